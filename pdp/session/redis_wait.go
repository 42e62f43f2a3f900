package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// waiters wakes the waits on asks when any replica answers one: one
// subscription per process to the channel every answer is published on.
// Pub/sub alone loses what is published while a connection is down, so a
// wait subscribes, then reads the ask, then keeps reading it now and then
// while it waits.
type waiters struct {
	ps   *redis.PubSub
	mu   sync.Mutex
	byID map[string]map[chan struct{}]struct{}
	done chan struct{}
}

// waitPoll is how often a wait reads its ask again, in case a wake-up was
// lost: an answer reaches a waiter within this at worst.
const waitPoll = 250 * time.Millisecond

// readBound is the longest one read of a wait may take.
const readBound = 5 * time.Second

func newWaiters(client *redis.Client, channel string) *waiters {
	w := &waiters{ps: client.Subscribe(context.Background(), channel), byID: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for m := range w.ps.Channel() {
			w.mu.Lock()
			for ch := range w.byID[m.Payload] {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *waiters) add(id string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.byID[id] == nil {
		w.byID[id] = map[chan struct{}]struct{}{}
	}
	w.byID[id][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.byID[id], ch)
		if len(w.byID[id]) == 0 {
			delete(w.byID, id)
		}
		w.mu.Unlock()
	}
}

func (w *waiters) close() {
	_ = w.ps.Close()
	<-w.done
}

// Get is workspace's decision id as it stands now, and the lookup's
// outcome: an unanswered ask past its ttl is Expired.
func (r *Redis) Get(ctx context.Context, id, workspace string, now time.Time) (Call, Lookup, error) {
	c, f, err := r.get(ctx, id)
	if err != nil {
		return Call{}, NotFound, err
	}
	if c == nil || c.Workspace != workspace {
		return Call{}, NotFound, nil
	}
	if c.Expired || (f["q"] == "asks" && now.Sub(c.Created) > r.b.PendingTTL) {
		return *c, Expired, nil
	}
	return *c, Found, nil
}

// Wait waits until workspace's decision id is settled — an ask answered
// on any replica, expired or forgotten — or ctx ends, and returns it as it
// then stands.
func (r *Redis) Wait(ctx context.Context, id, workspace string, now func() time.Time) (Call, Lookup, error) {
	woken, done := r.waiters.add(id) // subscribed before the first read
	defer done()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		// Each read has its own bound, not the wait's: the wait ending
		// (even at once, for a wait of 0) is no reason to fail the read
		// that tells how the ask stands.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBound)
		c, found, err := r.Get(rctx, id, workspace, now())
		cancel()
		// A read that fails while there is time left to wait is tried
		// again at the next tick: a store that stalls for a moment does
		// not end a wait; one still failing when the wait ends does.
		if err != nil && (ctx.Err() != nil || errors.Is(err, ErrStateLost)) {
			return c, found, err
		}
		if err == nil && (found != Found || c.Decision != pb.Decision_DECISION_ASK || c.Answer != pb.Decision_DECISION_UNSPECIFIED) {
			return c, found, nil
		}
		select {
		case <-woken:
		case <-tick.C:
		case <-ctx.Done():
			if err != nil {
				return Call{}, NotFound, err
			}
			return c, Found, nil
		}
	}
}
