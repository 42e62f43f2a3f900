package pdp

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/askview"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// MaxWait is the longest one AwaitDecision waits; the client waits again.
const MaxWait = 60 * time.Second

// AwaitDecision tells the agent of workspace ws how its ask stands,
// waiting up to wait_seconds (at most MaxWait, and never past ctx) for a
// person's answer: PENDING, ANSWERED with the final decision, or EXPIRED
// (a deny). It never answers an ask. An id never issued, forgotten or of
// another workspace is NOT_FOUND; a decision that was not an ask is
// FAILED_PRECONDITION.
func (e *Engine) AwaitDecision(ctx context.Context, ws string, req *pb.AwaitDecisionRequest) (*pb.AwaitDecisionResponse, error) {
	if req.GetWaitSeconds() < 0 {
		return nil, errorf(InvalidArgument, "wait_seconds: %d is negative", req.GetWaitSeconds())
	}
	id, err := e.callID(ctx, ws, req.GetDecisionId(), req.GetCallId(), req.GetAgentId(), req.GetSessionId())
	if err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.GetWaitSeconds())*time.Second, MaxWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// The wait's own end is not the caller's: a store read is never cut
	// by it (a wait of 0 reads once and answers), so the outcome is judged
	// against the caller's ctx.
	c, found, err := e.state.store.Wait(wctx, id, ws, e.cfg.Now)
	if e.state.result(ctx, "wait", err) != nil {
		return nil, storeError(err)
	}
	switch {
	case found == session.NotFound:
		return nil, notFoundError(id)
	case c.Decision != pb.Decision_DECISION_ASK:
		return nil, errorf(FailedPrecondition, "decision_id: %q was not an ask (it was %s); only an ask is awaited", id, policy.EffectName(c.Decision))
	}
	out := &pb.AwaitDecisionResponse{DecisionId: id}
	switch {
	case found == session.Expired || c.Expired:
		out.State, out.Decision = pb.AskState_ASK_STATE_EXPIRED, pb.Decision_DECISION_DENY
		out.Message = "no person answered this ask within the time asks are kept (--pending-ttl): treat it as denied and ask the user how to proceed"
	case c.Answer == pb.Decision_DECISION_UNSPECIFIED:
		out.State, out.Decision, out.Message = pb.AskState_ASK_STATE_PENDING, pb.Decision_DECISION_ASK, c.Message
	default:
		out.State, out.Decision, out.Halt = pb.AskState_ASK_STATE_ANSWERED, c.Answer, c.Halt
		if c.Answer == pb.Decision_DECISION_DENY {
			out.Message = c.AnswerMessage
		} else if len(c.Execution) > 0 {
			out.Execution = &pb.Execution{}
			if err := proto.Unmarshal(c.Execution, out.Execution); err != nil {
				// An allow without the execution it was decided with would
				// run the tool unconfined: fail closed.
				return &pb.AwaitDecisionResponse{DecisionId: id, State: pb.AskState_ASK_STATE_ANSWERED, Decision: pb.Decision_DECISION_DENY,
					Message: "the approved call's execution could not be read back, so it is denied: " + err.Error()}, nil
			}
		}
	}
	return out, nil
}

// ShowAsk renders workspace's ask c for the person who answers it: the
// whole call, every character visible, its arguments up to a bound, the
// values the decision log masks masked unless reveal.
func (e *Engine) ShowAsk(c session.Call, o askview.Options) *pb.PendingAsk {
	var req pb.DecideRequest
	var resp pb.DecideResponse
	_ = proto.Unmarshal(c.Request, &req) // written by Decide: an error leaves what was read
	_ = proto.Unmarshal(c.Response, &resp)
	if req.ToolName == "" {
		req.ToolName = c.ToolName
	}
	if resp.Message == "" {
		resp.Message = c.Message
	}
	resp.DecisionId = c.DecisionID
	var p decisionlog.BundlePolicy
	var f decisionlog.SecretFinder
	if a := e.current.Load(); a != nil {
		p, f = a.logPolicy, a.snap
	}
	args, env := e.dlog.MaskedCall(&req, &resp, p, f)
	// The message and reasons may quote the command: masked as the log masks them.
	resp.Message = e.dlog.MaskedText(resp.Message, &req, f)
	for _, r := range resp.Reasons {
		r.Message = e.dlog.MaskedText(r.Message, &req, f)
	}
	if o.Now.IsZero() {
		o.Now = e.cfg.Now()
	}
	return askview.Render(askview.Ask{DecisionID: c.DecisionID, CallID: c.CallID, AgentID: c.AgentID, SessionID: c.SessionID, Created: c.Created,
		Req: &req, Resp: &resp, MaskedArgs: args, MaskedEnv: env}, o)
}

// MaxPageBytes bounds a rendered ListPending page: under gRPC's default
// 4 MiB a client receives. A page that would pass it ends early, its
// token naming the next ask.
const MaxPageBytes = 3 << 20

// ShowPending is a page of workspace ws's pending asks as a person is
// shown them (ShowAsk), and the token of the next page.
func (e *Engine) ShowPending(ctx context.Context, ws string, req *pb.ListPendingRequest) ([]*pb.PendingAsk, string, error) {
	if req.GetMaxArgumentBytes() < 0 {
		return nil, "", errorf(InvalidArgument, "max_argument_bytes: %d is negative", req.GetMaxArgumentBytes())
	}
	calls, next, err := e.ListPending(ctx, ws, req.GetAgentId(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, "", err
	}
	o := askview.Options{Reveal: req.GetReveal(), Bound: int(req.GetMaxArgumentBytes()), Now: e.cfg.Now()}
	var out []*pb.PendingAsk
	size := 0
	for i := range calls {
		a := e.ShowAsk(calls[i], o)
		if size += proto.Size(a); size > MaxPageBytes && len(out) > 0 {
			return out, encodePageToken(calls[i-1].Seq()), nil
		}
		out = append(out, a)
	}
	return out, next, nil
}

// RecentDecisions is up to limit of the decisions of workspace ws's
// session, newest first, as far as the state store can list them (a
// process's own stores can; a shared one does not).
func (e *Engine) RecentDecisions(ws, agentID, sessionID string, limit int) []session.Call {
	lister, ok := e.state.store.(interface {
		Recent(workspace, agentID, sessionID string, limit int) []session.Call
	})
	if sessionID == "" || !ok {
		return nil
	}
	return lister.Recent(ws, agentID, sessionID, limit)
}

// Ask is workspace ws's decision id as it stands (a copy), if held.
func (e *Engine) Ask(ctx context.Context, ws, id string) (session.Call, bool) {
	c, found, err := e.state.store.Get(ctx, id, ws, e.cfg.Now())
	return c, err == nil && found == session.Found
}
