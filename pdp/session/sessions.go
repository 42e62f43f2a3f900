package session

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Key identifies a session: the same session id under another agent is
// another session, and with workspace binding, under another caller's
// workspace too ("" when nothing binds callers).
type Key struct{ Workspace, Agent, Session string }

// Pin is a pinned agent definition as a store keeps it: its encoding and
// the SHA-256 of that encoding, which names it.
type Pin struct {
	Digest [sha256.Size]byte
	Body   []byte
}

// undefinedBucket is where the sessions of agents the policy does not
// define are bounded together: calling under ever new agent ids must not
// buy a caller more room than one agent has.
const undefinedBucket = "\x00undefined"

// session is what toolpdp remembers of one agent loop.
type session struct {
	key      Key
	bucket   string // whose per-agent bound it counts against
	pin      *Pin   // nil until the agent is known
	denials  int    // consecutive failures: denials and reported errors
	reported bool   // the agent has reported a result: then only a reported success resets denials
	halted   bool   // denials reached the cap: kept for the idle timeout whatever else is evicted
	bytes    int64  // what the session holds, as charged (see charge)
	lost     bool   // a session of this key was released at a bound: its pin and counts are gone
	lastUsed time.Time

	all *list.Element // in Sessions.all: every session, by last use
	ev  *list.Element // in Sessions.evictable, nil while halted
	bev *list.Element // in its bucket's evictable list, nil while halted

	// remembered approvals: a person allowed exactly this call (key) under
	// the policy of that epoch, until expires. At most
	// MaxRememberedPerSession, each a fixed size.
	remembered map[RememberKey]remembered
}

type remembered struct {
	epoch   string
	expires time.Time
}

// MaxRememberedPerSession bounds a session's remembered approvals; past it
// the one that expires first is dropped.
const MaxRememberedPerSession = 64

// rememberedSize is what one remembered approval costs its session: a
// fixed-size key, its epoch and its map entry.
const rememberedSize = 160

// DefaultMaxSessionBytes bounds the bytes all sessions hold together.
const DefaultMaxSessionBytes = 16 << 20

// sessionOverhead is what a session costs beyond its ids: the struct, its
// list elements and map entry. Pinned definitions are shared with the
// snapshot that loaded them (or, loaded from a durable store, between the
// sessions that pin them) and are not counted per session.
const sessionOverhead = 320

// bucket is one agent's share of the sessions.
type bucket struct {
	n         int        // sessions held
	evictable *list.List // those not halted, front: most recently used
}

// Sessions holds session state, bounded in number, per agent as well as in
// all, and in bytes, and in idle time. At a bound the longest idle session
// that is not halted goes first; a halted session stays for the idle
// timeout whatever else comes, and a new session is refused only when
// every session its bound counts is halted — so a flood of new session
// ids can neither clear a halt nor, under one agent, lock another out.
type Sessions struct {
	mu          sync.Mutex
	byKey       map[Key]*session
	all         *list.List // every session, front: most recently used
	evictable   *list.List // those not halted
	buckets     map[string]*bucket
	max         int
	maxPerAgent int
	maxBytes    int64
	bytes       int64
	idle        time.Duration
	evicted     prometheus.Counter // sessions released at a bound
	refused     prometheus.Counter // new sessions refused: every entry was halted

	// buried are the keys of sessions released at a bound (not by idle
	// timeout or EndSession), as hashes in a ring of 4×max: such a session
	// coming back must not start afresh — a flood of new sessions would
	// otherwise shed a stricter pinned definition.
	buried   map[[16]byte]struct{}
	ring     [][16]byte
	ringNext int

	// changed, when set, learns of every change to a session (gone: it was
	// released) under the store's lock, in order: a durable store writes
	// them through.
	changed func(ss *session, gone bool)
}

// NewSessions returns a store of at most max sessions, at most max/2 of
// one agent (see SetMaxPerAgent), each released after idle without use,
// holding at most DefaultMaxSessionBytes (see SetMaxBytes).
func NewSessions(n int, idle time.Duration) *Sessions {
	return &Sessions{byKey: map[Key]*session{}, all: list.New(), evictable: list.New(), buckets: map[string]*bucket{},
		max: n, maxPerAgent: max(1, n/2), maxBytes: DefaultMaxSessionBytes, idle: idle,
		buried: map[[16]byte]struct{}{}, ring: make([][16]byte, 0, 4*n),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_evicted_total",
			Help: "Sessions released because --max-sessions, --max-sessions-per-agent or --max-session-bytes was reached (the longest idle that is not halted first).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_refused_total",
			Help: "New sessions refused because every session a bound counts was halted (their calls are denied).",
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

// SetMaxPerAgent bounds the sessions of one agent (n <= 0: half of all,
// at least one). Call it before use.
func (s *Sessions) SetMaxPerAgent(n int) {
	if n <= 0 {
		n = max(1, s.max/2)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxPerAgent = min(n, s.max)
}

// charge adds delta bytes to what session ss holds (a negative delta
// releases them) and keeps the store under its byte bound by releasing the
// longest idle other sessions that are not halted. It reports false,
// changing nothing, when that cannot make room: the caller must then not
// keep what it was charging for. Everything a session keeps that grows
// with requests — remembered approvals, say — must be charged here when
// added and released here when dropped. Callers hold mu.
func (s *Sessions) charge(ss *session, delta int64, now time.Time) bool {
	if delta > 0 && s.bytes+delta > s.maxBytes {
		s.expireIdle(now)
		room := s.maxBytes - s.bytes
		for e := s.evictable.Back(); e != nil && room < delta; e = e.Prev() {
			if o := e.Value.(*session); o != ss {
				room += o.bytes
			}
		}
		if room < delta {
			return false
		}
		for s.bytes+delta > s.maxBytes {
			oldest := s.evictable.Back().Value.(*session)
			if oldest == ss {
				oldest = s.evictable.Back().Prev().Value.(*session)
			}
			s.bury(oldest)
		}
	}
	ss.bytes += delta
	s.bytes += delta
	return true
}

// bury releases a session at a bound and remembers that it was.
func (s *Sessions) bury(ss *session) {
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

func keyHash(k Key) [16]byte {
	sum := sha256.Sum256([]byte(k.Workspace + "\x00" + k.Agent + "\x00" + k.Session))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// Collectors are the store's metrics, for a registry.
func (s *Sessions) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.evicted, s.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_sessions",
		Help: "Sessions held (pinned definitions and denial counts).",
	}, func() float64 { return float64(s.Len()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_sessions_bytes",
		Help: "Bytes the sessions hold (estimated; bounded by --max-session-bytes).",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(s.bytes) })}
}

// Begun is a session as a call finds it.
type Begun struct {
	Pin     *Pin // the definition the session started with; nil: none is known
	Lost    bool // its state was released at a bound: its calls are to be denied, not started afresh
	Refused bool // it is new and no room could be made: every session a bound counts is halted
}

// Pin returns the agent definition the session started with, pinning
// current (nil: the policy defines no such agent) when the session has
// none yet. An empty session id has no state.
func (s *Sessions) Pin(k Key, current *Pin, now time.Time) Begun {
	if k.Session == "" {
		return Begun{Pin: current}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(k, current != nil, now)
	if ss == nil {
		return Begun{Refused: true}
	}
	if ss.pin == nil && current != nil {
		ss.pin = current
	}
	s.note(ss)
	return Begun{Pin: ss.pin, Lost: ss.lost}
}

// Record counts one decision of the session (by Decide or a person's
// answer) and reports whether it is at its consecutive cap: a deny adds
// one; an allow resets the count of a session that has never reported a
// result (clients that do not report keep working); an ask changes nothing.
// Any other decision counts as a deny, as it is answered.
func (s *Sessions) Record(k Key, d pb.Decision, max int, now time.Time) (halt bool) {
	if k.Session == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(k, false, now)
	if ss == nil {
		return false
	}
	switch d {
	case pb.Decision_DECISION_ALLOW:
		if !ss.reported {
			ss.denials = 0
		}
	case pb.Decision_DECISION_ASK:
	default:
		ss.denials++
		halt = ss.denials >= max
	}
	s.setHalted(ss, ss.denials >= max)
	s.note(ss)
	return halt
}

// Report counts a reported result — denials and errors share one
// consecutive cap: an error adds one, a success resets.
// It reports whether the session is at its cap.
func (s *Sessions) Report(k Key, isError bool, max int, now time.Time) (halt bool) {
	if k.Session == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(k, false, now)
	if ss == nil {
		return false
	}
	ss.reported = true
	if isError {
		ss.denials++
	} else {
		ss.denials = 0
	}
	halt = ss.denials >= max
	s.setHalted(ss, halt)
	s.note(ss)
	return halt
}

// setHalted moves a session out of reach of eviction while halted, and
// back when its count resets. Callers hold mu.
func (s *Sessions) setHalted(ss *session, halted bool) {
	if ss.halted == halted {
		return
	}
	ss.halted = halted
	b := s.buckets[ss.bucket]
	if halted {
		s.evictable.Remove(ss.ev)
		b.evictable.Remove(ss.bev)
		ss.ev, ss.bev = nil, nil
		return
	}
	ss.ev, ss.bev = s.evictable.PushFront(ss), b.evictable.PushFront(ss)
}

// Remember records a person's approval of exactly the call key, made under
// the policy of epoch, until expires.
func (s *Sessions) Remember(k Key, key RememberKey, epoch string, expires, now time.Time) {
	if k.Session == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.touch(k, false, now)
	if ss == nil {
		return
	}
	defer s.note(ss)
	if ss.remembered == nil {
		ss.remembered = map[RememberKey]remembered{}
	}
	for k, r := range ss.remembered { // expired or of an older policy: gone
		if r.epoch != epoch || !now.Before(r.expires) {
			delete(ss.remembered, k)
			s.charge(ss, -rememberedSize, now)
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
		s.charge(ss, -rememberedSize, now)
	}
	if _, ok := ss.remembered[key]; !ok && !s.charge(ss, rememberedSize, now) {
		return // the store is at the byte bound: the approval is not remembered
	}
	ss.remembered[key] = remembered{epoch: epoch, expires: expires}
}

// Remembered reports whether a person approved exactly the call key in this
// session, under the policy of epoch, and the approval holds now.
func (s *Sessions) Remembered(k Key, key RememberKey, epoch string, now time.Time) bool {
	if k.Session == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.byKey[k]
	if !ok || now.Sub(ss.lastUsed) > s.idle {
		return false
	}
	r, ok := ss.remembered[key]
	return ok && r.epoch == epoch && now.Before(r.expires)
}

// End releases a session. It reports whether there was one.
func (s *Sessions) End(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.buried, keyHash(k)) // ended on purpose: the id may start afresh
	ss, ok := s.byKey[k]
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
	s.expireIdle(now)
}

// expireIdle releases the sessions idle past the timeout, halted or not.
// Callers hold mu.
func (s *Sessions) expireIdle(now time.Time) {
	for e := s.all.Back(); e != nil; e = s.all.Back() {
		ss := e.Value.(*session)
		if now.Sub(ss.lastUsed) <= s.idle {
			return
		}
		s.remove(ss)
	}
}

// touch finds or creates a session and marks it used; nil when a new one
// is refused. defined says whether the policy defines the agent: the
// sessions of undefined agents share one per-agent bound. Callers hold mu.
func (s *Sessions) touch(k Key, defined bool, now time.Time) *session {
	ss, ok := s.byKey[k]
	if ok && now.Sub(ss.lastUsed) > s.idle {
		s.remove(ss) // idle past the timeout: a new session under the old id
		ok = false
	}
	if ok {
		ss.lastUsed = now
		s.all.MoveToFront(ss.all)
		if ss.ev != nil {
			s.evictable.MoveToFront(ss.ev)
			s.buckets[ss.bucket].evictable.MoveToFront(ss.bev)
		}
		return ss
	}
	name := k.Agent
	if !defined {
		name = undefinedBucket
	}
	b := s.buckets[name]
	if b == nil {
		b = &bucket{evictable: list.New()}
	}
	if !s.makeRoom(b, now) {
		s.refused.Inc()
		return nil
	}
	s.buckets[name] = b
	_, lost := s.buried[keyHash(k)]
	ss = &session{key: k, bucket: name, lastUsed: now, lost: lost}
	ss.all, ss.ev, ss.bev = s.all.PushFront(ss), s.evictable.PushFront(ss), b.evictable.PushFront(ss)
	b.n++
	s.byKey[k] = ss
	// Ids are bounded (the gRPC edge refuses longer ones), so a new session
	// fits unless the byte bound is all halted sessions.
	if !s.charge(ss, int64(2*(len(k.Workspace)+len(k.Agent)+len(k.Session))+sessionOverhead), now) {
		s.remove(ss)
		s.refused.Inc()
		return nil
	}
	return ss
}

// makeRoom frees a place for a new session of bucket b, in b and in all:
// the idle past the timeout go first, then the longest idle that are not
// halted. It reports false when every session a full bound counts is
// halted. Callers hold mu.
func (s *Sessions) makeRoom(b *bucket, now time.Time) bool {
	if b.n >= s.maxPerAgent || len(s.byKey) >= s.max {
		s.expireIdle(now)
	}
	for b.n >= s.maxPerAgent {
		e := b.evictable.Back()
		if e == nil {
			return false
		}
		s.bury(e.Value.(*session))
	}
	for len(s.byKey) >= s.max {
		e := s.evictable.Back()
		if e == nil {
			return false
		}
		s.bury(e.Value.(*session))
	}
	return true
}

// restore puts back a session a durable store kept, in order of last use
// (the least recently used first).
func (s *Sessions) restore(ss *session, halted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byKey[ss.key]; ok {
		return
	}
	b := s.buckets[ss.bucket]
	if b == nil {
		b = &bucket{evictable: list.New()}
		s.buckets[ss.bucket] = b
	}
	ss.all = s.all.PushFront(ss)
	if ss.halted = halted; !halted {
		ss.ev, ss.bev = s.evictable.PushFront(ss), b.evictable.PushFront(ss)
	}
	b.n++
	s.byKey[ss.key] = ss
	size := int64(2*(len(ss.key.Workspace)+len(ss.key.Agent)+len(ss.key.Session))+sessionOverhead) + int64(len(ss.remembered))*rememberedSize
	ss.bytes, s.bytes = size, s.bytes+size
}

// note tells a durable store that ss changed. Callers hold mu.
func (s *Sessions) note(ss *session) {
	if s.changed != nil {
		s.changed(ss, false)
	}
}

func (s *Sessions) remove(ss *session) {
	s.all.Remove(ss.all)
	b := s.buckets[ss.bucket]
	if ss.ev != nil {
		s.evictable.Remove(ss.ev)
		b.evictable.Remove(ss.bev)
	}
	if b.n--; b.n == 0 {
		delete(s.buckets, ss.bucket)
	}
	delete(s.byKey, ss.key)
	s.bytes -= ss.bytes
	if s.changed != nil {
		s.changed(ss, true)
	}
}
