package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// countingServer is a real HTTP server on loopback that counts the
// connections it accepts.
type countingServer struct {
	port int
	n    atomic.Int64
}

func httpOnLoopback(t *testing.T) *countingServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{port: l.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "reached %s\n", r.URL.Path) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.n.Add(1)
			}
		}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return s
}

// A confined run whose network is rules reaches an allowed loopback host
// through its proxy with a real curl; a denied host sees no connection;
// a program that ignores the proxy variables has no route at all; the
// report lists every host decided.
func TestExecNetworkRulesThroughTheProxy(t *testing.T) {
	probeKernel(t)
	if userNSError != nil {
		t.Skipf("no user namespaces here: %v", userNSError)
	}
	needPrograms(t, "sh", "curl")
	allowed, denied := httpOnLoopback(t), httpOnLoopback(t)
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": fmt.Sprintf(`{"run": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"network": {"allow": ["127.0.0.1:%d"], "otherwise": "deny"}}}}`, allowed.port),
	})
	ts := grpcapitest.NewServer(t, grpcapitest.Options{Bundles: []string{dir}})
	script := fmt.Sprintf(`curl -sS --max-time 20 http://127.0.0.1:%d/ok; curl -sS --max-time 20 http://127.0.0.1:%d/no; curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:%d/direct || echo NO-ROUTE`,
		allowed.port, denied.port, allowed.port)
	allow := ts.Decide(t, &pb.DecideRequest{AgentId: "run", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": script})})
	if allow.Decision != pb.Decision_DECISION_ALLOW || allow.GetExecution().GetNetwork() != "rules" {
		t.Fatalf("the command: %v", allow)
	}
	tr := newTree(t)
	ex := tr.execution("rules")
	ex.NetworkRules = allow.GetExecution().GetNetworkRules()
	bin := binary(t)

	// Without the sidecar named, network rules are refused, not opened.
	if r := runExec(t, bin, ex, nil, nil, "true"); r.code != 126 || !strings.Contains(r.stderr, "--address and --decision") {
		t.Errorf("rules without a sidecar: exit %d\n%s", r.code, r.stderr)
	}
	flags := []string{"--address", ts.Addr, "--decision", allow.DecisionId, "--agent", "run", "--session", "s"}
	r := runExec(t, bin, ex, nil, flags, "sh", "-c", script)
	if !strings.Contains(r.stdout, "reached /ok") {
		t.Fatalf("the allowed host was not reached through the proxy (exit %d)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "reached /no") || denied.n.Load() != 0 {
		t.Errorf("the denied host was reached (%d connections)\nstdout:\n%s", denied.n.Load(), r.stdout)
	}
	if strings.Contains(r.stdout, "reached /direct") || !strings.Contains(r.stdout, "NO-ROUTE") {
		t.Errorf("a program ignoring the proxy variables got out\nstdout:\n%s", r.stdout)
	}
	if n := allowed.n.Load(); n != 1 {
		t.Errorf("the allowed host saw %d connections, want the proxied one", n)
	}
	hosts, _ := r.report["network_hosts"].([]any)
	var decided []string
	for _, h := range hosts {
		m, _ := h.(map[string]any)
		decided = append(decided, fmt.Sprintf("%v:%v=%v", m["host"], m["port"], m["decision"]))
	}
	want := []string{fmt.Sprintf("127.0.0.1:%d=allow", allowed.port), fmt.Sprintf("127.0.0.1:%d=deny", denied.port)}
	if strings.Join(decided, ",") != strings.Join(want, ",") {
		t.Errorf("report network_hosts %q, want %q\nstderr:\n%s", decided, want, r.stderr)
	}
	if !strings.Contains(r.stderr, "network: 2 hosts decided, 1 allowed, 1 refused") {
		t.Errorf("stderr does not sum up the hosts decided:\n%s", r.stderr)
	}
}

// git, confined with network rules, clones from an allowed loopback git
// server (git's own http-backend) through the proxy.
func TestExecNetworkRulesGitClone(t *testing.T) {
	probeKernel(t)
	if userNSError != nil {
		t.Skipf("no user namespaces here: %v", userNSError)
	}
	needPrograms(t, "git")
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("no git-http-backend: %v", err)
	}
	root := t.TempDir()
	src := filepath.Join(root, "src")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "first"},
		{"clone", "-q", "--bare", src, filepath.Join(root, "repo.git")},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })

	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": fmt.Sprintf(`{"run": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"network": {"allow": ["127.0.0.1:%d"]}}}}`, port),
	})
	ts := grpcapitest.NewServer(t, grpcapitest.Options{Bundles: []string{dir}})
	command := fmt.Sprintf("git clone -q http://127.0.0.1:%d/repo.git clone", port)
	allow := ts.Decide(t, &pb.DecideRequest{AgentId: "run", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": command})})
	if allow.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the command: %v", allow)
	}
	tr := newTree(t)
	ex := tr.execution("rules")
	ex.NetworkRules = allow.GetExecution().GetNetworkRules()
	r := runExec(t, binary(t), ex, nil, []string{"--address", ts.Addr, "--decision", allow.DecisionId, "--agent", "run"},
		"git", "clone", "-q", fmt.Sprintf("http://127.0.0.1:%d/repo.git", port), "clone")
	if r.code != 0 {
		t.Fatalf("git clone through the proxy: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tr.work, "clone", ".git", "HEAD")); err != nil {
		t.Errorf("the clone is not there: %v", err)
	}
	if hosts, _ := r.report["network_hosts"].([]any); len(hosts) != 1 {
		t.Errorf("report network_hosts %v, want the one host decided", r.report["network_hosts"])
	}
}

// A connection the rules ask about is held until a person answers: listed
// by ListPending, let through by an allow.
func TestExecNetworkAskHeldUntilAnswered(t *testing.T) {
	probeKernel(t)
	if userNSError != nil {
		t.Skipf("no user namespaces here: %v", userNSError)
	}
	needPrograms(t, "curl")
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "reached %s\n", r.URL.Path) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"run": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"network": {"ask": ["127.0.0.2"], "otherwise": "deny"}}}}`,
	})
	ts := grpcapitest.NewServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})
	url := fmt.Sprintf("http://127.0.0.2:%d/asked", port)
	allow := ts.Decide(t, &pb.DecideRequest{AgentId: "run", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "curl " + url})})
	if allow.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the command: %v", allow)
	}
	tr := newTree(t)
	ex := tr.execution("rules")
	ex.NetworkRules = allow.GetExecution().GetNetworkRules()
	answered := make(chan string, 1)
	go func() {
		ctx := context.Background()
		deadline := time.Now().Add(50 * time.Second)
		for time.Now().Before(deadline) {
			p, err := ts.Approver.ListPending(ctx, &pb.ListPendingRequest{})
			if err == nil && len(p.Asks) == 1 {
				_, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: p.Asks[0].DecisionId, Result: "allow"})
				answered <- fmt.Sprintf("%v %v", p.Asks[0].GetMessage(), err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		answered <- "never listed"
	}()
	r := runExec(t, binary(t), ex, nil, []string{"--address", ts.Addr, "--decision", allow.DecisionId, "--agent", "run", "--session", "s"},
		"curl", "-sS", "--max-time", "50", url)
	got := <-answered
	if !strings.Contains(got, fmt.Sprintf("127.0.0.2:%d", port)) || !strings.HasSuffix(got, "<nil>") {
		t.Errorf("the ask as listed and answered: %s", got)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "reached /asked") {
		t.Errorf("the held connection after a person's allow: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
