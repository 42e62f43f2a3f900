package pdp

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Confirm records a person's answer to an ask (seed 001's
// user.tool_confirmation). A deny counts toward the session's denial cap,
// an allow resets it.
func (e *Engine) Confirm(req *pb.ConfirmRequest) (*pb.ConfirmResponse, error) {
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
	ask, fresh := e.pending.Take(req.GetDecisionId(), now)
	switch {
	case ask == nil && e.pending.WasNotAsk(req.GetDecisionId()):
		return nil, status.Errorf(codes.FailedPrecondition, "decision_id: %q was not an ask; only asks are confirmed", req.GetDecisionId())
	case ask == nil:
		return nil, status.Errorf(codes.NotFound, "decision_id: %q is not an ask awaiting confirmation (unknown, already answered, or forgotten)", req.GetDecisionId())
	case !fresh:
		return nil, status.Errorf(codes.NotFound, "decision_id: %q expired before it was confirmed", req.GetDecisionId())
	}
	halt := e.sessions.Record(ask.AgentID, ask.SessionID, effectName(answer), ask.maxDenials, now)
	e.dlog.record(logEntry{kind: "confirmation", at: now, confirm: req, ask: ask, halt: halt})
	return &pb.ConfirmResponse{Decision: answer, Halt: halt}, nil
}

// Bounds of a ListPending page.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ListPending lists a page of the asks no person has answered yet, oldest
// first, and the token of the next page ("" on the last). A page size of 0
// is DefaultPageSize; a larger one than MaxPageSize is MaxPageSize.
func (e *Engine) ListPending(agentID string, pageSize int32, pageToken string) ([]PendingAsk, string, error) {
	if pageSize < 0 {
		return nil, "", status.Errorf(codes.InvalidArgument, "page_size: %d is negative", pageSize)
	}
	size := int(pageSize)
	switch {
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	after, err := parsePageToken(pageToken)
	if err != nil {
		return nil, "", status.Errorf(codes.InvalidArgument, "page_token: %v", err)
	}
	asks, next := e.pending.Page(agentID, after, size, e.now())
	return asks, encodePageToken(next), nil
}

// A page token names the last ask of the previous page by its arrival
// number; it means nothing to another process.
func encodePageToken(seq uint64) string {
	if seq == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte("after:" + strconv.FormatUint(seq, 10)))
}

func parsePageToken(tok string) (uint64, error) {
	if tok == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if n, ok := strings.CutPrefix(string(raw), "after:"); err == nil && ok {
		if seq, err := strconv.ParseUint(n, 10, 64); err == nil && seq > 0 {
			return seq, nil
		}
	}
	return 0, errors.New("not a token ListPending returned")
}
