package grpcapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Agent "w": writes ask, rm is off, curl is denied by a guardrail; cap 3.
const resultAgents = `{"w": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}},
  "configs": [{"name": "Read", "permission_policy": {"type": "always_allow"}}, {"name": "rm", "enabled": false}]}],
  "guardrails": {"deny_commands": ["curl"]}, "max_consecutive_denials": 3}}`

func write(sid string, args map[string]any, t *testing.T) *pb.DecideRequest {
	return &pb.DecideRequest{AgentId: "w", SessionId: sid, ToolName: "Write", Args: testkit.Struct(t, args)}
}

// A remembered approval lets exactly the approved call through again: not
// other args, not another session, not another tool of the same name from
// elsewhere; it never turns a deny into anything; it ends with the session,
// with any reload and after --remember-ttl.
func TestRememberedApprovalIsExactlyTheCall(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": resultAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{Now: now, RememberTTL: 10 * time.Minute}})
	ctx := context.Background()
	approve := func(req *pb.DecideRequest) {
		t.Helper()
		ask := ts.Decide(t, req)
		if ask.Decision != pb.Decision_DECISION_ASK {
			t.Fatalf("%v: %s, want an ask", req, ask.Decision)
		}
		if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow", Remember: true}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, req *pb.DecideRequest, want pb.Decision) *pb.DecideResponse {
		t.Helper()
		r := ts.Decide(t, req)
		if r.Decision != want {
			t.Fatalf("%s: %s, want %s (%s)", what, r.Decision, want, r.Message)
		}
		return r
	}
	approve(write("s", map[string]any{"file_path": "/tmp/x", "content": "a", "n": 1}, t))
	r := expect("the same call, keys reordered, 1 as 1.0", write("s", map[string]any{"n": 1.0, "content": "a", "file_path": "/tmp/x"}, t), pb.Decision_DECISION_ALLOW)
	last := r.Reasons[len(r.Reasons)-1]
	if last.Axis != "session" || last.Rule != "remembered_approval" || r.Message != "" {
		t.Fatalf("a remembered approval's reasons: %v (message %q)", r.Reasons, r.Message)
	}
	expect("other content", write("s", map[string]any{"file_path": "/tmp/x", "content": "b", "n": 1}, t), pb.Decision_DECISION_ASK)
	expect("another session", write("s2", map[string]any{"file_path": "/tmp/x", "content": "a", "n": 1}, t), pb.Decision_DECISION_ASK)
	withEnv := write("s", map[string]any{"file_path": "/tmp/x", "content": "a", "n": 1}, t)
	withEnv.Env = map[string]string{"PATH": "/tmp/evil"}
	expect("the same args with another env", withEnv, pb.Decision_DECISION_ASK)

	// A deny is never turned: approve a Bash call, then the same call is
	// denied by a guardrail added by a reload (which also ends approvals).
	approve(&pb.DecideRequest{AgentId: "w", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "wget x"})})
	expect("approved Bash", &pb.DecideRequest{AgentId: "w", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "wget x"})}, pb.Decision_DECISION_ALLOW)

	// Any reload that activates a policy ends every remembered approval,
	// even one with the same revision string.
	if err := ts.Engine.Reload(ctx, true); err != nil {
		t.Fatal(err)
	}
	expect("after a reload", write("s", map[string]any{"file_path": "/tmp/x", "content": "a", "n": 1}, t), pb.Decision_DECISION_ASK)

	// The TTL.
	approve(write("s", map[string]any{"file_path": "/tmp/y"}, t))
	expect("within the TTL", write("s", map[string]any{"file_path": "/tmp/y"}, t), pb.Decision_DECISION_ALLOW)
	clock.Add(int64(11 * time.Minute))
	expect("past the TTL", write("s", map[string]any{"file_path": "/tmp/y"}, t), pb.Decision_DECISION_ASK)

	// The session's end.
	approve(write("s", map[string]any{"file_path": "/tmp/z"}, t))
	if _, err := ts.Client.EndSession(ctx, &pb.EndSessionRequest{AgentId: "w", SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	expect("after EndSession", write("s", map[string]any{"file_path": "/tmp/z"}, t), pb.Decision_DECISION_ASK)

	// A guardrail deny of a remembered call stays a deny.
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(strings.Replace(resultAgents, `["curl"]`, `["curl", "wget"]`, 1)))
	approve(write("t", map[string]any{"file_path": "/tmp/q"}, t))
	approve(&pb.DecideRequest{AgentId: "w", SessionId: "t", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})})
	if err := ts.Engine.Reload(ctx, false); err != nil {
		t.Fatal(err)
	}
	expect("a denied call in a session with approvals", &pb.DecideRequest{AgentId: "w", SessionId: "t", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "wget x"})}, pb.Decision_DECISION_DENY)

	// remember with a deny is malformed.
	ask := expect("an ask", write("u", map[string]any{}, t), pb.Decision_DECISION_ASK)
	if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", Remember: true}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("remember with deny: %v, want INVALID_ARGUMENT", err)
	}
}

// The canonical tool: an approval of mcp__S__X covers X from server S.
func TestRememberedApprovalCanonicalTool(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": `{"m": {"mcp_servers": [{"name": "gh"}]}}`})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	ask := ts.Decide(t, &pb.DecideRequest{AgentId: "m", SessionId: "s", ToolName: "mcp__gh__create_issue", Args: testkit.Struct(t, map[string]any{"title": "t"})})
	if ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("mcp tool: %s", ask.Decision)
	}
	if _, err := ts.Client.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow", Remember: true}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*pb.DecideRequest{
		{AgentId: "m", SessionId: "s", ToolName: "create_issue", Server: "gh", Args: testkit.Struct(t, map[string]any{"title": "t"})},
		{AgentId: "m", SessionId: "s", ToolName: "mcp__gh__create_issue", Server: "gh", Args: testkit.Struct(t, map[string]any{"title": "t"})},
	} {
		if r := ts.Decide(t, req); r.Decision != pb.Decision_DECISION_ALLOW {
			t.Errorf("%s server %q: %s, want the remembered allow", req.ToolName, req.Server, r.Decision)
		}
	}
}

// ReportResult: errors share the consecutive cap with denials; a success
// resets it; once a session reports, allows alone do not reset; codes.
func TestReportResult(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": resultAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	ctx := context.Background()
	read := func(sid, callID string) string {
		return ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: sid, ToolName: "Read", CallId: callID}).DecisionId
	}
	report := func(req *pb.ReportResultRequest) (bool, codes.Code) {
		r, err := ts.Client.ReportResult(ctx, req)
		return r.GetHalt(), status.Code(err)
	}
	// Error, deny, allow (no reset once reported), error: the third failure halts.
	if h, c := report(&pb.ReportResultRequest{DecisionId: read("e", ""), IsError: true, Error: "ENOENT"}); h || c != codes.OK {
		t.Fatalf("first error: halt %v %s", h, c)
	}
	ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: "e", ToolName: "rm"})
	id := read("e", "tool_use_1")
	if h, c := report(&pb.ReportResultRequest{CallId: "tool_use_1", AgentId: "w", SessionId: "e", IsError: true}); !h || c != codes.OK {
		t.Fatalf("third failure, reported by call_id: halt %v %s", h, c)
	}
	if _, c := report(&pb.ReportResultRequest{DecisionId: id}); c != codes.FailedPrecondition {
		t.Fatalf("reported twice: %s", c)
	}
	// A success resets.
	if h, c := report(&pb.ReportResultRequest{DecisionId: read("e", "")}); h || c != codes.OK {
		t.Fatalf("a success: halt %v %s", h, c)
	}
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: "e", ToolName: "rm"}); r.Halt {
		t.Fatal("a denial after a reported success halts")
	}
	// Codes, in order: shape, id, state.
	denied := ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: "e", ToolName: "rm"}).DecisionId
	asked := ts.Decide(t, write("e", map[string]any{}, t)).DecisionId
	cases := []struct {
		what string
		req  *pb.ReportResultRequest
		want codes.Code
	}{
		{"no id", &pb.ReportResultRequest{}, codes.InvalidArgument},
		{"both ids", &pb.ReportResultRequest{DecisionId: denied, CallId: "x"}, codes.InvalidArgument},
		{"error text on a success", &pb.ReportResultRequest{DecisionId: denied, Error: "x"}, codes.InvalidArgument},
		{"an error text too long", &pb.ReportResultRequest{DecisionId: denied, IsError: true, Error: strings.Repeat("x", pdp.MaxReportErrorBytes+1)}, codes.InvalidArgument},
		{"an id too long", &pb.ReportResultRequest{DecisionId: strings.Repeat("x", grpcapi.MaxIDBytes+1)}, codes.InvalidArgument},
		{"unknown id", &pb.ReportResultRequest{DecisionId: "nope"}, codes.NotFound},
		{"unknown call id", &pb.ReportResultRequest{CallId: "nope", AgentId: "w", SessionId: "e"}, codes.NotFound},
		{"a call id of another session", &pb.ReportResultRequest{CallId: "tool_use_1", AgentId: "w", SessionId: "other"}, codes.NotFound},
		{"a deny", &pb.ReportResultRequest{DecisionId: denied}, codes.FailedPrecondition},
		{"an ask not answered", &pb.ReportResultRequest{DecisionId: asked}, codes.FailedPrecondition},
	}
	for _, c := range cases {
		if _, got := report(c.req); got != c.want {
			t.Errorf("%s: %s, want %s", c.what, got, c.want)
		}
	}
	// A confirmed allow has a result to report; a confirmed deny has none.
	if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: asked, Result: "allow"}); err != nil {
		t.Fatal(err)
	}
	if _, c := report(&pb.ReportResultRequest{DecisionId: asked}); c != codes.OK {
		t.Fatalf("a confirmed allow: %s", c)
	}
	refused := ts.Decide(t, write("e", map[string]any{"file_path": "/x"}, t)).DecisionId
	if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: refused, Result: "deny"}); err != nil {
		t.Fatal(err)
	}
	if _, c := report(&pb.ReportResultRequest{DecisionId: refused}); c != codes.FailedPrecondition {
		t.Fatalf("a confirmed deny: %s", c)
	}
}

// Confirm by the agent's own call id.
func TestConfirmByCallID(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": resultAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	req := write("s", map[string]any{"file_path": "/tmp/x"}, t)
	req.CallId = "toolu_01"
	if r := ts.Decide(t, req); r.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("write: %s", r.Decision)
	}
	list, err := ts.Client.ListPending(context.Background(), &pb.ListPendingRequest{})
	if err != nil || len(list.Asks) != 1 || list.Asks[0].CallId != "toolu_01" {
		t.Fatalf("ListPending: %v %v, want the call id", list, err)
	}
	if _, err := ts.Client.Confirm(context.Background(), &pb.ConfirmRequest{CallId: "toolu_01", AgentId: "w", SessionId: "other", Result: "allow"}); status.Code(err) != codes.NotFound {
		t.Fatalf("call id under another session: %v", err)
	}
	if r, err := ts.Client.Confirm(context.Background(), &pb.ConfirmRequest{CallId: "toolu_01", AgentId: "w", SessionId: "s", Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Confirm by call id: %v %v", r, err)
	}
	if _, err := ts.Client.ReportResult(context.Background(), &pb.ReportResultRequest{CallId: "toolu_01", AgentId: "w", SessionId: "s", IsError: true, Error: "disk full"}); err != nil {
		t.Fatalf("ReportResult by call id: %v", err)
	}
}

// With workspace binding, ReportResult sees only the caller's workspace.
func TestReportResultIsWorkspaceScoped(t *testing.T) {
	ts := workspaceServer(t, false)
	allow := mustDecide(t, ts.Client, as(acmeToken), &pb.DecideRequest{AgentId: "acme-coder", SessionId: "s", ToolName: "Read", CallId: "c1"}, pb.Decision_DECISION_ALLOW)
	if _, err := ts.Client.ReportResult(as(globexToken), &pb.ReportResultRequest{DecisionId: allow.DecisionId, IsError: true}); status.Code(err) != codes.NotFound {
		t.Fatalf("globex reporting acme's call: %v, want NOT_FOUND", err)
	}
	if _, err := ts.Client.ReportResult(as(globexToken), &pb.ReportResultRequest{CallId: "c1", AgentId: "acme-coder", SessionId: "s", IsError: true}); status.Code(err) != codes.NotFound {
		t.Fatalf("globex reporting acme's call by call id: %v, want NOT_FOUND", err)
	}
	if _, err := ts.Client.ReportResult(as(acmeToken), &pb.ReportResultRequest{DecisionId: allow.DecisionId}); err != nil {
		t.Fatalf("acme reporting its own call: %v", err)
	}
}

// Each report and each confirmation is a decision-log event, with the
// call id; a decision line carries the call id in its input.
func TestResultAndConfirmationEvents(t *testing.T) {
	var buf testkit.SyncBuffer
	log, err := decisionlog.New(decisionlog.Config{Writer: &buf, QueueSize: 100, Block: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("v1"), "agents/data.json": resultAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Engine: pdp.Config{DecisionLog: log}})
	ctx := context.Background()
	read := ts.Decide(t, &pb.DecideRequest{AgentId: "w", SessionId: "s", ToolName: "Read", CallId: "toolu_9"})
	if _, err := ts.Client.ReportResult(ctx, &pb.ReportResultRequest{DecisionId: read.DecisionId, IsError: true, Error: "EACCES"}); err != nil {
		t.Fatal(err)
	}
	ask := ts.Decide(t, write("s", map[string]any{}, t))
	if _, err := ts.Client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow", Remember: true}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	var result, confirmation map[string]any
	callIDLogged := false
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch m["type"] {
		case "tool.result":
			result = m
		case "tool.confirmation":
			confirmation = m
		case "decision":
			if in, _ := m["input"].(map[string]any); in["call_id"] == "toolu_9" {
				callIDLogged = true
			}
		}
	}
	if result == nil || result["decision_id"] != read.DecisionId || result["call_id"] != "toolu_9" || result["is_error"] != true || result["error"] != "EACCES" || result["halt"] != false {
		t.Errorf("tool.result event: %v", result)
	}
	if confirmation == nil || confirmation["decision_id"] != ask.DecisionId || confirmation["remember"] != true || confirmation["result"] != "allow" {
		t.Errorf("tool.confirmation event: %v", confirmation)
	}
	if !callIDLogged {
		t.Error("the decision line's input lacks call_id")
	}
}

// A call id that names two different calls names neither, with or without
// a session: an ask for `ls` and a later ask for `rm -rf ~` under one call
// id cannot be approved by that id on the approver's listener (the person
// saw `ls`), nor waited on, nor reported; decision_id is the way out. A
// retried call (the same call again) still names the latest.
func TestCallIDNamingTwoCallsNamesNeither(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"a": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})
	ctx := t.Context()
	for _, session := range []string{"", "s1"} {
		bash := func(cmd string) *pb.DecideResponse {
			r := ts.Decide(t, &pb.DecideRequest{AgentId: "a", SessionId: session, ToolName: "Bash", CallId: "toolu_1",
				Args: testkit.Struct(t, map[string]any{"command": cmd})})
			if r.Decision != pb.Decision_DECISION_ASK {
				t.Fatalf("session %q, %s: %v, want an ask", session, cmd, r.Decision)
			}
			return r
		}
		first := bash("ls")
		retried := bash("ls")
		byID := &pb.ConfirmRequest{CallId: "toolu_1", AgentId: "a", SessionId: session, Result: "deny", DenyMessage: "no"}
		if r, err := ts.Approver.Confirm(ctx, byID); err != nil || r.Decision != pb.Decision_DECISION_DENY {
			t.Fatalf("session %q: Confirm of a retried call by its id: %v, %v", session, r, err)
		}
		if _, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: first.DecisionId, Result: "deny"}); err != nil {
			t.Fatalf("session %q: the first of the retried pair by decision_id: %v", session, err)
		}
		_ = retried

		ls := bash("ls")
		rm := bash("rm -rf ~")
		byID.Result, byID.DenyMessage = "allow", ""
		_, err := ts.Approver.Confirm(ctx, byID)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "decision_id") || !strings.Contains(err.Error(), "more than one call") {
			t.Fatalf("session %q: Confirm allow by a call id naming ls and rm -rf ~: %v, want FAILED_PRECONDITION naming decision_id", session, err)
		}
		_, err = ts.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{CallId: "toolu_1", AgentId: "a", SessionId: session})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("session %q: AwaitDecision by the shared call id: %v, want FAILED_PRECONDITION", session, err)
		}
		_, err = ts.Client.ReportResult(ctx, &pb.ReportResultRequest{CallId: "toolu_1", AgentId: "a", SessionId: session})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("session %q: ReportResult by the shared call id: %v, want FAILED_PRECONDITION", session, err)
		}
		// Nothing was approved: both asks are still pending, each answerable by its decision id.
		for _, id := range []string{ls.DecisionId, rm.DecisionId} {
			r, err := ts.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: id})
			if err != nil || r.State != pb.AskState_ASK_STATE_PENDING {
				t.Fatalf("session %q: %s: %v, %v; want still pending", session, id, r, err)
			}
		}
		if r, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ls.DecisionId, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
			t.Fatalf("session %q: Confirm ls by decision_id: %v, %v", session, r, err)
		}
		if r, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: rm.DecisionId, Result: "deny"}); err != nil || r.Decision != pb.Decision_DECISION_DENY {
			t.Fatalf("session %q: Confirm rm by decision_id: %v, %v", session, r, err)
		}
	}
}
