package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// killAsks is how many asks each run of the file kill test makes: 300
// with TOOLPDP_TEST_KILL_ASKS=300 (the full figure), fewer by default to
// keep the test's time modest.
func killAsks(t *testing.T) int {
	if v := os.Getenv("TOOLPDP_TEST_KILL_ASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 50 {
			t.Fatalf("TOOLPDP_TEST_KILL_ASKS=%q: a number of asks, at least 50", v)
		}
		return n
	}
	return 120
}

// told is what somebody outside the server was told of an ask: by its
// waiter's AwaitDecision or by the Confirm that answered it.
type told struct {
	decision pb.Decision
	by       string
}

// A file store answers nobody before the answer is on disk: asks with a
// waiter each, a burst of Confirms (allow and deny), kill -9 once 40
// answers have been heard, restart — every answer a waiter or a Confirm
// heard is the answer the store holds, none of them is pending again, and
// none can be answered a second time. Five runs.
func TestFileStoreAnswerDurableBeforeHeard(t *testing.T) {
	asks := killAsks(t)
	const runs, killAt = 5, 40
	lost := 0
	for run := range runs {
		lost += fileKillRun(t, run, asks, killAt)
	}
	t.Logf("file kill: %d answers lost or flipped in %d runs (%d asks each)", lost, runs, asks)
	if lost != 0 {
		t.Fatalf("%d answers lost or flipped", lost)
	}
}

func fileKillRun(t *testing.T, run, asks, killAt int) (lost int) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	state := "file:" + filepath.Join(dir, "state.db")
	run1, run2 := filepath.Join(dir, "run1"), filepath.Join(dir, "run2")
	for _, d := range []string{run1, run2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, run1, bundle, state, "--eval-timeout", "10s")
	agents := []pb.DecisionServiceClient{r.agent}
	for range 3 {
		agents = append(agents, pb.NewDecisionServiceClient(dialUnix(t, filepath.Join(run1, "agent.sock"))))
	}
	ids := make([]string, asks)
	for i := range asks {
		resp := r.decide(t, fmt.Sprint("s", i%10), "bash")
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("run %d: ask %d: %s %v", run, i, resp.Decision, resp.Reasons)
		}
		ids[i] = resp.DecisionId
	}
	want := func(i int) pb.Decision { // what the person answers
		if i%2 == 0 {
			return pb.Decision_DECISION_ALLOW
		}
		return pb.Decision_DECISION_DENY
	}

	var mu sync.Mutex
	heard := map[string]told{}
	heardCount := 0
	enough := make(chan struct{})
	hear := func(id string, d pb.Decision, by string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := heard[id]; ok && prev.decision != d {
			t.Errorf("run %d: %s heard %s by %s and %s by %s", run, id, prev.decision, prev.by, d, by)
		}
		if _, ok := heard[id]; ok {
			return
		}
		heard[id] = told{d, by}
		if heardCount++; heardCount == killAt {
			close(enough)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	started := make(chan struct{}, asks)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			resp, err := agents[i%len(agents)].AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: 30})
			if err == nil && resp.State == pb.AskState_ASK_STATE_ANSWERED {
				hear(id, resp.Decision, "waiter")
			}
		}()
	}
	for range ids {
		<-started
	}
	time.Sleep(200 * time.Millisecond) // the waiters are waiting
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ids); i += 16 {
				if ctx.Err() != nil {
					return
				}
				req := &pb.ConfirmRequest{DecisionId: ids[i], Result: "allow"}
				if want(i) == pb.Decision_DECISION_DENY {
					req.Result, req.DenyMessage = "deny", "no"
				}
				resp, err := r.approver.Confirm(ctx, req)
				if err == nil {
					hear(ids[i], resp.Decision, "confirm")
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatalf("run %d: %d answers heard in 30s\n%s", run, heardCount, r.p.stderr.String())
	}
	r.kill9(t)
	cancel()
	wg.Wait()

	r = startReplica(t, run2, bundle, state, "--eval-timeout", "10s")
	mu.Lock()
	defer mu.Unlock()
	answered, pending := 0, 0
	for i, id := range ids {
		st, err := r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: id})
		if err != nil {
			t.Fatalf("run %d: AwaitDecision{0} of %s after the restart: %v", run, id, err)
		}
		h, wasHeard := heard[id]
		switch {
		case st.State == pb.AskState_ASK_STATE_ANSWERED:
			answered++
			if st.Decision != want(i) || (wasHeard && st.Decision != h.decision) {
				t.Errorf("run %d: %s holds %s; the person answered %s, the %s heard %s", run, id, st.Decision, want(i), h.by, h.decision)
				lost++
			}
		case wasHeard:
			t.Errorf("run %d: %s is %s after the restart; the %s heard %s before kill -9", run, id, st.State, h.by, h.decision)
			lost++
		default:
			pending++
		}
		if wasHeard || st.State == pb.AskState_ASK_STATE_ANSWERED {
			// Answered once: the other answer is refused.
			req := &pb.ConfirmRequest{DecisionId: id, Result: "deny"}
			if want(i) == pb.Decision_DECISION_DENY {
				req.Result = "allow"
			}
			if _, err := r.approver.Confirm(context.Background(), req); grpcstatus.Code(err) != codes.FailedPrecondition {
				t.Errorf("run %d: %s answered again after the restart: %v", run, id, err)
				lost++
			}
		}
	}
	t.Logf("run %d: %d answers heard before kill -9; after the restart %d answered, %d pending", run, len(heard), answered, pending)
	return lost
}
