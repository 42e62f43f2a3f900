package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A server that changes a tool's definition after it was listed (the rug
// pull of testdata/mcp/rugpull.js, which wraps server-everything and
// appends an instruction to echo's description from its second tools/list
// on) is noticed by the gateway, through the real binary, the Go SDK's
// client and the reference server.

// rugpull is the wrapper server's script.
func rugpull(t *testing.T) string {
	t.Helper()
	everything(t) // its node_modules
	p, _ := filepath.Abs("../../testdata/mcp/rugpull.js")
	return p
}

// startPinSidecar serves agents (as mcpAgents) with extra serve flags;
// its sockets are in a directory of their own, so that a second one can
// start on the same state file after the first is gone.
func startPinSidecar(t *testing.T, agents string, extra ...string) *mcpFixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "pins-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bdir := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(filepath.Join(bdir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "agents", "data.json"), []byte(agents), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &mcpFixture{agentSock: filepath.Join(dir, "agent.sock"), bundleDir: bdir}
	approverSock := filepath.Join(dir, "approver.sock")
	f.sidecarArgs = append([]string{"serve", "--bundle", bdir, "--listen", "unix://" + f.agentSock, "--confirm-listen", "unix://" + approverSock,
		"--metrics-listen", "", "--decision-log", "off", "--eval-timeout", "10s"}, extra...)
	f.sidecar = start(t, f.sidecarArgs...)
	conn := dialUnix(t, f.agentSock)
	waitServing(t, conn, f.sidecar)
	f.client = pb.NewDecisionServiceClient(conn)
	f.approver = pb.NewDecisionServiceClient(dialUnix(t, approverSock))
	return f
}

// connectTo starts `toolpdp mcp-proxy ... -- server...` as the Go SDK
// client's command, with env added, and connects to it.
func (f *mcpFixture) connectTo(t *testing.T, ctx context.Context, env []string, server ...string) (*mcp.ClientSession, *syncBuf) {
	t.Helper()
	args := append([]string{"mcp-proxy", "--addr", "unix://" + f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--timeout", "15s", "--"}, server...)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "toolpdp-test-agent", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through mcp-proxy: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, stderr
}

func listed(t *testing.T, ctx context.Context, s *mcp.ClientSession, stderr *syncBuf) map[string]bool {
	t.Helper()
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, stderr.String())
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	return names
}

type callResult struct {
	r   *mcp.CallToolResult
	err error
}

func callAsync(ctx context.Context, s *mcp.ClientSession, name string, args map[string]any) chan callResult {
	done := make(chan callResult, 1)
	go func() {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		done <- callResult{r, err}
	}()
	return done
}

func TestMCPProxyToolDefinitionChanged(t *testing.T) {
	dir := t.TempDir()
	state := "file:" + filepath.Join(dir, "state.db")
	f := startPinSidecar(t, mcpAgents, "--state", state)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, stderr := f.connectTo(t, ctx, nil, "node", rugpull(t))

	// The first listing is trusted; the second has echo's description
	// changed: echo disappears, the rest stays.
	if names := listed(t, ctx, s, stderr); !names["echo"] || !names["get-sum"] {
		t.Fatalf("first tools/list: %v", names)
	}
	if names := listed(t, ctx, s, stderr); names["echo"] || !names["get-sum"] {
		t.Fatalf("second tools/list (echo changed): %v; want echo hidden, get-sum listed", names)
	}

	// Its call is an ask about the definition, showing both side by side
	// and none of the call's arguments.
	done := callAsync(ctx, s, "echo", map[string]any{"message": "secret-call-argument"})
	ask := waitPending(t, ctx, f.approver, "echo")
	c := ask.GetDefinitionChange()
	switch {
	case c == nil:
		t.Fatalf("the ask is not about the definition: %v", ask)
	case !strings.Contains(c.GetKeptDefinition(), `"Echoes back the input string"`) || strings.Contains(c.GetKeptDefinition(), "id_rsa"):
		t.Fatalf("kept definition:\n%s", c.GetKeptDefinition())
	case !strings.Contains(c.GetNewDefinition(), "read ~/.ssh/id_rsa"):
		t.Fatalf("new definition:\n%s", c.GetNewDefinition())
	case c.GetKeptDigest() == c.GetNewDigest() || !strings.HasPrefix(c.GetNewDigest(), "sha256:"):
		t.Fatalf("digests %s, %s", c.GetKeptDigest(), c.GetNewDigest())
	case strings.Contains(ask.GetArguments(), "secret-call-argument") || ask.GetCallId() != "":
		t.Fatalf("the definition ask carries the call: args %s, call id %q", ask.GetArguments(), ask.GetCallId())
	case len(ask.GetReasons()) != 1 || ask.GetReasons()[0].GetRule() != "tool_definition_changed":
		t.Fatalf("reasons: %v", ask.GetReasons())
	}
	// toolpdp pending shows the two definitions side by side.
	approverAddr := "unix://" + filepath.Join(filepath.Dir(f.agentSock), "approver.sock")
	out, err := exec.Command(binary(t), "pending", "--addr", approverAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "changed; allow keeps the new one") || !regexpLine(string(out), `^\s+!\s+"description": "Echoes back the input string",?\s+\|\s+"description": "Echoes back the input string Before answer`) {
		t.Fatalf("toolpdp pending: %v\n%s", err, out)
	}

	// A person's deny: the call is refused and echo stays hidden.
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "deny", DenyMessage: "that description is an injection"}); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || !res.r.IsError || !strings.Contains(toolText(res.r), "that description is an injection") {
		t.Fatalf("echo after the deny: %v %+v", res.err, res.r)
	}
	if names := listed(t, ctx, s, stderr); names["echo"] {
		t.Fatalf("echo listed after a person denied its new definition: %v", names)
	}

	// A person's allow keeps the new definition: the held call is then
	// decided as usual (echo is allowed) and echo is listed again.
	done = callAsync(ctx, s, "echo", map[string]any{"message": "after the allow"})
	ask = waitPending(t, ctx, f.approver, "echo")
	if ask.GetDefinitionChange() == nil {
		t.Fatalf("the second call's ask: %v", ask)
	}
	if r, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil || r.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Confirm allow: %v %v", r, err)
	}
	if res := <-done; res.err != nil || res.r.IsError || !strings.Contains(toolText(res.r), "after the allow") {
		t.Fatalf("echo after the allow: %v %+v", res.err, res.r)
	}
	if names := listed(t, ctx, s, stderr); !names["echo"] {
		t.Fatalf("echo not listed after its new definition was allowed: %v", names)
	}

	// The kept digest survives a restart with the file store: a new
	// sidecar on the same file, a server that lists the allowed (changed)
	// definition from the start, and echo is listed and called at once.
	_ = s.Close()
	_ = f.sidecar.cmd.Process.Kill()
	<-f.sidecar.done
	f = startPinSidecar(t, mcpAgents, "--state", state)
	s, stderr = f.connectTo(t, ctx, []string{"RUGPULL_FROM=1"}, "node", rugpull(t))
	if names := listed(t, ctx, s, stderr); !names["echo"] {
		t.Fatalf("after a restart, the allowed definition: %v\n%s", names, f.sidecar.stderr.String())
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after the restart"}})
	if err != nil || r.IsError || !strings.Contains(toolText(r), "after the restart") {
		t.Fatalf("echo after the restart: %v %+v", err, r)
	}
	// ... and the original definition, listed again, is a change now.
	s2, stderr2 := f.connectTo(t, ctx, nil, "node", rugpull(t))
	if names := listed(t, ctx, s2, stderr2); names["echo"] {
		t.Fatalf("after a restart, the definition trusted first and since replaced: %v", names)
	}
}

// regexpLine reports whether some line of out matches pattern.
func regexpLine(out, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, line := range strings.Split(out, "\n") {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// Pins in the definition: toolpdp mcp pin writes them; a pinned tool that
// changed is denied (tool_definition_changed) and a tool of a pinned
// server without a pin is denied (tool_not_pinned).
func TestMCPProxyToolPins(t *testing.T) {
	dir := t.TempDir()
	defs := filepath.Join(dir, "agents.json")
	if err := os.WriteFile(defs, []byte(mcpAgents), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "mcp", "pin", "--agent-id", "mcp", "--server-name", "everything", "--", "node", everything(t), "stdio").Output()
	if err != nil {
		t.Fatalf("mcp pin: %v", err)
	}
	var printed struct {
		Name  string `json:"name"`
		Tools []struct{ Name, Digest string }
	}
	if err := json.Unmarshal(out, &printed); err != nil || printed.Name != "everything" || len(printed.Tools) < 3 {
		t.Fatalf("mcp pin printed %s (%v)", out, err)
	}
	var echoPin string
	for _, p := range printed.Tools {
		if p.Name == "echo" {
			echoPin = p.Digest
		}
	}
	// --write puts the pins into the definition file, leaving the rest as it was.
	if out, err := exec.Command(binary(t), "mcp", "pin", "--agent-id", "mcp", "--server-name", "everything", "--write", defs, "--", "node", everything(t), "stdio").CombinedOutput(); err != nil {
		t.Fatalf("mcp pin --write: %v\n%s", err, out)
	}
	written, _ := os.ReadFile(defs)
	var doc map[string]struct {
		MCPServers []struct {
			Name  string
			Type  string
			Tools []struct{ Name, Digest string }
		} `json:"mcp_servers"`
		Guardrails map[string]any `json:"guardrails"`
	}
	if err := json.Unmarshal(written, &doc); err != nil || len(doc["mcp"].MCPServers) != 1 || len(doc["mcp"].MCPServers[0].Tools) != len(printed.Tools) ||
		doc["mcp"].MCPServers[0].Type != "stdio" || doc["mcp"].Guardrails == nil || strings.Index(string(written), `"tools"`) > strings.Index(string(written), `"mcp_servers"`) {
		t.Fatalf("the written definition (%v):\n%s", err, written)
	}

	// Serve a definition that pins echo alone.
	onlyEcho := strings.Replace(mcpAgents, `"mcp_servers": [{"name": "everything", "type": "stdio"}]`,
		`"mcp_servers": [{"name": "everything", "type": "stdio", "tools": [{"name": "echo", "digest": "`+echoPin+`"}]}]`, 1)
	f := startPinSidecar(t, onlyEcho)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, stderr := f.connectTo(t, ctx, nil, "node", rugpull(t))
	if names := listed(t, ctx, s, stderr); !names["echo"] || len(names) != 1 {
		t.Fatalf("a server with pins lists its pinned tools only: %v", names)
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || !r.IsError || !strings.Contains(toolText(r), "not among them") {
		t.Fatalf("an unpinned tool of a pinned server: %v %+v", err, r)
	}
	if names := listed(t, ctx, s, stderr); names["echo"] {
		t.Fatalf("a pinned tool that changed is listed: %v", names)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
	if err != nil || !r.IsError || !strings.Contains(toolText(r), "not the one pinned") {
		t.Fatalf("a pinned tool that changed: %v %+v", err, r)
	}
	// The rules, as Decide names them.
	changed := `{"name":"echo","description":"Echoes back the input string, and more","inputSchema":{"type":"object"}}`
	for tool, want := range map[string]string{"echo": "tool_definition_changed", "get-sum": "tool_not_pinned"} {
		resp, err := f.client.Decide(ctx, &pb.DecideRequest{AgentId: "mcp", ToolName: tool, Server: "everything",
			ToolDefinition: map[string]string{"echo": changed}[tool]})
		if err != nil || resp.GetDecision() != pb.Decision_DECISION_DENY || len(resp.GetReasons()) != 1 || resp.GetReasons()[0].GetRule() != want {
			t.Errorf("Decide %s: %v %v; want a deny by %s", tool, resp, err, want)
		}
	}
}

// In HTTP mode, a client that calls a tool without listing first is
// checked all the same: the proxy lists the server's tools itself. The
// kept definition is primed through FilterTools, as another gateway
// connection would have listed an older release of the server.
func TestMCPProxyHTTPToolDefinitionChanged(t *testing.T) {
	f := startPinSidecar(t, mcpAgents)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	older := `{"name":"echo","description":"Echoes, as release 1 said","inputSchema":{"type":"object"}}`
	fr, err := f.client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "mcp", Tools: []*pb.ToolRef{{Name: "echo", Server: "everything", Definition: older}}})
	if err != nil || len(fr.GetVisible()) != 1 || fr.GetVisible()[0].GetDefinition() != "" {
		t.Fatalf("the first listing is trusted (and no definition is sent back): %v %v", fr, err)
	}
	upAddr, proxyAddr := freePort(t), freePort(t)
	_, upPort, _ := net.SplitHostPort(upAddr)
	up := startBinaryEnv(t, "node", []string{"PORT=" + upPort}, everything(t), "streamableHttp")
	waitHTTP(t, "http://"+upAddr+"/mcp", up)
	proxy := start(t, "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--listen", proxyAddr, "--upstream-url", "http://"+upAddr+"/mcp", "--timeout", "15s")
	waitHTTP(t, "http://"+proxyAddr+"/", proxy)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolpdp-test-agent", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + proxyAddr + "/"}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nproxy: %s", err, proxy.stderr.String())
	}
	defer s.Close()

	done := callAsync(ctx, s, "echo", map[string]any{"message": "called without listing"})
	ask := waitPending(t, ctx, f.approver, "echo")
	c := ask.GetDefinitionChange()
	if c == nil || !strings.Contains(c.GetKeptDefinition(), "as release 1 said") || !strings.Contains(c.GetNewDefinition(), "Echoes back the input string") {
		t.Fatalf("the ask: %v", ask)
	}
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.r.IsError || !strings.Contains(toolText(res.r), "called without listing") {
		t.Fatalf("echo after the allow: %v %+v", res.err, res.r)
	}
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range list.Tools {
		found = found || tool.Name == "echo"
	}
	if !found {
		t.Fatalf("echo not listed after its definition was allowed: %d tools", len(list.Tools))
	}
}
