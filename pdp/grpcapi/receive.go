package grpcapi

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Bytes are counted before a message is buffered. grpc-go gathers a whole
// request before any codec or interceptor sees it, on every method, so a
// bound there comes too late: 256 callers sending 1 MB each hold 256 MB
// first. The receive gate admits a new stream, before its message is read,
// only while the streams being received could hold no more than
// MaxReceiveBytes at the largest message the server accepts; a stream waits
// for room (holding nothing: its connection's reader waits, so the caller
// is pushed back) and is refused RESOURCE_EXHAUSTED after receiveWait. Its
// room is freed as soon as its request is read, or its stream ends.

// DefaultMaxReceiveBytes bounds the bytes of requests being received at
// once, counted at the largest message size: four 1 MB requests.
const DefaultMaxReceiveBytes = 5 << 20

// receiveWait is how long a new stream waits for room.
const receiveWait = time.Second

type receiveGate struct {
	slots   chan struct{}
	refused prometheus.Counter
}

func newReceiveGate(maxBytes int64, maxMessage int) *receiveGate {
	n := max(1, int(maxBytes/int64(maxMessage)))
	return &receiveGate{slots: make(chan struct{}, n), refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolpdp_receive_refused_total",
		Help: "Calls refused with RESOURCE_EXHAUSTED because more requests were being received than --max-receive-bytes holds.",
	})}
}

// slot is one admitted stream's room, freed once.
type slot struct {
	once sync.Once
	g    *receiveGate
}

func (s *slot) free() { s.once.Do(func() { <-s.g.slots }) }

type slotKey struct{}

// tap admits a new stream (grpc.InTapHandle).
func (g *receiveGate) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(receiveWait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-t.C:
			g.refused.Inc()
			return nil, status.Error(codes.ResourceExhausted, "more requests are being received than the server holds at once (--max-receive-bytes); try again")
		}
	}
	sl := &slot{g: g}
	// Freed when the request is read or the RPC ends, and in any case when
	// the stream is closed: a stream the client abandons before the server
	// handles it reports neither, and its room would be held for ever.
	context.AfterFunc(ctx, sl.free)
	return context.WithValue(ctx, slotKey{}, sl), nil
}

// stats frees a stream's room once its request is read, or it ends.
type receiveStats struct{}

func (receiveStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (receiveStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (receiveStats) HandleConn(context.Context, stats.ConnStats) {}
func (receiveStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InPayload, *stats.End:
		if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
			sl.free()
		}
	}
}
