package pdp

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The decision is bound to the run: toolpdp exec --decision ID takes the
// execution of an allowed shell call from the server that decided it
// (GetExecution), so what runs is what was decided, once, soon after.
// An allow is held here from the moment it is decided (by Decide, by a
// remembered approval, or by a person's Confirm) for --execution-ttl; an
// allow that relied on running confined and was never fetched in that
// time is logged confinement_unverified and counted: something ran it, or
// meant to, outside toolpdp exec.
//
// The table is this process's: a GetExecution must reach the server that
// decided (a sidecar is one process; replicas behind a balancer each hold
// their own decisions).

// Bounds of the executions held for GetExecution.
const (
	DefaultExecutionTTL  = 5 * time.Minute
	DefaultMaxExecutions = 10000
)

// heldExecution is an allowed shell call waiting for its confined run.
type heldExecution struct {
	key     session.Key
	req     *pb.DecideRequest
	pin     [sha256.Size]byte // the definition it was decided with; zero: none
	created time.Time
	fetched bool
	relies  bool // its execution says confinement_required
}

// executions are the allows held for GetExecution, oldest first out.
type executions struct {
	mu    sync.Mutex
	byID  map[string]*heldExecution
	order []string // decision ids in the order they were held
	max   int

	unverified prometheus.Counter
}

func newExecutions(max int) *executions {
	return &executions{byID: map[string]*heldExecution{}, max: max, unverified: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolpdp_confinement_unverified_total",
		Help: "Allows that relied on the call running confined whose execution was never fetched with GetExecution within --execution-ttl.",
	})}
}

// holdExecution keeps an allowed shell call's request for GetExecution.
func (e *Engine) holdExecution(id string, key session.Key, agent *policy.Agent, req *pb.DecideRequest, resp *pb.DecideResponse, now time.Time) {
	snap := e.Snapshot()
	if resp.GetDecision() != pb.Decision_DECISION_ALLOW || resp.GetExecution() == nil || snap == nil {
		return
	}
	if _, _, shell := snap.ShellCommand(req); !shell {
		return
	}
	h := &heldExecution{key: key, req: proto.Clone(req).(*pb.DecideRequest), pin: pinDigest(agent), created: now, relies: resp.GetExecution().GetConfinementRequired()}
	x := e.execs
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, dup := x.byID[id]; !dup {
		x.order = append(x.order, id)
	}
	x.byID[id] = h
	for len(x.byID) > x.max && len(x.order) > 0 {
		oldest := x.order[0]
		x.order = x.order[1:]
		if old, ok := x.byID[oldest]; ok {
			delete(x.byID, oldest)
			e.unverified(oldest, old, "more allows are held than --max-executions")
		}
	}
}

// unverified logs and counts an allow that relied on confinement and
// whose execution nobody fetched. Called with x.mu held.
func (e *Engine) unverified(id string, h *heldExecution, why string) {
	if h.fetched || !h.relies {
		return
	}
	e.execs.unverified.Inc()
	e.log.Warn("confinement_unverified: an allow that relied on the call running confined was never fetched by toolpdp exec",
		"decision_id", id, "agent_id", h.key.Agent, "session_id", h.key.Session, "tool_name", h.req.GetToolName(), "why", why)
}

// sweepExecutions forgets the allows past their TTL, until ctx ends.
func (e *Engine) sweepExecutions(ctx context.Context) {
	t := time.NewTicker(min(max(e.cfg.ExecutionTTL/10, 50*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.expireExecutions(e.cfg.Now())
		}
	}
}

func (e *Engine) expireExecutions(now time.Time) {
	x := e.execs
	x.mu.Lock()
	defer x.mu.Unlock()
	kept := x.order[:0]
	for _, id := range x.order {
		h, ok := x.byID[id]
		switch {
		case !ok:
		case now.Sub(h.created) > e.cfg.ExecutionTTL:
			delete(x.byID, id)
			e.unverified(id, h, "its --execution-ttl passed")
		default:
			kept = append(kept, id)
		}
	}
	x.order = kept
}

// dropSessionExecutions forgets a session's held allows: its pin no
// longer holds once it ends.
func (e *Engine) dropSessionExecutions(k session.Key) {
	x := e.execs
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, h := range x.byID {
		if h.key == k {
			delete(x.byID, id)
			e.unverified(id, h, "its session ended")
		}
	}
}

func pinDigest(a *policy.Agent) [sha256.Size]byte {
	if a == nil {
		return [sha256.Size]byte{}
	}
	_, d, err := a.Encoded()
	if err != nil {
		return [sha256.Size]byte{1} // unlike any definition's
	}
	return d
}

// GetExecution hands workspace ws's confined run the execution of the
// allow it runs under: once, for exactly the command (or argv) decided,
// while the session's pin holds and within --execution-ttl of the
// decision, re-checked against the policy in force as Confirm is (a deny
// now refuses it). Refusals: INVALID_ARGUMENT (no id, no command);
// NOT_FOUND (unknown, forgotten, past its TTL, or another workspace's);
// FAILED_PRECONDITION (not an allowed shell call, fetched before, or its
// session's pin no longer holds); PERMISSION_DENIED (another command, an
// agent this caller may not use, or the policy in force denies it now).
func (e *Engine) GetExecution(ctx context.Context, ws string, req *pb.GetExecutionRequest) (*pb.Execution, error) {
	id := req.GetDecisionId()
	if id == "" {
		return nil, errorf(InvalidArgument, "decision_id: required")
	}
	if req.GetCommand() == "" && len(req.GetArgv()) == 0 {
		return nil, errorf(InvalidArgument, "command or argv: required (the command about to run, exactly as decided)")
	}
	now := e.cfg.Now()
	x := e.execs
	x.mu.Lock()
	h, ok := x.byID[id]
	if ok && h.key.Workspace != ws {
		ok = false
	}
	if ok && now.Sub(h.created) > e.cfg.ExecutionTTL {
		x.mu.Unlock()
		return nil, errorf(NotFound, "decision_id: %q was decided more than --execution-ttl (%s) ago: decide the call again", id, e.cfg.ExecutionTTL)
	}
	if !ok {
		x.mu.Unlock()
		return nil, e.notHeld(ctx, ws, id, now)
	}
	if h.fetched {
		x.mu.Unlock()
		return nil, errorf(FailedPrecondition, "decision_id: %q: its execution was fetched before; an execution is handed out once: decide the call again", id)
	}
	if why := sameCommand(e.Snapshot(), h.req, req); why != "" {
		x.mu.Unlock()
		return nil, errorf(PermissionDenied, "%s: not the command decision %q allowed; only the command decided may run under its execution", why, id)
	}
	h.fetched = true
	x.mu.Unlock()

	a := e.current.Load()
	if a == nil {
		return nil, errorf(FailedPrecondition, "no policy is loaded: the execution cannot be re-checked")
	}
	current := a.snap.Agent(h.key.Agent)
	if ws != "" && current != nil && current.Workspace != "" && current.Workspace != ws {
		return nil, errorf(PermissionDenied, "agent '%s' belongs to another workspace than this caller's (%s)", h.key.Agent, ws)
	}
	agent, refused := e.pin(ctx, a, h.key, current)
	if refused != nil {
		return nil, errorf(FailedPrecondition, "the session of decision %q cannot be had: %s", id, refused.GetMessage())
	}
	if pinDigest(agent) != h.pin {
		return nil, errorf(FailedPrecondition, "the session of decision %q no longer holds the definition it was decided with: decide the call again", id)
	}
	now2 := e.evaluate(ctx, a, ws, h.key.Agent, agent, current, h.req)
	if now2.GetDecision() == pb.Decision_DECISION_DENY {
		return nil, errorf(PermissionDenied, "the policy in force now denies decision %q's call: %s", id, now2.GetMessage())
	}
	ex := now2.GetExecution()
	if ex == nil {
		return nil, errorf(FailedPrecondition, "decision %q's call has no execution under the policy in force", id)
	}
	if h.relies {
		ex.ConfinementRequired = true
	}
	e.log.Info("execution fetched for a confined run", "decision_id", id, "agent_id", h.key.Agent, "session_id", h.key.Session)
	return ex, nil
}

// notHeld explains a decision id no allow is held for: a decision the
// store knows is in the wrong state, any other is not found.
func (e *Engine) notHeld(ctx context.Context, ws, id string, now time.Time) error {
	c, found, err := e.state.store.Get(ctx, id, ws, now)
	if e.state.result(ctx, "get", err) != nil {
		return storeError(err)
	}
	if found != session.Found {
		return notFoundError(id)
	}
	state := policy.EffectName(c.Decision)
	switch {
	case c.Decision == pb.Decision_DECISION_ASK && c.Answer == pb.Decision_DECISION_UNSPECIFIED:
		state = "an ask no person has answered"
	case c.Decision == pb.Decision_DECISION_ASK:
		state = "an ask answered " + policy.EffectName(c.Answer) + " whose execution is not held here"
	case c.Decision == pb.Decision_DECISION_ALLOW:
		state = "an allow of a call that is not a shell command"
	}
	return errorf(FailedPrecondition, "decision_id: %q was %s; only an allowed shell call has an execution to run", id, state)
}

// sameCommand is "" when what is about to run is exactly what req was
// decided for — the command text, the argv, or both, each equal to one of
// the call's command arguments — else the field that differs.
func sameCommand(snap *policy.Snapshot, decided *pb.DecideRequest, run *pb.GetExecutionRequest) string {
	if snap == nil {
		return "command"
	}
	commands, argvs, _ := snap.ShellCommand(decided)
	if c := run.GetCommand(); c != "" && !slices.Contains(commands, c) {
		return "command"
	}
	if argv := run.GetArgv(); len(argv) > 0 && !slices.ContainsFunc(argvs, func(a []string) bool { return slices.Equal(a, argv) }) {
		return "argv"
	}
	return ""
}

// holdConfirmed holds a person's allow of an asked shell call for its
// confined run, decided with the definition the session holds now.
func (e *Engine) holdConfirmed(ctx context.Context, c *session.Call, final *pb.DecideResponse, now time.Time) {
	var req pb.DecideRequest
	a := e.current.Load()
	if a == nil || proto.Unmarshal(c.Request, &req) != nil {
		return
	}
	agent, refused := e.pin(ctx, a, c.Key(), a.snap.Agent(c.AgentID))
	if refused != nil {
		return
	}
	e.holdExecution(c.DecisionID, c.Key(), agent, &req, final, now)
}
