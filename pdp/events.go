package pdp

import (
	"sync"

	"github.com/toolpdp/toolpdp/pdp/session"
)

// An AskEvent tells approver surfaces (the console, notifications) that an
// ask arrived or was answered.
type AskEvent struct {
	Answered bool         // false: a new ask
	Call     session.Call // the ask: for a new one, with its request and response
}

// askListeners are called, in order, with every AskEvent. A listener
// must not block: it is called on the request's path.
type askListeners struct {
	mu sync.RWMutex
	fs []func(AskEvent)
}

// OnAsk registers f to be told of every new ask and every answer. f runs
// on the request's path and must return at once (queue, never wait).
func (e *Engine) OnAsk(f func(AskEvent)) {
	e.asks.mu.Lock()
	defer e.asks.mu.Unlock()
	e.asks.fs = append(e.asks.fs, f)
}

func (e *Engine) tell(ev AskEvent) {
	e.asks.mu.RLock()
	defer e.asks.mu.RUnlock()
	for _, f := range e.asks.fs {
		f(ev)
	}
}
