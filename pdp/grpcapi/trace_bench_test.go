package grpcapi_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
)

// BenchmarkGRPCTrace replays the shared agent-sessions trace over a unix
// socket, 8 calls in flight, each iteration one Decide; a fresh server per
// pass of the trace (as the trace harness starts a fresh process).
func BenchmarkGRPCTrace(b *testing.B) {
	bdir, reqs := testkit.ReplayOrSkip(b, "../../../shared/traces/agent-sessions.json")
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(reqs) {
		b.StopTimer()
		ts := startServer(b, grpcapitest.Options{Unix: true, Bundles: []string{bdir}, LogLevel: slog.LevelWarn}) // as serve logs by default
		b.StartTimer()
		n := min(len(reqs), b.N-done)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					if _, err := ts.Client.Decide(context.Background(), reqs[i]); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		ts.Close()
		b.StartTimer()
	}
}
