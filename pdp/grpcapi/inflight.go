package grpcapi

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxInflightBytes bounds the encoded bytes of the Decide requests
// being decoded and decided at once. A request of 1 MB of args takes about
// 25 MB while it is decided (decoded args, the policy's input, evaluation):
// this bound, not the number of callers, decides how many run together.
const DefaultMaxInflightBytes = 2 << 20

// inflightWait is how long a request waits for room before it is refused
// with RESOURCE_EXHAUSTED. It waits holding only its encoded bytes.
const inflightWait = 5 * time.Second

// byteGate admits requests while the bytes admitted stay under a bound. A
// request larger than the bound is admitted alone.
type byteGate struct {
	mu      sync.Mutex
	free    int64
	max     int64
	wake    chan struct{} // closed, and replaced, whenever bytes are released
	held    sync.Map      // request message -> bytes it holds
	refused prometheus.Counter
}

func newByteGate(max int64) *byteGate {
	if max <= 0 {
		max = DefaultMaxInflightBytes
	}
	return &byteGate{free: max, max: max, wake: make(chan struct{}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_inflight_refused_total",
			Help: "Decide requests refused with RESOURCE_EXHAUSTED after waiting for room under --max-inflight-bytes.",
		})}
}

// admit waits until n bytes are free, for at most wait, and holds them for
// m until release(m). It reports false when there was no room in time.
func (g *byteGate) admit(m proto.Message, n int64, wait time.Duration) bool {
	n = min(n, g.max)
	var timeout <-chan time.Time
	for {
		g.mu.Lock()
		if g.free >= n {
			g.free -= n
			g.mu.Unlock()
			g.held.Store(m, n)
			return true
		}
		wake := g.wake
		g.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wake:
		case <-timeout:
			g.refused.Inc()
			return false
		}
	}
}

// release frees what m holds, if anything.
func (g *byteGate) release(m any) {
	v, ok := g.held.LoadAndDelete(m)
	if !ok {
		return
	}
	g.mu.Lock()
	g.free += v.(int64)
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

func (g *byteGate) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolpdp_inflight_bytes",
		Help: "Encoded bytes of the Decide requests being decided (bounded by --max-inflight-bytes).",
	}, func() float64 { g.mu.Lock(); defer g.mu.Unlock(); return float64(g.max - g.free) })}
}
