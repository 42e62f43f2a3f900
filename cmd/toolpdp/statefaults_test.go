package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/redistest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// killAsks is how many asks each run of the file kill test makes: 300,
// or TOOLPDP_TEST_KILL_ASKS on a machine too slow for five runs of 300.
func killAsks(t *testing.T) int {
	if v := os.Getenv("TOOLPDP_TEST_KILL_ASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 50 {
			t.Fatalf("TOOLPDP_TEST_KILL_ASKS=%q: a number of asks, at least 50", v)
		}
		return n
	}
	return 300
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
	case <-time.After(5 * time.Minute): // a hang guard, not a speed bound
		mu.Lock()
		n := heardCount
		mu.Unlock()
		t.Fatalf("run %d: %d answers heard in 5 minutes\n%s", run, n, r.p.stderr.String())
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

// confirmations are the tool.confirmation events of decision logs, by
// decision id.
func confirmations(t *testing.T, paths ...string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) == nil && ev["type"] == "tool.confirmation" {
				id, _ := ev["decision_id"].(string)
				out[id] = append(out[id], ev)
			}
		}
	}
	return out
}

// stallRedis keeps Redis busy for d with another client's script, as a
// slow Lua script of any tenant would: every other command waits.
func stallRedis(t *testing.T, addr string, d time.Duration) <-chan error {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: d + 10*time.Second})
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Eval(context.Background(), `local t = redis.call('TIME')
local from = tonumber(t[1]) * 1000000 + tonumber(t[2])
while true do
  local n = redis.call('TIME')
  if tonumber(n[1]) * 1000000 + tonumber(n[2]) - from > tonumber(ARGV[1]) then break end
end
return 1`, nil, d.Microseconds()).Err()
	}()
	return done
}

// Redis kept busy for 1.5 s by another client while 16 people answer:
// every Confirm's reply is what its waiter hears and what the decision
// log holds, once, with who answered; an allow is never turned into a
// deny by the stall, and an approval asked to be remembered is.
func TestRedisBusyDuringConfirms(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	var rs []*replica
	var logs []string
	for i := range 2 {
		d := filepath.Join(dir, fmt.Sprint("replica", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, filepath.Join(d, "decisions.log"))
		rs = append(rs, startReplica(t, d, bundle, redis.URL(), "--decision-log", logs[i], "--eval-timeout", "10s"))
	}
	a, b := rs[0], rs[1]
	const n = 16
	ids := make([]string, n)
	for i := range n {
		ask := a.decide(t, fmt.Sprint("busy-", i), "bash")
		if ask.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("ask %d: %s", i, ask.Decision)
		}
		ids[i] = ask.DecisionId
	}
	heard := make([]chan *pb.AwaitDecisionResponse, n)
	for i, id := range ids {
		heard[i] = make(chan *pb.AwaitDecisionResponse, 1)
		go func() {
			for {
				resp, err := a.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: 60})
				if err == nil && resp.State == pb.AskState_ASK_STATE_PENDING {
					continue
				}
				if err != nil {
					t.Errorf("waiter of %s: %v", id, err)
				}
				heard[i] <- resp
				return
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the waiters are waiting
	confirm := func(i int) (*pb.ConfirmResponse, error) {
		req := &pb.ConfirmRequest{DecisionId: ids[i], Result: "allow", Remember: true}
		if i%4 == 3 {
			req = &pb.ConfirmRequest{DecisionId: ids[i], Result: "deny", DenyMessage: "not now"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return b.approver.Confirm(ctx, req)
	}
	stalled := stallRedis(t, redis.Addr, 1500*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the script is running
	replies := make([]*pb.ConfirmResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); replies[i], errs[i] = confirm(i) }()
	}
	wg.Wait()
	if err := <-stalled; err != nil {
		t.Fatalf("the busy script: %v", err)
	}
	unavailable := 0
	for i := range n {
		if errs[i] == nil {
			continue
		}
		if grpcstatus.Code(errs[i]) != codes.Unavailable {
			t.Fatalf("Confirm %d during the stall: %v", i, errs[i])
		}
		// Not recorded, so nobody was told: still pending, answered now.
		unavailable++
		st, err := a.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: ids[i]})
		if err != nil || st.State != pb.AskState_ASK_STATE_PENDING {
			t.Fatalf("ask %d after an UNAVAILABLE Confirm: %v %v, want it still pending", i, st, err)
		}
		if replies[i], errs[i] = confirm(i); errs[i] != nil {
			t.Fatalf("Confirm %d again after the stall: %v", i, errs[i])
		}
	}
	agree := 0
	var logged map[string][]map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		logged = confirmations(t, logs...)
		if len(logged) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, id := range ids {
		want := pb.Decision_DECISION_ALLOW
		if i%4 == 3 {
			want = pb.Decision_DECISION_DENY
		}
		var w *pb.AwaitDecisionResponse
		select {
		case w = <-heard[i]:
		case <-time.After(20 * time.Second):
			t.Fatalf("the waiter of ask %d never heard", i)
		}
		lines := logged[id]
		ok := replies[i].Decision == want && w != nil && w.State == pb.AskState_ASK_STATE_ANSWERED && w.Decision == want && len(lines) == 1
		if ok {
			ev := lines[0]
			by, _ := ev["answered_by"].(string)
			ok = by != "" && ev["outcome"] == strings.ToLower(strings.TrimPrefix(want.String(), "DECISION_")) && ev["remember"] == (want == pb.Decision_DECISION_ALLOW)
		}
		if !ok {
			t.Errorf("ask %d: reply %v, waiter %v, decision log %v (want %s, one line with who answered)", i, replies[i], w, lines, want)
			continue
		}
		if want == pb.Decision_DECISION_ALLOW {
			if again := a.decide(t, fmt.Sprint("busy-", i), "bash"); again.Decision != pb.Decision_DECISION_ALLOW {
				t.Errorf("ask %d: the remembered approval is gone: the same call is %s", i, again.Decision)
				continue
			}
		}
		agree++
	}
	t.Logf("busy confirm: log and reply agree %d/%d (%d UNAVAILABLE during the stall, answered again after it)", agree, n, unavailable)
}

// AwaitDecision with wait_seconds 0 on Redis answers at once from the
// store — PENDING for a pending ask, ANSWERED for an answered one — and
// a caller's own deadline never counts as the store being down.
func TestRedisAwaitZero(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	ml := listenLoopback(t)
	metrics := ml.Addr().String()
	ml.Close()
	r := startReplica(t, dir, bundle, redis.URL(), "--metrics-listen", metrics)
	pending := r.decide(t, "w0", "bash")
	answered := r.decide(t, "w0", "bash")
	if _, err := r.approver.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: answered.DecisionId, Result: "deny", DenyMessage: "no"}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		st, err := r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: pending.DecisionId})
		if err != nil || st.State != pb.AskState_ASK_STATE_PENDING {
			t.Fatalf("AwaitDecision{0} of a pending ask: %v %v", st, err)
		}
		st, err = r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: answered.DecisionId})
		if err != nil || st.State != pb.AskState_ASK_STATE_ANSWERED || st.Decision != pb.Decision_DECISION_DENY || st.Message != "no" {
			t.Fatalf("AwaitDecision{0} of an answered ask: %v %v", st, err)
		}
		// A caller whose deadline is all but past: whatever it is told,
		// the store is not down.
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _ = r.agent.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: pending.DecisionId, WaitSeconds: 5})
		cancel()
	}
	if st := r.stateHealth(t); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("state health after waits of 0: %s", st)
	}
	if up := metricValue(t, metrics, "toolpdp_state_store_up"); up != 1 {
		t.Fatalf("toolpdp_state_store_up after waits of 0: %v", up)
	}
	t.Logf("await 0: pending/answered")
}

// stateEvents are the decision log's lines of a type.
func logEvents(t *testing.T, path, typ string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(raw), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["type"] == typ {
			out = append(out, ev)
		}
	}
	return out
}

// untilLost waits until r's calls with a session are denied state_lost;
// meanwhile every such call must be a deny (state_unavailable while the
// connection comes back), never a fresh session.
func untilLost(t *testing.T, r *replica, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := r.decide(t, "halted", "rm")
		rule := ""
		if len(resp.Reasons) > 0 {
			rule = resp.Reasons[0].Rule
		}
		if resp.Decision != pb.Decision_DECISION_DENY || (rule != "state_lost" && rule != "state_unavailable") {
			t.Fatalf("%s: the halted session after the store lost its data: %s %v (halt %v), want a state_lost deny", name, resp.Decision, resp.Reasons, resp.Halt)
		}
		if rule == "state_lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never said state_lost\n%s", name, r.p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp := r.decide(t, "fresh-while-lost", "Read"); resp.Decision != pb.Decision_DECISION_DENY || resp.Reasons[0].Rule != "state_lost" {
		t.Fatalf("%s: a new session while the store is lost: %s %v", name, resp.Decision, resp.Reasons)
	}
	if st := r.stateHealth(t); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("%s: state health while lost: %s", name, st)
	}
	st, err := r.agent.Status(context.Background(), &pb.StatusRequest{})
	if err != nil || !st.GetState().GetLost() || st.GetState().GetMessage() == "" {
		t.Fatalf("%s: Status while lost: %v %v", name, st.GetState(), err)
	}
}

// untilFresh waits until r decides a new session again.
func untilFresh(t *testing.T, r *replica, name, session string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := r.decide(t, session, "Read")
		if resp.Decision == pb.Decision_DECISION_ALLOW {
			break
		}
		if rule := resp.Reasons[0].Rule; rule != "state_lost" && rule != "state_unavailable" {
			t.Fatalf("%s after the loss was accepted: %s %v", name, resp.Decision, resp.Reasons)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never decided a fresh session after the loss was accepted: %v\n%s", name, resp.Reasons, r.p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := r.stateHealth(t); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("%s: state health after the accepted loss: %s", name, st)
	}
}

// A Redis that lost its data is noticed by every replica: restarted
// empty under two replicas, the next session call on each is state_lost
// (not a fresh session that would have cleared the halt), Status and
// health say so, a replica started meanwhile is lost too, and pending
// asks cannot be answered; `toolpdp state accept-reset` on one replica's
// approver address lets every replica start sessions afresh, recorded
// with who accepted. A FLUSHALL is noticed the same way, and a restart
// with --state-accept-reset accepts it.
func TestRedisStoreLostNoticedOnEveryReplica(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	var rs []*replica
	var logs, dirs []string
	var metrics string
	for i := range 2 {
		d := filepath.Join(dir, fmt.Sprint("replica", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs, logs = append(dirs, d), append(logs, filepath.Join(d, "decisions.log"))
		extra := []string{"--decision-log", logs[i], "--eval-timeout", "10s"}
		if i == 0 {
			ml := listenLoopback(t)
			metrics = ml.Addr().String()
			ml.Close()
			extra = append(extra, "--metrics-listen", metrics)
		}
		rs = append(rs, startReplica(t, d, bundle, redis.URL(), extra...))
	}
	a, b := rs[0], rs[1]
	for range 3 {
		a.decide(t, "halted", "rm")
	}
	if resp := b.decide(t, "halted", "rm"); !resp.Halt {
		t.Fatal("the session did not halt")
	}
	ask := a.decide(t, "asking", "bash")

	redis.Restart(t) // empty: no persistence
	untilLost(t, a, "replica 0")
	untilLost(t, b, "replica 1")
	if n, lost := metricValue(t, metrics, "toolpdp_state_store_lost_total"), metricValue(t, metrics, "toolpdp_state_store_lost"); n != 1 || lost != 1 {
		t.Fatalf("replica 0's metrics while lost: toolpdp_state_store_lost_total %v, toolpdp_state_store_lost %v", n, lost)
	}
	if _, err := b.approver.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); grpcstatus.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "state_lost") {
		t.Fatalf("Confirm of an ask the store lost: %v", err)
	}
	if _, err := a.agent.AcceptStateReset(context.Background(), &pb.AcceptStateResetRequest{}); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("AcceptStateReset on the agent's address: %v, want PERMISSION_DENIED", err)
	}
	// A replica starting now sees the loss the others marked.
	d3 := filepath.Join(dir, "replica2")
	if err := os.Mkdir(d3, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startReplica(t, d3, bundle, redis.URL(), "--eval-timeout", "10s")
	untilLost(t, c, "replica 2 (started after the loss)")

	out, err := exec.Command(binary(t), "state", "accept-reset", "--addr", "unix://"+filepath.Join(dirs[0], "approver.sock")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "accepted") {
		t.Fatalf("toolpdp state accept-reset: %v\n%s", err, out)
	}
	for i, r := range []*replica{a, b, c} {
		untilFresh(t, r, fmt.Sprint("replica ", i), "after-accept")
	}
	if lost := metricValue(t, metrics, "toolpdp_state_store_lost"); lost != 0 {
		t.Fatalf("toolpdp_state_store_lost after the loss was accepted: %v", lost)
	}
	var resets []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for len(resets) == 0 && time.Now().Before(deadline) {
		resets = logEvents(t, logs[0], "toolpdp.state_reset")
		time.Sleep(50 * time.Millisecond)
	}
	if len(resets) != 1 || !strings.Contains(fmt.Sprint(resets[0]["accepted_by"]), "approver.sock") || resets[0]["lost_epoch"] == "" {
		t.Fatalf("the decision log's state resets: %v", resets)
	}

	// FLUSHALL: noticed the same way; a restart with --state-accept-reset
	// accepts it, and the replicas that stayed up go on.
	fl := goredis.NewClient(&goredis.Options{Addr: redis.Addr})
	defer fl.Close()
	if err := fl.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	untilLost(t, a, "replica 0 after FLUSHALL")
	b.kill9(t)
	d4 := filepath.Join(dir, "replica1-again")
	if err := os.Mkdir(d4, 0o755); err != nil {
		t.Fatal(err)
	}
	log4 := filepath.Join(d4, "decisions.log")
	b = startReplica(t, d4, bundle, redis.URL(), "--decision-log", log4, "--eval-timeout", "10s", "--state-accept-reset")
	untilFresh(t, b, "replica 1 restarted with --state-accept-reset", "after-flush")
	untilFresh(t, a, "replica 0 after replica 1 accepted", "after-flush")
	deadline = time.Now().Add(10 * time.Second)
	for resets = nil; len(resets) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resets = logEvents(t, log4, "toolpdp.state_reset")
	}
	if len(resets) != 1 || !strings.Contains(fmt.Sprint(resets[0]["accepted_by"]), "--state-accept-reset") {
		t.Fatalf("the decision log of the replica restarted with --state-accept-reset: %v", resets)
	}
	// The store's epoch replaced (another store's data restored in its
	// place): a replica that knew the old one is lost, a replica started
	// afterwards knows only the new one; accepting on that one, as an
	// operator reaching any replica behind a Service would, frees both.
	if err := fl.Set(context.Background(), "{toolpdp}:epoch", "another-store", 0).Err(); err != nil {
		t.Fatal(err)
	}
	untilLost(t, a, "replica 0 after the epoch was replaced")
	b.kill9(t)
	d5 := filepath.Join(dir, "replica1-third")
	if err := os.Mkdir(d5, 0o755); err != nil {
		t.Fatal(err)
	}
	b = startReplica(t, d5, bundle, redis.URL(), "--eval-timeout", "10s")
	untilFresh(t, b, "replica 1 started after the epoch was replaced", "replaced")
	out, err = exec.Command(binary(t), "state", "accept-reset", "--addr", "unix://"+filepath.Join(d5, "approver.sock")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "accepted") {
		t.Fatalf("toolpdp state accept-reset on the replica that lost nothing: %v\n%s", err, out)
	}
	untilFresh(t, a, "replica 0 after the replaced epoch was accepted elsewhere", "replaced")
	t.Logf("store lost: noticed on every replica (3 replicas; Redis restarted empty, then FLUSHALL)")
}

// Redis refusing writes for a while (CLIENT PAUSE WRITE: reads answer,
// scripts wait) while people allow asks: the call is decided again only
// once the pause ends, so every allow stands — the stall never becomes a
// recorded deny — and reply, waiter and decision log agree.
func TestRedisPausedWhileConfirmDecidesAgain(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	logPath := filepath.Join(dir, "decisions.log")
	r := startReplica(t, dir, bundle, redis.URL(), "--decision-log", logPath, "--eval-timeout", "10s")
	const n = 6
	ids := make([]string, n)
	for i := range n {
		ids[i] = r.decide(t, fmt.Sprint("paused-", i), "bash").DecisionId
	}
	admin := goredis.NewClient(&goredis.Options{Addr: redis.Addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	replies := make([]*pb.ConfirmResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			replies[i], errs[i] = r.approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ids[i], Result: "allow"})
		}()
	}
	began := time.Now()
	wg.Wait()
	t.Logf("the Confirms took %v", time.Since(began))
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			t.Logf("Confirm during the pause: %v", err)
		}
	}
	var logged map[string][]map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for logged = confirmations(t, logPath); len(logged) < ok && time.Now().Before(deadline); logged = confirmations(t, logPath) {
		time.Sleep(100 * time.Millisecond)
	}
	for i, id := range ids {
		if errs[i] != nil {
			// Not recorded: then nobody may have been told.
			st, err := r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: id})
			if grpcstatus.Code(errs[i]) != codes.Unavailable || err != nil || st.State != pb.AskState_ASK_STATE_PENDING || len(logged[id]) != 0 {
				t.Errorf("ask %d: Confirm %v, but the ask is %v %v, logged %v", i, errs[i], st, err, logged[id])
			}
			continue
		}
		st, err := r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: id})
		if replies[i].Decision != pb.Decision_DECISION_ALLOW || err != nil || st.Decision != pb.Decision_DECISION_ALLOW || len(logged[id]) != 1 || logged[id][0]["outcome"] != "allow" {
			t.Errorf("ask %d allowed during a pause: reply %v, waiter %v %v, log %v", i, replies[i], st, err, logged[id])
		}
	}
}
