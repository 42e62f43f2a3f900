package pdp

import (
	"container/list"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sessionKey identifies a session: the same session id under another agent
// is another session (SPEC §6).
type sessionKey struct{ agent, session string }

// session is what toolpdp remembers of one agent loop.
type session struct {
	key      sessionKey
	agent    *Agent // pinned definition; nil until the agent is known
	denials  int    // consecutive denials
	bytes    int64  // what the session holds, as charged (see charge)
	lastUsed time.Time
	elem     *list.Element
}

// DefaultMaxSessionBytes bounds the bytes all sessions hold together.
const DefaultMaxSessionBytes = 16 << 20

// sessionOverhead is what a session costs beyond its ids: the struct, its
// list element and map entry. Pinned definitions are shared with the
// snapshot that loaded them and are not counted per session.
const sessionOverhead = 320

// Sessions holds session state, bounded in number and in bytes (the
// longest idle are evicted first at either bound) and in idle time.
type Sessions struct {
	mu       sync.Mutex
	byKey    map[sessionKey]*session
	lru      *list.List // front: most recently used
	max      int
	maxBytes int64
	bytes    int64
	idle     time.Duration
	evicted  prometheus.Counter // sessions released at a bound
}

// NewSessions returns a store of at most max sessions, each released after
// idle without use, holding at most DefaultMaxSessionBytes (see SetMaxBytes).
func NewSessions(max int, idle time.Duration) *Sessions {
	return &Sessions{byKey: map[sessionKey]*session{}, lru: list.New(), max: max, maxBytes: DefaultMaxSessionBytes, idle: idle,
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_evicted_total",
			Help: "Sessions released because --max-sessions or --max-session-bytes was reached (the longest idle first).",
		})}
}

// SetMaxBytes bounds the bytes all sessions hold (n <= 0: the default).
// Call it before use.
func (s *Sessions) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxSessionBytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxBytes = n
}

// charge adds delta bytes to what session ss holds (a negative delta
// releases them) and keeps the store under its byte bound by releasing the
// longest idle other sessions. It reports false, changing nothing, when ss
// alone would exceed the bound: the caller must then not keep what it was
// charging for. Everything a session keeps that grows with requests —
// remembered approvals, say — must be charged here when added and released
// here when dropped. Callers hold mu.
func (s *Sessions) charge(ss *session, delta int64) bool {
	if delta > 0 && ss.bytes+delta > s.maxBytes {
		return false
	}
	ss.bytes += delta
	s.bytes += delta
	for s.bytes > s.maxBytes {
		oldest := s.lru.Back().Value.(*session)
		if oldest == ss {
			oldest = s.lru.Back().Prev().Value.(*session) // ss alone fits, so another is there
		}
		s.remove(oldest)
		s.evicted.Inc()
	}
	return true
}

// Collectors are the store's metrics, for a registry.
func (s *Sessions) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.evicted, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_sessions",
		Help: "Sessions held (pinned definitions and denial counts).",
	}, func() float64 { return float64(s.Len()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_sessions_bytes",
		Help: "Bytes the sessions hold (estimated; bounded by --max-session-bytes).",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(s.bytes) })}
}

// Pin returns the agent definition the session started with, pinning
// current when the session has none yet. An empty session id has no state.
func (s *Sessions) Pin(agentID, sessionID string, current *Agent, now time.Time) *Agent {
	if sessionID == "" {
		return current
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{agentID, sessionID}, now)
	if ss.agent == nil {
		ss.agent = current
	}
	return ss.agent
}

// Record counts one decision of the session and reports whether it is at
// its denial cap: a deny adds one, an allow resets, an ask changes nothing.
func (s *Sessions) Record(agentID, sessionID string, effect string, max int, now time.Time) (halt bool) {
	if sessionID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{agentID, sessionID}, now)
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
func (s *Sessions) End(agentID, sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byKey[sessionKey{agentID, sessionID}]
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
	// Ids are bounded (MaxIDBytes), so a new session always fits alone.
	s.charge(ss, int64(2*(len(k.agent)+len(k.session))+sessionOverhead))
	return ss
}

func (s *Sessions) remove(ss *session) {
	s.lru.Remove(ss.elem)
	delete(s.byKey, ss.key)
	s.bytes -= ss.bytes
}
