package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A bundle whose load would stall or exhaust the sidecar is rejected
// within --load-timeout or its memory budget, by a child process killed
// from outside, while the last good policy serves, Status answers within
// 3 s at every moment and the process tree stays under the shipped limit.
func TestHostileLoadsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("loads hostile bundles in a server process")
	}
	limit := manifestMemoryLimit(t)
	env := []string{}
	for k, v := range manifestEnv(t) {
		if !strings.HasPrefix(k, "TOOLPDP_") {
			env = append(env, k+"="+v)
		}
	}
	for _, c := range []struct {
		name, test, want string
	}{
		{"memory", "test_huge if count(numbers.range(1, 1e9)) > 0", "passed its memory budget"},
		{"time", "test_spin if {\n\tr := numbers.range(1, 20000)\n\tevery i in r {\n\t\tevery j in r {\n\t\t\ti + j > 0\n\t\t}\n\t}\n}", "did not finish within 4s (--load-timeout)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, map[string]string{
				"agents/data.json":  `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`,
				"guardrails/g.rego": guardrailModule("guardrails.team", `deny contains "no Curl" if input.tool_name == "Curl"`),
			})
			sock := filepath.Join(t.TempDir(), "s.sock")
			p := startBinaryEnv(t, binary(t), env, "serve", "--bundle", dir, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off",
				"--load-timeout", "4s", "--watch-debounce", "50ms")
			conn := dialUnix(t, sock)
			waitServing(t, conn, p)
			tree := &treeSampler{root: p.cmd.Process.Pid}
			stop := tree.run()
			defer stop()
			slowest := watchStatus(t, conn)
			defer slowest.stop()

			start := time.Now()
			if err := os.WriteFile(filepath.Join(dir, "guardrails", "g_test.rego"), []byte(guardrailModule("guardrails.team_test", c.test)), 0o644); err != nil {
				t.Fatal(err)
			}
			lastErr := waitStatus(t, conn, 20*time.Second, func(s *pb.StatusResponse) bool { return s.LastError != "" })
			took := time.Since(start)
			if !strings.Contains(lastErr, c.want) || !strings.Contains(lastErr, "test_") {
				t.Errorf("the rejection does not say which bound and which test: %s", lastErr)
			}
			t.Logf("rejected after %v; --load-timeout is 4s", took)
			curl, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{AgentId: "coder", ToolName: "Curl"})
			if err != nil || curl.Decision != pb.Decision_DECISION_DENY || !strings.Contains(curl.Message, "no Curl") {
				t.Errorf("the last good policy does not serve: %v %v", curl, err)
			}
			stop()
			slowest.stop()
			t.Logf("rejected after %v; slowest Status %v; peak total PSS %.1f MiB (limit %.0f MiB); %s",
				took.Round(time.Millisecond), slowest.max(), float64(tree.peak.Load())/(1<<20), float64(limit)/(1<<20), lastErr)
			if slowest.max() > 3*time.Second || slowest.failed.Load() > 0 {
				t.Errorf("Status took up to %v (%d failed) during the load", slowest.max(), slowest.failed.Load())
			}
			if tree.peak.Load() >= limit {
				t.Errorf("the server and its child peaked at %d bytes, over the shipped limit of %d", tree.peak.Load(), limit)
			}

			// Back to the content that serves: the error is cleared.
			if err := os.Remove(filepath.Join(dir, "guardrails", "g_test.rego")); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, conn, 20*time.Second, func(s *pb.StatusResponse) bool { return s.LastError == "" })
		})
	}
}

// waitStatus polls Status until ok, returning the last error it reports.
func waitStatus(t *testing.T, conn *grpc.ClientConn, d time.Duration, ok func(*pb.StatusResponse) bool) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		s, err := pb.NewDecisionServiceClient(conn).Status(ctx, &pb.StatusRequest{})
		cancel()
		if err == nil && ok(s) {
			return s.LastError
		}
		if time.Now().After(deadline) {
			t.Fatalf("Status never as wanted: %v %v", s, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statusWatch calls Status every 50 ms and keeps the slowest answer.
type statusWatch struct {
	slowest atomic.Int64
	failed  atomic.Int64
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func watchStatus(t *testing.T, conn *grpc.ClientConn) *statusWatch {
	w := &statusWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			_, err := pb.NewDecisionServiceClient(conn).Status(ctx, &pb.StatusRequest{})
			cancel()
			if err != nil {
				w.failed.Add(1)
			}
			if d := int64(time.Since(start)); d > w.slowest.Load() {
				w.slowest.Store(d)
			}
		}
	}()
	return w
}

func (w *statusWatch) stop()              { w.once.Do(func() { close(w.done) }); w.wg.Wait() }
func (w *statusWatch) max() time.Duration { return time.Duration(w.slowest.Load()) }

// treeSampler samples the memory of a process and its children every 10 ms,
// keeping the peak: the sum of their proportional set sizes, which charges
// each page they share (the one binary's text) once, as the container's
// memory cgroup does; summed RSS would count it once per process.
type treeSampler struct {
	root int
	peak atomic.Int64
}

func (s *treeSampler) run() (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var total int64
			for _, pid := range append([]int{s.root}, childrenOf(s.root)...) {
				total += pssOf(pid)
			}
			if total > s.peak.Load() {
				s.peak.Store(total)
			}
		}
	}()
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}

// childrenOf are the direct children of pid.
func childrenOf(pid int) []int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// pssOf is a process's proportional set size in bytes (its resident pages,
// each shared one divided among the processes sharing it), or its RSS where
// the kernel has no smaps_rollup; 0 once it is gone.
func pssOf(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return rssOf(pid)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return rssOf(pid)
}

// rssOf is a process's resident set in bytes (0 once it is gone).
func rssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// serve refuses a definition with an unknown key as check does, and
// --unknown-keys=warn serves it with a warning.
func TestServeUnknownKeys(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"coder": {"execution_policy": {"read_path": ["/srv"]}}}`})
	sock := filepath.Join(t.TempDir(), "s.sock")
	cmd := exec.Command(binary(t), "serve", "--bundle", dir, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `execution_policy.read_path: unknown key (did you mean \"read_paths\"?)`) {
		t.Fatalf("serve of a misspelt key: %v\n%s", err, out)
	}
	p := start(t, "serve", "--bundle", dir, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off", "--unknown-keys", "warn")
	waitServing(t, dialUnix(t, sock), p)
	if !strings.Contains(p.stderr.String(), "unknown key, ignored (--unknown-keys=warn)") {
		t.Errorf("no warning:\n%s", p.stderr.String())
	}
}

// With --decision-log-required, a decision whose line cannot be written is
// a deny; without, it stands and the failed write is counted.
func TestDecisionLogRequired(t *testing.T) {
	for _, required := range []bool{false, true} {
		t.Run(fmt.Sprint("required=", required), func(t *testing.T) {
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Skip("no /dev/full:", err)
			}
			defer full.Close()
			sock := filepath.Join(t.TempDir(), "s.sock")
			metrics := freePort(t)
			args := []string{"serve", "--listen", "unix://" + sock, "--metrics-listen", metrics, "--decision-log", "stdout"}
			if required {
				args = append(args, "--decision-log-required")
			}
			p := &process{cmd: exec.Command(binary(t), args...), stderr: &syncBuf{}, done: make(chan struct{})}
			p.cmd.Stdout, p.cmd.Stderr = full, p.stderr
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
			t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
			conn := dialUnix(t, sock)
			waitServing(t, conn, p)
			resp, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{ToolName: "Read", Args: mustStruct(map[string]any{"file_path": "/tmp/x"})})
			if err != nil {
				t.Fatal(err)
			}
			want := pb.Decision_DECISION_ALLOW
			if required {
				want = pb.Decision_DECISION_DENY
			}
			if resp.Decision != want || required && !strings.Contains(resp.Message, "decision log") {
				t.Errorf("a Read with the log on /dev/full: %s %q, want %s", resp.Decision, resp.Message, want)
			}
			deadline := time.Now().Add(5 * time.Second)
			for metricValue(t, metrics, "toolpdp_decision_log_write_errors_total") == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no failed write counted:\n%s", p.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// metricValue is the value of an unlabelled metric the server at addr
// exports, 0 when it is not there (yet).
func metricValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
