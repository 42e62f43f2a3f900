package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The flood tests drive a real server process with each hostile request
// shape and check that it stays under the memory limit the shipped
// Kubernetes manifest gives it, and still answers a plain Decide after.
// A flood is a number of calls, not a length of time: on a loaded machine
// it takes longer, it does not become a smaller flood, and nothing is
// asserted about how fast calls are answered — a deadline only stops a
// hung server.
//
// Knobs, for measuring rather than testing:
//
//	TOOLPDP_FLOOD_BINARY=/path/to/toolpdp  flood that binary instead (only report, assert nothing)
//	TOOLPDP_FLOOD_SCALE=5                  send five times each shape's calls (default 1)
//	TOOLPDP_FLOOD_CEILING_MB=3072          kill the server past this RSS (default 3072), to keep the machine alive
//
// e.g. peak RSS of an older build:
//
//	TOOLPDP_FLOOD_BINARY=/tmp/old/toolpdp go test ./cmd/toolpdp -run TestFlood -v
const floodWorkers = 8

type floodShape struct {
	name    string
	bundle  map[string]string         // files of the served bundle
	args    []string                  // extra serve flags
	prepare func(t *testing.T) string // builds files the requests name; returns a directory
	request func(dir string, i int) *pb.DecideRequest
	calls   int           // the flood's size
	timeout time.Duration // each call's deadline
	after   func(t *testing.T, f *flood)
	wantErr codes.Code // the code every flood call must get; OK when it must succeed
}

type flood struct {
	p       *process
	conn    *grpc.ClientConn
	peakRSS atomic.Int64 // bytes, as sampled
	killed  atomic.Bool
	report  bool // measuring another binary: report, do not assert
	sent    atomic.Int64
	codes   sync.Map // codes.Code -> *atomic.Int64
}

func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a server process")
	}
	limit := manifestMemoryLimit(t)
	for k, v := range manifestEnv(t) { // the sidecar runs with the shipped runtime environment (GOMEMLIMIT)
		if strings.HasPrefix(k, "TOOLPDP_") {
			continue // the manifest's serve flags: this test gives its own
		}
		t.Setenv(k, v)
	}
	bin, report := os.Getenv("TOOLPDP_FLOOD_BINARY"), true
	if bin == "" {
		bin, report = binary(t), false
	}
	scale := 1
	if s := os.Getenv("TOOLPDP_FLOOD_SCALE"); s != "" {
		scale, _ = strconv.Atoi(s)
	}
	ceiling := int64(3072) << 20
	if s := os.Getenv("TOOLPDP_FLOOD_CEILING_MB"); s != "" {
		n, _ := strconv.ParseInt(s, 10, 64)
		ceiling = n << 20
	}
	for _, shape := range floodShapes() {
		t.Run(shape.name, func(t *testing.T) {
			f, stop := runFlood(t, bin, shape, shape.calls*scale, ceiling)
			f.report = report
			if shape.after != nil && !f.killed.Load() {
				shape.after(t, f)
			}
			stop()
			peak := f.peakRSS.Load()
			t.Logf("%s: %d calls %s; peak RSS %.1f MiB (limit %.0f MiB)%s", shape.name, f.sent.Load(), f.codeSummary(),
				float64(peak)/(1<<20), float64(limit)/(1<<20), map[bool]string{true: " — KILLED at the ceiling"}[f.killed.Load()])
			if report {
				return
			}
			if peak >= limit {
				t.Errorf("peak RSS %d bytes, over the shipped limit of %d", peak, limit)
			}
			if shape.wantErr != codes.OK && f.count(codes.OK) > 0 {
				t.Errorf("%d calls succeeded; want every one %s", f.count(codes.OK), shape.wantErr)
			}
			f.plainDecideAnswers(t)
		})
	}
}

func floodShapes() []floodShape {
	askGitPush := map[string]string{
		"agents/data.json":     `{"default": {}}`,
		"guardrails/data.json": `{"ask_commands": ["git push"]}`,
	}
	return []floodShape{
		{
			// Asks that quote 60,000 control characters, held for the pending TTL,
			// then one ListPending asking for everything.
			name:   "pending-asks",
			bundle: askGitPush,
			request: func(_ string, i int) *pb.DecideRequest {
				return &pb.DecideRequest{SessionId: fmt.Sprintf("s%d", i), ToolName: "Bash",
					Args: mustStruct(map[string]any{"command": "git push '" + strings.Repeat("\x01", 60000) + "'"})}
			},
			calls:   16,
			timeout: 5 * time.Second,
			after: func(t *testing.T, f *flood) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp, err := pb.NewDecisionServiceClient(f.conn).ListPending(ctx, &pb.ListPendingRequest{PageSize: 1 << 30},
					grpc.MaxCallRecvMsgSize(64<<20))
				if f.report {
					t.Logf("ListPending: %d asks, %v", len(resp.GetAsks()), err)
					return
				}
				if err != nil {
					t.Fatalf("ListPending: %v", err)
				}
				if n := len(resp.Asks); n == 0 || n > 1000 {
					t.Errorf("ListPending returned %d asks; want a page of at most 1000", n)
				}
				for _, a := range resp.Asks {
					if len(a.Message) > 1024 {
						t.Fatalf("a pending message of %d bytes: it quotes too much of the command", len(a.Message))
					}
				}
				if peak := f.sample(); peak >= manifestMemoryLimit(t) {
					t.Errorf("after ListPending: peak RSS %d", peak)
				}
			},
		},
		{
			// Read calls with ~1 MB of args each, logged to a file.
			name:   "decision-log",
			bundle: map[string]string{"agents/data.json": `{"default": {}}`},
			args:   []string{"--decision-log-max-mb", "10", "--decision-log-max-backups", "1"},
			request: func(_ string, i int) *pb.DecideRequest {
				return &pb.DecideRequest{SessionId: fmt.Sprintf("s%d", i%100), ToolName: "Read", Args: bigArgs}
			},
			calls:   16,
			timeout: 10 * time.Second,
		},
		{
			// 65 KB of nested parentheses, parsed as a shell command.
			name:   "nested-parentheses",
			bundle: askGitPush,
			request: func(_ string, i int) *pb.DecideRequest {
				return &pb.DecideRequest{ToolName: "Bash", Args: mustStruct(map[string]any{"command": nestedParens})}
			},
			calls:   16,
			timeout: 5 * time.Second,
		},
		{
			// Scope roots that are symlink loops with long targets, under a short
			// deadline: the server must stop working when the caller has gone.
			name:    "scope-roots",
			bundle:  map[string]string{"agents/data.json": `{"default": {}}`},
			prepare: symlinkLoops,
			request: func(dir string, i int) *pb.DecideRequest {
				roots := make([]string, 64)
				for j := range roots {
					roots[j] = filepath.Join(dir, "l0") + strings.Repeat("/.", j) // distinct strings, the same loop
				}
				return &pb.DecideRequest{ToolName: "Read", Args: mustStruct(map[string]any{"file_path": filepath.Join(dir, "f")}),
					ExecutionPolicy: &pb.ExecutionPolicy{ReadPaths: &pb.PathList{Paths: roots}}}
			},
			calls:   80,
			timeout: 200 * time.Millisecond,
			after: func(t *testing.T, f *flood) {
				// The server goes idle: some second after the flood spends
				// under 0.3 CPU-seconds. Waited for, not timed: a loaded
				// machine may take longer to drain what was already running,
				// and only work that never stops fails.
				deadline := time.Now().Add(floodHangGuard)
				for {
					before := f.cpuSeconds(t)
					time.Sleep(time.Second)
					spent := f.cpuSeconds(t) - before
					if spent <= 0.3 {
						t.Logf("CPU-seconds spent in a second after the flood: %.2f", spent)
						return
					}
					if time.Now().After(deadline) {
						if !f.report {
							t.Errorf("the server still spent %.2f CPU-seconds a second, %v after the flood: work goes on after callers left", spent, floodHangGuard)
						}
						return
					}
				}
			},
		},
		{
			// Too many scope roots: refused before any is resolved.
			name:    "scope-root-count",
			bundle:  map[string]string{"agents/data.json": `{"default": {}}`},
			prepare: symlinkLoops,
			request: func(dir string, i int) *pb.DecideRequest {
				roots := make([]string, 3000)
				for j := range roots {
					roots[j] = filepath.Join(dir, "l0")
				}
				return &pb.DecideRequest{ToolName: "Read", Args: mustStruct(map[string]any{"file_path": filepath.Join(dir, "f")}),
					ExecutionPolicy: &pb.ExecutionPolicy{ReadPaths: &pb.PathList{Paths: roots}}}
			},
			calls:   16,
			timeout: 3 * time.Second,
			wantErr: codes.InvalidArgument,
		},
		{
			// Args nested deeper than protobuf decodes.
			name:   "deep-args",
			bundle: map[string]string{"agents/data.json": `{"default": {}}`},
			request: func(_ string, i int) *pb.DecideRequest {
				return &pb.DecideRequest{ToolName: "Read", Args: deepArgs}
			},
			calls:   16,
			timeout: 5 * time.Second,
			wantErr: codes.InvalidArgument,
		},
	}
}

var (
	nestedParens = strings.Repeat("(", 32500) + "true" + strings.Repeat(")", 32500)
	bigArgs      = func() *structpb.Struct {
		m := make(map[string]any, 45000)
		for i := range 45000 {
			m[fmt.Sprintf("k%05d", i)] = "value-of" // ~990 KB of args in all
		}
		return mustStruct(m)
	}()
	deepArgs = func() *structpb.Struct {
		inner := &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewBoolValue(true)}}
		for range 6000 { // each level is a Struct and a Value: 12,000 messages deep
			inner = &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStructValue(inner)}}
		}
		return inner
	}()
)

func mustStruct(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return s
}

// symlinkLoops makes l0 -> l1 -> … -> l39 -> l0, each target a long walk
// (x/../x/../…/lN) so every hop costs many lookups.
func symlinkLoops(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		target := strings.Repeat("x/../", 400) + fmt.Sprintf("l%d", (i+1)%40)
		if err := os.Symlink(target, filepath.Join(dir, fmt.Sprintf("l%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// floodHangGuard bounds a flood and what waits on the server after it: only
// a server that stopped answering takes this long.
const floodHangGuard = 5 * time.Minute

// runFlood starts a server and sends it calls calls; stop ends the RSS
// watch.
func runFlood(t *testing.T, bin string, shape floodShape, calls int, ceiling int64) (f *flood, stop func()) {
	t.Helper()
	dir := ""
	if shape.prepare != nil {
		dir = shape.prepare(t)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	args := append([]string{"serve", "--bundle", testkit.WriteBundle(t, shape.bundle), "--listen", "unix://" + sock, "--metrics-listen", "",
		"--decision-log", filepath.Join(t.TempDir(), "decisions.log")}, shape.args...)
	f = &flood{p: startBinary(t, bin, args...)}
	f.conn = dialUnix(t, sock)
	waitServing(t, f.conn, f.p)

	done := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { // sample RSS; kill past the ceiling
		defer watch.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss := f.sample(); rss > ceiling {
				f.killed.Store(true)
				_ = f.p.cmd.Process.Kill()
				return
			}
			select {
			case <-done:
				return
			case <-f.p.done:
				return
			case <-tick.C:
			}
		}
	}()
	client := pb.NewDecisionServiceClient(f.conn)
	deadline := time.Now().Add(floodHangGuard)
	var workers sync.WaitGroup
	for w := range floodWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := w; i < calls && time.Now().Before(deadline) && !f.killed.Load(); i += floodWorkers {
				ctx, cancel := context.WithTimeout(context.Background(), shape.timeout)
				_, err := client.Decide(ctx, shape.request(dir, i), grpc.MaxCallSendMsgSize(64<<20))
				cancel()
				f.sent.Add(1)
				c, _ := f.codes.LoadOrStore(grpcstatus.Code(err), new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
			}
		}()
	}
	workers.Wait()
	if n := f.sent.Load(); n < int64(calls) && !f.killed.Load() {
		t.Fatalf("%d of %d calls sent in %v: the server hangs\n%s", n, calls, floodHangGuard, f.p.stderr.String())
	}
	return f, func() { close(done); watch.Wait() }
}

// sample reads the server's RSS and peak RSS (VmHWM) and keeps the larger.
func (f *flood) sample() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", f.p.cmd.Process.Pid))
	if err != nil {
		return f.peakRSS.Load()
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		for {
			old := f.peakRSS.Load()
			if kb<<10 <= old || f.peakRSS.CompareAndSwap(old, kb<<10) {
				break
			}
		}
	}
	return f.peakRSS.Load()
}

// cpuSeconds is the server's user and system CPU time so far.
func (f *flood) cpuSeconds(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", f.p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at state.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks; 100 per second on Linux
}

func (f *flood) count(c codes.Code) int64 {
	if v, ok := f.codes.Load(c); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func (f *flood) codeSummary() string {
	var parts []string
	f.codes.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k.(codes.Code), v.(*atomic.Int64).Load()))
		return true
	})
	return strings.Join(parts, " ")
}

// plainDecideAnswers: after the flood a plain Read is allowed. How long it
// took is logged, not asserted — a loaded machine answers late — and the
// deadline is a hang guard: a wedged server (a lock held, a queue never
// drained) never answers.
func (f *flood) plainDecideAnswers(t *testing.T) {
	t.Helper()
	plainDecideAnswers(t, f.conn, f.p)
}

// plainDecideAnswers: a plain Read on conn is allowed before the hang
// guard. RESOURCE_EXHAUSTED says "try again" — the calls the flood's
// callers gave up on may still hold the server's receive budget for a
// moment — and is tried again, as a client would; any other answer fails.
func plainDecideAnswers(t *testing.T, conn *grpc.ClientConn, p *process) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(floodHangGuard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.EvalTimeout)
		resp, err := pb.NewDecisionServiceClient(conn).Decide(ctx, &pb.DecideRequest{ToolName: "Read"})
		cancel()
		if grpcstatus.Code(err) == codes.ResourceExhausted && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || resp.Decision != pb.Decision_DECISION_ALLOW {
			t.Fatalf("a plain Read after the flood: %v %v\n%s", resp, err, p.stderr.String())
		}
		t.Logf("a plain Read after the flood: allowed %v after it was first tried", time.Since(start).Round(time.Microsecond))
		return
	}
}

// manifestEnv is the environment the shipped Deployment gives the sidecar.
func manifestEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range manifestSidecar(t).Env {
		env[e.Name] = e.Value
	}
	return env
}

// manifestSidecar is the toolpdp container of the shipped Deployment.
func manifestSidecar(t *testing.T) container {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifestDir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d k8sObject
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == "toolpdp" {
			return c
		}
	}
	t.Fatal("no toolpdp sidecar in deployment.yaml")
	return container{}
}

// manifestMemoryLimit is the sidecar's memory limit in the shipped
// Deployment, in bytes.
func manifestMemoryLimit(t *testing.T) int64 {
	t.Helper()
	q := manifestSidecar(t).Resources.Limits["memory"]
	for suffix, mult := range map[string]int64{"Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("memory limit %q", q)
			}
			return v * mult
		}
	}
	t.Fatalf("memory limit %q is not in Mi or Gi", q)
	return 0
}
