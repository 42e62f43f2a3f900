package pdp

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxPendingBytes bounds the bytes the asks awaiting Confirm hold.
const DefaultMaxPendingBytes = 8 << 20

// PendingAsk is an ask decision awaiting a person's answer.
type PendingAsk struct {
	DecisionID string
	AgentID    string
	SessionID  string
	ToolName   string
	Message    string
	Created    time.Time
	maxDenials int
	seq        uint64 // order of arrival: what a page token names
}

// size is what an ask costs the store: its strings plus a fixed overhead
// for the struct, its map entry and its place in the order. A field added
// to PendingAsk that can grow with the request must be counted here.
func (a *PendingAsk) size() int64 {
	return int64(len(a.DecisionID)+len(a.AgentID)+len(a.SessionID)+len(a.ToolName)+len(a.Message)) + 256
}

// Pending remembers ask decisions until Confirm answers them, bounded in
// number, in bytes (the oldest go first at either bound) and in age.
type Pending struct {
	mu       sync.Mutex
	asks     map[string]*PendingAsk
	order    []*PendingAsk // arrival order, for the bounds and pages; may hold answered asks
	max      int
	maxBytes int64
	bytes    int64
	ttl      time.Duration
	seq      uint64
	evicted  *prometheus.CounterVec // asks forgotten before an answer, by reason

	// Recent decisions that were not asks, so Confirm can tell "not an ask"
	// (FAILED_PRECONDITION) from "unknown" (NOT_FOUND). A ring of max ids.
	others   map[string]struct{}
	ring     []string
	ringNext int
}

// NewPending keeps at most max asks, each for at most ttl, in at most
// DefaultMaxPendingBytes (see SetMaxBytes).
func NewPending(max int, ttl time.Duration) *Pending {
	return &Pending{asks: map[string]*PendingAsk{}, max: max, maxBytes: DefaultMaxPendingBytes, ttl: ttl,
		others: map[string]struct{}{}, ring: make([]string, 0, max),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_pending_evicted_total",
			Help: "Asks forgotten before anyone answered them: reason entries (--max-pending), bytes (--max-pending-bytes) or expired (--pending-ttl).",
		}, []string{"reason"})}
}

// SetMaxBytes bounds the bytes the held asks take (n <= 0: the default).
// Call it before use.
func (p *Pending) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxPendingBytes
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxBytes = n
}

// Collectors are the store's metrics, for a registry.
func (p *Pending) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.evicted,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_pending", Help: "Asks awaiting Confirm."},
			func() float64 { p.mu.Lock(); defer p.mu.Unlock(); return float64(len(p.asks)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolpdp_pending_bytes", Help: "Bytes the asks awaiting Confirm hold (estimated)."},
			func() float64 { p.mu.Lock(); defer p.mu.Unlock(); return float64(p.bytes) }),
	}
}

// NotAsk records a decision that was not an ask.
func (p *Pending) NotAsk(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ring) < p.max {
		p.ring = append(p.ring, id)
	} else {
		delete(p.others, p.ring[p.ringNext])
		p.ring[p.ringNext] = id
		p.ringNext = (p.ringNext + 1) % p.max
	}
	p.others[id] = struct{}{}
}

// WasNotAsk reports whether id is a recent decision that was not an ask.
func (p *Pending) WasNotAsk(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.others[id]
	return ok
}

// Add records an ask. Expired asks go first; then the oldest, while the
// store is over either bound.
func (p *Pending) Add(a PendingAsk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	a.seq = p.seq
	p.asks[a.DecisionID] = &a
	p.order = append(p.order, &a)
	p.bytes += a.size()
	for len(p.order) > 0 {
		oldest := p.order[0]
		reason := ""
		switch {
		case !p.held(oldest):
		case a.Created.Sub(oldest.Created) > p.ttl:
			reason = "expired"
		case len(p.asks) > p.max:
			reason = "entries"
		case p.bytes > p.maxBytes && oldest != &a:
			reason = "bytes"
		default:
			p.compact()
			return
		}
		p.order[0] = nil
		p.order = p.order[1:]
		if reason != "" {
			p.forget(oldest)
			p.evicted.WithLabelValues(reason).Inc()
		}
	}
}

// held reports whether a is still waiting (not answered or dropped).
func (p *Pending) held(a *PendingAsk) bool { return p.asks[a.DecisionID] == a }

func (p *Pending) forget(a *PendingAsk) {
	delete(p.asks, a.DecisionID)
	p.bytes -= a.size()
}

// compact drops answered asks from the order now and then.
func (p *Pending) compact() {
	if len(p.order) <= 2*len(p.asks)+64 {
		return
	}
	kept := make([]*PendingAsk, 0, len(p.asks))
	for _, a := range p.order {
		if p.held(a) {
			kept = append(kept, a)
		}
	}
	p.order = kept
}

// Take removes and returns the ask with this id, if it is held and fresh.
func (p *Pending) Take(id string, now time.Time) (*PendingAsk, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.asks[id]
	if !ok {
		return nil, false
	}
	p.forget(a)
	return a, now.Sub(a.Created) <= p.ttl
}

// Page returns up to limit asks still waiting, oldest first, that arrived
// after the ask a page token names (after 0: from the first) and belong to
// agentID ("" for all), and the token of the next page (0 on the last).
func (p *Pending) Page(agentID string, after uint64, limit int, now time.Time) ([]PendingAsk, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.order), func(i int) bool { return p.order[i].seq > after })
	var out []PendingAsk
	for ; i < len(p.order); i++ {
		a := p.order[i]
		if !p.held(a) || now.Sub(a.Created) > p.ttl || (agentID != "" && a.AgentID != agentID) {
			continue
		}
		if len(out) == limit {
			return out, out[len(out)-1].seq
		}
		out = append(out, *a)
	}
	return out, 0
}

// DropSession forgets the asks of an ended session.
func (p *Pending) DropSession(agentID, sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.asks {
		if a.AgentID == agentID && a.SessionID == sessionID {
			p.forget(a)
		}
	}
}
