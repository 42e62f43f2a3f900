package pdp

import (
	"sync"
	"time"
)

// PendingAsk is an ask decision awaiting a person's answer.
type PendingAsk struct {
	Workspace  string // the workspace of the caller that asked; "" when nothing binds callers
	DecisionID string
	AgentID    string
	SessionID  string
	ToolName   string
	Message    string
	Created    time.Time
	maxDenials int
}

// Pending remembers ask decisions until Confirm answers them, bounded in
// number (the oldest go first) and in age.
type Pending struct {
	mu    sync.Mutex
	asks  map[string]*PendingAsk
	order []string // insertion order, for the bound; may hold answered ids
	max   int
	ttl   time.Duration

	// Recent decisions that were not asks, so Confirm can tell "not an ask"
	// (FAILED_PRECONDITION) from "unknown" (NOT_FOUND). A ring of max ids,
	// each with its caller's workspace.
	others   map[string]string
	ring     []string
	ringNext int
}

// NewPending keeps at most max asks, each for at most ttl.
func NewPending(max int, ttl time.Duration) *Pending {
	return &Pending{asks: map[string]*PendingAsk{}, max: max, ttl: ttl, others: map[string]string{}, ring: make([]string, 0, max)}
}

// NotAsk records a decision that was not an ask, made for workspace.
func (p *Pending) NotAsk(id, workspace string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ring) < p.max {
		p.ring = append(p.ring, id)
	} else {
		delete(p.others, p.ring[p.ringNext])
		p.ring[p.ringNext] = id
		p.ringNext = (p.ringNext + 1) % p.max
	}
	p.others[id] = workspace
}

// WasNotAsk reports whether id is a recent decision of workspace that was
// not an ask.
func (p *Pending) WasNotAsk(id, workspace string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws, ok := p.others[id]
	return ok && ws == workspace
}

// Add records an ask.
func (p *Pending) Add(a PendingAsk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.asks) >= p.max && len(p.order) > 0 {
		delete(p.asks, p.order[0])
		p.order = p.order[1:]
	}
	p.asks[a.DecisionID] = &a
	p.order = append(p.order, a.DecisionID)
	if len(p.order) > 2*p.max { // answered ids linger in order; compact now and then
		kept := p.order[:0]
		for _, id := range p.order {
			if _, ok := p.asks[id]; ok {
				kept = append(kept, id)
			}
		}
		p.order = kept
	}
}

// Take removes and returns the ask with this id, if it is held and fresh.
// Another workspace's ask is not there for this caller.
func (p *Pending) Take(id, workspace string, now time.Time) (*PendingAsk, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.asks[id]
	if !ok || a.Workspace != workspace {
		return nil, false
	}
	delete(p.asks, id)
	return a, now.Sub(a.Created) <= p.ttl
}

// List returns workspace's asks still waiting, oldest first.
func (p *Pending) List(workspace string, now time.Time) []PendingAsk {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PendingAsk, 0, len(p.asks))
	for _, id := range p.order {
		if a, ok := p.asks[id]; ok && a.Workspace == workspace && now.Sub(a.Created) <= p.ttl {
			out = append(out, *a)
		}
	}
	return out
}

// DropSession forgets the asks of an ended session.
func (p *Pending) DropSession(workspace, agentID, sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, a := range p.asks {
		if a.Workspace == workspace && a.AgentID == agentID && a.SessionID == sessionID {
			delete(p.asks, id)
		}
	}
}
