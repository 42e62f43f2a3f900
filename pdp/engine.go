package pdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/loadchild"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Defaults of Config: what a zero field means, and what serve's flags
// and docs/OPERATING.md show.
const (
	DefaultEvalTimeout     = 100 * time.Millisecond
	DefaultMaxSessions     = 10000
	DefaultSessionIdle     = time.Hour
	DefaultMaxSessionBytes = session.DefaultMaxSessionBytes
	DefaultMaxPending      = 10000
	DefaultPendingTTL      = time.Hour
	DefaultMaxPendingBytes = session.DefaultMaxPendingBytes
	DefaultRememberTTL     = time.Hour // how long a remembered approval holds at most
	DefaultTestTimeout     = 30 * time.Second
	DefaultDebounce        = 200 * time.Millisecond
	DefaultPoll            = 5 * time.Second
	DefaultDecisionCache   = policy.DefaultMemoEntries
)

// Config is everything an Engine is built from. Zero values take the
// defaults above (withDefaults).
type Config struct {
	Bundles []string                   // the --bundle arguments; none: the embedded default agent
	Verify  *bundle.VerificationConfig // nil: signatures are not checked
	Remote  bundles.Credentials        // how to authenticate to bundle servers
	// BundleLimits bound each bundle read (bytes and entries); zero: the
	// bundles package's defaults.
	BundleLimits bundles.Limits
	// DownloadTimeout bounds one download from a bundle server, headers
	// and body; zero: bundles.DefaultDownloadTimeout.
	DownloadTimeout time.Duration

	Logger      *slog.Logger
	Registerer  prometheus.Registerer // nil: metrics are not registered
	Now         func() time.Time      // clock; time.Now when nil
	EvalTimeout time.Duration         // bound on building one input and evaluating it (with the request's deadline)
	TestTimeout time.Duration         // bound on a bundle's own _test.rego run at each load

	// LoadChild, when set, loads each bundle in a child process under a
	// deadline and a memory bound first (--load-timeout, --load-memory);
	// nil loads in this process only.
	LoadChild *loadchild.Config
	// WarnUnknownKeys serves a definition with unknown keys, warning
	// (--unknown-keys=warn), instead of rejecting the bundle.
	WarnUnknownKeys bool

	// Store holds session state; nil: an in-memory store with the bounds
	// below. Given a store, the bounds are the store's own.
	Store session.Store

	MaxSessions         int
	MaxSessionsPerAgent int // 0: half of MaxSessions
	SessionIdle         time.Duration
	MaxSessionBytes     int64
	MaxPending          int
	PendingTTL          time.Duration
	MaxPendingBytes     int64
	RememberTTL         time.Duration
	// ExecutionTTL is how long an allowed shell call's execution can be
	// fetched for its confined run (GetExecution); MaxExecutions bounds
	// the allows held for it.
	ExecutionTTL  time.Duration
	MaxExecutions int

	DecisionLog *decisionlog.Log // nil: decisions are not logged

	// DecisionCache bounds the decisions memoized per snapshot (policy.Memo):
	// negative turns memoizing off.
	DecisionCache int

	Debounce time.Duration // file events closer than this give one reload
	Poll     time.Duration // how often sources are re-hashed and remote ones polled
	Watching func()        // called once Run's file watches are in place; may be nil
}

// Engine is one decision point: the policy in force, the session state,
// and the decision log. It pins, evaluates, records and logs each call.
type Engine struct {
	current           atomic.Pointer[active]
	sources           *bundles.Sources
	state             *state
	dlog              *decisionlog.Log
	log               *slog.Logger
	cfg               Config
	metrics           *metrics
	memo              *prometheus.CounterVec // decision cache lookups by result
	memoHit, memoMiss prometheus.Counter
	asks              askListeners
	execs             *executions // allows held for GetExecution

	loadMu sync.Mutex // serialises loads; guards onSwap
	onSwap []func(*policy.Snapshot)

	mu       sync.Mutex // guards the last load's outcome, never held across a load
	lastErr  error
	lastHash string // of the content in force
	rejected string // of the content last rejected: not loaded again until it changes
}

// active is the snapshot in force with what the engine keeps beside it,
// worked out once per swap.
type active struct {
	snap      *policy.Snapshot
	epoch     string // one per swap, whether or not the revision changed; kept across a restart for unchanged content
	bundles   []decisionlog.Bundle
	logPolicy decisionlog.BundlePolicy // nil: the bundle has none
	memo      *policy.Memo             // nil: decisions are not memoized
}

// New builds an engine with no policy: it denies until a load succeeds.
func New(c Config) (*Engine, error) {
	c = c.withDefaults()
	e := &Engine{
		sources: &bundles.Sources{Paths: c.Bundles, Verify: c.Verify, Remote: c.Remote,
			Limits: c.BundleLimits, DownloadTimeout: c.DownloadTimeout},
		state:   newState(c.Store),
		dlog:    c.DecisionLog,
		log:     c.Logger,
		cfg:     c,
		metrics: newMetrics(),
		execs:   newExecutions(c.MaxExecutions),
		memo: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_decision_cache_lookups_total",
			Help: "Decisions looked up in the per-snapshot decision cache, by result: hit or miss. Uncacheable calls and policies are not counted.",
		}, []string{"result"}),
	}
	e.memoHit, e.memoMiss = e.memo.WithLabelValues("hit"), e.memo.WithLabelValues("miss")
	e.OnStateHealth(func(up bool) {
		if up {
			e.log.Info("the session state store answers again")
		} else {
			e.log.Error("the session state store cannot be reached: calls with a session and asks are denied until it answers")
		}
	})
	cs := append(append(e.metrics.collectors(), e.memo, e.execs.unverified), e.sources.Collectors()...)
	for _, m := range append(cs, e.state.collectors()...) {
		if err := c.Registerer.Register(m); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// withDefaults is c with every zero field set to its default; a nil
// Registerer registers into a registry nobody gathers.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	orDefault(&c.EvalTimeout, DefaultEvalTimeout)
	orDefault(&c.SessionIdle, DefaultSessionIdle)
	orDefault(&c.PendingTTL, DefaultPendingTTL)
	orDefault(&c.RememberTTL, DefaultRememberTTL)
	orDefault(&c.ExecutionTTL, DefaultExecutionTTL)
	orDefault(&c.MaxExecutions, DefaultMaxExecutions)
	orDefault(&c.TestTimeout, DefaultTestTimeout)
	orDefault(&c.Debounce, DefaultDebounce)
	orDefault(&c.Poll, DefaultPoll)
	orDefault(&c.MaxSessions, DefaultMaxSessions)
	orDefault(&c.MaxPending, DefaultMaxPending)
	orDefault(&c.MaxSessionBytes, DefaultMaxSessionBytes)
	orDefault(&c.MaxPendingBytes, DefaultMaxPendingBytes)
	if c.DecisionCache == 0 {
		c.DecisionCache = DefaultDecisionCache
	}
	if c.Store == nil {
		c.Store = session.NewMemory(c.Bounds())
	}
	return c
}

// orDefault sets *v to d when it is zero or negative.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// OnSwap registers f to be called after every swap of the policy, and at
// once when one is already in force.
func (e *Engine) OnSwap(f func(*policy.Snapshot)) {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	e.onSwap = append(e.onSwap, f)
	if a := e.current.Load(); a != nil {
		f(a.snap)
	}
}

// Snapshot is the policy in force, or nil before the first load.
func (e *Engine) Snapshot() *policy.Snapshot {
	if a := e.current.Load(); a != nil {
		return a.snap
	}
	return nil
}

// Remote reports whether any bundle comes from a bundle server.
func (e *Engine) Remote() bool {
	for _, p := range e.sources.Paths {
		if bundles.IsRemote(p) {
			return true
		}
	}
	return false
}

// Run keeps the engine current until ctx ends: it polls bundle servers,
// watches bundle files and reloads on change (a bad bundle leaves the last
// good policy serving), and releases idle sessions. Call Reload first for
// the initial load.
func (e *Engine) Run(ctx context.Context) error {
	go e.sweep(ctx)
	go e.probe(ctx)
	go e.sweepExecutions(ctx)
	return e.sources.Watch(ctx, bundles.WatchConfig{Debounce: e.cfg.Debounce, Poll: e.cfg.Poll, Logger: e.log, Watching: e.cfg.Watching,
		Failed: func(string, error) { e.metrics.reloads.WithLabelValues("rejected").Inc() }},
		func() { _ = e.Reload(ctx, false) })
}

// Refresh re-reads every bundle now — bundle servers are polled at once —
// and reloads what changed (serve's SIGHUP).
func (e *Engine) Refresh(ctx context.Context) error {
	e.sources.PollNow()
	return e.Reload(ctx, false)
}

// Sources reports each --bundle source: its name without credentials, its
// last download's error and time, whether it is stale.
func (e *Engine) Sources() []bundles.SourceStatus {
	return e.sources.Status()
}

// stateProbeEvery is how often the state store is asked whether it
// answers, so that health reports a store that went away, or came back,
// between calls.
const stateProbeEvery = 2 * time.Second

// probe asks the state store whether it answers, until ctx ends.
func (e *Engine) probe(ctx context.Context) {
	t := time.NewTicker(stateProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := e.state.store.Ping(pctx)
			cancel()
			if ctx.Err() == nil {
				_ = e.state.result(ctx, "ping", err)
			}
		}
	}
}

// sweep releases idle sessions now and then, until ctx ends.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTicker(max(e.cfg.SessionIdle/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.state.store.Sweep(ctx, e.cfg.Now())
		}
	}
}

// Decide answers one tool call for a caller of workspace ws ("" when
// nothing binds callers): check the caller may use the agent, pin the
// session's definition, evaluate with the policy alone, then count the
// decision, keep it for Confirm and ReportResult, and log it, all with the
// one snapshot it loads first. It fails closed: every error is a deny; the
// only refusal is an agent of another workspace (PermissionDenied).
func (e *Engine) Decide(ctx context.Context, ws string, req *pb.DecideRequest) (*pb.DecideResponse, error) {
	now := e.cfg.Now()
	a := e.current.Load()
	if a == nil {
		resp := policy.Deny(&pb.DecideResponse{DecisionId: NewDecisionID()}, "policy", "no_policy", "no policy is loaded yet: every tool call is denied until a bundle loads")
		e.dlog.Record(decisionlog.Entry{Kind: decisionlog.Decision, At: now, Req: req, Resp: resp, AgentID: req.GetAgentId()})
		e.metrics.decided(resp, 0)
		return resp, nil
	}
	agentID := policy.AgentID(req.GetAgentId())
	current := a.snap.Agent(agentID)
	if ws != "" && current != nil && current.Workspace != "" && current.Workspace != ws {
		e.log.Warn("decision refused: agent of another workspace", "caller_workspace", ws, "agent_id", agentID, "agent_workspace", current.Workspace)
		return nil, &Error{Code: PermissionDenied, Message: fmt.Sprintf("agent_id: agent '%s' belongs to another workspace than this caller's (%s)", agentID, ws)}
	}
	key := session.Key{Workspace: ws, Agent: agentID, Session: req.GetSessionId()}
	evalStart := time.Now()
	agent, resp := e.pin(ctx, a, key, current)
	asked := req // what the person is shown of an ask
	if resp == nil {
		resp = e.evaluate(ctx, a, ws, agentID, agent, current, req)
		var only *pb.DecideRequest // an ask about an MCP tool's definition, not the call (tooldefs.go)
		if resp, only = e.gateTool(ctx, a, ws, current, req, resp); only != nil {
			asked = only
		}
	}
	took := time.Since(evalStart)
	evalNs := took.Nanoseconds()
	resp.DecisionId = NewDecisionID()
	max := agent.Denials()
	call := &session.Call{Workspace: ws, DecisionID: resp.DecisionId, CallID: req.GetCallId(), AgentID: agentID, SessionID: req.GetSessionId(),
		ToolName: req.GetToolName(), Created: now, MaxDenials: max, Epoch: a.epoch}
	switch {
	case asked != req: // an ask about a tool's definition is not the call's: no call id, never remembered
		call.CallID = ""
	case req.GetCallId() != "":
		call.Signature = session.CallSignature(req)
	}
	// A connection of a confined run is not a step of the agent's loop: it
	// counts toward no cap, and only an ask is kept (for its answer).
	network := policy.IsNetworkCall(req)
	call.Uncounted = network
	if kept := networkPart(resp); kept != nil {
		call.Execution, _ = proto.Marshal(kept)
	}
	if resp.Decision == pb.Decision_DECISION_ASK && req.GetSessionId() != "" && asked == req {
		e.rememberedApproval(ctx, a.snap, call, req, resp, now)
	}
	call.Decision, call.Message = resp.Decision, resp.Message
	if resp.Decision == pb.Decision_DECISION_ASK {
		// What the person is shown and what Confirm decides again.
		call.Request, _ = proto.Marshal(asked)
		call.Response, _ = proto.Marshal(resp)
	}
	ev := AskEvent{Call: *call} // before the store shares it
	var halt bool
	var err error
	if !network || resp.Decision == pb.Decision_DECISION_ASK {
		halt, err = e.state.store.Decided(ctx, call, now)
	}
	if asked != req && err == nil {
		e.noteDefinitionAsk(ctx, ws, agentID, resp)
	}
	if e.state.result(ctx, "decided", err) != nil && (key.Session != "" || resp.Decision == pb.Decision_DECISION_ASK) {
		// The count was not kept, or nobody could answer the ask: fail closed.
		resp.Reasons, resp.Message, resp.Execution = nil, "", nil
		unavailable(resp, err)
		e.log.Error("the state store failed; the call is denied", "agent_id", agentID, "error", err.Error())
	}
	if resp.Halt = halt; resp.Halt {
		halt := fmt.Sprintf("%d consecutive failures (denials and reported errors) in this session: stop and ask the user how to proceed", max)
		resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: "session", Rule: "max_consecutive_denials", Effect: pb.Decision_DECISION_DENY, Message: halt})
		resp.Message = policy.JoinMessages(resp.Message, halt) // the model reads the top-level message, not the reasons
	}
	entry := decisionlog.Entry{Kind: decisionlog.Decision, At: now, Req: req, Resp: resp, Bundles: a.bundles, EvalNs: evalNs, AgentID: agentID, Policy: a.logPolicy, Secrets: a.snap}
	if e.dlog.Required() && resp.Decision != pb.Decision_DECISION_DENY {
		if err := e.dlog.RecordRequired(ctx, entry); err != nil {
			unaudited(resp, err)
			e.dlog.Record(entry)
		}
	} else {
		e.dlog.Record(entry)
	}
	e.metrics.decided(resp, took)
	if resp.Decision == pb.Decision_DECISION_ASK {
		e.tell(ev)
	}
	e.holdExecution(resp.DecisionId, key, agent, req, resp, now)
	return resp, nil
}

// unaudited turns a decision whose log line could not be written into a
// deny (--decision-log-required: no audit, no allow).
func unaudited(resp *pb.DecideResponse, err error) {
	msg := fmt.Sprintf("denied because this decision could not be recorded in the decision log (%v); the operator requires every decision to be logged: try again later", err)
	resp.Decision = pb.Decision_DECISION_DENY
	resp.Message = msg
	resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: "log", Rule: "decision_log_required", Effect: pb.Decision_DECISION_DENY, Message: msg})
	resp.Execution = nil
	policy.BoundMessages(resp)
}

// evaluate decides with the pinned definition agent, under --eval-timeout.
// A session pinned to a definition the newest policy no longer has is
// revoked: nothing of the pin applies, custom tools included.
func (e *Engine) evaluate(ctx context.Context, a *active, ws, agentID string, agent, current *policy.Agent, req *pb.DecideRequest) *pb.DecideResponse {
	snap := a.snap
	if agent != nil && current == nil {
		resp := &pb.DecideResponse{PolicyRevision: snap.Revision}
		policy.Deny(resp, "session", "agent_removed", fmt.Sprintf("agent '%s' was removed from the policy: every call of its running sessions is denied", agentID))
		policy.BoundMessages(resp)
		return resp
	}
	if policy.IsNetworkCall(req) {
		return e.decideNetwork(ctx, a, ws, agentID, agent, req)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.EvalTimeout)
	defer cancel()
	resp, hit, err := snap.DecideMemo(ctx, req, agent, a.memo)
	if a.memo != nil {
		if hit {
			e.memoHit.Inc()
		} else {
			e.memoMiss.Inc()
		}
	}
	if err != nil {
		e.log.Error("evaluation failed", "agent_id", agentID, "tool_name", req.GetToolName(), "revision", snap.Revision, "error", err)
	}
	return resp
}

// pin is the definition session key decides with, or the deny of a call
// whose session cannot be had: the store is unreachable, the session was
// released at a bound (starting afresh would shed a stricter definition),
// or it is new and every place is a halted session.
func (e *Engine) pin(ctx context.Context, a *active, key session.Key, current *policy.Agent) (*policy.Agent, *pb.DecideResponse) {
	agent, deny, _ := e.pinOrErr(ctx, a, key, current)
	return agent, deny
}

// pinOrErr is pin with the store's error beside the deny it makes of it,
// for a caller that may try again (Confirm's decision again).
func (e *Engine) pinOrErr(ctx context.Context, a *active, key session.Key, current *policy.Agent) (*policy.Agent, *pb.DecideResponse, error) {
	if key.Session == "" {
		return current, nil, nil
	}
	deny := func(rule, msg string) *pb.DecideResponse {
		return policy.Deny(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, "session", rule, msg)
	}
	p, err := pinOf(current)
	if err != nil {
		return nil, deny("state_unavailable", "the agent's definition cannot be pinned: "+clipError(err)), nil
	}
	begun, err := e.state.store.Begin(ctx, key, p, e.cfg.Now())
	if e.state.result(ctx, "begin", err) != nil {
		e.log.Error("the state store failed; the call is denied", "agent_id", key.Agent, "error", err.Error())
		return nil, unavailable(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, err), err
	}
	switch {
	case begun.Refused:
		return nil, deny("session_refused", "no new session can start: every session the server holds for this agent (--max-sessions-per-agent) or in all (--max-sessions, --max-session-bytes) is halted; end one with EndSession or wait for the idle timeout"), nil
	case begun.Lost:
		return nil, deny("session_evicted", "this session's state was released because more sessions were open than the server holds (--max-sessions, --max-sessions-per-agent, --max-session-bytes): start a new session"), nil
	}
	agent, err := e.state.resolve(ctx, begun.Pin, current)
	if err != nil {
		e.log.Error("a pinned definition cannot be read; the call is denied", "agent_id", key.Agent, "error", err.Error())
		refused := unavailable(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, err)
		if !errors.Is(err, session.ErrUnavailable) {
			err = nil // a definition that cannot be decoded will not decode on a second try
		}
		return nil, refused, err
	}
	return agent, nil, nil
}

// rememberedApproval turns an ask into an allow when a person approved
// exactly this call earlier in the session under this very policy (Confirm
// with remember); otherwise it notes the key the ask would be remembered by.
// Only an ask: a remembered approval never turns a deny into anything.
func (e *Engine) rememberedApproval(ctx context.Context, snap *policy.Snapshot, call *session.Call, req *pb.DecideRequest, resp *pb.DecideResponse, now time.Time) {
	server, tool, ok := snap.CanonicalTool(ctx, req.GetToolName(), req.GetServer())
	if !ok {
		return
	}
	key, ok := session.KeyOf(server, tool, req, resp)
	if !ok {
		return
	}
	call.Remember = key
	held, err := e.state.store.Remembered(ctx, call.Key(), key, call.Epoch, now)
	if e.state.result(ctx, "remembered", err) != nil || !held {
		return
	}
	resp.Decision, resp.Message = pb.Decision_DECISION_ALLOW, ""
	resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: "session", Rule: "remembered_approval", Effect: pb.Decision_DECISION_ALLOW,
		Message: "a person approved exactly this call earlier in this session and asked not to be asked again"})
}

// NewDecisionID is a UUIDv7: unique, and ordered by time in a decision log.
func NewDecisionID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// EndSession releases a session's pin and counters. Another workspace's
// session is not found.
func (e *Engine) EndSession(ctx context.Context, ws, agentID, sessionID string) (bool, error) {
	k := session.Key{Workspace: ws, Agent: policy.AgentID(agentID), Session: sessionID}
	e.dropSessionExecutions(k)
	found, err := e.state.store.End(ctx, k)
	if e.state.result(ctx, "end", err) != nil {
		return false, storeError(err)
	}
	return found, nil
}

// Bounds are the session store's bounds the configuration gives, its
// defaults filled in.
func (c Config) Bounds() session.Bounds {
	orDefault(&c.SessionIdle, DefaultSessionIdle)
	orDefault(&c.PendingTTL, DefaultPendingTTL)
	orDefault(&c.MaxSessions, DefaultMaxSessions)
	orDefault(&c.MaxPending, DefaultMaxPending)
	orDefault(&c.MaxSessionBytes, DefaultMaxSessionBytes)
	orDefault(&c.MaxPendingBytes, DefaultMaxPendingBytes)
	return session.Bounds{MaxSessions: c.MaxSessions, MaxSessionsPerAgent: c.MaxSessionsPerAgent, SessionIdle: c.SessionIdle,
		MaxSessionBytes: c.MaxSessionBytes, MaxPending: c.MaxPending, PendingTTL: c.PendingTTL, MaxPendingBytes: c.MaxPendingBytes}
}
