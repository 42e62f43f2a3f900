package pdp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// MaxReportErrorBytes bounds ReportResult's error text.
const MaxReportErrorBytes = 16 << 10

// Confirm records the answer of a person (by: who answered, for the
// decision log) to workspace ws's ask. An allow meets the policy in
// force: the call is decided again with the session's pin and the newest
// guardrails, and if that is now a deny, the allow is a deny naming the
// newer rule. A deny counts toward the session's consecutive cap; an allow
// resets it for a session that never reported a result; an allow with
// remember lets later calls of the session that are exactly this call run
// without asking. The request's shape is checked first (INVALID_ARGUMENT),
// then the id (NOT_FOUND: unknown, expired, or another workspace's), then
// its state (FAILED_PRECONDITION: not an ask, or answered before). The
// agent's AwaitDecision wakes as soon as the answer is recorded.
func (e *Engine) Confirm(ctx context.Context, ws, by string, req *pb.ConfirmRequest) (*pb.ConfirmResponse, error) {
	var answer pb.Decision
	switch req.GetResult() {
	case "allow":
		if req.GetDenyMessage() != "" {
			return nil, errorf(InvalidArgument, "deny_message: only valid with result \"deny\"")
		}
		answer = pb.Decision_DECISION_ALLOW
	case "deny":
		if req.GetRemember() {
			return nil, errorf(InvalidArgument, "remember: only valid with result \"allow\"")
		}
		if len(req.GetDenyMessage()) > MaxDenyMessageBytes {
			return nil, errorf(InvalidArgument, "deny_message: %d bytes, more than the limit of %d", len(req.GetDenyMessage()), MaxDenyMessageBytes)
		}
		answer = pb.Decision_DECISION_DENY
	default:
		return nil, errorf(InvalidArgument, "result: %q is not \"allow\" or \"deny\"", req.GetResult())
	}
	id, err := e.callID(ctx, ws, req.GetDecisionId(), req.GetCallId(), req.GetAgentId(), req.GetSessionId())
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now()
	var ask session.Call
	var found session.Lookup
	err = retryStore(ctx, func() (err error) {
		ask, found, err = e.state.store.Get(ctx, id, ws, now)
		return err
	})
	if e.state.result(ctx, "get", err) != nil {
		return nil, storeError(err)
	}
	if err := askState(id, ask, found); err != nil {
		return nil, err
	}
	final := &pb.DecideResponse{Decision: answer, Message: personDenied(req.GetDenyMessage())}
	change := definitionChange(&ask)
	var siblings []string // the other asks about the same changed definition
	if change != nil {
		siblings = e.definitionSiblings(ctx, &ask, change)
	}
	switch {
	case answer != pb.Decision_DECISION_ALLOW:
	case change != nil:
		if final, err = e.keepDefinition(ctx, &ask, change); err != nil {
			return nil, storeError(err)
		}
	default:
		if final, err = e.redecide(ctx, &ask, now); err != nil {
			// A store that stalls is no reason to overrule the person: the
			// ask stays as it was, for them to answer again.
			return nil, errorf(Unavailable, "the call could not be decided again under the policy in force (the session state store: %s), so the answer is not recorded; the ask is still pending: answer it again", clipError(err))
		}
	}
	got, found, answered, err := e.state.store.Answer(ctx, id, ws, func(c *session.Call) {
		c.Answer, c.AnsweredBy = final.Decision, by
		if final.Decision == pb.Decision_DECISION_DENY {
			c.AnswerMessage = final.Message
		} else if final.Execution != nil {
			c.Execution, _ = proto.Marshal(final.Execution)
		}
	}, now)
	if e.state.result(ctx, "answer", err) != nil {
		return nil, storeError(err)
	}
	if !answered { // answered by someone else between Get and Answer
		if err := askState(id, derefCall(got), found); err != nil {
			return nil, err
		}
	}
	halt := got.Halt
	remembered := false
	if final.Decision == pb.Decision_DECISION_ALLOW && req.GetRemember() && got.SessionID != "" && got.Remember != (session.RememberKey{}) {
		// The answer is stored: what goes with it is kept even if the
		// caller stops waiting, tried again while the store stalls.
		rctx := context.WithoutCancel(ctx)
		err := retryStore(rctx, func() error {
			return e.state.store.Remember(rctx, got.Key(), got.Remember, got.Epoch, now.Add(e.cfg.RememberTTL), now)
		})
		if remembered = e.state.result(rctx, "remember", err) == nil; !remembered {
			e.log.Error("the state store failed; the approval is not remembered", "decision_id", got.DecisionID, "error", err.Error())
		}
	}
	var asked pb.DecideRequest
	_ = proto.Unmarshal(ask.Request, &asked) // written by Decide; what could not be read has no secrets to find
	var secrets decisionlog.SecretFinder
	if a := e.current.Load(); a != nil {
		secrets = a.snap
	}
	e.dlog.Record(decisionlog.Entry{Kind: decisionlog.Confirmation, At: now, Confirm: req, Call: logCall(got), Halt: halt, Remembered: remembered,
		AnsweredBy: by, Outcome: policy.EffectName(final.Decision), Overruled: overruled(answer, final), Req: &asked, Secrets: secrets})
	told := *got
	if len(told.Request) == 0 { // what is shown of the answer is masked as the ask was
		told.Request, told.Response = ask.Request, ask.Response
	}
	e.tell(AskEvent{Answered: true, Call: told})
	e.answerSiblings(ctx, ws, by, req, siblings, final, now)
	if final.Decision == pb.Decision_DECISION_ALLOW {
		e.holdConfirmed(ctx, &ask, final, now)
	}
	resp := &pb.ConfirmResponse{Decision: final.Decision, Halt: halt}
	if final.Decision != pb.Decision_DECISION_ALLOW {
		resp.Message = final.Message
	}
	return resp, nil
}

// MaxDenyMessageBytes bounds a person's deny_message: it reaches the model.
const MaxDenyMessageBytes = 4 << 10

// personDenied is what the agent is told of a person's deny.
func personDenied(msg string) string {
	if msg == "" {
		return "a person denied this call; do not retry it, ask the user how to proceed"
	}
	return msg
}

// askState explains a decision that cannot be answered: unknown,
// expired, not an ask, or answered before.
func askState(id string, c session.Call, found session.Lookup) error {
	switch {
	case found == session.Expired:
		return errorf(NotFound, "decision_id: %q expired before it was confirmed", id)
	case found == session.NotFound:
		return notFoundError(id)
	case c.Decision != pb.Decision_DECISION_ASK:
		return errorf(FailedPrecondition, "decision_id: %q was not an ask (it was %s); only asks are confirmed", id, policy.EffectName(c.Decision))
	case c.Answer != pb.Decision_DECISION_UNSPECIFIED:
		return errorf(FailedPrecondition, "decision_id: %q was answered before (%s); an ask is answered once", id, policy.EffectName(c.Answer))
	}
	return nil
}

func derefCall(c *session.Call) session.Call {
	if c == nil {
		return session.Call{}
	}
	return *c
}

// redecide decides an ask's call again, as a person allows it, under the
// policy in force: the session's pin and the newest guardrails. A deny now
// overrules the person, naming the rules that deny; otherwise the allow
// stands, with the execution the policy in force gives the call. A store
// that cannot give the session's pin is asked again within a bound; then
// the error, and no decision: the policy did not deny, so the person's
// answer must not become a deny.
func (e *Engine) redecide(ctx context.Context, ask *session.Call, now time.Time) (*pb.DecideResponse, error) {
	allow := &pb.DecideResponse{Decision: pb.Decision_DECISION_ALLOW}
	var req pb.DecideRequest
	if err := proto.Unmarshal(ask.Request, &req); err != nil {
		return policy.Deny(&pb.DecideResponse{}, "session", "ask_unreadable", "the asked call could not be decided again, so a person's allow cannot stand: "+err.Error()), nil
	}
	a := e.current.Load()
	if a == nil {
		return policy.Deny(&pb.DecideResponse{}, "policy", "no_policy", "no policy is loaded: a person's allow cannot stand"), nil
	}
	current := a.snap.Agent(ask.AgentID)
	var agent *policy.Agent
	var refused *pb.DecideResponse
	err := retryStore(ctx, func() (err error) {
		agent, refused, err = e.pinOrErr(ctx, a, ask.Key(), current)
		return err
	})
	if err != nil {
		return nil, err
	}
	if refused != nil {
		refused.Message = "a person's allow cannot stand: " + refused.Message
		return refused, nil
	}
	now2 := e.evaluate(ctx, a, ask.Workspace, ask.AgentID, agent, current, &req)
	if now2.Decision != pb.Decision_DECISION_DENY {
		allow.Execution = now2.Execution
		return allow, nil
	}
	var rules []string
	for _, r := range now2.Reasons {
		if r.Effect == pb.Decision_DECISION_DENY {
			rules = append(rules, r.Axis+"/"+r.Rule)
		}
	}
	resp := &pb.DecideResponse{Decision: pb.Decision_DECISION_DENY, Reasons: now2.Reasons,
		Message: fmt.Sprintf("a person allowed this call, but the policy in force now denies it (%s): %s", strings.Join(rules, ", "), now2.Message)}
	policy.BoundMessages(resp)
	return resp, nil
}

// storeRetry bounds how long Confirm asks a stalled store again before it
// gives up (UNAVAILABLE, nothing recorded).
const storeRetry = 5 * time.Second

// retryStore runs op until it succeeds, fails other than by an
// unreachable store (a lost store, a refusal), ctx ends or storeRetry has
// passed. Only reads and writes that may be repeated go through it.
func retryStore(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(storeRetry)
	pause := 50 * time.Millisecond
	for {
		err := op()
		if err == nil || !errors.Is(err, session.ErrUnavailable) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// overruled names the rules by which the policy in force turned a
// person's allow into a deny ("" when it did not).
func overruled(answer pb.Decision, final *pb.DecideResponse) string {
	if answer != pb.Decision_DECISION_ALLOW || final.Decision != pb.Decision_DECISION_DENY {
		return ""
	}
	return final.Message
}

// ReportResult records how workspace ws's allowed call ended — denials and
// errors share one consecutive cap: an error adds one to the session's
// count, a success resets it. Checked like Confirm: shape, then
// id (NOT_FOUND), then state (FAILED_PRECONDITION: not allowed, or
// reported before).
func (e *Engine) ReportResult(ctx context.Context, ws string, req *pb.ReportResultRequest) (*pb.ReportResultResponse, error) {
	if !req.GetIsError() && req.GetError() != "" {
		return nil, errorf(InvalidArgument, "error: only valid with is_error true")
	}
	if len(req.GetError()) > MaxReportErrorBytes {
		return nil, errorf(InvalidArgument, "error: %d bytes, more than the limit of %d", len(req.GetError()), MaxReportErrorBytes)
	}
	id, err := e.callID(ctx, ws, req.GetDecisionId(), req.GetCallId(), req.GetAgentId(), req.GetSessionId())
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now()
	call, found, marked, halt, err := e.state.store.Report(ctx, id, ws, req.GetIsError(), now)
	if e.state.result(ctx, "report", err) != nil {
		return nil, storeError(err)
	}
	if found == session.Expired {
		return nil, errorf(FailedPrecondition, "decision_id: %q was an ask nobody answered before it expired; only an allowed call has a result to report", id)
	}
	switch {
	case found == session.NotFound:
		return nil, notFoundError(id)
	case !call.Allowed():
		state := policy.EffectName(call.Decision)
		if call.Decision == pb.Decision_DECISION_ASK {
			state = "an ask not allowed by a person"
			if call.Answer == pb.Decision_DECISION_UNSPECIFIED {
				state = "an ask still awaiting a person"
			}
		}
		return nil, errorf(FailedPrecondition, "decision_id: %q was %s; only an allowed call has a result to report", id, state)
	case !marked:
		return nil, errorf(FailedPrecondition, "decision_id: %q was reported before; a call ends once", id)
	}
	e.dlog.Record(decisionlog.Entry{Kind: decisionlog.Result, At: now, Report: req, Call: logCall(call), Halt: halt})
	return &pb.ReportResultResponse{Halt: halt}, nil
}

// callID is the decision a Confirm or ReportResult names: by decision_id,
// or by the agent's call_id with the agent and session of its Decide.
func (e *Engine) callID(ctx context.Context, ws, decisionID, callID, agentID, sessionID string) (string, error) {
	switch {
	case decisionID != "" && callID != "":
		return "", errorf(InvalidArgument, "decision_id, call_id: give one, not both")
	case decisionID != "":
		return decisionID, nil
	case callID == "":
		return "", errorf(InvalidArgument, "decision_id: required (or call_id with agent_id and session_id)")
	}
	agentID = policy.AgentID(agentID)
	id, ambiguous, err := e.state.store.ByCallID(ctx, ws, agentID, sessionID, callID)
	if e.state.result(ctx, "call_id", err) != nil {
		return "", storeError(err)
	}
	if ambiguous {
		where := fmt.Sprintf("in session %q", sessionID)
		if sessionID == "" {
			where = "with no session"
		}
		return "", errorf(FailedPrecondition, "call_id: %q of agent '%s' %s names more than one call (its id was reused for another one); name the call by decision_id", callID, agentID, where)
	}
	if id != "" {
		return id, nil
	}
	return "", errorf(NotFound, "call_id: %q of agent '%s' in session %q names no recent decision", callID, agentID, sessionID)
}

// logCall names a decided call in the decision log.
func logCall(c *session.Call) decisionlog.Call {
	return decisionlog.Call{DecisionID: c.DecisionID, CallID: c.CallID, AgentID: c.AgentID, SessionID: c.SessionID, ToolName: c.ToolName}
}

// notFoundError is the same for an id never issued, one forgotten and one
// of another workspace: the caller cannot tell them apart.
func notFoundError(id string) error {
	return errorf(NotFound, "decision_id: %q names no recent decision (unknown, forgotten, or never issued)", id)
}

// Bounds of a ListPending page.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ListPending lists a page of the asks of workspace ws no person has
// answered yet, oldest first, and the token of the next page ("" on the
// last). A page size of 0 is DefaultPageSize; a larger one than MaxPageSize
// is MaxPageSize.
func (e *Engine) ListPending(ctx context.Context, ws, agentID string, pageSize int32, pageToken string) ([]session.Call, string, error) {
	if pageSize < 0 {
		return nil, "", errorf(InvalidArgument, "page_size: %d is negative", pageSize)
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
		return nil, "", errorf(InvalidArgument, "page_token: %v", err)
	}
	asks, next, err := e.state.store.Page(ctx, ws, agentID, after, size, e.cfg.Now())
	if e.state.result(ctx, "page", err) != nil {
		return nil, "", storeError(err)
	}
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
