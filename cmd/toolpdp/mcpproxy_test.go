package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The MCP gateway is tested against the MCP project's reference server
// (@modelcontextprotocol/server-everything, from npm: testdata/mcp), with
// the official Go SDK's client as the agent, through the built binary.

var (
	everythingOnce sync.Once
	everythingPath string
	everythingErr  error
)

// everything is the reference server's entry point, installed from
// testdata/mcp's lock file when missing.
func everything(t *testing.T) string {
	t.Helper()
	everythingOnce.Do(func() {
		dir, _ := filepath.Abs("../../testdata/mcp")
		everythingPath = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
		if _, err := os.Stat(everythingPath); err == nil {
			return
		}
		out, err := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund").CombinedOutput()
		if err != nil {
			everythingErr = err
			everythingPath = string(out)
		}
	})
	if everythingErr != nil {
		t.Fatalf("npm ci testdata/mcp: %v\n%s", everythingErr, everythingPath)
	}
	return everythingPath
}

const mcpAgents = `{
  "mcp": {
    "tools": [
      {"type": "mcp_toolset", "mcp_server_name": "everything",
       "default_config": {"permission_policy": {"type": "always_ask"}},
       "configs": [
         {"name": "echo", "permission_policy": {"type": "always_allow"}},
         {"name": "get-sum", "permission_policy": {"type": "always_ask"}},
         {"name": "get-env", "enabled": false},
         {"name": "resources/read", "permission_policy": {"type": "always_allow"}}
       ]}
    ],
    "mcp_servers": [{"name": "everything", "type": "stdio"}],
    "guardrails": {"deny_commands": ["curl"]},
    "max_consecutive_denials": 3
  }
}`

type mcpFixture struct {
	sidecar     *process
	agentSock   string
	approver    pb.DecisionServiceClient
	client      pb.DecisionServiceClient
	bundleDir   string
	sidecarArgs []string
}

func startMCPSidecar(t *testing.T) *mcpFixture {
	t.Helper()
	dir := t.TempDir()
	bdir := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(filepath.Join(bdir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "agents", "data.json"), []byte(mcpAgents), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &mcpFixture{agentSock: filepath.Join(dir, "agent.sock"), bundleDir: bdir}
	approverSock := filepath.Join(dir, "approver.sock")
	f.sidecarArgs = []string{"serve", "--bundle", bdir, "--listen", "unix://" + f.agentSock, "--confirm-listen", "unix://" + approverSock,
		"--metrics-listen", "", "--decision-log", "off"}
	f.sidecar = start(t, f.sidecarArgs...)
	conn := dialUnix(t, f.agentSock)
	waitServing(t, conn, f.sidecar)
	f.client = pb.NewDecisionServiceClient(conn)
	f.approver = pb.NewDecisionServiceClient(dialUnix(t, approverSock))
	return f
}

// connect starts `toolpdp mcp-proxy ... -- node everything stdio` as the
// Go SDK client's command and connects to it.
func (f *mcpFixture) connect(t *testing.T, ctx context.Context, opts *mcp.ClientOptions) (*mcp.ClientSession, *syncBuf) {
	t.Helper()
	cmd := exec.Command(binary(t), "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--timeout", "15s", "--", "node", everything(t), "stdio")
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "toolpdp-test-agent", Version: "1"}, opts)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through mcp-proxy: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, stderr
}

func toolText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestMCPProxyStdio(t *testing.T) {
	f := startMCPSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, stderr := f.connect(t, ctx, nil)

	// tools/list is filtered: the disabled tool is hidden, the rest listed.
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, stderr.String())
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	if !names["echo"] || !names["get-sum"] || names["get-env"] {
		t.Fatalf("listed %v: want echo and get-sum, not the disabled get-env", names)
	}

	// An allowed call is forwarded and answered by the server.
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello through the gate"}})
	if err != nil || r.IsError || !strings.Contains(toolText(r), "hello through the gate") {
		t.Fatalf("echo: %v, %+v", err, r)
	}

	// A disabled tool, called anyway, is refused with the policy's message.
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "get-env", Arguments: map[string]any{}})
	if err != nil || !r.IsError || !strings.Contains(toolText(r), "get-env") {
		t.Fatalf("get-env: %v, %+v: want a refusal naming the tool", err, r)
	}

	// An asked call is held until a person confirms, then completed.
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 3}})
		done <- result{r, err}
	}()
	ask := waitPending(t, ctx, f.approver, "get-sum")
	select {
	case res := <-done:
		t.Fatalf("the asked call completed before anyone answered: %+v %v", res.r, res.err)
	default:
	}
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.IsError || !strings.Contains(toolText(res.r), "5") {
		t.Fatalf("get-sum after the person allowed it: %v, %+v", res.err, res.r)
	}

	// resources/read is decided as the tool resources/read (allowed here).
	if rs, err := s.ListResources(ctx, nil); err == nil && len(rs.Resources) > 0 {
		if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: rs.Resources[0].URI}); err != nil {
			t.Errorf("resources/read %s: %v", rs.Resources[0].URI, err)
		}
	}

	// A denied ask: the person's message reaches the client.
	go func() {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 1, "b": 1}})
		done <- result{r, err}
	}()
	ask = waitPending(t, ctx, f.approver, "get-sum")
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "deny", DenyMessage: "Add them in your head."}); err != nil {
		t.Fatal(err)
	}
	res = <-done
	if res.err != nil || !res.r.IsError || !strings.Contains(toolText(res.r), "Add them in your head.") {
		t.Fatalf("denied get-sum: %v, %+v", res.err, res.r)
	}

	// The third failure in a row (the person's deny, then two refusals)
	// halts: the proxy answers, then ends the session.
	if r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "get-env", Arguments: map[string]any{}}); err != nil || !r.IsError {
		t.Fatalf("get-env: %v %+v", err, r)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "get-env", Arguments: map[string]any{}})
	if err != nil || !r.IsError || !strings.Contains(toolText(r), "consecutive") {
		t.Fatalf("the call reaching the cap: %v, %+v: want a refusal saying the session stops", err, r)
	}
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after the halt"}}); err == nil {
		t.Error("the session went on after the halt")
	}
}

// The sidecar gone mid-session: every call is refused, nothing forwarded.
func TestMCPProxySidecarKilled(t *testing.T) {
	f := startMCPSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, _ := f.connect(t, ctx, nil)
	if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "before"}}); err != nil || r.IsError {
		t.Fatalf("echo before: %v %+v", err, r)
	}
	_ = f.sidecar.cmd.Process.Kill()
	<-f.sidecar.done
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after"}})
	if err != nil || !r.IsError || strings.Contains(toolText(r), "after") || !strings.Contains(toolText(r), "could not be asked") {
		t.Fatalf("echo with the sidecar gone: %v, %+v: want a refusal, not the server's echo", err, r)
	}
	if _, err := s.ListTools(ctx, nil); err == nil {
		t.Error("tools/list was answered unfiltered with the sidecar gone")
	}
}

// A server that gains a tool after tools/list (the reference server adds
// its sampling and elicitation tools once the client says it can do them)
// gets the toolset's default policy for it, not an allow: here always_ask.
func TestMCPProxyLateTool(t *testing.T) {
	f := startMCPSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sampled atomic.Bool
	// Sampling is deprecated in the newest protocol version, yet servers
	// still send it: the gateway must refuse it.
	//lint:ignore SA1019 the test plays a client that could sample
	opts := &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		sampled.Store(true)
		//lint:ignore SA1019 the test plays a client that could sample
		return &mcp.CreateMessageResult{Model: "none", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
	}}
	s, stderr := f.connect(t, ctx, opts)
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var late string
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, "trigger-sampling") {
			late = tool.Name
		}
	}
	if late == "" {
		t.Skipf("the reference server did not add its sampling tool for a client with sampling: listed %d tools\n%s", len(list.Tools), stderr.String())
	}
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: late, Arguments: map[string]any{"prompt": "hi", "maxTokens": 5}})
		done <- result{r, err}
	}()
	// Asked, not run: the toolset's default_config is always_ask.
	ask := waitPending(t, ctx, f.approver, late)
	// Allowed by the person: the server then asks the client's model, which
	// the definition does not allow (allow_sampling is not true).
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if sampled.Load() {
		t.Errorf("the server sampled the client's model although the definition does not allow it")
	}
	if res.err == nil && !res.r.IsError && strings.Contains(toolText(res.r), "sampled") {
		t.Errorf("%s returned the model's answer: %+v", late, res.r)
	}
}

func waitPending(t *testing.T, ctx context.Context, approver pb.DecisionServiceClient, tool string) *pb.PendingAsk {
	t.Helper()
	for {
		lp, err := approver.ListPending(ctx, &pb.ListPendingRequest{AgentId: "mcp"})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range lp.GetAsks() {
			if a.GetToolName() == tool || strings.HasSuffix(a.GetToolName(), "__"+tool) {
				return a
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no ask for %s appeared", tool)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitHTTP(t *testing.T, url string, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v\n%s", url, err, p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The streamable HTTP front: the reference server over HTTP, the proxy
// listening in front of it, the Go SDK's client connecting to the proxy.
func TestMCPProxyHTTP(t *testing.T) {
	f := startMCPSidecar(t)
	upAddr, proxyAddr := freePort(t), freePort(t)
	_, upPort, _ := net.SplitHostPort(upAddr)
	up := startBinaryEnv(t, "node", []string{"PORT=" + upPort}, everything(t), "streamableHttp")
	waitHTTP(t, "http://"+upAddr+"/mcp", up)
	proxy := start(t, "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--listen", proxyAddr, "--upstream-url", "http://"+upAddr+"/mcp")
	waitHTTP(t, "http://"+proxyAddr+"/", proxy)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "toolpdp-test-agent", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + proxyAddr + "/"}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nproxy: %s", err, proxy.stderr.String())
	}
	defer s.Close()
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, proxy.stderr.String())
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	if !names["echo"] || names["get-env"] {
		t.Fatalf("listed %v: want echo, not the disabled get-env", names)
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "over http"}})
	if err != nil || r.IsError || !strings.Contains(toolText(r), "over http") {
		t.Fatalf("echo: %v %+v", err, r)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "get-env", Arguments: map[string]any{}})
	if err != nil || !r.IsError {
		t.Fatalf("get-env: %v %+v: want a refusal", err, r)
	}
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 20, "b": 22}})
		done <- result{r, err}
	}()
	ask := waitPending(t, ctx, f.approver, "get-sum")
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.IsError || !strings.Contains(toolText(res.r), "42") {
		t.Fatalf("get-sum after the person allowed it: %v %+v", res.err, res.r)
	}
}
