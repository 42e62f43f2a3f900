package pdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/rego"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DefaultAgent is the agent a request with no agent_id is decided for.
const DefaultAgent = "default"

// Engine decides tool calls against the current snapshot.
type Engine struct {
	current  atomic.Pointer[Snapshot]
	sessions *Sessions
	pending  *Pending
	dlog     *DecisionLog
	log      *slog.Logger
	timeout  time.Duration
	now      func() time.Time
	remember time.Duration // how long a remembered approval holds
	gens     atomic.Uint64 // snapshot generations: remembered approvals end with theirs
}

// EngineConfig holds what an Engine is built from.
type EngineConfig struct {
	Logger      *slog.Logger
	EvalTimeout time.Duration    // bound on one evaluation
	Sessions    *Sessions        // session state; required
	Pending     *Pending         // asks awaiting Confirm; required
	DecisionLog *DecisionLog     // where decisions are logged; nil: nowhere
	Now         func() time.Time // clock; time.Now when nil
	RememberTTL time.Duration    // how long a remembered approval holds; DefaultRememberTTL when 0
}

// DefaultRememberTTL bounds a remembered approval when no --remember-ttl is given.
const DefaultRememberTTL = time.Hour

// NewEngine returns an engine with no policy: it denies until Swap.
func NewEngine(c EngineConfig) *Engine {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RememberTTL <= 0 {
		c.RememberTTL = DefaultRememberTTL
	}
	return &Engine{sessions: c.Sessions, pending: c.Pending, dlog: c.DecisionLog, log: c.Logger, timeout: c.EvalTimeout, now: c.Now,
		remember: c.RememberTTL}
}

// Swap makes s the snapshot every later request uses. Each swap is a new
// generation, whether or not the revision string changed: remembered
// approvals of the generations before it no longer hold.
func (e *Engine) Swap(s *Snapshot) {
	s.generation = e.gens.Add(1)
	e.current.Store(s)
}

// Snapshot is the snapshot in use, or nil before the first load.
func (e *Engine) Snapshot() *Snapshot { return e.current.Load() }

// Decide answers one tool call. It fails closed: every error is a deny.
func (e *Engine) Decide(ctx context.Context, req *pb.DecideRequest) *pb.DecideResponse {
	now := e.now()
	resp := &pb.DecideResponse{DecisionId: newDecisionID()}
	snap := e.current.Load()
	if snap == nil {
		denyResponse(resp, "policy", "no_policy", "no policy is loaded yet: every tool call is denied until a bundle loads")
		e.dlog.record(logEntry{kind: "decision", at: now, req: req, resp: resp, agentID: req.GetAgentId()})
		return resp
	}
	resp.PolicyRevision = snap.Revision
	agentID := req.GetAgentId()
	if agentID == "" {
		agentID = DefaultAgent
	}
	ws, _ := callerWorkspace(ctx)
	current := snap.agents[agentID]
	agent := e.sessions.Pin(ws, agentID, req.GetSessionId(), current, now)
	evalStart := time.Now()
	var err error
	if agent != nil && current == nil {
		// Revoked: the newest bundle no longer defines the agent this session
		// is pinned to. Nothing of the pin applies, custom tools included.
		denyResponse(resp, "session", "agent_removed", fmt.Sprintf("agent '%s' was removed from the policy: every call of its running sessions is denied", agentID))
	} else {
		err = e.evaluate(ctx, snap, agentID, agent, req, resp)
	}
	evalNs := time.Since(evalStart).Nanoseconds()
	if err != nil {
		e.log.Error("evaluation failed", "agent_id", agentID, "tool_name", req.GetToolName(), "revision", snap.Revision, "error", err)
		denyResponse(resp, "policy", "evaluation_error", fmt.Sprintf("the policy could not be evaluated, so the call is denied: %v", err))
	}
	boundMessages(resp)
	max := 5
	if agent != nil {
		max = agent.MaxDenials
	}
	call := &PendingAsk{Workspace: ws, DecisionID: resp.DecisionId, CallID: req.GetCallId(), AgentID: agentID, SessionID: req.GetSessionId(),
		ToolName: req.GetToolName(), Created: now, maxDenials: max, generation: snap.generation}
	if resp.Decision == pb.Decision_DECISION_ASK && req.GetSessionId() != "" {
		e.rememberedApproval(call, req, resp, now)
	}
	if resp.Halt = e.sessions.Record(ws, agentID, req.GetSessionId(), effectName(resp.Decision), max, now); resp.Halt {
		resp.Reasons = append(resp.Reasons, &pb.Reason{
			Axis: "session", Rule: "max_consecutive_denials", Effect: pb.Decision_DECISION_DENY,
			Message: fmt.Sprintf("%d consecutive failures (denials and reported errors) in this session: stop and ask the user how to proceed", max),
		})
	}
	call.decision, call.Message = resp.Decision, resp.Message
	e.pending.Add(call)
	e.dlog.record(logEntry{kind: "decision", at: now, req: req, resp: resp, bundles: snap.Bundles, evalNs: evalNs, agentID: agentID, policy: snap.logMask})
	return resp
}

// rememberedApproval turns an ask into an allow when a person approved
// exactly this call earlier in the session under this very policy (Confirm
// with remember); otherwise it notes the key the ask would be remembered by.
// Only an ask: a remembered approval never turns a deny into anything.
func (e *Engine) rememberedApproval(call *PendingAsk, req *pb.DecideRequest, resp *pb.DecideResponse, now time.Time) {
	key, ok := rememberKeyOf(req, resp)
	if !ok {
		return
	}
	call.remember = key
	if !e.sessions.Remembered(call.Workspace, call.AgentID, call.SessionID, key, call.generation, now) {
		return
	}
	resp.Decision, resp.Message = pb.Decision_DECISION_ALLOW, ""
	resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: "session", Rule: "remembered_approval", Effect: pb.Decision_DECISION_ALLOW,
		Message: "a person approved exactly this call earlier in this session and asked not to be asked again"})
}

func (e *Engine) evaluate(ctx context.Context, snap *Snapshot, agentID string, agent *Agent, req *pb.DecideRequest, resp *pb.DecideResponse) error {
	// Building the input (resolving paths and roots, parsing the command)
	// and evaluating share the request's deadline and --eval-timeout, and
	// stop when the caller goes away.
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	input := buildInput(ctx, snap, agentID, agent, req)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the request's deadline passed while its paths and command were examined: %w", err)
	}
	rs, err := snap.query.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// OPA notices cancellation only now and then; a result that arrives
		// after the deadline is not trusted.
		return fmt.Errorf("evaluation exceeded its deadline: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return errors.New("the library's decision is undefined")
	}
	doc, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return fmt.Errorf("the decision is %T, not an object", rs[0].Expressions[0].Value)
	}
	return mapResult(doc, resp)
}

// mapResult copies the library's decision document into the response.
func mapResult(doc map[string]any, resp *pb.DecideResponse) error {
	d, ok := effects[fmt.Sprint(doc["decision"])]
	if !ok {
		return fmt.Errorf("decision %q is not allow, ask or deny", doc["decision"])
	}
	resp.Decision = d
	resp.Message, _ = doc["message"].(string)
	reasons, _ := doc["reasons"].([]any)
	for _, r := range reasons {
		m, _ := r.(map[string]any)
		effect, ok := effects[fmt.Sprint(m["effect"])]
		if !ok {
			return fmt.Errorf("reason %v has no valid effect", r)
		}
		resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: str(m["axis"]), Rule: str(m["rule"]), Effect: effect, Message: str(m["message"])})
	}
	if ex, ok := doc["execution"].(map[string]any); ok && len(ex) > 0 {
		enforced, _ := ex["env_enforced"].(bool)
		out := &pb.Execution{Cwd: str(ex["cwd"]), Env: map[string]string{}, EnvEnforced: enforced}
		env, _ := ex["env"].(map[string]any)
		for k, v := range env {
			out.Env[k] = str(v)
		}
		resp.Execution = out
	}
	return nil
}

var effects = map[string]pb.Decision{"allow": pb.Decision_DECISION_ALLOW, "ask": pb.Decision_DECISION_ASK, "deny": pb.Decision_DECISION_DENY}

func effectName(d pb.Decision) string {
	switch d {
	case pb.Decision_DECISION_ALLOW:
		return "allow"
	case pb.Decision_DECISION_ASK:
		return "ask"
	}
	return "deny"
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// denyResponse turns resp into a deny with one reason, dropping any other.
func denyResponse(resp *pb.DecideResponse, axis, rule, msg string) *pb.DecideResponse {
	resp.Decision = pb.Decision_DECISION_DENY
	resp.Message = msg
	resp.Reasons = []*pb.Reason{{Axis: axis, Rule: rule, Effect: pb.Decision_DECISION_DENY, Message: msg}}
	resp.Execution = nil
	return resp
}

// newDecisionID is a UUIDv7: unique, and ordered by time in a decision log.
func newDecisionID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// EndSession releases a session's pin and counters. Another workspace's
// session is not found.
func (e *Engine) EndSession(ctx context.Context, agentID, sessionID string) bool {
	if agentID == "" {
		agentID = DefaultAgent
	}
	ws, _ := callerWorkspace(ctx)
	e.pending.DropSession(ws, agentID, sessionID)
	return e.sessions.End(ws, agentID, sessionID)
}
