// Package grpcapitest is localserver for Go tests: a real toolpdp server
// started for one test and stopped when it ends, with the helpers tests use
// on it (a Decide that fails the test, metric values). The gRPC tests and
// the Go client's tests use it; the release binary does not, so Go's
// testing package stays out of it.
package grpcapitest

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/localserver"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Options shape a test server: localserver's, with an EvalTimeout of 0
// meaning testkit.EvalTimeout (tests run on loaded machines, under the race
// detector) and unix sockets in the test's own temporary directory.
type Options = localserver.Options

// Server is a running test server and a client of it.
type Server struct {
	*localserver.Server
}

// NewServer starts a server for the test and stops it when the test ends.
func NewServer(tb testing.TB, o Options) *Server {
	tb.Helper()
	if o.Unix && o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	if o.Engine.EvalTimeout == 0 {
		o.Engine.EvalTimeout = testkit.EvalTimeout
	}
	s, err := localserver.Start(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return &Server{s}
}

// Decide calls Decide, failing tb on any error. Its deadline is a hang
// guard, past the evaluation bound: a loaded machine answers late, not
// wrongly.
func (s *Server) Decide(tb testing.TB, req *pb.DecideRequest) *pb.DecideResponse {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*testkit.EvalTimeout)
	defer cancel()
	resp, err := s.Client.Decide(ctx, req)
	if err != nil {
		tb.Fatalf("Decide(%v): %v", req, err)
	}
	return resp
}

// Revision is the policy revision a Decide is answered with now.
func (s *Server) Revision(tb testing.TB) string {
	tb.Helper()
	return s.Decide(tb, &pb.DecideRequest{AgentId: "__probe__", ToolName: "Read"}).PolicyRevision
}

// Reloads is the value of toolpdp_bundle_reloads_total{result}.
func (s *Server) Reloads(tb testing.TB, result string) float64 {
	tb.Helper()
	return s.Metric(tb, "toolpdp_bundle_reloads_total", result)
}

// Metric is the value of the registry's counter or gauge name: of its
// series with these label values, or of its first series when none are
// given; 0 when it has none.
func (s *Server) Metric(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matchLabels(m.GetLabel(), labels) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func matchLabels(got []*dto.LabelPair, want []string) bool {
	for i, v := range want {
		if i >= len(got) || got[i].GetValue() != v {
			return false
		}
	}
	return true
}
