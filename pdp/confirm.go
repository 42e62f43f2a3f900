package pdp

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Confirm records a person's answer to an ask (seed 001's
// user.tool_confirmation). A deny counts toward the session's denial cap,
// an allow resets it. Another workspace's asks are not found.
func (e *Engine) Confirm(ctx context.Context, req *pb.ConfirmRequest) (*pb.ConfirmResponse, error) {
	var answer pb.Decision
	switch req.GetResult() {
	case "allow":
		if req.GetDenyMessage() != "" {
			return nil, status.Error(codes.InvalidArgument, "deny_message: only valid with result \"deny\"")
		}
		answer = pb.Decision_DECISION_ALLOW
	case "deny":
		answer = pb.Decision_DECISION_DENY
	default:
		return nil, status.Errorf(codes.InvalidArgument, "result: %q is not \"allow\" or \"deny\"", req.GetResult())
	}
	if req.GetDecisionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "decision_id: required")
	}
	now := e.now()
	ws, _ := callerWorkspace(ctx)
	ask, fresh := e.pending.Take(req.GetDecisionId(), ws, now)
	switch {
	case ask == nil && e.pending.WasNotAsk(req.GetDecisionId(), ws):
		return nil, status.Errorf(codes.FailedPrecondition, "decision_id: %q was not an ask; only asks are confirmed", req.GetDecisionId())
	case ask == nil:
		return nil, status.Errorf(codes.NotFound, "decision_id: %q is not an ask awaiting confirmation (unknown, already answered, or forgotten)", req.GetDecisionId())
	case !fresh:
		return nil, status.Errorf(codes.NotFound, "decision_id: %q expired before it was confirmed", req.GetDecisionId())
	}
	halt := e.sessions.Record(ask.Workspace, ask.AgentID, ask.SessionID, effectName(answer), ask.maxDenials, now)
	e.dlog.record(logEntry{kind: "confirmation", at: now, confirm: req, ask: ask, halt: halt})
	return &pb.ConfirmResponse{Decision: answer, Halt: halt}, nil
}

// ListPending lists the asks of the caller's workspace no person has
// answered yet, oldest first.
func (e *Engine) ListPending(ctx context.Context, agentID string) []PendingAsk {
	ws, _ := callerWorkspace(ctx)
	all := e.pending.List(ws, e.now())
	if agentID == "" {
		return all
	}
	out := all[:0]
	for _, a := range all {
		if a.AgentID == agentID {
			out = append(out, a)
		}
	}
	return out
}
