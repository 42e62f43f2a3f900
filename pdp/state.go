package pdp

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// state is the engine's side of the session store: it turns pins into the
// definitions decisions use, and watches whether the store answers.
type state struct {
	store session.Store

	mu   sync.Mutex
	pins map[[sha256.Size]byte]*policy.Agent // decoded pins, and every loaded snapshot's definitions

	up       atomic.Bool
	onHealth []func(bool)
	upGauge  prometheus.Gauge
	errors   *prometheus.CounterVec

	lost       atomic.Pointer[string] // why the store counts as lost; nil while it does not
	lostGauge  prometheus.Gauge
	lostEvents prometheus.Counter
}

// maxDecodedPins bounds the definitions kept decoded; past it the cache
// starts again (a decode is a JSON parse, paid once per definition).
const maxDecodedPins = 4096

func newState(store session.Store) *state {
	s := &state{store: store, pins: map[[sha256.Size]byte]*policy.Agent{},
		upGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolpdp_state_store_up",
			Help: "1 while the session state store (--state) answers; 0 while it cannot be reached (calls with a session and asks are denied).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_state_store_errors_total",
			Help: "Operations on the session state store that failed, by operation; each failed closed.",
		}, []string{"op"}),
	}
	s.lostGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolpdp_state_store_lost",
		Help: "1 while the session state store counts as lost (its epoch vanished or changed: it was restarted without its data, flushed or replaced) and no operator accepted it; calls with a session and asks are denied (state_lost).",
	})
	s.lostEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolpdp_state_store_lost_total",
		Help: "Times this process found that the session state store lost its data.",
	})
	s.up.Store(true)
	s.upGauge.Set(1)
	return s
}

func (s *state) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{s.upGauge, s.errors, s.lostGauge, s.lostEvents}, s.store.Collectors()...)
}

// result notes how an operation on the store went. An operation cut
// short by its caller — a deadline it set, a call it cancelled — says
// nothing of the store: it leaves health as it was, so that no caller can
// raise a "store down" alarm by asking with a deadline already past.
func (s *state) result(ctx context.Context, op string, err error) error {
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err != nil {
		s.errors.WithLabelValues(op).Inc()
	}
	switch {
	case errors.Is(err, session.ErrStateLost):
		why := clipError(err)
		if s.lost.Swap(&why) == nil {
			s.lostEvents.Inc()
			s.lostGauge.Set(1)
		}
	case err == nil && s.lost.Load() != nil:
		// The store answered as this process's again: the loss was
		// accepted (on another replica, or here).
		s.lost.Store(nil)
		s.lostGauge.Set(0)
	}
	up := err == nil
	if s.up.Swap(up) != up {
		s.upGauge.Set(map[bool]float64{true: 1, false: 0}[up])
		s.mu.Lock()
		fs := s.onHealth
		s.mu.Unlock()
		for _, f := range fs {
			f(up)
		}
	}
	return err
}

// learn keeps a snapshot's definitions, so that a pin of one of them
// resolves to it (and its decision cache entries) without a decode.
func (s *state) learn(snap *policy.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range snap.AgentIDs() {
		a := snap.Agent(id)
		if _, d, err := a.Encoded(); err == nil {
			s.pins[d] = a
		}
	}
}

// pinOf is what a store keeps of a definition; nil for none.
func pinOf(a *policy.Agent) (*session.Pin, error) {
	if a == nil {
		return nil, nil
	}
	body, d, err := a.Encoded()
	if err != nil {
		return nil, err
	}
	return &session.Pin{Digest: d, Body: body}, nil
}

// resolve is the definition a pin names: current when it is that one,
// else one seen or decoded before, else decoded from the store's copy.
func (s *state) resolve(ctx context.Context, p *session.Pin, current *policy.Agent) (*policy.Agent, error) {
	if p == nil {
		return nil, nil
	}
	if current != nil {
		if _, d, err := current.Encoded(); err == nil && d == p.Digest {
			return current, nil
		}
	}
	s.mu.Lock()
	a := s.pins[p.Digest]
	s.mu.Unlock()
	if a != nil {
		return a, nil
	}
	body := p.Body
	if body == nil {
		var err error
		if body, err = s.store.PinBody(ctx, p.Digest); s.result(ctx, "pin", err) != nil {
			return nil, err
		}
		if body == nil {
			return nil, errors.New("the store holds no copy of the session's pinned definition")
		}
	}
	a, err := policy.DecodeAgent(body)
	if err != nil {
		return nil, err
	}
	if _, d, _ := a.Encoded(); d != p.Digest {
		return nil, fmt.Errorf("the session's pinned definition does not match its digest")
	}
	s.mu.Lock()
	if len(s.pins) >= maxDecodedPins {
		s.pins = map[[sha256.Size]byte]*policy.Agent{}
	}
	s.pins[p.Digest] = a
	s.mu.Unlock()
	return a, nil
}

// unavailable is the deny of a call the store's state was needed for.
func unavailable(resp *pb.DecideResponse, err error) *pb.DecideResponse {
	if errors.Is(err, session.ErrStateLost) {
		return policy.Deny(resp, "session", "state_lost", lostMessage(err))
	}
	return policy.Deny(resp, "session", "state_unavailable",
		"the session state store cannot be reached, so this call is denied (a session's count and pin, and asks, need it): "+clipError(err))
}

// clipError keeps a store's error short enough for a message.
func clipError(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// OnStateHealth registers f to learn when the state store stops or starts
// answering.
func (e *Engine) OnStateHealth(f func(up bool)) {
	e.state.mu.Lock()
	defer e.state.mu.Unlock()
	e.state.onHealth = append(e.state.onHealth, f)
}

// StateUp reports whether the state store answered its last operation.
func (e *Engine) StateUp() bool { return e.state.up.Load() }

// lostMessage says what a store that lost its data means for a call.
func lostMessage(err error) string {
	return "the session state store lost its data, so this call is denied: halts, pins, asks and remembered approvals it held may be gone, and a fresh start would quietly clear them; an operator accepts the loss with `toolpdp state accept-reset` (or serve --state-accept-reset): " + clipError(err)
}

// StateLost is why the state store counts as lost, "" while it does not.
func (e *Engine) StateLost() string {
	if why := e.state.lost.Load(); why != nil {
		return *why
	}
	return ""
}

// AcceptStateReset records that an operator (by) accepts that the state
// store lost its data: sessions start afresh from now on, on this replica
// and on every other one that shares the store. It returns the epoch
// given up ("" when nothing was lost) and the epoch in force; a store
// that cannot lose its data apart from the process refuses
// (FailedPrecondition).
func (e *Engine) AcceptStateReset(ctx context.Context, by string) (from, to string, err error) {
	r, ok := e.state.store.(interface {
		AcceptReset(ctx context.Context, by string) (from, to string, err error)
	})
	if !ok {
		return "", "", errorf(FailedPrecondition, "the memory state store is lost only with the process: there is nothing to accept")
	}
	from, to, err = r.AcceptReset(ctx, by)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return "", "", err
		}
		if errors.Is(err, session.ErrUnavailable) {
			_ = e.state.result(ctx, "accept_reset", err)
			return "", "", storeError(err)
		}
		return "", "", errorf(FailedPrecondition, "%s", err.Error())
	}
	_ = e.state.result(ctx, "accept_reset", e.state.store.Ping(ctx))
	if from != "" {
		e.log.Warn("the state store's loss was accepted: sessions start afresh", "accepted_by", by, "lost_epoch", from, "epoch", to)
		e.dlog.Record(decisionlog.Entry{Kind: decisionlog.StateReset, At: e.cfg.Now(), AcceptedBy: by, LostEpoch: from, NewEpoch: to})
	}
	return from, to, nil
}
