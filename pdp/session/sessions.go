package session

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sessionKey identifies a session: the same session id under another agent
// is another session, and with workspace binding, under another caller's
// workspace too ("" when nothing binds callers).
type sessionKey struct{ workspace, agent, session string }

// session is what toolpdp remembers of one agent loop.
type session[A any] struct {
	key      sessionKey
	agent    *A    // pinned definition; nil until the agent is known
	denials  int   // consecutive failures: denials and reported errors
	reported bool  // the agent has reported a result: then only a reported success resets denials
	bytes    int64 // what the session holds, as charged (see charge)
	lost     bool  // a session of this key was released at a bound: its pin and counts are gone
	lastUsed time.Time
	elem     *list.Element

	// remembered approvals: a person allowed exactly this call (key) under
	// the snapshot of that generation, until expires. At most
	// MaxRememberedPerSession, each a fixed size.
	remembered map[RememberKey]remembered
}

type remembered struct {
	generation uint64
	expires    time.Time
}

// MaxRememberedPerSession bounds a session's remembered approvals; past it
// the one that expires first is dropped.
const MaxRememberedPerSession = 64

// rememberedSize is what one remembered approval costs its session: a
// fixed-size key and its map entry.
const rememberedSize = 96

// DefaultMaxSessionBytes bounds the bytes all sessions hold together.
const DefaultMaxSessionBytes = 16 << 20

// sessionOverhead is what a session costs beyond its ids: the struct, its
// list element and map entry. Pinned definitions are shared with the
// snapshot that loaded them and are not counted per session.
const sessionOverhead = 320

// Sessions holds session state, bounded in number and in bytes (the
// longest idle are evicted first at either bound) and in idle time. A is
// the type of the agent definition a session pins.
type Sessions[A any] struct {
	mu       sync.Mutex
	byKey    map[sessionKey]*session[A]
	lru      *list.List // front: most recently used
	max      int
	maxBytes int64
	bytes    int64
	idle     time.Duration
	evicted  prometheus.Counter // sessions released at a bound

	// buried are the keys of sessions released at a bound (not by idle
	// timeout or EndSession), as hashes in a ring of 4×max: such a session
	// coming back must not start afresh — a flood of new sessions would
	// otherwise shed a halt or a stricter pinned definition.
	buried   map[[16]byte]struct{}
	ring     [][16]byte
	ringNext int
}

// NewSessions returns a store of at most max sessions, each released after
// idle without use, holding at most DefaultMaxSessionBytes (see SetMaxBytes).
func NewSessions[A any](max int, idle time.Duration) *Sessions[A] {
	return &Sessions[A]{byKey: map[sessionKey]*session[A]{}, lru: list.New(), max: max, maxBytes: DefaultMaxSessionBytes, idle: idle,
		buried: map[[16]byte]struct{}{}, ring: make([][16]byte, 0, 4*max),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_evicted_total",
			Help: "Sessions released because --max-sessions or --max-session-bytes was reached (the longest idle first).",
		})}
}

// SetMaxBytes bounds the bytes all sessions hold (n <= 0: the default).
// Call it before use.
func (s *Sessions[A]) SetMaxBytes(n int64) {
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
func (s *Sessions[A]) charge(ss *session[A], delta int64) bool {
	if delta > 0 && ss.bytes+delta > s.maxBytes {
		return false
	}
	ss.bytes += delta
	s.bytes += delta
	for s.bytes > s.maxBytes {
		oldest := s.lru.Back().Value.(*session[A])
		if oldest == ss {
			oldest = s.lru.Back().Prev().Value.(*session[A]) // ss alone fits, so another is there
		}
		s.bury(oldest)
	}
	return true
}

// bury releases a session at a bound and remembers that it was.
func (s *Sessions[A]) bury(ss *session[A]) {
	s.remove(ss)
	s.evicted.Inc()
	h := keyHash(ss.key)
	if _, ok := s.buried[h]; ok {
		return
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, h)
	} else if len(s.ring) > 0 {
		delete(s.buried, s.ring[s.ringNext])
		s.ring[s.ringNext] = h
		s.ringNext = (s.ringNext + 1) % len(s.ring)
	}
	s.buried[h] = struct{}{}
}

func keyHash(k sessionKey) [16]byte {
	sum := sha256.Sum256([]byte(k.workspace + "\x00" + k.agent + "\x00" + k.session))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// Collectors are the store's metrics, for a registry.
func (s *Sessions[A]) Collectors() []prometheus.Collector {
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
// lost reports a session whose state was released at the store's bound:
// its calls are to be denied, not started afresh.
func (s *Sessions[A]) Pin(workspace, agentID, sessionID string, current *A, now time.Time) (pinned *A, lost bool) {
	if sessionID == "" {
		return current, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{workspace, agentID, sessionID}, now)
	if ss.agent == nil {
		ss.agent = current
	}
	return ss.agent, ss.lost
}

// Record counts one decision of the session (by Decide or a person's
// answer) and reports whether it is at its consecutive cap: a deny adds
// one; an allow resets the count of a session that has never reported a
// result (clients that do not report keep working); an ask changes nothing.
func (s *Sessions[A]) Record(workspace, agentID, sessionID string, effect string, max int, now time.Time) (halt bool) {
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
		if !ss.reported {
			ss.denials = 0
		}
	}
	return false
}

// Report counts a reported result — denials and errors share one
// consecutive cap: an error adds one, a success resets.
// It reports whether the session is at its cap.
func (s *Sessions[A]) Report(workspace, agentID, sessionID string, isError bool, max int, now time.Time) (halt bool) {
	if sessionID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{workspace, agentID, sessionID}, now)
	ss.reported = true
	if !isError {
		ss.denials = 0
		return false
	}
	ss.denials++
	return ss.denials >= max
}

// Remember records a person's approval of exactly the call key, made under
// the snapshot of generation, until expires.
func (s *Sessions[A]) Remember(workspace, agentID, sessionID string, key RememberKey, generation uint64, expires, now time.Time) {
	if sessionID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(sessionKey{workspace, agentID, sessionID}, now)
	if ss.remembered == nil {
		ss.remembered = map[RememberKey]remembered{}
	}
	for k, r := range ss.remembered { // expired or of an older policy: gone
		if r.generation != generation || !now.Before(r.expires) {
			delete(ss.remembered, k)
			s.charge(ss, -rememberedSize)
		}
	}
	if _, ok := ss.remembered[key]; !ok && len(ss.remembered) >= MaxRememberedPerSession {
		var first RememberKey
		var at time.Time
		for k, r := range ss.remembered {
			if at.IsZero() || r.expires.Before(at) {
				first, at = k, r.expires
			}
		}
		delete(ss.remembered, first)
		s.charge(ss, -rememberedSize)
	}
	if _, ok := ss.remembered[key]; !ok && !s.charge(ss, rememberedSize) {
		return // the session is at the byte bound: the approval is not remembered
	}
	ss.remembered[key] = remembered{generation: generation, expires: expires}
}

// Remembered reports whether a person approved exactly the call key in this
// session, under the snapshot of generation, and the approval holds now.
func (s *Sessions[A]) Remembered(workspace, agentID, sessionID string, key RememberKey, generation uint64, now time.Time) bool {
	if sessionID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byKey[sessionKey{workspace, agentID, sessionID}]
	if !ok || now.Sub(ss.lastUsed) > s.idle {
		return false
	}
	r, ok := ss.remembered[key]
	return ok && r.generation == generation && now.Before(r.expires)
}

// End releases a session. It reports whether there was one.
func (s *Sessions[A]) End(workspace, agentID, sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey{workspace, agentID, sessionID}
	delete(s.buried, keyHash(k)) // ended on purpose: the id may start afresh
	ss, ok := s.byKey[k]
	if ok {
		s.remove(ss)
	}
	return ok
}

// Len is the number of sessions held.
func (s *Sessions[A]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// Sweep releases the sessions idle for longer than the idle timeout.
func (s *Sessions[A]) Sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.lru.Back(); e != nil; e = s.lru.Back() {
		ss := e.Value.(*session[A])
		if now.Sub(ss.lastUsed) <= s.idle {
			return
		}
		s.remove(ss)
	}
}

// touch finds or creates a session and marks it used. Callers hold mu.
func (s *Sessions[A]) touch(k sessionKey, now time.Time) *session[A] {
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
		s.bury(s.lru.Back().Value.(*session[A]))
	}
	_, lost := s.buried[keyHash(k)]
	ss = &session[A]{key: k, lastUsed: now, lost: lost}
	ss.elem = s.lru.PushFront(ss)
	s.byKey[k] = ss
	// Ids are bounded (the gRPC edge refuses longer ones), so a new session
	// always fits alone.
	s.charge(ss, int64(2*(len(k.workspace)+len(k.agent)+len(k.session))+sessionOverhead))
	return ss
}

func (s *Sessions[A]) remove(ss *session[A]) {
	s.lru.Remove(ss.elem)
	delete(s.byKey, ss.key)
	s.bytes -= ss.bytes
}
