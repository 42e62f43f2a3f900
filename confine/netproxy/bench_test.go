package netproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/confine/netproxy"
	"github.com/toolpdp/toolpdp/envguard/netrules"
	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// BenchmarkNewHost measures what a new host's connection costs through
// the proxy (a CONNECT to a fresh run's proxy, answered once the decision
// and the dial are done) beside the Decide of Network alone, both against
// a real server on loopback; it reports the medians.
func BenchmarkNewHost(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	dir := testkit.WriteBundle(b, map[string]string{"agents/data.json": fmt.Sprintf(`{"run": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
	  "execution_policy": {"network": {"allow": ["127.0.0.1:%d"]}}}}`, port)})
	ts := grpcapitest.NewServer(b, grpcapitest.Options{Bundles: []string{dir}})
	allow := ts.Decide(b, &pb.DecideRequest{AgentId: "run", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(b, map[string]any{"command": "make"})})
	rules, err := netrules.Parse([]string{fmt.Sprintf("127.0.0.1:%d", port)}, nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	dec := &netproxy.Sidecar{Client: ts.Client, AgentID: "run", SessionID: "s", ForDecision: allow.DecisionId, Command: "make"}
	host, _ := netrules.ParseHost("127.0.0.1")
	ctx := context.Background()
	var decide, through []time.Duration
	for b.Loop() {
		start := time.Now()
		if d, err := dec.Decide(ctx, netproxy.Target{Host: host, Port: port, Scheme: "tcp"}); err != nil || d.Verdict != netproxy.Allow {
			b.Fatalf("decide: %v %v", d, err)
		}
		decide = append(decide, time.Since(start))

		p, err := netproxy.New(netproxy.Config{Decider: dec, Rules: rules})
		if err != nil {
			b.Fatal(err)
		}
		a, c := net.Pipe()
		go p.ServeConn(ctx, a)
		start = time.Now()
		fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		through = append(through, time.Since(start))
		c.Close()
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(median(decide), "decide-ms-p50")
	b.ReportMetric(median(through), "connect-ms-p50")
	b.ReportMetric(median(through)-median(decide), "proxy-ms-p50-beyond-decide")
}
