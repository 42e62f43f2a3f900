package grpcapi_test

import (
	"testing"

	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The engine's metrics: decisions by outcome and deciding axis, the
// evaluation-latency histogram, the last good reload and the revision.
func TestDecisionMetrics(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	ts.Decide(t, &pb.DecideRequest{ToolName: "Read"})                                      // allow, permission
	ts.Decide(t, &pb.DecideRequest{ToolName: "Write"})                                     // ask, permission
	ts.Decide(t, &pb.DecideRequest{ToolName: "Read", Server: "nowhere"})                   // deny, permission
	ts.Decide(t, &pb.DecideRequest{AgentId: "nobody", ToolName: "mcp__a__b", Server: "c"}) // deny, permission
	for _, c := range []struct {
		decision, axis string
		want           float64
	}{{"allow", "permission", 1}, {"ask", "permission", 1}, {"deny", "permission", 2}} {
		if got := ts.Metric(t, "toolpdp_decisions_total", c.axis, c.decision); got != c.want {
			t.Errorf("toolpdp_decisions_total{decision=%q,axis=%q} = %v, want %v", c.decision, c.axis, got, c.want)
		}
	}
	mfs, err := ts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		found[mf.GetName()] = true
		if mf.GetName() == "toolpdp_decision_duration_seconds" && mf.GetMetric()[0].GetHistogram().GetSampleCount() != 4 {
			t.Errorf("latency histogram counted %d decisions, want 4", mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	for _, name := range []string{"toolpdp_decision_duration_seconds", "toolpdp_bundle_last_successful_reload_timestamp_seconds", "toolpdp_bundle_info"} {
		if !found[name] {
			t.Errorf("no metric %s", name)
		}
	}
	if ts.Metric(t, "toolpdp_bundle_last_successful_reload_timestamp_seconds") < 1e9 {
		t.Error("no last reload time")
	}
	if ts.Metric(t, "toolpdp_bundle_info", "library-0.1.0,default-0.1.0") != 1 && ts.Metric(t, "toolpdp_bundle_info") != 1 {
		t.Error("no revision info")
	}
	if ts.Metric(t, "toolpdp_bundle_reloads_total", "unchanged") != 0 {
		t.Error("an unchanged result")
	}
}
