package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// stateRun drives Decide in sessions — every call pins, counts and keeps
// its decision in the store — with each --state store in turn, one server
// at a time, and prints throughput and latency side by side.
func stateRun(bin, work string) error {
	redisAddr, stopRedis, err := startRedis(work)
	if err != nil {
		return err
	}
	defer stopRedis()
	stores := []struct{ name, url string }{
		{"memory", "memory"},
		{"file (bbolt)", "file:" + filepath.Join(work, "state.db")},
		{"redis (loopback)", "redis://" + redisAddr},
	}
	req := request()
	fmt.Printf("machine: %d CPUs; %s each, %d in flight, one session per caller; request: %s %s\n\n",
		numCPU(), *duration, *concurrency, req.ToolName, req.Args.AsMap()["command"])
	var results []result
	for i, st := range stores {
		sock := filepath.Join(work, fmt.Sprintf("state%d.sock", i))
		srv := exec.Command(bin, "serve", "--bundle", *bundleDir, "--listen", "unix://"+sock, "--state", st.url,
			"--metrics-listen", "", "--decision-log", "off", "--log-level", "warn")
		srv.Stderr = os.Stderr
		if err := srv.Start(); err != nil {
			return err
		}
		conn := dial("unix://" + sock)
		if err := waitHealthy(conn); err != nil {
			srv.Process.Kill()
			srv.Wait()
			return err
		}
		c := pb.NewDecisionServiceClient(conn)
		results = append(results, closedLoopEach("Decide in a session, "+st.name, func(caller int) func() error {
			r := request()
			r.SessionId = fmt.Sprintf("bench-%d-%d", i, caller)
			return func() error {
				resp, err := c.Decide(context.Background(), r)
				if err == nil && resp.Decision == pb.Decision_DECISION_DENY && len(resp.Reasons) > 0 && resp.Reasons[0].Axis == "session" {
					return fmt.Errorf("denied by the session: %s", resp.Message)
				}
				return err
			}
		}))
		conn.Close()
		srv.Process.Kill()
		srv.Wait()
	}
	fmt.Printf("%-40s %10s %9s %9s %9s %9s %7s\n", "target", "req/s", "p50", "p90", "p99", "p99.9", "errors")
	for _, r := range results {
		fmt.Printf("%-40s %10.0f %9s %9s %9s %9s %7d\n", r.name, r.throughput, r.q(0.5), r.q(0.9), r.q(0.99), r.q(0.999), r.errors)
	}
	for _, r := range results {
		if r.firstErr != "" {
			fmt.Printf("first error of %s: %s\n", r.name, r.firstErr)
		}
	}
	return nil
}

// startRedis starts redis-server (Debian's package) on a free loopback
// port, persistence off, for -state.
func startRedis(work string) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("-state needs redis-server (apt-get install redis-server): %w", err)
	}
	addr := freeAddr()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", work, "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, fmt.Errorf("redis-server on %s did not start", addr)
}
