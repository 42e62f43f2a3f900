package pdp

import (
	"container/list"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sessionKey identifies a session: the same session id under another agent
// is another session, and with workspace binding, under another caller's
// workspace too ("" when nothing binds callers).
type sessionKey struct{ workspace, agent, session string }

// session is what toolpdp remembers of one agent loop.
type session struct {
	key      sessionKey
	agent    *Agent // pinned definition; nil until the agent is known
	denials  int    // consecutive denials
	lastUsed time.Time
	elem     *list.Element
}

// Sessions holds session state, bounded in number (the longest idle are
// evicted first) and in idle time.
type Sessions struct {
	mu      sync.Mutex
	byKey   map[sessionKey]*session
	lru     *list.List // front: most recently used
	max     int
	idle    time.Duration
	evicted prometheus.Counter // sessions released at the bound
}

// NewSessions returns a store of at most max sessions, each released after
// idle without use.
func NewSessions(max int, idle time.Duration) *Sessions {
	return &Sessions{byKey: map[sessionKey]*session{}, lru: list.New(), max: max, idle: idle,
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_evicted_total",
			Help: "Sessions released because --max-sessions was reached (the longest idle first).",
		})}
}

// Collectors are the store's metrics, for a registry.
func (s *Sessions) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.evicted, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_sessions",
		Help: "Sessions held (pinned definitions and denial counts).",
	}, func() float64 { return float64(s.Len()) })}
}

// Pin returns the agent definition the session started with, pinning
// current when the session has none yet. An empty session id has no state.
func (s *Sessions) Pin(workspace, agentID, sessionID string, current *Agent, now time.Time) *Agent {
	if sessionID == "" {
		return current
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{workspace, agentID, sessionID}, now)
	if ss.agent == nil {
		ss.agent = current
	}
	return ss.agent
}

// Record counts one decision of the session and reports whether it is at
// its denial cap: a deny adds one, an allow resets, an ask changes nothing.
func (s *Sessions) Record(workspace, agentID, sessionID string, effect string, max int, now time.Time) (halt bool) {
	if sessionID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{workspace, agentID, sessionID}, now)
	switch effect {
	case "deny":
		ss.denials++
		return ss.denials >= max
	case "allow":
		ss.denials = 0
	}
	return false
}

// End releases a session. It reports whether there was one.
func (s *Sessions) End(workspace, agentID, sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byKey[sessionKey{workspace, agentID, sessionID}]
	if ok {
		s.remove(ss)
	}
	return ok
}

// Len is the number of sessions held.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// Sweep releases the sessions idle for longer than the idle timeout.
func (s *Sessions) Sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.lru.Back(); e != nil; e = s.lru.Back() {
		ss := e.Value.(*session)
		if now.Sub(ss.lastUsed) <= s.idle {
			return
		}
		s.remove(ss)
	}
}

// touch finds or creates a session and marks it used. Callers hold mu.
func (s *Sessions) touch(k sessionKey, now time.Time) *session {
	ss, ok := s.byKey[k]
	if ok && now.Sub(ss.lastUsed) > s.idle {
		s.remove(ss) // idle past the timeout: a new session under the old id
		ok = false
	}
	if ok {
		ss.lastUsed = now
		s.lru.MoveToFront(ss.elem)
		return ss
	}
	for len(s.byKey) >= s.max && s.lru.Len() > 0 {
		s.remove(s.lru.Back().Value.(*session))
		s.evicted.Inc()
	}
	ss = &session{key: k, lastUsed: now}
	ss.elem = s.lru.PushFront(ss)
	s.byKey[k] = ss
	return ss
}

func (s *Sessions) remove(ss *session) {
	s.lru.Remove(ss.elem)
	delete(s.byKey, ss.key)
}
