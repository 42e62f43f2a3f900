package grpcapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Agent "a" with the rm tool disabled and a cap of 3 consecutive denials.

// Many sessions from many goroutines: each session's denial count and halt
// are its own.
func TestManySessionsConcurrently(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("s"), "agents/data.json": testkit.SessionAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range 25 {
				sid := fmt.Sprintf("g%d-s%d", g, s)
				for i := 1; i <= 5; i++ {
					resp, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{AgentId: "a", SessionId: sid, ToolName: "rm"})
					if err != nil || resp.Halt != (i >= 3) {
						wrong.Add(1)
					}
				}
				// An allow resets the count.
				if resp, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{AgentId: "a", SessionId: sid, ToolName: "ls"}); err != nil || resp.Halt {
					wrong.Add(1)
				}
				if resp, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{AgentId: "a", SessionId: sid, ToolName: "rm"}); err != nil || resp.Halt {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d answers with a wrong halt or an error", wrong.Load())
	}
	if n := int(ts.Metric(t, "toolpdp_sessions")); n != 200 {
		t.Fatalf("%d sessions held, want 200", n)
	}
}

// The number of pins is bounded; the longest idle is released first, and
// comes back denied (session_evicted): starting afresh under the newest
// definition would let a flood of sessions loosen a running one.
func TestPinEvictionAtTheBound(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": `{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{MaxSessions: 2, MaxSessionsPerAgent: 2}})
	decide := func(sid string) pb.Decision {
		return ts.Decide(t, &pb.DecideRequest{AgentId: "b", SessionId: sid, ToolName: "bash"}).Decision
	}
	decide("s1")
	decide("s2")
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(`{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`))
	if err := ts.Engine.Reload(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if decide("s1") != pb.Decision_DECISION_ALLOW {
		t.Fatal("s1 lost its pin before the bound was reached")
	}
	decide("s3") // the third session: s2, idle longest, is released
	if int(ts.Metric(t, "toolpdp_sessions")) != 2 {
		t.Fatalf("%d sessions, want the bound of 2", int(ts.Metric(t, "toolpdp_sessions")))
	}
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "b", SessionId: "s2", ToolName: "bash"}); r.Decision != pb.Decision_DECISION_DENY || r.Reasons[0].Rule != "session_evicted" {
		t.Fatalf("s2 after it was released at the bound: %s %v, want a session_evicted deny", r.Decision, r.Reasons)
	}
	if n := ts.Metric(t, "toolpdp_sessions_evicted_total"); n != 2 { // s2 for s3, then s1 for s2's return
		t.Fatalf("toolpdp_sessions_evicted_total = %v, want 2", n)
	}
}

func TestIdleTimeoutAndEndSessionReleasePins(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": `{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{MaxSessions: 100, SessionIdle: time.Minute, Now: now}})
	decide := func(sid string) pb.Decision {
		return ts.Decide(t, &pb.DecideRequest{AgentId: "b", SessionId: sid, ToolName: "bash"}).Decision
	}
	decide("idle")
	decide("ended")
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(`{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`))
	if err := ts.Engine.Reload(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client.EndSession(context.Background(), &pb.EndSessionRequest{AgentId: "b", SessionId: "ended"})
	if err != nil || !resp.Found {
		t.Fatalf("EndSession: %v %v", resp, err)
	}
	if decide("ended") != pb.Decision_DECISION_ASK {
		t.Fatal("an ended session kept its pin")
	}
	if decide("idle") != pb.Decision_DECISION_ALLOW {
		t.Fatal("a session in use lost its pin")
	}
	clock.Add(int64(2 * time.Minute))
	if decide("idle") != pb.Decision_DECISION_ASK {
		t.Fatal("a session idle past the timeout kept its pin")
	}
	if _, err := ts.Client.EndSession(context.Background(), &pb.EndSessionRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("EndSession without session_id: %v", err)
	}
}

func TestConfirm(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("c"), "agents/data.json": testkit.SessionAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	ctx := context.Background()
	ask := func(sid string) string {
		resp := ts.Decide(t, &pb.DecideRequest{AgentId: "a", SessionId: sid, ToolName: "bash"})
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("bash: %s", resp.Decision)
		}
		return resp.DecisionId
	}
	code := func(req *pb.ConfirmRequest) codes.Code {
		_, err := ts.Client.Confirm(ctx, req)
		return status.Code(err)
	}
	id := ask("s")
	pending, err := ts.Client.ListPending(ctx, &pb.ListPendingRequest{AgentId: "a"})
	if err != nil || len(pending.Asks) != 1 || pending.Asks[0].DecisionId != id || !strings.Contains(pending.Asks[0].Message, "confirmation") {
		t.Fatalf("ListPending: %v %v", pending, err)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: id, Result: "allow", DenyMessage: "no"}); c != codes.InvalidArgument {
		t.Fatalf("deny_message with allow: %s", c)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: id, Result: "maybe"}); c != codes.InvalidArgument {
		t.Fatalf("result maybe: %s", c)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: "nope", Result: "allow"}); c != codes.NotFound {
		t.Fatalf("unknown id: %s", c)
	}
	allowID := ts.Decide(t, &pb.DecideRequest{AgentId: "a", ToolName: "ls"}).DecisionId
	if c := code(&pb.ConfirmRequest{DecisionId: allowID, Result: "allow"}); c != codes.FailedPrecondition {
		t.Fatalf("a decision that was not ask: %s", c)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: id, Result: "allow"}); c != codes.OK {
		t.Fatalf("a good confirm: %s", c)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: id, Result: "allow"}); c != codes.FailedPrecondition {
		t.Fatalf("a second confirm of the same ask: %s, want FAILED_PRECONDITION (answered before)", c)
	}
	if c := code(&pb.ConfirmRequest{DecisionId: id, Result: "deny"}); c != codes.FailedPrecondition {
		t.Fatalf("a contrary second confirm of the same ask: %s, want FAILED_PRECONDITION (answered before)", c)
	}
	// Confirmed denials count toward the cap of 3, with decisions' denials.
	ts.Decide(t, &pb.DecideRequest{AgentId: "a", SessionId: "cap", ToolName: "rm"})
	for i, want := range []bool{false, true} {
		resp, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask("cap"), Result: "deny", DenyMessage: "use the staging copy"})
		if err != nil || resp.Halt != want || resp.Decision != pb.Decision_DECISION_DENY {
			t.Fatalf("confirm deny %d: %v %v; want halt %v", i, resp, err, want)
		}
	}
	if resp := ts.Decide(t, &pb.DecideRequest{AgentId: "a", SessionId: "cap", ToolName: "rm"}); !resp.Halt {
		t.Fatal("a denial after the cap does not halt")
	}
	if pending, _ := ts.Client.ListPending(ctx, &pb.ListPendingRequest{}); len(pending.Asks) != 0 {
		t.Fatalf("answered asks still pending: %v", pending.Asks)
	}
}

// A pinned session keeps its agent definition, but guardrails always come
// from the newest bundle: a security fix reaches running sessions at once.
func TestGuardrailsReachPinnedSessions(t *testing.T) {
	allowAll := `{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": allowAll})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	curl := &pb.DecideRequest{AgentId: "b", SessionId: "pinned", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "curl x"})}
	if d := ts.Decide(t, curl).Decision; d != pb.Decision_DECISION_ALLOW {
		t.Fatalf("before the fix: %s", d)
	}
	// The new bundle changes the agent's policy (ask) and adds a guardrail.
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(`{"b": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}],
		"guardrails": {"deny_commands": ["curl"]}}}`))
	writeFileAtomic(t, filepath.Join(dir, "guardrails", "data.json"), []byte(`{"deny_commands": ["wget"]}`))
	if err := ts.Engine.Reload(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	resp := ts.Decide(t, curl)
	if resp.Decision != pb.Decision_DECISION_DENY || resp.Reasons[0].Effect != pb.Decision_DECISION_ALLOW {
		t.Fatalf("pinned session after the fix: %s, reasons %v; want the pinned allow plus the new deny", resp.Decision, resp.Reasons)
	}
	wget := &pb.DecideRequest{AgentId: "b", SessionId: "pinned", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "wget x"})}
	if d := ts.Decide(t, wget).Decision; d != pb.Decision_DECISION_DENY {
		t.Fatalf("global guardrail on a pinned session: %s", d)
	}
	ls := &pb.DecideRequest{AgentId: "b", SessionId: "pinned", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})}
	if d := ts.Decide(t, ls).Decision; d != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the pinned definition changed: %s", d)
	}
}

// An agent removed from the newest bundle is revoked: every call of its
// running sessions is denied (custom tools included), new sessions meet an
// unknown agent; defined again, running sessions go on under their pins.
func TestRemovedAgentIsRevoked(t *testing.T) {
	coder := `"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}, {"type": "custom", "name": "lookup"}], "guardrails": {"deny_commands": ["curl"]}}`
	other := `"other": {"tools": [{"type": "agent_toolset"}]}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": "{" + coder + "," + other + "}"})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	bash := func(cmd string) *pb.DecideRequest {
		return &pb.DecideRequest{AgentId: "coder", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})}
	}
	if r := ts.Decide(t, bash("curl x")); r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("curl before the reload: %s", r.Decision)
	}
	ask := ts.Decide(t, bash("eval ls")) // code it cannot see: an ask, left pending
	reload := func(agents, rev string) {
		t.Helper()
		writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(agents))
		writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest(rev)))
		if err := ts.Engine.Reload(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
	reload("{"+other+"}", "v2")
	// An ask of the removed agent still pending: a person's allow is a deny.
	if ask.Decision == pb.Decision_DECISION_ASK {
		c, err := ts.Client.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow", Remember: true})
		if err != nil || c.Decision != pb.Decision_DECISION_DENY || !strings.Contains(c.Message, "removed") {
			t.Fatalf("Confirm allow of a removed agent's ask: %v %v, want DECISION_DENY with a message saying the agent was removed", c, err)
		}
	} else {
		t.Fatalf("eval ls: %s, want an ask to confirm", ask.Decision)
	}
	for _, req := range []*pb.DecideRequest{bash("ls"), bash("rm -rf /"), {AgentId: "coder", SessionId: "s", ToolName: "Read"}, {AgentId: "coder", SessionId: "s", ToolName: "lookup"}} {
		r := ts.Decide(t, req)
		if r.Decision != pb.Decision_DECISION_DENY || r.Reasons[0].Rule != "agent_removed" || !strings.Contains(r.Message, "removed") {
			t.Fatalf("%s in a running session of a removed agent: %s %v", req.ToolName, r.Decision, r.Reasons)
		}
	}
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "coder", SessionId: "new", ToolName: "Read"}); r.Decision != pb.Decision_DECISION_DENY || r.Reasons[0].Rule != "unknown_agent" {
		t.Fatalf("a new session of a removed agent: %s %v", r.Decision, r.Reasons)
	}
	// Defined again, looser: the running session keeps its pin and the
	// guardrails it was pinned with; a new session gets the new definition.
	reload(`{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`, "v3")
	if r := ts.Decide(t, bash("ls")); r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("ls in the running session, defined again: %s %s", r.Decision, r.Message)
	}
	if r := ts.Decide(t, bash("curl x")); r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("curl in the running session after a reload that dropped the rule: %s, want its pinned guardrail's deny", r.Decision)
	}
	fresh := bash("curl x")
	fresh.SessionId = "fresh"
	if r := ts.Decide(t, fresh); r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("curl in a new session of the new definition: %s %s", r.Decision, r.Message)
	}
}

// A session released because the store was full comes back denied, not
// afresh: a flood of new sessions must not shed a pin to a stricter
// definition. A halted session is not released at all: the flood evicts
// the sessions that are not halted, and once every place is a halted
// session, new sessions are refused rather than halts forgotten. Idle
// timeouts and EndSession still start afresh.
func TestSessionEvictedUnderLoadIsNotReborn(t *testing.T) {
	strict := `{"v": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}], "default_config": {"permission_policy": {"type": "always_ask"}}}], "max_consecutive_denials": 2}}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": strict})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{MaxSessions: 3, MaxSessionsPerAgent: 3}})
	rm := &pb.DecideRequest{AgentId: "v", SessionId: "H", ToolName: "rm"}
	ts.Decide(t, rm)
	if r := ts.Decide(t, rm); !r.Halt {
		t.Fatalf("second denial: halt %v", r.Halt)
	}
	ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: "V", ToolName: "rm"}) // one denial: not halted
	// A looser definition, then a flood of new sessions that evicts V.
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(`{"v": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`))
	writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest("v2")))
	if err := ts.Engine.Reload(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: fmt.Sprintf("flood%d", i), ToolName: "Read"})
	}
	r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: "V", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})})
	if r.Decision != pb.Decision_DECISION_DENY || r.Reasons[0].Rule != "session_evicted" {
		t.Fatalf("the evicted session after the flood: %s %v, want a session_evicted deny", r.Decision, r.Reasons)
	}
	// The halted session outlived the flood, with its pin and its count.
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: "H", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})}); r.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("the halted session's Bash after the flood: %s %v, want its pinned definition's ask", r.Decision, r.Reasons)
	}
	if r := ts.Decide(t, rm); r.Decision != pb.Decision_DECISION_DENY || !r.Halt {
		t.Fatalf("the halted session's rm after the flood: %s halt %v, want a deny with halt", r.Decision, r.Halt)
	}
	// Ended on purpose, the id starts afresh.
	if _, err := ts.Client.EndSession(context.Background(), &pb.EndSessionRequest{AgentId: "v", SessionId: "V"}); err != nil {
		t.Fatal(err)
	}
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: "V", ToolName: "Read"}); r.Decision == pb.Decision_DECISION_DENY {
		t.Fatalf("after EndSession: %s %v", r.Decision, r.Reasons)
	}
}

// Every place halted: a new session is refused (denied, saying so), never
// made by forgetting a halt; another agent's sessions still start, since
// one agent holds at most its share.
func TestHaltedSessionsAreNotEvicted(t *testing.T) {
	agents := `{"v": {"tools": [{"type": "agent_toolset", "configs": [{"name": "rm", "enabled": false}]}], "max_consecutive_denials": 1}, "w": {"tools": [{"type": "agent_toolset"}]}}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": agents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{MaxSessions: 4, MaxSessionsPerAgent: 2}})
	for _, sid := range []string{"a", "b"} {
		if r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: sid, ToolName: "rm"}); !r.Halt {
			t.Fatalf("%s: halt %v", sid, r.Halt)
		}
	}
	for i := range 50 {
		r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: fmt.Sprintf("flood%d", i), ToolName: "Read"})
		if r.Decision != pb.Decision_DECISION_DENY || r.Reasons[0].Rule != "session_refused" {
			t.Fatalf("a new session of an agent whose every place is halted: %s %v, want session_refused", r.Decision, r.Reasons)
		}
	}
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: "other", ToolName: "Read"}); r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("another agent's new session: %s %v", r.Decision, r.Reasons)
	}
	for _, sid := range []string{"a", "b"} {
		if r := ts.Decide(t, &pb.DecideRequest{AgentId: "v", SessionId: sid, ToolName: "rm"}); !r.Halt {
			t.Fatalf("%s after the flood: halt %v", sid, r.Halt)
		}
	}
	if n := ts.Metric(t, "toolpdp_sessions_refused_total"); n != 50 {
		t.Errorf("refused %v, want 50", n)
	}
}
