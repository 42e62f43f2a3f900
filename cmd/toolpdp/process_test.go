package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/toolpdp once for the process tests.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolpdp-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "toolpdp")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, binPath)
	}
	return binPath
}

type process struct {
	cmd     *exec.Cmd
	stderr  *syncBuf
	done    chan struct{} // closed when the process has exited
	waitErr error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func start(t *testing.T, args ...string) *process {
	t.Helper()
	return startBinary(t, binary(t), args...)
}

// startBinary runs bin with args, killed at the end of the test.
func startBinary(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	return startBinaryEnv(t, bin, nil, args...)
}

// startBinaryEnv is startBinary with env added to this process's environment.
func startBinaryEnv(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), stderr: &syncBuf{}, done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func dialUnix(t *testing.T, sock string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func waitServing(t *testing.T, conn *grpc.ClientConn, p *process) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && h.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never SERVING: %v\n%s", err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// decideStarted reports whether the server at metricsAddr has started
// handling a Decide (grpc_server_started_total).
func decideStarted(metricsAddr string) bool {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "grpc_server_started_total{") && strings.Contains(line, `grpc_method="Decide"`) && !strings.HasSuffix(line, " 0") {
			return true
		}
	}
	return false
}

// A slow guardrail keeps one Decide in flight for about a second.
const slowGuardrail = `package guardrails.slow

import rego.v1

deny contains "never" if {
	input.tool_name == "Slow"
	count([x | some x in numbers.range(1, 1500000)]) < 0
}
`

func TestUnixSocketModeAndGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "toolpdp.sock")
	// A stale socket from a crashed run: bound, then left behind.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	bundle := testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"default": {}}`, "guardrails/slow/slow.rego": slowGuardrail})
	ml, err := net.Listen("tcp", "127.0.0.1:0") // a free loopback port for /metrics
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	ml.Close()
	p := start(t, "serve", "--bundle", bundle, "--listen", "unix://"+sock, "--metrics-listen", metricsAddr, "--decision-log", "off",
		"--eval-timeout", "30s", "--shutdown-grace", "10s")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)

	info, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o660 {
		t.Fatalf("socket mode %o, want 660", mode)
	}

	type result struct {
		resp *pb.DecideResponse
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{ToolName: "Slow"})
		inflight <- result{resp, err}
	}()
	// The call is in flight once the server has started handling it.
	deadline := time.Now().Add(20 * time.Second)
	for !decideStarted(metricsAddr) {
		if time.Now().After(deadline) {
			t.Fatalf("the slow call never started\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-inflight
	if r.err != nil || r.resp.Decision == pb.Decision_DECISION_UNSPECIFIED {
		t.Fatalf("the in-flight call did not complete: %v %v\n%s", r.resp, r.err, p.stderr.String())
	}
	select {
	case <-p.done:
		if p.waitErr != nil {
			t.Fatalf("exit: %v\n%s", p.waitErr, p.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", p.stderr.String())
	}
	t.Logf("in-flight call completed; exited 0 %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	if !strings.Contains(p.stderr.String(), `"msg":"stopped"`) {
		t.Fatalf("no shutdown log line:\n%s", p.stderr.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket file left behind: %v", err)
	}
}

func TestStartupErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bundle", "/nonexistent/bundle", "--listen", "127.0.0.1:0", "--metrics-listen", ""}, "/nonexistent/bundle"},
		{[]string{"serve", "--listen", "0.0.0.0:0", "--metrics-listen", ""}, "is not loopback: pass --allow-non-loopback"},
		{[]string{"serve", "--listen", "nonsense", "--metrics-listen", ""}, "not host:port or unix:///path"},
		{[]string{"serve", "--tls-client-ca", "x.pem", "--metrics-listen", ""}, "--tls-client-ca needs --tls-cert"},
	}
	for _, c := range cases {
		out, err := exec.Command(binary(t), c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: err %v, output %q; want a failure naming %q", c.args, err, out, c.want)
		}
	}
}

// --wait-for-bundle: a missing bundle at start is not fatal; decisions deny
// and health is NOT_SERVING until it appears.
func TestWaitForBundleProcess(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	bundle := filepath.Join(dir, "later")
	p := start(t, "serve", "--bundle", bundle, "--wait-for-bundle", "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
	conn := dialUnix(t, sock)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil {
			if h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("health %s before any bundle", h.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server: %v\n%s", err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{ToolName: "Read"})
	if err != nil || resp.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("before the bundle: %v %v", resp, err)
	}
	if err := os.MkdirAll(filepath.Join(bundle, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "agents", "data.json"), []byte(`{"default": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitServing(t, conn, p)
}

// toolpdp pending and toolpdp status against a running server.
func TestPendingAndStatusCommands(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	p := start(t, "serve", "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	ask, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{SessionId: "s", ToolName: "Bash"})
	if err != nil || ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Bash: %v %v", ask, err)
	}
	out, err := exec.Command(binary(t), "pending", "--addr", "unix://"+sock).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ask.DecisionId) || !strings.Contains(string(out), "1 waiting") {
		t.Fatalf("pending: %v\n%s", err, out)
	}
	out, err = exec.Command(binary(t), "status", "--addr", "unix://"+sock).Output()
	var st struct {
		PolicyRevision string `json:"policyRevision"`
	}
	if err != nil || json.Unmarshal(out, &st) != nil || st.PolicyRevision != "library-0.1.0,default-0.1.0" {
		t.Fatalf("status: %v\n%s", err, out)
	}
}

// The health-only listener kubelet probes reach answers health and server
// reflection (grpcurl ADDR list), and nothing else.
func TestHealthListenerServesReflection(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "toolpdp.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free loopback port for the probes
	if err != nil {
		t.Fatal(err)
	}
	probes := l.Addr().String()
	l.Close()
	p := start(t, "serve", "--listen", "unix://"+sock, "--health-listen", probes, "--metrics-listen", "", "--decision-log", "off")
	conn, err := grpc.NewClient(probes, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitServing(t, conn, p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection on the health listener: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("services listed on the health listener: %v", names)
	}
	if _, err := pb.NewDecisionServiceClient(conn).Decide(ctx, &pb.DecideRequest{ToolName: "Read"}); grpcstatus.Code(err) != codes.Unimplemented {
		t.Fatalf("Decide on the health listener: %v, want UNIMPLEMENTED", err)
	}
}
