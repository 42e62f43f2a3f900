// Command bench is toolpdp's load harness. It starts the real binary and
// OPA's own REST server on the same policy library, bundle and input, and
// drives each with the same client shape for a fixed time, at a fixed
// concurrency or a fixed rate:
//
//	go run ./bench                 all targets, then the ratios
//	go run ./bench -rss            1M decisions, RSS every 100k
//	go run ./bench -state          Decide with a session on each state store:
//	                               memory, file: and a Redis it starts
//	go run ./bench -trace FILE     replay a decision-test file's requests (-json: last line JSON)
//
// Targets: toolpdp Decide (TCP and unix socket), toolpdp's grpc.health.v1
// Check (the transport floor, same process), OPA REST (`opa run --server`,
// built by scripts/build-opa at go.mod's OPA version) over loopback HTTP
// with keep-alive. Traffic goes to loopback only, bounded in count and time.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

var (
	duration    = flag.Duration("duration", 10*time.Second, "how long each target is driven")
	concurrency = flag.Int("concurrency", 8, "requests in flight (closed loop)")
	rate        = flag.Int("rate", 2000, "requests per second of the fixed-rate run (unix socket)")
	bundleDir   = flag.String("bundle", "testdata/bench", "the bundle both servers load")
	rss         = flag.Bool("rss", false, "instead: 1M decisions over the unix socket, RSS every 100k")
	decisions   = flag.Int("decisions", 1_000_000, "decisions of the -rss run")
	stateStores = flag.Bool("state", false, "instead: Decide in sessions over the unix socket with each --state store (memory, file:, redis:// on a redis-server it starts)")
	trace       = flag.String("trace", "", "instead: replay the requests of this decision-test file (corpus format) in process, over gRPC and to OPA")
	cpuProfile  = flag.String("cpuprofile", "", "with -trace: write a CPU profile of the in-process replay to this file")
	jsonOut     = flag.Bool("json", false, "with -trace: print the figures as one JSON object, the last line of stdout")
)

// The request every target answers: a Bash call through scope, env and
// command guardrails of the realistic bundle.
func request() *pb.DecideRequest {
	args, _ := structpb.NewStruct(map[string]any{"command": "cd src && go test ./... | tee out.txt"})
	return &pb.DecideRequest{AgentId: "agent3", ToolName: "Bash", Category: pb.Category_CATEGORY_SAFE, Args: args,
		Env: map[string]string{"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "GOFLAGS": "-mod=mod"}}
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	work, err := os.MkdirTemp("", "toolpdp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "toolpdp")
	if out, err := exec.Command("scripts/build", bin).CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/build: %v\n%s", err, out)
	}
	if *stateStores {
		return stateRun(bin, work)
	}
	if *trace != "" {
		return traceRun(work, bin)
	}
	tcp, sock := freeAddr(), filepath.Join(work, "toolpdp.sock")
	srv, err := startServe(bin, *bundleDir, tcp, "unix://"+sock)
	if err != nil {
		return err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	tcpConn, unixConn := dial(tcp), dial("unix://"+sock)
	if err := waitHealthy(tcpConn); err != nil {
		return err
	}
	req := request()
	want, err := pb.NewDecisionServiceClient(tcpConn).Decide(context.Background(), req)
	if err != nil {
		return err
	}
	if *rss {
		return rssRun(srv.Process.Pid, pb.NewDecisionServiceClient(unixConn), req)
	}

	opaBody, slimBody, fairBody, err := opaInput(req, filepath.Join(work, "fair"))
	if err != nil {
		return err
	}
	opaURL, stopOPA, err := startOPA(*bundleDir, filepath.Join(work, "fair"))
	if err != nil {
		return err
	}
	defer stopOPA()
	fairURL := strings.TrimSuffix(opaURL, "toolpdp/decision/result") + "toolpdp_fair/result"
	for _, c := range []struct {
		url  string
		body []byte
	}{{opaURL, opaBody}, {opaURL, slimBody}, {fairURL, fairBody}} {
		if got, err := opaDecision(c.url, c.body); err != nil || "DECISION_"+strings.ToUpper(got) != want.Decision.String() {
			return fmt.Errorf("OPA (%s) decides %q (%v), toolpdp %s: not the same computation", c.url, got, err, want.Decision)
		}
	}

	fmt.Printf("machine: %d CPUs; %s each, %d in flight; request: %s %s\nOPA's input: %d bytes of JSON (toolpdp's own), %d bytes without the agent's pre-decided lookups (slim), %d bytes request-only (fair: the index as OPA base data)\n\n",
		numCPU(), *duration, *concurrency, req.ToolName, req.Args.AsMap()["command"], len(opaBody), len(slimBody), len(fairBody))
	decide := func(c pb.DecisionServiceClient) func() error {
		return func() error { _, err := c.Decide(context.Background(), req); return err }
	}
	health := healthpb.NewHealthClient(tcpConn)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}}
	results := []result{
		closedLoop("toolpdp Decide, TCP", decide(pb.NewDecisionServiceClient(tcpConn))),
		closedLoop("toolpdp Decide, unix socket", decide(pb.NewDecisionServiceClient(unixConn))),
		closedLoop("toolpdp Health Check, TCP", func() error {
			_, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
			return err
		}),
		closedLoop("OPA REST, HTTP keep-alive", post(httpc, opaURL, opaBody)),
		closedLoop("OPA REST, slim input", post(httpc, opaURL, slimBody)),
		closedLoop("OPA REST, fair (index as data)", post(httpc, fairURL, fairBody)),
		fixedRateN(fmt.Sprintf("toolpdp Decide, unix, %d/s", *rate), *rate, int(duration.Seconds()*float64(*rate)), decide(pb.NewDecisionServiceClient(unixConn))),
	}
	fmt.Printf("%-34s %10s %9s %9s %9s %9s %7s\n", "target", "req/s", "p50", "p90", "p99", "p99.9", "errors")
	for _, r := range results {
		fmt.Printf("%-34s %10.0f %9s %9s %9s %9s %7d\n", r.name, r.throughput, r.q(0.5), r.q(0.9), r.q(0.99), r.q(0.999), r.errors)
	}
	for _, r := range results {
		if r.firstErr != "" {
			fmt.Printf("first error of %s: %s\n", r.name, r.firstErr)
		}
	}
	fmt.Printf("\nratios: Decide/OPA REST %.2fx (slim input: %.2fx; fair mode: %.2fx, target >= 3), Decide/Health Check %.2fx (target >= 0.6), fixed-rate p99 %s (target <= 1ms)\n",
		results[0].throughput/results[3].throughput, results[0].throughput/results[4].throughput, results[0].throughput/results[5].throughput,
		results[0].throughput/results[2].throughput, results[6].q(0.99))
	return nil
}

type result struct {
	name       string
	throughput float64
	latencies  []time.Duration
	errors     int64
	firstErr   string
}

func (r result) q(p float64) string {
	if len(r.latencies) == 0 {
		return "-"
	}
	d := r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
	return d.Round(time.Microsecond).String()
}

// closedLoop keeps -concurrency requests in flight for -duration.
func closedLoop(name string, call func() error) result {
	return closedLoopEach(name, func(int) func() error { return call })
}

// closedLoopEach is closedLoop where each caller makes its own call.
func closedLoopEach(name string, per func(caller int) func() error) result {
	var mu sync.Mutex
	var all []time.Duration
	var errs atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for caller := range *concurrency {
		wg.Add(1)
		call := per(caller)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<16)
			for time.Now().Before(deadline) {
				t := time.Now()
				if err := call(); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	fe, _ := firstErr.Load().(string)
	return result{name: name, throughput: float64(len(all)) / time.Since(start).Seconds(), latencies: all, errors: errs.Load(), firstErr: fe}
}

// fixedRateN sends n requests at rate per second, each measured from when
// it was due (no coordinated omission), at most 1000 in flight.
func fixedRateN(name string, rate, n int, call func() error) result {
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := call(); err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
			lat[i] = time.Since(due)
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	fe, _ := firstErr.Load().(string)
	return result{name: name, throughput: float64(n) / time.Since(start).Seconds(), latencies: lat, errors: errs.Load(), firstErr: fe}
}

// rssRun makes -decisions decisions and prints the server's RSS every 100k.
func rssRun(pid int, c pb.DecisionServiceClient, req *pb.DecideRequest) error {
	fmt.Printf("%12s %10s %10s\n", "decisions", "RSS MiB", "req/s")
	var done atomic.Int64
	start := time.Now()
	for step := 1; step <= *decisions/100_000; step++ {
		var wg sync.WaitGroup
		t := time.Now()
		for range *concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Add(1) <= int64(step*100_000) {
					if _, err := c.Decide(context.Background(), req); err != nil {
						fmt.Fprintln(os.Stderr, "decide:", err)
						return
					}
				}
				done.Add(-1)
			}()
		}
		wg.Wait()
		fmt.Printf("%12d %10.1f %10.0f\n", step*100_000, rssMiB(pid), 100_000/time.Since(t).Seconds())
	}
	fmt.Printf("total %s\n", time.Since(start).Round(time.Second))
	return nil
}

func rssMiB(pid int) float64 {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb float64
			fmt.Sscan(f[1], &kb)
			return kb / 1024
		}
	}
	return 0
}

// startServe starts the binary serving bundle on the listen addresses,
// with no metrics listener and no decision log.
func startServe(bin, bundle string, listen ...string) (*exec.Cmd, error) {
	args := []string{"serve", "--bundle", bundle, "--metrics-listen", "", "--decision-log", "off", "--log-level", "warn"}
	for _, l := range listen {
		args = append(args, "--listen", l)
	}
	srv := exec.Command(bin, args...)
	srv.Stderr = os.Stderr
	return srv, srv.Start()
}

func startOPA(bundle, fair string) (string, func(), error) {
	out, err := exec.Command("scripts/build-opa").Output()
	if err != nil {
		return "", nil, fmt.Errorf("scripts/build-opa: %w", err)
	}
	addr := freeAddr()
	cmd := exec.Command(strings.TrimSpace(string(out)), "run", "--server", "--addr", addr, "--log-level", "error",
		"--bundle", "rego/library", "--bundle", bundle, "--bundle", fair)
	stop, err := startHealthy(cmd, "OPA", "http://"+addr+"/health?bundles", 10*time.Second)
	return "http://" + addr + "/v1/data/toolpdp/decision/result", stop, err
}

// startHealthy starts cmd and waits, up to wait, for health to answer 200;
// the function that stops it, or why it did not become healthy.
func startHealthy(cmd *exec.Cmd, name, health string, wait time.Duration) (func(), error) {
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return stop, nil
			}
		}
	}
	stop()
	return nil, fmt.Errorf("%s never became healthy (%s)", name, health)
}

// opaInput is {"input": ...}: exactly the document toolpdp evaluates (full);
// the same without input.agent.decided, which the chain does not need
// (slim); and the fair mode's request-only input, with a bundle written to
// fairDir that holds what toolpdp computes once per bundle (every agent's
// index entry and guardrails) as OPA base data, and a thin wrapper rule
// binding them from data: the same work per request on both sides.
func opaInput(req *pb.DecideRequest, fairDir string) (full, slim, fair []byte, err error) {
	snap, err := policy.Load(context.Background(), &bundles.Sources{Paths: []string{*bundleDir}}, time.Minute, time.Now())
	if err != nil {
		return nil, nil, nil, err
	}
	input, err := snap.Input(req)
	if err != nil {
		return nil, nil, nil, err
	}
	full = []byte(`{"input": ` + input.String() + `}`)
	doc, fair, err := requestOnly(input)
	if err != nil {
		return nil, nil, nil, err
	}
	in := doc["input"]
	delete(in["agent"].(map[string]any), "decided")
	if slim, err = json.Marshal(doc); err != nil {
		return nil, nil, nil, err
	}
	return full, slim, fair, writeFairBundle(snap, fairDir)
}

// requestOnly is the fair mode's body for input, {"input": ...} without
// the agent's index entry and guardrails (OPA binds them from base data),
// and the whole body as a document.
func requestOnly(input ast.Value) (doc map[string]map[string]any, fair []byte, err error) {
	if err := json.Unmarshal([]byte(`{"input": `+input.String()+`}`), &doc); err != nil {
		return nil, nil, err
	}
	in := doc["input"]
	agent, guardrails := in["agent"], in["guardrails"]
	delete(in, "agent")
	delete(in, "guardrails")
	if fair, err = json.Marshal(doc); err != nil {
		return nil, nil, err
	}
	in["agent"], in["guardrails"] = agent, guardrails
	return doc, fair, nil
}

// writeFairBundle exports the index as base data under toolpdp_fair, with
// the wrapper rule toolpdp_fair.result.
func writeFairBundle(snap *policy.Snapshot, dir string) error {
	agents, guardrails := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for _, id := range snap.AgentIDs() {
		in, err := snap.Input(&pb.DecideRequest{AgentId: id, ToolName: "Read"})
		if err != nil {
			return err
		}
		obj, _ := in.(ast.Object)
		agents[id] = json.RawMessage(obj.Get(ast.StringTerm("agent")).String())
		guardrails[id] = json.RawMessage(obj.Get(ast.StringTerm("guardrails")).String())
	}
	data, err := json.Marshal(map[string]any{"agents": agents, "guardrails": guardrails})
	if err != nil {
		return err
	}
	files := map[string]string{
		".manifest":                 `{"revision": "fair", "roots": ["toolpdp_fair"]}`,
		"toolpdp_fair/data.json":    string(data),
		"toolpdp_fair/wrapper.rego": fairWrapper,
	}
	for name, content := range files {
		if err := writeFile(filepath.Join(dir, name), []byte(content)); err != nil {
			return err
		}
	}
	return nil
}

const fairWrapper = `package toolpdp_fair

import rego.v1

# The request-only input, with the agent's index entry and guardrails bound
# from base data computed once per bundle, decided by the library as is.
result := r if {
	full := object.union(input, {
		"agent": data.toolpdp_fair.agents[input.agent_id],
		"guardrails": data.toolpdp_fair.guardrails[input.agent_id],
	})
	r := data.toolpdp.decision.result with input as full
}
`

func post(c *http.Client, url string, body []byte) func() error {
	return func() error {
		resp, err := c.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
}

func opaDecision(url string, body []byte) (string, error) {
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Decision string `json:"decision"`
		} `json:"result"`
	}
	return out.Result.Decision, json.NewDecoder(resp.Body).Decode(&out)
}

func dial(addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(client.Target(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err) // impossible: the targets are well-formed
	}
	return conn
}

func waitHealthy(conn *grpc.ClientConn) error {
	for range 200 {
		h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && h.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("toolpdp never became SERVING")
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func numCPU() int {
	raw, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(raw), "processor\t:")
}
