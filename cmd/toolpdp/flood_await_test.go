package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Thousands of agents waiting for people, on connections of their own (a
// connection carries at most 100 calls at once): each waiter holds a
// stream, not its request, and counts against --max-waiters, so the server
// stays under the shipped memory limit, refuses the waiters past the bound
// with RESOURCE_EXHAUSTED, and still decides while they wait. The waiters
// wait longer than the test needs and are let go once it has looked, so
// however slowly they arrive none is done before the last one is counted.
func TestFloodOfWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a server process")
	}
	limit := manifestMemoryLimit(t)
	const waiters, bound = 3000, 2000
	sock := t.TempDir() + "/s.sock"
	p := start(t, "serve", "--bundle", testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"default": {}}`,
		"guardrails/data.json": `{"ask_commands": ["git push"]}`}), "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off",
		"--max-waiters", "2000")
	f := &flood{p: p, conn: dialUnix(t, sock)}
	waitServing(t, f.conn, p)
	agent := pb.NewDecisionServiceClient(f.conn)
	ask, err := agent.Decide(context.Background(), &pb.DecideRequest{SessionId: "s", ToolName: "Bash", Args: mustStruct(map[string]any{"command": "git push"})})
	if err != nil || ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Decide: %v %v", ask, err)
	}
	var exhausted, held, other atomic.Int64
	var wg sync.WaitGroup
	release, letGo := context.WithCancel(context.Background())
	defer letGo()
	conns := make([]pb.DecisionServiceClient, waiters/100)
	for i := range conns {
		conns[i] = pb.NewDecisionServiceClient(dialUnix(t, sock))
	}
	for i := range waiters {
		agent := conns[i%len(conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(release, floodHangGuard)
			defer cancel()
			r, err := agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId, WaitSeconds: 60})
			for err == nil && r.State == pb.AskState_ASK_STATE_PENDING { // the longest one call waits: wait again, as agents do
				r, err = agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId, WaitSeconds: 60})
			}
			switch {
			case grpcstatus.Code(err) == codes.ResourceExhausted:
				exhausted.Add(1)
			case grpcstatus.Code(err) == codes.Canceled && release.Err() != nil:
				held.Add(1) // waited until the test let it go
			default:
				other.Add(1)
			}
		}()
	}
	// Every waiter past the bound is refused at once, so once waiters-bound
	// are refused the bound is full and the rest are waiting.
	deadline := time.Now().Add(floodHangGuard)
	for exhausted.Load()+other.Load() < waiters-bound {
		if time.Now().After(deadline) {
			t.Fatalf("%d refused, %d other after %v: the server hangs\n%s", exhausted.Load(), other.Load(), floodHangGuard, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.conn = dialUnix(t, sock) // another agent's
	f.plainDecideAnswers(t)
	peak := f.sample()
	letGo()
	wg.Wait()
	if peak = max(peak, f.sample()); peak >= limit {
		t.Errorf("peak RSS %d bytes with %d waiting, over the shipped limit of %d", peak, waiters, limit)
	}
	t.Logf("%d waiters: %d waited, %d refused (RESOURCE_EXHAUSTED), %d other; peak RSS %.1f MiB", waiters, held.Load(), exhausted.Load(), other.Load(), float64(peak)/(1<<20))
	if exhausted.Load() != waiters-bound || held.Load() != bound || other.Load() > 0 {
		t.Errorf("want %d waiting and the rest refused: %d waited, %d refused, %d other", bound, held.Load(), exhausted.Load(), other.Load())
	}
}
