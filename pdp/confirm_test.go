package pdp

import (
	"context"
	"errors"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The engine refuses a Confirm or ReportResult with a typed error: the
// request's shape first, then the id, then the decision's state. Another
// workspace's decision is not found.
func TestConfirmAndReportRefusals(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/data.json": testkit.SessionAgents})
	e := loadedEngine(t, Config{Bundles: []string{dir}})
	ask := decide(t, e, "acme", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash", CallId: "c1"})
	deny := decide(t, e, "acme", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "rm"})
	if ask.Decision != pb.Decision_DECISION_ASK || deny.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("decisions: %v, %v", ask.Decision, deny.Decision)
	}
	codeOf := func(err error) Code {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%v is not a *pdp.Error", err)
		}
		return e.Code
	}
	for name, c := range map[string]struct {
		ws   string
		req  *pb.ConfirmRequest
		want Code
	}{
		"no result":         {"acme", &pb.ConfirmRequest{DecisionId: ask.DecisionId}, InvalidArgument},
		"both ids":          {"acme", &pb.ConfirmRequest{DecisionId: ask.DecisionId, CallId: "c1", Result: "allow"}, InvalidArgument},
		"remembered deny":   {"acme", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", Remember: true}, InvalidArgument},
		"unknown id":        {"acme", &pb.ConfirmRequest{DecisionId: "nope", Result: "allow"}, NotFound},
		"another workspace": {"globex", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}, NotFound},
		"not an ask":        {"acme", &pb.ConfirmRequest{DecisionId: deny.DecisionId, Result: "allow"}, FailedPrecondition},
	} {
		if _, err := e.Confirm(context.Background(), c.ws, "test", c.req); codeOf(err) != c.want {
			t.Errorf("%s: %v, want code %d", name, err, c.want)
		}
	}
	if _, err := e.Confirm(context.Background(), "acme", "test", &pb.ConfirmRequest{CallId: "c1", AgentId: "a", SessionId: "s", Result: "allow"}); err != nil {
		t.Fatalf("confirm by call id: %v", err)
	}
	if _, err := e.Confirm(context.Background(), "acme", "test", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); codeOf(err) != FailedPrecondition {
		t.Errorf("answered twice: %v", err)
	}
	if _, err := e.ReportResult(context.Background(), "acme", &pb.ReportResultRequest{DecisionId: deny.DecisionId}); codeOf(err) != FailedPrecondition {
		t.Errorf("report of a deny: %v", err)
	}
	if _, err := e.ReportResult(context.Background(), "acme", &pb.ReportResultRequest{DecisionId: ask.DecisionId, IsError: true}); err != nil {
		t.Errorf("report of an approved ask: %v", err)
	}
}
