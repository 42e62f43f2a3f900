package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/internal/redistest"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// stateAgents is agent "a": rm disabled, bash asked, Read allowed, a cap of
// 3 consecutive denials; stateAgentsNoRead is the same with Read disabled.
const (
	stateAgents       = `{"a": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}, {"name": "bash", "permission_policy": {"type": "always_ask"}}]}], "max_consecutive_denials": 3}}`
	stateAgentsNoRead = `{"a": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}, {"name": "bash", "permission_policy": {"type": "always_ask"}}, {"name": "Read", "enabled": false}]}], "max_consecutive_denials": 3}}`
)

func writeStateBundle(t *testing.T, dir, agents, rev string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", "data.json"), []byte(agents), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"revision": "`+rev+`", "roots": ["agents"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replica is one running `toolpdp serve` with its agent and approver
// clients.
type replica struct {
	p        *process
	agent    pb.DecisionServiceClient
	approver pb.DecisionServiceClient
	health   healthpb.HealthClient
}

func startReplica(t *testing.T, dir, bundle, state string, extra ...string) *replica {
	t.Helper()
	sock, approverSock := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "approver.sock")
	args := append([]string{"serve", "--bundle", bundle, "--listen", "unix://" + sock, "--confirm-listen", "unix://" + approverSock,
		"--metrics-listen", "", "--decision-log", "off", "--state", state}, extra...)
	p := start(t, args...)
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	return &replica{p: p, agent: pb.NewDecisionServiceClient(conn), approver: pb.NewDecisionServiceClient(dialUnix(t, approverSock)),
		health: healthpb.NewHealthClient(conn)}
}

func (r *replica) decide(t *testing.T, session, tool string) *pb.DecideResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.agent.Decide(ctx, &pb.DecideRequest{AgentId: "a", SessionId: session, ToolName: tool})
	if err != nil {
		t.Fatalf("Decide %s in %q: %v\n%s", tool, session, err, r.p.stderr.String())
	}
	return resp
}

func (r *replica) stateHealth(t *testing.T) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := r.health.Check(ctx, &healthpb.HealthCheckRequest{Service: grpcapi.StateHealthService})
	if err != nil {
		t.Fatalf("health of %s: %v", grpcapi.StateHealthService, err)
	}
	return h.Status
}

// kill9 ends the process as the kernel would on an OOM kill: no shutdown,
// nothing flushed.
func (r *replica) kill9(t *testing.T) {
	t.Helper()
	if err := r.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.p.done
}

// With --state file:, a container killed and restarted goes on where it
// stopped: a halted session is still halted, a pending ask can still be
// answered and its waiter learns the answer, a pinned session keeps its
// pin although the bundle changed while the process was down, and a
// second process cannot open the same file.
func TestFileStateSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	state := "file:" + filepath.Join(dir, "state.db")
	run1 := filepath.Join(dir, "run1")
	if err := os.Mkdir(run1, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, run1, bundle, state)

	for i := range 3 {
		if resp := r.decide(t, "halted", "rm"); resp.Halt != (i == 2) {
			t.Fatalf("denial %d: halt %v", i+1, resp.Halt)
		}
	}
	if resp := r.decide(t, "pinned", "Read"); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Read under v1: %s", resp.Decision)
	}
	ask := r.decide(t, "asking", "bash")
	if ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("bash: %s, want ask", ask.Decision)
	}
	// One process per file.
	second := filepath.Join(dir, "second")
	if err := os.Mkdir(second, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "serve", "--bundle", bundle, "--listen", "unix://"+filepath.Join(second, "s.sock"), "--metrics-listen", "", "--decision-log", "off", "--state", state).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked by another process: one toolpdp serves each state file") {
		t.Fatalf("a second serve on the same state file: %v\n%s", err, out)
	}

	r.kill9(t)
	writeStateBundle(t, bundle, stateAgentsNoRead, "v2") // the bundle changes while the process is down
	run2 := filepath.Join(dir, "run2")
	if err := os.Mkdir(run2, 0o755); err != nil {
		t.Fatal(err)
	}
	r = startReplica(t, run2, bundle, state)

	if resp := r.decide(t, "halted", "rm"); resp.Decision != pb.Decision_DECISION_DENY || !resp.Halt {
		t.Fatalf("the halted session after kill -9: %s halt %v, want a deny with halt", resp.Decision, resp.Halt)
	}
	if resp := r.decide(t, "pinned", "Read"); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the pinned session's Read after kill -9 and a bundle change: %s %v, want its pinned v1 allow", resp.Decision, resp.Reasons)
	}
	if resp := r.decide(t, "fresh", "Read"); resp.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("a new session's Read under v2: %s, want deny", resp.Decision)
	}
	listed, err := r.approver.ListPending(context.Background(), &pb.ListPendingRequest{})
	if err != nil || len(listed.Asks) != 1 || listed.Asks[0].DecisionId != ask.DecisionId {
		t.Fatalf("ListPending after kill -9: %v %v", listed, err)
	}
	waited := make(chan *pb.AwaitDecisionResponse, 1)
	go func() {
		resp, err := r.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId, WaitSeconds: 30})
		if err != nil {
			t.Error(err)
		}
		waited <- resp
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is waiting
	if _, err := r.approver.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: "not this one"}); err != nil {
		t.Fatalf("Confirm of an ask made before kill -9: %v", err)
	}
	select {
	case resp := <-waited:
		if resp == nil || resp.State != pb.AskState_ASK_STATE_ANSWERED || resp.Decision != pb.Decision_DECISION_DENY || resp.Message != "not this one" {
			t.Fatalf("the waiter learnt %v", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not learn the answer")
	}
}

// Two replicas on one Redis are one decision point: denials split across
// them halt the session, an ask made on one is listed and answered on the
// other and the first one's waiter wakes within a second; with Redis gone
// a call with a session is denied and one without is decided, health says
// so, and both recover when Redis is back, without a restart.
func TestRedisReplicasShareState(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, stateAgents, "v1")
	var rs []*replica
	for i := range 2 {
		d := filepath.Join(dir, fmt.Sprint("replica", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, startReplica(t, d, bundle, redis.URL()))
	}
	a, b := rs[0], rs[1]

	// Count then halt, across replicas.
	for i, r := range []*replica{a, b, a} {
		if resp := r.decide(t, "split", "rm"); resp.Halt != (i == 2) {
			t.Fatalf("denial %d (replica %d): halt %v", i+1, i%2, resp.Halt)
		}
	}
	if resp := b.decide(t, "split", "rm"); !resp.Halt {
		t.Fatal("the fourth denial, on the other replica, carries no halt")
	}

	// An ask made on a, listed and answered on b; a's waiter wakes.
	ask := a.decide(t, "asking", "bash")
	listed, err := b.approver.ListPending(context.Background(), &pb.ListPendingRequest{})
	if err != nil || len(listed.Asks) != 1 || listed.Asks[0].DecisionId != ask.DecisionId {
		t.Fatalf("ListPending on the other replica: %v %v", listed, err)
	}
	type result struct {
		resp *pb.AwaitDecisionResponse
		at   time.Time
	}
	waited := make(chan result, 1)
	var started sync.WaitGroup
	started.Add(1)
	go func() {
		started.Done()
		resp, err := a.agent.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId, WaitSeconds: 30})
		if err != nil {
			t.Error(err)
		}
		waited <- result{resp, time.Now()}
	}()
	started.Wait()
	time.Sleep(500 * time.Millisecond) // a is waiting
	confirmed := time.Now()
	if _, err := b.approver.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil {
		t.Fatalf("Confirm on the other replica: %v", err)
	}
	select {
	case got := <-waited:
		if got.resp == nil || got.resp.State != pb.AskState_ASK_STATE_ANSWERED || got.resp.Decision != pb.Decision_DECISION_ALLOW {
			t.Fatalf("a's waiter learnt %v", got.resp)
		}
		// Answered within its wait of 30s: woken by b's Confirm, not by
		// the end of the wait (which would say PENDING). How soon is
		// logged; a loaded machine wakes it late.
		t.Logf("a's waiter woke %v after b's Confirm", got.at.Sub(confirmed))
	case <-time.After(45 * time.Second):
		t.Fatal("a's waiter never woke")
	}
	if _, err := a.approver.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny"}); err == nil {
		t.Fatal("an ask answered on b was answered again on a")
	}

	// Redis gone: fail closed for what needs state, decide what does not.
	redis.Stop()
	if resp := a.decide(t, "after", "Read"); resp.Decision != pb.Decision_DECISION_DENY || len(resp.Reasons) == 0 || resp.Reasons[0].Rule != "state_unavailable" {
		t.Fatalf("a call with a session while Redis is down: %s %v, want a state_unavailable deny", resp.Decision, resp.Reasons)
	}
	if resp := b.decide(t, "", "Read"); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("a call without a session while Redis is down: %s %v, want it decided (allow)", resp.Decision, resp.Reasons)
	}
	if resp := b.decide(t, "", "bash"); resp.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("an ask without a session while Redis is down: %s, want a deny (nobody could answer it)", resp.Decision)
	}
	if st := a.stateHealth(t); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("state health while Redis is down: %s", st)
	}

	// Redis back (empty, as after a crash without persistence): the data
	// is lost, which both replicas say until an operator accepts it; then
	// both decide sessions again without a restart.
	redis.Restart(t)
	for i, r := range rs {
		untilLost(t, r, fmt.Sprint("replica ", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.approver.AcceptStateReset(ctx, &pb.AcceptStateResetRequest{}); err != nil {
		t.Fatalf("AcceptStateReset: %v", err)
	}
	for i, r := range rs {
		untilFresh(t, r, fmt.Sprint("replica ", i), "recovered")
	}
}

// A Redis that could evict keys is refused at start-up, naming why.
func TestRedisEvictionPolicyRefusedAtStart(t *testing.T) {
	redis := redistest.Start(t, "--maxmemory-policy volatile-lru")
	out, err := exec.Command(binary(t), "serve", "--listen", "unix://"+filepath.Join(t.TempDir(), "s.sock"), "--metrics-listen", "", "--decision-log", "off", "--state", redis.URL()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "maxmemory-policy is volatile-lru") || !strings.Contains(string(out), "noeviction") {
		t.Fatalf("serve on an evicting Redis: %v\n%s", err, out)
	}
}

// --state is an environment variable like every serve flag.
func TestStateFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	p := startBinaryEnv(t, binary(t), []string{"TOOLPDP_STATE=file:" + filepath.Join(dir, "env.db")},
		"serve", "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	if _, err := os.Stat(filepath.Join(dir, "env.db")); err != nil {
		t.Fatalf("TOOLPDP_STATE=file:… made no state file: %v\n%s", err, p.stderr.String())
	}
}

// A flood of new session ids cannot clear a halt: 20,100 calls under
// fresh ids (67 times the bound of 300 sessions) leave the halted session
// halted; a flood of sessions that halt fills only its own agent's share,
// whose new sessions are then refused, while another agent's start. The
// flood is every one of its calls however long a loaded machine takes; it
// stops early only when a call fails (a hung server's calls time out).
func TestFloodOfNewSessionsKeepsHalts(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of 20,100 calls")
	}
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	writeStateBundle(t, bundle, `{"a": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}]}], "max_consecutive_denials": 3},
		"h": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}]}], "max_consecutive_denials": 1},
		"b": {"tools": [{"type": "agent_toolset"}]}}`, "v1")
	const bound = 300
	r := startReplica(t, dir, bundle, "memory", "--max-sessions", fmt.Sprint(bound))
	decide := func(agent, session, tool string) (*pb.DecideResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.agent.Decide(ctx, &pb.DecideRequest{AgentId: agent, SessionId: session, ToolName: tool})
	}
	for i := range 3 {
		if resp, err := decide("a", "halted", "rm"); err != nil || resp.Halt != (i == 2) {
			t.Fatalf("denial %d: %v %v", i+1, resp, err)
		}
	}
	const calls = 67 * bound
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls && failed.Load() == 0; i += 8 {
				start := time.Now()
				if _, err := decide("a", fmt.Sprint("fresh-", i), "Read"); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("call %d after %s: %v", i, time.Since(start), err))
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := sent.Load(); n < calls || failed.Load() > 0 {
		t.Fatalf("%d of %d calls sent, %d failed (first: %v)\n%s", n, calls, failed.Load(), firstErr.Load(), r.p.stderr.String())
	}
	t.Logf("%d calls under fresh session ids", sent.Load())
	resp, err := decide("a", "halted", "rm")
	if err != nil || resp.Decision != pb.Decision_DECISION_DENY || !resp.Halt {
		t.Fatalf("the halted session after the flood: %v %v, want a deny with halt", resp, err)
	}

	// Agent h's flood of sessions that halt: its share (half of the
	// bound) fills with halted sessions, then its new ones are refused.
	refused := 0
	for i := range bound * 3 / 4 {
		resp, err := decide("h", fmt.Sprint("h-", i), "rm")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Reasons) > 0 && resp.Reasons[0].Rule == "session_refused" {
			refused++
		}
	}
	if refused != bound/4 {
		t.Fatalf("%d of agent h's %d halting sessions refused, want the %d past its share of %d", refused, bound*3/4, bound/4, bound/2)
	}
	if resp, err := decide("b", "another agent", "Read"); err != nil || resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("another agent's new session after agent h filled its share: %v %v", resp, err)
	}
	if resp, err := decide("a", "halted", "rm"); err != nil || !resp.Halt {
		t.Fatalf("the halted session after agent h's flood: %v %v", resp, err)
	}
}
