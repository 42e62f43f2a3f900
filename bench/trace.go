package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/internal/opafloor"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/decisionrun"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// traceReport is what -trace -json prints as its last line.
type traceReport struct {
	Trace     string `json:"trace"`
	Requests  int    `json:"requests"`
	InProcess struct {
		MeanNs       int64   `json:"mean_ns"`
		P50Ns        int64   `json:"p50_ns"`
		P99Ns        int64   `json:"p99_ns"`
		CacheHitRate float64 `json:"cache_hit_rate"`
		OPAFloorNs   int64   `json:"opa_floor_ns"`
	} `json:"in_process"`
	GRPC struct {
		DecideRPS           float64 `json:"decide_rps"`
		HealthRPS           float64 `json:"health_rps"`
		P99MsAtHalfCapacity float64 `json:"p99_ms_at_half_capacity"`
	} `json:"grpc"`
	OPARestFairRPS float64 `json:"opa_rest_fair_rps"`
	CerbosRPS      float64 `json:"cerbos_rps,omitempty"`
}

// traceRun replays every request of a decision-test file (its agents as
// the bundle, its files under a temporary root): in process through the
// engine serve runs, over gRPC to the real binary on a unix socket, and to
// OPA's REST server in the fair mode. Each replay that measures toolpdp
// starts from a fresh engine or process, so the decision cache holds only
// what the trace itself repeats.
func traceRun(work, bin string) error {
	f, err := decisionrun.Read(*trace)
	if err != nil {
		return err
	}
	dir, err := filepath.EvalSymlinks(work)
	if err != nil {
		return err
	}
	bdir, reqs, err := decisionrun.Replay(f, dir)
	if err != nil {
		return fmt.Errorf("%s: %w", *trace, err)
	}
	if len(reqs) == 0 {
		return fmt.Errorf("%s: no requests to replay", *trace)
	}
	var rep traceReport
	rep.Trace, rep.Requests = f.Name, len(reqs)
	out := os.Stdout
	if *jsonOut {
		out = os.Stderr // the figures as text go beside; the last line of stdout is the JSON
	}
	fmt.Fprintf(out, "trace %q: %d requests, %d agents, %d files; %d CPUs; -duration %s per target\n",
		f.Name, len(reqs), len(f.Agents), len(f.Files), numCPU(), *duration)

	ctx := context.Background()
	// In process: one decision at a time, in trace order, through the
	// engine as serve builds it (sessions, the decision cache, metrics).
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
	}
	lat, hits, lookups, decided, engine, err := inProcess(ctx, bdir, reqs)
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	floor, err := opafloor.Measure(ctx)
	if err != nil {
		return err
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ip := &rep.InProcess
	ip.MeanNs, ip.P50Ns, ip.P99Ns, ip.OPAFloorNs = int64(sum)/int64(len(lat)), int64(quantile(lat, 0.5)), int64(quantile(lat, 0.99)), floor
	if lookups > 0 {
		ip.CacheHitRate = hits / lookups
	}
	fmt.Fprintf(out, "in process: %d decisions, mean %s (%.1fx the OPA floor %s), p50 %s (%.1fx), p99 %s (%.1fx), decision cache hit rate %.1f%%\n",
		len(lat), time.Duration(ip.MeanNs), float64(ip.MeanNs)/float64(floor), time.Duration(floor),
		time.Duration(ip.P50Ns), float64(ip.P50Ns)/float64(floor), time.Duration(ip.P99Ns), float64(ip.P99Ns)/float64(floor), 100*ip.CacheHitRate)

	// Over gRPC, the real binary on a unix socket: closed loop of
	// -concurrency, each session's requests in trace order.
	var calls, health int
	var replay time.Duration
	var healthRes result
	for calls == 0 || replay < *duration {
		err := withServer(work, bin, bdir, func(conn *grpc.ClientConn) error {
			n, took, err := replaySessions(pb.NewDecisionServiceClient(conn), reqs)
			calls, replay = calls+n, replay+took
			if err == nil && replay >= *duration {
				h := healthpb.NewHealthClient(conn)
				healthRes = closedLoop("toolpdp Health Check, unix", func() error {
					_, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{})
					return err
				})
				health = len(healthRes.latencies)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	rep.GRPC.DecideRPS, rep.GRPC.HealthRPS = float64(calls)/replay.Seconds(), healthRes.throughput
	half := max(1, int(rep.GRPC.DecideRPS/2))
	var fixed result
	if err := withServer(work, bin, bdir, func(conn *grpc.ClientConn) error {
		c := pb.NewDecisionServiceClient(conn)
		var next atomic.Int64
		fixed = fixedRateN(fmt.Sprintf("toolpdp Decide, unix, %d/s", half), half, len(reqs), func() error {
			_, err := c.Decide(context.Background(), reqs[int(next.Add(1)-1)%len(reqs)])
			return err
		})
		return nil
	}); err != nil {
		return err
	}
	rep.GRPC.P99MsAtHalfCapacity = float64(quantile(fixed.latencies, 0.99).Microseconds()) / 1000
	fmt.Fprintf(out, "gRPC, unix socket, %d in flight: Decide %.0f req/s (%d calls replaying the trace), Health Check %.0f req/s (%d): Decide/Health %.2fx\n",
		*concurrency, rep.GRPC.DecideRPS, calls, rep.GRPC.HealthRPS, health, rep.GRPC.DecideRPS/rep.GRPC.HealthRPS)
	fmt.Fprintf(out, "gRPC, unix socket, fixed %d/s (half of capacity), %d calls in trace order: p50 %s, p99 %s, p99.9 %s, errors %d\n",
		half, len(fixed.latencies), fixed.q(0.5), fixed.q(0.99), fixed.q(0.999), fixed.errors)
	if fixed.firstErr != "" {
		fmt.Fprintf(out, "first error of the fixed-rate run: %s\n", fixed.firstErr)
	}

	// OPA's REST server, fair mode: the index as base data, the request
	// and what toolpdp works out per request as input.
	fairDir := filepath.Join(work, "fair")
	snap := engine.Snapshot()
	if err := writeFairBundle(snap, fairDir); err != nil {
		return err
	}
	bodies := make([][]byte, len(reqs))
	for i, req := range reqs {
		input, err := snap.Input(req)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if _, bodies[i], err = requestOnly(input); err != nil {
			return err
		}
	}
	opaURL, stopOPA, err := startOPA(bdir, fairDir)
	if err != nil {
		return err
	}
	defer stopOPA()
	fairURL := strings.TrimSuffix(opaURL, "toolpdp/decision/result") + "toolpdp_fair/result"
	mismatch := 0
	for i, body := range bodies {
		got, err := opaDecision(fairURL, body)
		if err != nil {
			return fmt.Errorf("OPA on request %d: %w", i, err)
		}
		if want := decided[i]; "DECISION_"+strings.ToUpper(got) != want.String() {
			if mismatch == 0 {
				fmt.Fprintf(out, "OPA decides request %d (%s) %q, toolpdp %s\n", i, reqs[i].ToolName, got, want)
			}
			mismatch++
		}
	}
	if mismatch > 0 {
		return fmt.Errorf("OPA and toolpdp disagree on %d of %d requests: not the same computation", mismatch, len(bodies))
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}}
	var nextBody atomic.Int64
	opa := closedLoop("OPA REST, fair", func() error {
		return post(httpc, fairURL, bodies[int(nextBody.Add(1)-1)%len(bodies)])()
	})
	if opa.errors > 0 {
		return fmt.Errorf("OPA REST: %d errors, the first: %s", opa.errors, opa.firstErr)
	}
	rep.OPARestFairRPS = opa.throughput
	fmt.Fprintf(out, "OPA REST, fair mode, %d in flight: %.0f req/s (all %d decisions agree with toolpdp's): Decide/OPA %.2fx\n",
		*concurrency, opa.throughput, len(bodies), rep.GRPC.DecideRPS/opa.throughput)

	// Cerbos, where it builds here: the permission axis alone.
	if rps, err := cerbosRun(out, filepath.Join(work, "cerbos"), f.Agents, snap, reqs); err != nil {
		fmt.Fprintf(out, "Cerbos: not measured: %v\n", err)
	} else {
		rep.CerbosRPS = rps
		fmt.Fprintf(out, "Cerbos (permission axis only), HTTP, %d in flight: %.0f req/s (all %d decisions agree with toolpdp's permission axis): Decide/Cerbos %.2fx\n",
			*concurrency, rps, len(reqs), rep.GRPC.DecideRPS/rps)
	}
	if *jsonOut {
		j, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Println(string(j))
	}
	return nil
}

// inProcess replays reqs through a fresh engine per pass until -duration
// has passed (at least once), one decision at a time, and returns every
// decision's latency, the decision cache's hits and lookups, the first
// pass's decisions and its engine.
func inProcess(ctx context.Context, bdir string, reqs []*pb.DecideRequest) (lat []time.Duration, hits, lookups float64, decided []pb.Decision, first *pdp.Engine, err error) {
	var spent time.Duration
	for first == nil || spent < *duration {
		reg := prometheus.NewRegistry()
		e, err := pdp.New(pdp.Config{Bundles: []string{bdir}, Registerer: reg})
		if err != nil {
			return nil, 0, 0, nil, nil, err
		}
		if err := e.Reload(ctx, true); err != nil {
			return nil, 0, 0, nil, nil, err
		}
		for i, req := range reqs {
			t := time.Now()
			resp, err := e.Decide(ctx, "", req)
			d := time.Since(t)
			if err != nil {
				return nil, 0, 0, nil, nil, fmt.Errorf("request %d: %w", i, err)
			}
			lat, spent = append(lat, d), spent+d
			if first == nil {
				decided = append(decided, resp.Decision)
			}
		}
		h, l := cacheLookups(reg)
		hits, lookups = hits+h, lookups+l
		if first == nil {
			first = e
		}
	}
	slices.Sort(lat)
	return lat, hits, lookups, decided, first, nil
}

// cacheLookups reads toolpdp_decision_cache_lookups_total: hits and all.
func cacheLookups(reg *prometheus.Registry) (hits, all float64) {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "toolpdp_decision_cache_lookups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			all += v
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "hit" {
					hits += v
				}
			}
		}
	}
	return hits, all
}

// replaySessions sends every request with -concurrency in flight, a
// session's requests one after another in trace order: a free worker
// takes the earliest request whose session has none in flight.
func replaySessions(c pb.DecisionServiceClient, reqs []*pb.DecideRequest) (int, time.Duration, error) {
	queues := map[string][]int{}
	var order []string
	for i, r := range reqs {
		s := r.GetAgentId() + "\x00" + r.GetSessionId()
		if _, ok := queues[s]; !ok {
			order = append(order, s)
		}
		queues[s] = append(queues[s], i)
	}
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	busy, left := map[string]bool{}, len(reqs)
	var firstErr error
	take := func() (string, int, bool) {
		mu.Lock()
		defer mu.Unlock()
		for {
			if left == 0 || firstErr != nil {
				return "", 0, false
			}
			best, at := "", len(reqs)
			for _, s := range order {
				if q := queues[s]; len(q) > 0 && !busy[s] && q[0] < at {
					best, at = s, q[0]
				}
			}
			if best != "" {
				busy[best], queues[best] = true, queues[best][1:]
				left--
				return best, at, true
			}
			cond.Wait()
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s, i, ok := take()
				if !ok {
					return
				}
				_, err := c.Decide(context.Background(), reqs[i])
				mu.Lock()
				busy[s] = false
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("request %d: Decide: %w", i, err)
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(reqs), time.Since(start), firstErr
}

// withServer starts the binary on bundle bdir, listening on a unix
// socket only, runs f with a connection to it, and stops it.
func withServer(work, bin, bdir string, f func(*grpc.ClientConn) error) error {
	sock := filepath.Join(work, "trace.sock")
	srv, err := startServe(bin, bdir, "unix://"+sock)
	if err != nil {
		return err
	}
	defer func() { srv.Process.Kill(); srv.Wait(); os.Remove(sock) }()
	conn := dial("unix://" + sock)
	defer conn.Close()
	if err := waitHealthy(conn); err != nil {
		return err
	}
	return f(conn)
}

func quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func writeFile(p string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, content, 0o644)
}
