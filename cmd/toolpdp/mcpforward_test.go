package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The gateway forwards only what it decided. These tests speak raw
// JSON-RPC to the proxy over its real transports, since the bodies that
// tell a lax reader from a strict one are ones no MCP SDK sends.

// rpcMsg is a JSON-RPC message as the tests read it.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

func (m rpcMsg) hasID(id string) bool { return string(m.ID) == id }

// toolNames are the names of a tools/list result.
func (m rpcMsg) toolNames(t *testing.T) map[string]bool {
	t.Helper()
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("not a tools/list result: %s", m.raw)
	}
	names := map[string]bool{}
	for _, tool := range r.Tools {
		names[tool.Name] = true
	}
	return names
}

const initializeParams = `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"toolpdp-raw-test","version":"1"}}`

// The bodies no reader may see two ways, each refused naming the key.
var differentials = []struct {
	method, params, key string
}{
	{"tools/call", `{"name":"get-env","NAME":"echo","arguments":{}}`, "NAME"},
	{"tools/call", `{"name":"echo","arguments":{"message":"benign"},"ARGUMENTS":{"message":"the real one"}}`, "ARGUMENTS"},
	{"tools/call", `{"name":"echo","arguments":{"message":"benign","MESSAGE":"the real one"}}`, "arguments.MESSAGE"},
	{"resources/read", `{"uri":"demo://resource/dynamic/text/1","URI":"demo://resource/dynamic/text/2"}`, "URI"},
	{"tools/call", "{\"name\":\"echo\",\"arguments\":{\"message\":\"\xc3(\"}}", "UTF-8"},
	{"tools/call", `{"name":"echo","name":"get-env","arguments":{}}`, "name"},
	{"prompts/get", `{"name":"simple-prompt","NAME":"args-prompt"}`, "NAME"},
}

// rawStdio is a client speaking newline-delimited JSON-RPC to
// `toolpdp mcp-proxy -- sh -c 'tee LOG | node everything stdio'`: the
// server's stdin is copied to LOG, so what reached the server is on disk.
type rawStdio struct {
	t      *testing.T
	in     io.WriteCloser
	msgs   chan rpcMsg
	mu     sync.Mutex
	all    []string
	log    string // what the server read
	stderr *syncBuf
}

func (f *mcpFixture) rawStdio(t *testing.T, canary string) *rawStdio {
	t.Helper()
	log := filepath.Join(t.TempDir(), "server-stdin.log")
	cmd := exec.Command(binary(t), "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--timeout", "15s", "--", "sh", "-c", `tee -a "$0" | exec node "$1" stdio`, log, everything(t))
	cmd.Env = append(os.Environ(), "TOOLPDP_TEST_CANARY="+canary)
	c := startRaw(t, cmd)
	c.log = log
	return c
}

// startRaw starts cmd (a `toolpdp mcp-proxy` over stdio) as the raw
// client's peer.
func startRaw(t *testing.T, cmd *exec.Cmd) *rawStdio {
	t.Helper()
	c := &rawStdio{t: t, msgs: make(chan rpcMsg, 64), stderr: &syncBuf{}}
	cmd.Stderr = c.stderr
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.all = append(c.all, line)
			c.mu.Unlock()
			var m rpcMsg
			if json.Unmarshal([]byte(line), &m) == nil {
				m.raw = line
				c.msgs <- m
			}
		}
		close(c.msgs)
	}()
	return c
}

func (c *rawStdio) send(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, strings.Join(lines, "\n")+"\n"); err != nil {
		c.t.Fatalf("writing to the proxy: %v\n%s", err, c.stderr.String())
	}
}

// await returns the next message that is a response under id, skipping
// notifications.
func (c *rawStdio) await(ctx context.Context, id string) rpcMsg {
	c.t.Helper()
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatalf("the proxy closed its output waiting for id %s\n%s", id, c.stderr.String())
			}
			if m.Method == "" && m.hasID(id) {
				return m
			}
		case <-ctx.Done():
			c.t.Fatalf("no response under id %s\n%s", id, c.stderr.String())
		}
	}
}

func (c *rawStdio) received() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.all, "\n")
}

func request(id, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
}

func echoCall(id, message string) string {
	return request(id, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"message":%q}}`, message))
}

func wantRefused(t *testing.T, m rpcMsg, code int, words ...string) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code {
		t.Fatalf("want a JSON-RPC error %d, got %s", code, m.raw)
	}
	for _, w := range words {
		if !strings.Contains(m.Error.Message, w) {
			t.Fatalf("the refusal %q does not say %q", m.Error.Message, w)
		}
	}
}

func wantEcho(t *testing.T, m rpcMsg, message string) {
	t.Helper()
	if m.Error != nil || !strings.Contains(string(m.Result), message) || strings.Contains(string(m.Result), `"isError":true`) {
		t.Fatalf("want the server's echo of %q, got %s", message, m.raw)
	}
}

func TestMCPProxyForwardsWhatItDecidedStdio(t *testing.T) {
	f := startMCPSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	canary := "canary-" + fmt.Sprint(time.Now().UnixNano())
	c := f.rawStdio(t, canary)
	c.send(request("1", "initialize", initializeParams))
	if m := c.await(ctx, "1"); m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(echoCall("2", "before"))
	wantEcho(t, c.await(ctx, "2"), "before")

	// Each differential is refused, naming the key, and nothing reaches
	// the server.
	for i, d := range differentials {
		id := fmt.Sprint(100 + i)
		c.send(request(id, d.method, d.params))
		wantRefused(t, c.await(ctx, id), -32600, d.key)
	}
	// A call without an id would be forwarded undecided: it is dropped;
	// an id a reader could take for another is refused.
	c.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get-env","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{"message":"no-id-call"}}}`,
		`{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"demo://resource/dynamic/text/2"}}`)
	c.send(`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"fractional-id"}}}`)
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"big-number","n":9007199254740993}}}`)
	wantRefused(t, c.await(ctx, "7"), -32602, "cannot be decided exactly")
	// The unchanged bodies work; once the server has read the call after
	// the refusals, it has read everything before it.
	c.send(echoCall("3", "after the refusals"))
	wantEcho(t, c.await(ctx, "3"), "after the refusals")
	c.send(request("4", "resources/read", `{"uri":"demo://resource/dynamic/text/1"}`))
	if m := c.await(ctx, "4"); m.Error != nil || !strings.Contains(string(m.Result), "contents") {
		t.Fatalf("resources/read: %s", m.raw)
	}
	c.send(request("6", "prompts/get", `{"name":"simple-prompt"}`))
	if m := c.await(ctx, "6"); m.Error != nil || !strings.Contains(string(m.Result), "messages") {
		t.Fatalf("prompts/get: %s", m.raw)
	}
	serverRead := waitFileContains(t, ctx, c.log, "after the refusals")
	for _, forbidden := range []string{"get-env", "NAME", "ARGUMENTS", "MESSAGE", "URI", "benign", "the real one", "text/2", "args-prompt", "no-id-call", "fractional-id", "big-number"} {
		if strings.Contains(serverRead, forbidden) {
			t.Errorf("the server read %q:\n%s", forbidden, serverRead)
		}
	}
	if strings.Contains(c.received(), canary) {
		t.Fatalf("the server's environment reached the client")
	}

	// An id still outstanding is refused; the held call is answered later.
	c.send(request("5", "tools/call", `{"name":"get-sum","arguments":{"a":2,"b":3}}`))
	ask := waitPending(t, ctx, f.approver, "get-sum")
	c.send(request("5", "ping", `{}`))
	wantRefused(t, c.await(ctx, "5"), -32600, "outstanding")
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	if m := c.await(ctx, "5"); m.Error != nil || !strings.Contains(string(m.Result), "5") {
		t.Fatalf("get-sum after the person allowed it: %s", m.raw)
	}

	// tools/list id 7 then ping id 7: the list reaches the client filtered,
	// whichever way the two are answered.
	c.send(request("7", "tools/list", `{}`), request("7", "ping", `{}`))
	lists := 0
	for range 2 {
		m := c.await(ctx, "7")
		if strings.Contains(string(m.Result), `"tools"`) {
			lists++
			if names := m.toolNames(t); names["get-env"] || !names["echo"] {
				t.Fatalf("the list under a reused id was not filtered: %v", names)
			}
			continue
		}
		if m.Error != nil {
			wantRefused(t, m, -32600, "outstanding")
		} else {
			t.Logf("the list was answered before the ping arrived, so the ping was answered: %s", m.raw)
		}
	}
	if lists != 1 {
		t.Fatalf("%d lists answered under id 7, want 1", lists)
	}

	// A batch is refused whole.
	c.send(`[` + echoCall("8", "in a batch") + `]`)
	c.send(echoCall("9", "after the batch"))
	wantEcho(t, c.await(ctx, "9"), "after the batch")
	if got := c.received(); !strings.Contains(got, "batches are refused whole") || strings.Contains(got, `"id":8`) {
		t.Fatalf("the batch was not refused whole:\n%s", got)
	}
}

func waitFileContains(t *testing.T, ctx context.Context, path, want string) string {
	t.Helper()
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return string(b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never held %q:\n%s", path, want, b)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rawHTTP is a client POSTing JSON-RPC to the proxy's streamable HTTP
// front.
type rawHTTP struct {
	t       *testing.T
	url     string
	session string
	header  http.Header // sent with every request
}

func (c *rawHTTP) post(body string) (int, rpcMsg) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		c.session = id
	}
	var m rpcMsg
	_ = json.Unmarshal(b, &m)
	m.raw = string(b)
	return resp.StatusCode, m
}

// startHTTPUpstream runs the reference server over streamable HTTP with
// its log (stdout, a line per POST it receives) in the process's stderr.
func startHTTPUpstream(t *testing.T, canary string) (addr string, p *process) {
	t.Helper()
	addr = freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	p = startBinaryEnv(t, "sh", []string{"PORT=" + port, "TOOLPDP_TEST_CANARY=" + canary}, "-c", `exec node "$0" streamableHttp >&2`, everything(t))
	waitHTTP(t, "http://"+addr+"/mcp", p)
	return addr, p
}

func (c *rawHTTP) initialize() {
	c.t.Helper()
	if code, m := c.post(request("1", "initialize", initializeParams)); code != http.StatusOK || m.Error != nil || c.session == "" {
		c.t.Fatalf("initialize: %d %s", code, m.raw)
	}
	if code, m := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %d %s", code, m.raw)
	}
}

func TestMCPProxyForwardsWhatItDecidedHTTP(t *testing.T) {
	f := startMCPSidecar(t)
	canary := "canary-" + fmt.Sprint(time.Now().UnixNano())
	upAddr, up := startHTTPUpstream(t, canary)
	proxyAddr := freePort(t)
	proxy := start(t, "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything", "--timeout", "15s",
		"--listen", proxyAddr, "--upstream-url", "http://"+upAddr+"/mcp")
	waitHTTP(t, "http://"+proxyAddr+"/", proxy)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c := &rawHTTP{t: t, url: "http://" + proxyAddr + "/"}
	c.initialize()
	_, m := c.post(echoCall("2", "before"))
	wantEcho(t, m, "before")
	posts := func() int { return strings.Count(up.stderr.String(), "Received MCP POST request") }
	before := posts()
	var got []string
	for i, d := range differentials {
		code, m := c.post(request(fmt.Sprint(100+i), d.method, d.params))
		if code != http.StatusOK {
			t.Fatalf("%s: HTTP %d, want 200 with the JSON-RPC error", d.key, code)
		}
		wantRefused(t, m, -32600, d.key)
		got = append(got, m.raw)
	}
	_, m = c.post(echoCall("3", "after the refusals"))
	wantEcho(t, m, "after the refusals")
	// The server logs every POST it receives, in order: the refused calls
	// would be logged before the one after them.
	for posts() < before+1 {
		select {
		case <-ctx.Done():
			t.Fatalf("the server never logged the call after the refusals:\n%s", up.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := posts(); n != before+1 {
		t.Fatalf("the server received %d POSTs for 1 forwarded call: a refused call reached it", n-before)
	}
	if strings.Contains(strings.Join(got, "\n"), canary) {
		t.Fatal("the server's environment reached the client")
	}
	if _, m := c.post(request("4", "resources/read", `{"uri":"demo://resource/dynamic/text/1"}`)); m.Error != nil || !strings.Contains(string(m.Result), "contents") {
		t.Fatalf("resources/read: %s", m.raw)
	}

	// An id still outstanding is refused; the held call is answered later.
	held := make(chan rpcMsg, 1)
	go func() {
		_, m := c.post(request("5", "tools/call", `{"name":"get-sum","arguments":{"a":20,"b":22}}`))
		held <- m
	}()
	ask := waitPending(t, ctx, f.approver, "get-sum")
	code, m := c.post(request("5", "ping", `{}`))
	if code != http.StatusOK {
		t.Fatalf("ping under an outstanding id: HTTP %d %s", code, m.raw)
	}
	wantRefused(t, m, -32600, "outstanding")
	if _, err := f.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.GetDecisionId(), Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	if m := <-held; m.Error != nil || !strings.Contains(string(m.Result), "42") {
		t.Fatalf("get-sum after the person allowed it: %s", m.raw)
	}
	if _, m := c.post(request("7", "tools/list", `{}`)); m.toolNames(t)["get-env"] {
		t.Fatalf("tools/list not filtered: %s", m.raw)
	}

	// A batch is refused whole.
	code, m = c.post(`[` + echoCall("8", "in a batch") + `]`)
	if code != http.StatusBadRequest {
		t.Fatalf("a batch: HTTP %d %s", code, m.raw)
	}
	wantRefused(t, m, -32600, "batches are refused whole")
}

// The HTTP front refuses a browser page it does not know (DNS
// rebinding): Origin absent, loopback, or named with --allowed-origin.
func TestMCPProxyHTTPOrigin(t *testing.T) {
	f := startMCPSidecar(t)
	upAddr, _ := startHTTPUpstream(t, "")
	proxyAddr := freePort(t)
	proxy := start(t, "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything", "--timeout", "15s",
		"--listen", proxyAddr, "--upstream-url", "http://"+upAddr+"/mcp", "--allowed-origin", "https://app.example")
	waitHTTP(t, "http://"+proxyAddr+"/", proxy)

	for _, origin := range []string{"http://evil.example", "http://localhost.evil.example", "http://127.0.0.1.evil.example:8080", "null", "https://app.example:8443", "file://"} {
		c := &rawHTTP{t: t, url: "http://" + proxyAddr + "/", header: http.Header{"Origin": {origin}}}
		code, m := c.post(request("1", "initialize", initializeParams))
		if code != http.StatusForbidden || !strings.Contains(m.raw, "is not allowed") || c.session != "" {
			t.Errorf("Origin %s: HTTP %d %s: want 403 and no session", origin, code, m.raw)
		}
	}
	for _, origin := range []string{"http://localhost:3000", "http://127.0.0.1", "https://127.1.2.3:9", "http://[::1]:6274", "https://app.example", "HTTPS://APP.example:443"} {
		c := &rawHTTP{t: t, url: "http://" + proxyAddr + "/", header: http.Header{"Origin": {origin}}}
		c.initialize()
		_, m := c.post(echoCall("2", "from "+origin))
		wantEcho(t, m, "from "+origin)
	}

	// A preflight from an allowed page is answered for CORS; from another, refused.
	for origin, want := range map[string]int{"https://app.example": http.StatusNoContent, "http://evil.example": http.StatusForbidden} {
		req, _ := http.NewRequest(http.MethodOptions, "http://"+proxyAddr+"/", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusNoContent) != (resp.Header.Get("Access-Control-Allow-Origin") == origin) {
			t.Errorf("preflight from %s: %d %v, want %d", origin, resp.StatusCode, resp.Header, want)
		}
	}
}

// Off loopback the HTTP front needs a bearer token: without one it does
// not start; with one, a request without it is refused.
func TestMCPProxyHTTPOffLoopbackToken(t *testing.T) {
	f := startMCPSidecar(t)
	upAddr, _ := startHTTPUpstream(t, "")
	_, port, _ := net.SplitHostPort(freePort(t))
	args := []string{"mcp-proxy", "--addr", "unix://" + f.agentSock, "--agent-id", "mcp", "--server-name", "everything", "--timeout", "15s",
		"--listen", "0.0.0.0:" + port, "--upstream-url", "http://" + upAddr + "/mcp"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary(t), args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not loopback") || !strings.Contains(string(out), "--listen-token-file") {
		t.Fatalf("off loopback without a token: %v\n%s", err, out)
	}

	tokenFile := filepath.Join(t.TempDir(), "mcp.token")
	const token = "mcp-proxy-token-0123456789abcdef"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := start(t, append(args, "--listen-token-file", tokenFile)...)
	url := "http://127.0.0.1:" + port + "/"
	waitHTTP(t, url, proxy)
	for _, auth := range []string{"", "Bearer wrong-token-0123456789abcdef", token} {
		c := &rawHTTP{t: t, url: url, header: http.Header{}}
		if auth != "" {
			c.header.Set("Authorization", auth)
		}
		if code, m := c.post(request("1", "initialize", initializeParams)); code != http.StatusUnauthorized || c.session != "" {
			t.Errorf("Authorization %q: HTTP %d %s: want 401", auth, code, m.raw)
		}
	}
	c := &rawHTTP{t: t, url: url, header: http.Header{"Authorization": {"Bearer " + token}}}
	c.initialize()
	_, m := c.post(echoCall("2", "with the token"))
	wantEcho(t, m, "with the token")
}

// The server's answers are read as strictly as the client's requests: a
// tools/list in which the hidden get-env also says "NAME": "echo" would be
// filtered as echo and listed as get-env, so it is refused whole.
func TestMCPProxyRefusesAmbiguousServerAnswer(t *testing.T) {
	f := startMCPSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wrapper, _ := filepath.Abs("../../testdata/mcp/ambiguous-list.mjs")
	cmd := exec.Command(binary(t), "mcp-proxy", "--addr", "unix://"+f.agentSock, "--agent-id", "mcp", "--server-name", "everything",
		"--timeout", "15s", "--", "node", wrapper, everything(t))
	c := startRaw(t, cmd)
	c.send(request("1", "initialize", initializeParams))
	if m := c.await(ctx, "1"); m.Error != nil {
		t.Fatalf("initialize: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(request("2", "tools/list", `{}`))
	m := c.await(ctx, "2")
	if strings.Contains(m.raw, "get-env\"") || m.Error == nil || !strings.Contains(m.Error.Message, `the key "NAME" equals the key "name" ignoring case`) {
		t.Fatalf("tools/list with an ambiguous tool: %s", m.raw)
	}
	// A call of this server's tools is then refused: their definitions
	// cannot be read to be checked.
	c.send(echoCall("3", "still here"))
	if m := c.await(ctx, "3"); strings.Contains(m.raw, `"still here"`) && !strings.Contains(m.raw, "its definition could not be checked") {
		t.Fatalf("echo with the server's list unreadable: %s", m.raw)
	} else if !strings.Contains(m.raw, "its definition could not be checked") {
		t.Fatalf("echo with the server's list unreadable: %s, want a refusal saying the definition could not be checked", m.raw)
	}
}
