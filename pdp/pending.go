package pdp

import (
	"sync"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// PendingAsk is one decided call as Confirm and ReportResult find it: an
// ask awaiting a person's answer, or an answered ask, an allow or a deny
// kept so that a later Confirm or ReportResult gets the right status.
type PendingAsk struct {
	Workspace  string // the workspace of the caller that decided; "" when nothing binds callers
	DecisionID string
	CallID     string // the agent's own id for the call; "" when its Decide carried none
	AgentID    string
	SessionID  string
	ToolName   string
	Message    string
	Created    time.Time
	maxDenials int

	decision pb.Decision // what Decide answered
	answer   pb.Decision // a person's answer to an ask; UNSPECIFIED until Confirm
	reported bool        // ReportResult was called for it

	// For an ask in a session: the key it would be remembered by, and the
	// generation of the snapshot that asked.
	remember   rememberKey
	generation uint64
}

// allowed: the call may run, by Decide or by a person's answer.
func (a *PendingAsk) allowed() bool {
	return a.decision == pb.Decision_DECISION_ALLOW || a.answer == pb.Decision_DECISION_ALLOW
}

// callKey finds a decision by the agent's own call id.
type callKey struct{ workspace, agent, session, callID string }

// Pending remembers decided calls for Confirm and ReportResult: asks
// awaiting an answer (at most max, each for at most ttl) and, apart from
// them, the most recent max other decisions (allows to report on, denials
// and answered asks), so that a flood of allows never pushes out an ask a
// person is looking at. Both are bounded in number, the oldest going first;
// each entry is a fixed set of strings bounded by the request limits.
type Pending struct {
	mu     sync.Mutex
	asks   fifo
	recent fifo
	byCall map[callKey]string // the latest decision with that call id
	ttl    time.Duration
}

// NewPending keeps at most max asks, each for at most ttl, and at most max
// other recent decisions.
func NewPending(max int, ttl time.Duration) *Pending {
	return &Pending{asks: newFIFO(max), recent: newFIFO(max), byCall: map[callKey]string{}, ttl: ttl}
}

// Add records a decided call.
func (p *Pending) Add(a *PendingAsk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.decision == pb.Decision_DECISION_ASK {
		p.forget(p.asks.add(a))
	} else {
		p.forget(p.recent.add(a))
	}
	if a.CallID != "" {
		p.byCall[callKey{a.Workspace, a.AgentID, a.SessionID, a.CallID}] = a.DecisionID
	}
}

// forget drops the call-id entry of an evicted decision.
func (p *Pending) forget(evicted *PendingAsk) {
	if evicted == nil || evicted.CallID == "" {
		return
	}
	k := callKey{evicted.Workspace, evicted.AgentID, evicted.SessionID, evicted.CallID}
	if p.byCall[k] == evicted.DecisionID {
		delete(p.byCall, k)
	}
}

// ByCallID is the decision id of workspace's latest Decide with that call
// id in that session, or "".
func (p *Pending) ByCallID(workspace, agentID, sessionID, callID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byCall[callKey{workspace, agentID, sessionID, callID}]
}

// lookup is how a search by decision id ended: Confirm and ReportResult
// tell these apart from a decision in the wrong state.
type lookup int

const (
	found lookup = iota
	notFound
	expired
)

// Answer records a person's answer to workspace's ask id. It returns the
// decision, the lookup's outcome and whether this call answered it; a
// found decision that is not an unanswered ask is returned unchanged for
// the caller to explain.
func (p *Pending) Answer(id, workspace string, answer pb.Decision, now time.Time) (*PendingAsk, lookup, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.asks.get(id); a != nil && a.Workspace == workspace {
		p.asks.remove(id)
		if now.Sub(a.Created) > p.ttl {
			p.forget(a)
			return nil, expired, false
		}
		a.answer = answer
		p.forget(p.recent.add(a))
		return a, found, true
	}
	if a := p.recent.get(id); a != nil && a.Workspace == workspace {
		return a, found, false
	}
	return nil, notFound, false
}

// Report marks workspace's allowed call id as reported. It returns the
// decision with the lookup's outcome and whether this call marked it; a
// decision that was not allowed or was reported before is not marked.
func (p *Pending) Report(id, workspace string) (*PendingAsk, lookup, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.asks.get(id); a != nil && a.Workspace == workspace {
		return a, found, false // still awaiting a person: not allowed
	}
	a := p.recent.get(id)
	if a == nil || a.Workspace != workspace {
		return nil, notFound, false
	}
	if !a.allowed() || a.reported {
		return a, found, false
	}
	a.reported = true
	return a, found, true
}

// List returns workspace's asks still waiting, oldest first.
func (p *Pending) List(workspace string, now time.Time) []PendingAsk {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PendingAsk, 0, len(p.asks.m))
	for _, id := range p.asks.order {
		if a, ok := p.asks.m[id]; ok && a.Workspace == workspace && now.Sub(a.Created) <= p.ttl {
			out = append(out, *a)
		}
	}
	return out
}

// DropSession forgets the decisions of an ended session.
func (p *Pending) DropSession(workspace, agentID, sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range []*fifo{&p.asks, &p.recent} {
		for id, a := range f.m {
			if a.Workspace == workspace && a.AgentID == agentID && a.SessionID == sessionID {
				f.remove(id)
				p.forget(a)
			}
		}
	}
}

// fifo is a map bounded in entries, the oldest evicted first.
type fifo struct {
	m     map[string]*PendingAsk
	order []string // insertion order; may hold removed ids until compacted
	max   int
}

func newFIFO(max int) fifo { return fifo{m: map[string]*PendingAsk{}, max: max} }

func (f *fifo) get(id string) *PendingAsk { return f.m[id] }

func (f *fifo) remove(id string) { delete(f.m, id) }

// add inserts a, evicting and returning the oldest entry at the bound.
func (f *fifo) add(a *PendingAsk) (evicted *PendingAsk) {
	for len(f.m) >= f.max && len(f.order) > 0 {
		id := f.order[0]
		f.order = f.order[1:]
		if old, ok := f.m[id]; ok {
			delete(f.m, id)
			evicted = old
		}
	}
	f.m[a.DecisionID] = a
	f.order = append(f.order, a.DecisionID)
	if len(f.order) > 2*f.max { // removed ids linger in order; compact now and then
		kept := f.order[:0]
		for _, id := range f.order {
			if _, ok := f.m[id]; ok {
				kept = append(kept, id)
			}
		}
		f.order = kept
	}
	return evicted
}
