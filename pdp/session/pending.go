package session

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DefaultMaxPendingBytes bounds the bytes the asks awaiting Confirm hold, and
// separately those of the other recent decisions.
const DefaultMaxPendingBytes = 8 << 20

// Call is one decided call as Confirm and ReportResult find it: an ask
// awaiting a person's answer, or an answered ask, an allow or a deny kept
// so that a later Confirm or ReportResult gets the right status.
type Call struct {
	Workspace  string // the workspace of the caller that decided; "" when nothing binds callers
	DecisionID string
	CallID     string // the agent's own id for the call; "" when its Decide carried none
	AgentID    string
	SessionID  string
	ToolName   string
	Message    string
	Created    time.Time
	MaxDenials int // the session's consecutive cap, of the definition that decided

	Decision pb.Decision // what Decide answered
	// Uncounted: neither the decision nor its answer counts toward the
	// session's consecutive cap (a confined run's connection: the run's
	// own command was counted already).
	Uncounted bool
	Answer    pb.Decision // a person's answer to an ask; UNSPECIFIED until Confirm
	reported  bool        // ReportResult was called for it

	// An ask keeps its request and response, encoded (a decoded request
	// costs many times its wire size): what a person is shown, and what
	// Confirm decides again. Both are dropped once it is answered.
	Request  []byte // the DecideRequest
	Response []byte // the DecideResponse (reasons, message)

	// What an answered ask ended as, for the agent's AwaitDecision.
	AnswerMessage string // a deny's message: the person's deny_message, or why the policy turned an allow into a deny
	Execution     []byte // an allow's Execution, encoded, as Decide would have returned it
	Halt          bool   // the answer brought the session to its consecutive cap
	AnsweredBy    string // who answered: a token's name, a certificate's subject, a console user
	Expired       bool   // nobody answered within the ttl: a deny

	done chan struct{} // an ask's: closed when it is answered, expires or is forgotten

	// For an ask in a session: the key it would be remembered by, and the
	// epoch of the policy that asked.
	Remember RememberKey
	Epoch    string

	// Signature is a digest of what the call is (CallSignature): two
	// decisions with one call id and different signatures are two calls,
	// with or without a session.
	Signature CallSig

	seq uint64 // order of arrival: what a page token names
}

// size is what an entry costs the store: its strings plus a fixed overhead
// for the struct, its map entry and its place in the order. A field added
// to Call that can grow with the request must be counted here.
func (a *Call) size() int64 {
	return int64(len(a.Workspace)+len(a.DecisionID)+len(a.CallID)+len(a.AgentID)+len(a.SessionID)+len(a.ToolName)+len(a.Message)+
		len(a.Request)+len(a.Response)+len(a.AnswerMessage)+len(a.Execution)+len(a.AnsweredBy)+len(a.Epoch)) + 320
}

// countedAs is how the decision d of c counts in its session: as itself,
// or as an ask (nothing) when c is uncounted.
func (a *Call) countedAs(d pb.Decision) pb.Decision {
	if a.Uncounted {
		return pb.Decision_DECISION_ASK
	}
	return d
}

// settled reports whether an ask's wait is over: answered or expired, or
// a decision that was never an ask.
func (a *Call) settled() bool {
	return a.Decision != pb.Decision_DECISION_ASK || a.Answer != pb.Decision_DECISION_UNSPECIFIED || a.Expired
}

// wake ends the waits on an ask; once.
func (a *Call) wake() {
	if a.done != nil {
		select {
		case <-a.done:
		default:
			close(a.done)
		}
	}
}

// leave is what becomes of an ask that moves out of the asks store
// unanswered or answered: its wait ends and it stops holding its request.
func (a *Call) leave() {
	a.Request, a.Response = nil, nil
	a.wake()
}

// Allowed: the call may run, by Decide or by a person's answer.
func (a *Call) Allowed() bool {
	return a.Decision == pb.Decision_DECISION_ALLOW || a.Answer == pb.Decision_DECISION_ALLOW
}

// callKey finds a decision by the agent's own call id.
type callKey struct{ workspace, agent, session, callID string }

// Pending remembers decided calls for Confirm and ReportResult: asks
// awaiting an answer (each for at most ttl) and, apart from them, the most
// recent other decisions (allows to report on, denials and answered asks),
// so that a flood of allows never pushes out an ask a person is looking at.
// Both are bounded in number and in bytes, the oldest going first.
type Pending struct {
	mu      sync.Mutex
	asks    fifo
	recent  fifo
	byCall  map[callKey]*callRef // the latest decision with that call id
	ttl     time.Duration
	seq     uint64
	evicted *prometheus.CounterVec // entries forgotten at a bound, by store and reason

	// changed, when set, learns of every change to a decided call (gone:
	// it was forgotten) under the store's lock, in order: a durable store
	// writes them through.
	changed func(a *Call, gone bool)
}

// note tells a durable store that a changed. Callers hold mu.
func (p *Pending) note(a *Call, gone bool) {
	if p.changed != nil {
		p.changed(a, gone)
	}
}

// NewPending keeps at most max asks, each for at most ttl, and at most max
// other recent decisions, each store in at most DefaultMaxPendingBytes (see
// SetMaxBytes).
func NewPending(max int, ttl time.Duration) *Pending {
	return &Pending{asks: newFIFO(max), recent: newFIFO(max), byCall: map[callKey]*callRef{}, ttl: ttl,
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_pending_evicted_total",
			Help: "Decided calls forgotten at a bound: store asks (awaiting an answer) or recent (others), reason entries (--max-pending), bytes (--max-pending-bytes) or expired (--pending-ttl).",
		}, []string{"store", "reason"})}
}

// SetMaxBytes bounds the bytes each store takes (n <= 0: the default).
// Call it before use.
func (p *Pending) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxPendingBytes
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asks.maxBytes, p.recent.maxBytes = n, n
}

// Collectors are the store's metrics, for a registry.
func (p *Pending) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.evicted,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_pending", Help: "Asks awaiting Confirm."},
			func() float64 { p.mu.Lock(); defer p.mu.Unlock(); return float64(len(p.asks.m)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_pending_bytes", Help: "Bytes the decided calls held for Confirm and ReportResult take (estimated)."},
			func() float64 { p.mu.Lock(); defer p.mu.Unlock(); return float64(p.asks.bytes + p.recent.bytes) }),
	}
}

// Add records a decided call. Expired asks go first; then the oldest of a
// store while it is over either bound.
func (p *Pending) Add(a *Call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	a.seq = p.seq
	if a.Decision == pb.Decision_DECISION_ASK {
		a.done = make(chan struct{})
		p.expire(a.Created)
		p.asks.add(a, p.evict("asks"))
	} else {
		p.recent.add(a, p.evict("recent"))
	}
	p.index(a)
	p.note(a, false)
}

// restore puts back a decided call a durable store kept, where it was:
// an unanswered ask among the asks (past its ttl: expired, among the
// recent decisions), any other among the recent decisions.
func (p *Pending) restore(a *Call, now time.Time) {
	waiting := a.Decision == pb.Decision_DECISION_ASK && a.Answer == pb.Decision_DECISION_UNSPECIFIED && !a.Expired
	if waiting && now.Sub(a.Created) > p.ttl {
		waiting, a.Expired = false, true
		a.leave()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	a.seq = p.seq
	if waiting {
		a.done = make(chan struct{})
		p.asks.add(a, p.evict("asks"))
	} else {
		p.recent.add(a, p.evict("recent"))
	}
	p.index(a)
}

// index notes a's call id. Callers hold mu.
func (p *Pending) index(a *Call) {
	if a.CallID != "" {
		k := callKey{a.Workspace, a.AgentID, a.SessionID, a.CallID}
		sig := a.Signature
		ref := p.byCall[k]
		if ref == nil {
			ref = &callRef{sig: sig}
			p.byCall[k] = ref
		}
		ref.conflict = ref.conflict || ref.sig != sig
		ref.id, ref.held, ref.sig = a.DecisionID, ref.held+1, sig
	}
}

// callRef is the latest decision with a call id, how many decisions held
// here carry that id, and whether they were different calls (another tool
// or other arguments): a retried call may reuse its id, another call may
// not take it over.
type callRef struct {
	id       string
	held     int
	sig      CallSig
	conflict bool
}

// expire drops the asks older than the ttl from the front of the order.
func (p *Pending) expire(now time.Time) {
	for len(p.asks.order) > 0 {
		oldest := p.asks.order[0]
		if p.asks.held(oldest) && now.Sub(oldest.Created) <= p.ttl {
			return
		}
		p.asks.order[0] = nil
		p.asks.order = p.asks.order[1:]
		if p.asks.held(oldest) {
			p.asks.remove(oldest.DecisionID)
			p.evicted.WithLabelValues("asks", "expired").Inc()
			// Kept among the recent decisions, so that a waiting agent
			// learns it expired rather than that it never existed.
			oldest.Expired = true
			oldest.leave()
			p.recent.add(oldest, p.evict("recent"))
			p.note(oldest, false)
		}
	}
}

// evict is what happens to an entry a store drops at a bound.
func (p *Pending) evict(store string) func(*Call, string) {
	return func(a *Call, reason string) {
		a.leave()
		p.forget(a)
		p.evicted.WithLabelValues(store, reason).Inc()
		p.note(a, true)
	}
}

// forget drops the call-id entry of an evicted decision.
func (p *Pending) forget(evicted *Call) {
	if evicted == nil || evicted.CallID == "" {
		return
	}
	k := callKey{evicted.Workspace, evicted.AgentID, evicted.SessionID, evicted.CallID}
	if ref := p.byCall[k]; ref != nil {
		if ref.held--; ref.held <= 0 {
			delete(p.byCall, k)
		}
	}
}

// ByCallID is the decision id of workspace's Decide with that call id in
// that session ("" for none); ambiguous when the agent sent that call id
// with more than one decision still held: a person answering "the call
// toolu_01" must not approve another call that reused its id.
func (p *Pending) ByCallID(workspace, agentID, sessionID, callID string) (id string, ambiguous bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ref := p.byCall[callKey{workspace, agentID, sessionID, callID}]
	if ref == nil {
		return "", false
	}
	return ref.id, ref.held > 1 && ref.conflict
}

// Lookup is how a search by decision id ended: Confirm and ReportResult
// tell these apart from a decision in the wrong state.
type Lookup int

const (
	Found Lookup = iota
	NotFound
	Expired
)

// Get is workspace's decision id as it stands now (a copy), and the
// lookup's outcome: an ask past its ttl is Expired.
func (p *Pending) Get(id, workspace string, now time.Time) (Call, Lookup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, found := p.lookup(id, workspace, now)
	if a == nil {
		return Call{}, found
	}
	return *a, found
}

// lookup finds workspace's decision id; an unanswered ask past its ttl
// is Expired (it stays where it is until the next Add moves it).
func (p *Pending) lookup(id, workspace string, now time.Time) (*Call, Lookup) {
	if a := p.asks.get(id); a != nil && a.Workspace == workspace {
		if now.Sub(a.Created) > p.ttl {
			return a, Expired
		}
		return a, Found
	}
	if a := p.recent.get(id); a != nil && a.Workspace == workspace {
		if a.Expired {
			return a, Expired
		}
		return a, Found
	}
	return nil, NotFound
}

// Answer records a person's answer to workspace's ask id: answer sets the
// call's Answer (and what goes with it: AnswerMessage, Execution, Halt,
// AnsweredBy) under the store's lock, so the ask is answered once; then
// its waiters wake. It returns the decision, the lookup's outcome and
// whether this call answered it; a found decision that is not an
// unanswered ask is returned unchanged for the caller to explain.
func (p *Pending) Answer(id, workspace string, answer func(*Call), now time.Time) (*Call, Lookup, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.asks.get(id); a != nil && a.Workspace == workspace {
		if now.Sub(a.Created) > p.ttl {
			return nil, Expired, false
		}
		p.asks.remove(id)
		answer(a)
		a.leave()
		p.recent.add(a, p.evict("recent"))
		p.note(a, false)
		return a, Found, true
	}
	if a := p.recent.get(id); a != nil && a.Workspace == workspace {
		if a.Expired {
			return nil, Expired, false
		}
		return a, Found, false
	}
	return nil, NotFound, false
}

// Wait waits until workspace's decision id is settled — an ask answered,
// expired or forgotten at a bound — or ctx ends, and returns it as it
// then stands (a copy) with the lookup's outcome. A decision that was not
// an ask, and one already settled, return at once. now is the clock the
// ttl is measured by.
func (p *Pending) Wait(ctx context.Context, id, workspace string, now func() time.Time) (Call, Lookup) {
	for {
		p.mu.Lock()
		a, found := p.lookup(id, workspace, now())
		if a == nil || found != Found || a.settled() {
			var c Call
			if a != nil {
				c = *a
			}
			p.mu.Unlock()
			return c, found
		}
		c, done, left := *a, a.done, p.ttl-now().Sub(a.Created)
		p.mu.Unlock()
		expiry := time.NewTimer(left + time.Millisecond)
		select {
		case <-done:
		case <-expiry.C:
		case <-ctx.Done():
			expiry.Stop()
			return c, Found
		}
		expiry.Stop()
	}
}

// Report marks workspace's allowed call id as reported. It returns the
// decision with the lookup's outcome and whether this call marked it; a
// decision that was not allowed or was reported before is not marked.
func (p *Pending) Report(id, workspace string) (*Call, Lookup, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.asks.get(id); a != nil && a.Workspace == workspace {
		return a, Found, false // still awaiting a person: not allowed
	}
	a := p.recent.get(id)
	if a == nil || a.Workspace != workspace {
		return nil, NotFound, false
	}
	if !a.Allowed() || a.reported {
		return a, Found, false
	}
	a.reported = true
	p.note(a, false)
	return a, Found, true
}

// Page returns up to limit of workspace's asks still waiting, oldest first,
// that arrived after the ask a page token names (after 0: from the first)
// and belong to agentID ("" for all), and the token of the next page (0 on
// the last).
func (p *Pending) Page(workspace, agentID string, after uint64, limit int, now time.Time) ([]Call, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	order := p.asks.order
	i := sort.Search(len(order), func(i int) bool { return order[i].seq > after })
	var out []Call
	for ; i < len(order); i++ {
		a := order[i]
		if !p.asks.held(a) || a.Workspace != workspace || now.Sub(a.Created) > p.ttl || (agentID != "" && a.AgentID != agentID) {
			continue
		}
		if len(out) == limit {
			return out, out[len(out)-1].seq
		}
		out = append(out, *a)
	}
	return out, 0
}

// DropSession forgets the decisions of an ended session.
func (p *Pending) DropSession(workspace, agentID, sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range []*fifo{&p.asks, &p.recent} {
		for id, a := range f.m {
			if a.Workspace == workspace && a.AgentID == agentID && a.SessionID == sessionID {
				f.remove(id)
				a.leave()
				p.forget(a)
				p.note(a, true)
			}
		}
	}
}

// fifo is a map bounded in entries and bytes, the oldest evicted first.
type fifo struct {
	m        map[string]*Call
	order    []*Call // arrival order (seq ascending); may hold removed entries until compacted
	max      int
	maxBytes int64
	bytes    int64
}

func newFIFO(max int) fifo {
	return fifo{m: map[string]*Call{}, max: max, maxBytes: DefaultMaxPendingBytes}
}

func (f *fifo) get(id string) *Call { return f.m[id] }

// held reports whether a is still in the store (not removed or replaced).
func (f *fifo) held(a *Call) bool { return f.m[a.DecisionID] == a }

func (f *fifo) remove(id string) {
	if a, ok := f.m[id]; ok {
		delete(f.m, id)
		f.bytes -= a.size()
	}
}

// add inserts a, then evicts the oldest entries while the store is over
// either bound (the one just added stays, however large).
func (f *fifo) add(a *Call, evicted func(*Call, string)) {
	f.remove(a.DecisionID)
	f.m[a.DecisionID] = a
	f.order = append(f.order, a)
	f.bytes += a.size()
	for len(f.order) > 1 && (len(f.m) > f.max || f.bytes > f.maxBytes) {
		old := f.order[0]
		f.order[0] = nil
		f.order = f.order[1:]
		if !f.held(old) {
			continue
		}
		reason := "bytes"
		if len(f.m) > f.max {
			reason = "entries"
		}
		f.remove(old.DecisionID)
		evicted(old, reason)
	}
	if len(f.order) > 2*len(f.m)+64 { // removed entries linger in order; compact now and then
		kept := make([]*Call, 0, len(f.m))
		for _, e := range f.order {
			if f.held(e) {
				kept = append(kept, e)
			}
		}
		f.order = kept
	}
}

// Seq is the call's place in the order of arrival: what a page token names.
func (a *Call) Seq() uint64 { return a.seq }

// Recent is up to limit of the decisions held for workspace's session,
// newest first (copies, without their requests): what a person answering
// an ask sees of the session beside it.
func (p *Pending) Recent(workspace, agentID, sessionID string, limit int) []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Call
	for _, f := range []*fifo{&p.recent, &p.asks} {
		for _, a := range f.m {
			if a.Workspace == workspace && a.AgentID == agentID && a.SessionID == sessionID {
				c := *a
				c.Request, c.Response, c.done = nil, nil, nil
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
