package grpcapi

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxWaiters bounds the AwaitDecision calls waiting at once. A
// waiter holds a stream and a goroutine, not its request: thousands cost
// a few MiB.
const DefaultMaxWaiters = 10000

// waiters counts the AwaitDecision calls waiting, up to a bound of their
// own, so that agents waiting for people never crowd out decisions.
type waiters struct {
	n       atomic.Int64
	max     int64
	refused prometheus.Counter
}

func newWaiters(max int) *waiters {
	if max <= 0 {
		max = DefaultMaxWaiters
	}
	return &waiters{max: int64(max), refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolpdp_await_refused_total",
		Help: "AwaitDecision calls refused with RESOURCE_EXHAUSTED because --max-waiters were waiting already.",
	})}
}

func (w *waiters) enter() bool {
	if w.n.Add(1) > w.max {
		w.n.Add(-1)
		w.refused.Inc()
		return false
	}
	return true
}

func (w *waiters) leave() { w.n.Add(-1) }

func (w *waiters) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_await_waiting",
		Help: "AwaitDecision calls waiting for a person's answer (bounded by --max-waiters).",
	}, func() float64 { return float64(w.n.Load()) })}
}
