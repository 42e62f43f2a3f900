package grpcapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// clock is a test's own time: the server's TTLs are judged by it, so a
// test moves time on instead of waiting for it.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// confinedServer serves agent "boxed" (confined calls trusted; a
// recursive read beside .env is an ask unless confined) of workspace
// acme, with workspace binding, on a tree with a .env.
func confinedServer(t *testing.T, clk *clock) *grpcapitest.Server {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "p")
	for name, content := range map[string]string{"README": "readme\n", ".env": "SECRET=s\n"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agents, err := json.Marshal(map[string]any{"boxed": map[string]any{
		"workspace": "acme",
		"tools":     []any{map[string]any{"type": "agent_toolset", "default_config": map[string]any{"permission_policy": map[string]any{"type": "always_allow"}}}},
		"execution_policy": map[string]any{"cwd": p, "read_paths": []string{p}, "write_paths": []string{p}, "network": "none",
			"confinement": "trusted"},
		"guardrails": map[string]any{"deny_commands": []string{"curl"}, "protected_paths": []string{".env"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("x"), "agents/data.json": string(agents)})
	return startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true,
		Engine: pdp.Config{Now: clk.now, ExecutionTTL: time.Minute},
		API:    grpcapi.Config{Workspaces: &grpcapi.Workspaces{Tokens: map[string]string{acmeToken: "acme", globexToken: "globex"}}}})
}

func bash(t *testing.T, session, command string, confined bool) *pb.DecideRequest {
	return &pb.DecideRequest{AgentId: "boxed", SessionId: session, ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": command}), Confined: confined}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// GetExecution hands out an allowed shell call's execution once, for
// exactly the command decided, to its own workspace, within its TTL; an
// ask has none until a person allows it.
func TestGetExecutionIsBoundToTheDecision(t *testing.T) {
	clk := &clock{at: time.Unix(1_800_000_000, 0)}
	ts := startConfined(t, clk)
	acme, globex := as(acmeToken), as(globexToken)
	const grep = "grep -rn TODO ."

	allow := mustDecide(t, ts.Client, acme, bash(t, "s1", grep, true), pb.Decision_DECISION_ALLOW)
	if !allow.GetExecution().GetConfinementRequired() {
		t.Errorf("the confined allow's execution: %v, want confinement_required", allow.GetExecution())
	}
	_, err := ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: allow.DecisionId, Command: grep + " /"})
	wantCode(t, "another command", err, codes.PermissionDenied)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: allow.DecisionId, Argv: []string{"grep", "-rn", "TODO", "."}})
	wantCode(t, "an argv the call did not have", err, codes.PermissionDenied)
	_, err = ts.Client.GetExecution(globex, &pb.GetExecutionRequest{DecisionId: allow.DecisionId, Command: grep})
	wantCode(t, "another workspace", err, codes.NotFound)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: allow.DecisionId})
	wantCode(t, "no command", err, codes.InvalidArgument)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: "0190aaaa-0000-7000-8000-000000000000", Command: grep})
	wantCode(t, "an id never issued", err, codes.NotFound)

	ex, err := ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: allow.DecisionId, Command: grep})
	if err != nil {
		t.Fatalf("GetExecution of the exact command: %v", err)
	}
	if !ex.ConfinementRequired || ex.Network != "none" || len(ex.GetWritePaths().GetPaths()) != 1 || len(ex.UnreadableNames) == 0 {
		t.Errorf("the execution: %v, want the decided scopes, network none, .env unreadable and confinement_required", ex)
	}
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: allow.DecisionId, Command: grep})
	wantCode(t, "a second fetch", err, codes.FailedPrecondition)

	// An ask has no execution; a person's allow gives it one.
	ask := mustDecide(t, ts.Client, acme, bash(t, "s1", grep, false), pb.Decision_DECISION_ASK)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: ask.DecisionId, Command: grep})
	wantCode(t, "an ask", err, codes.FailedPrecondition)
	if r, err := ts.Client.Confirm(acme, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Confirm: %v %v", r, err)
	}
	if ex, err := ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: ask.DecisionId, Command: grep}); err != nil || ex.ConfinementRequired {
		t.Errorf("the confirmed ask's execution: %v %v, want one, not relying on confinement", ex, err)
	}

	// A denied call has none.
	deny := mustDecide(t, ts.Client, acme, bash(t, "s1", "curl https://example.com", true), pb.Decision_DECISION_DENY)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: deny.DecisionId, Command: "curl https://example.com"})
	wantCode(t, "a deny", err, codes.FailedPrecondition)

	// Past --execution-ttl it is gone.
	late := mustDecide(t, ts.Client, acme, bash(t, "", "ls", true), pb.Decision_DECISION_ALLOW)
	clk.advance(2 * time.Minute)
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: late.DecisionId, Command: "ls"})
	wantCode(t, "an expired decision", err, codes.NotFound)

	// An ended session's allows hold no longer.
	ended := mustDecide(t, ts.Client, acme, bash(t, "s2", grep, true), pb.Decision_DECISION_ALLOW)
	if _, err := ts.Client.EndSession(acme, &pb.EndSessionRequest{AgentId: "boxed", SessionId: "s2"}); err != nil {
		t.Fatal(err)
	}
	_, err = ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: ended.DecisionId, Command: grep})
	if status.Code(err) == codes.OK {
		t.Errorf("an ended session's allow: served, want refused")
	}
}

// An allow that relied on confinement and whose execution nobody fetched
// within its TTL is counted (and logged) as unverified; one fetched is not.
func TestUnfetchedConfinedAllowIsUnverified(t *testing.T) {
	clk := &clock{at: time.Unix(1_800_000_000, 0)}
	ts := startConfined(t, clk)
	acme := as(acmeToken)
	const grep = "grep -rn TODO ."
	unverified := func() float64 {
		n, err := testutil.GatherAndCount(ts.Registry, "toolpdp_confinement_unverified_total")
		if err != nil || n != 1 {
			t.Fatalf("toolpdp_confinement_unverified_total: %d series, %v", n, err)
		}
		mfs, err := ts.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "toolpdp_confinement_unverified_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	fetched := mustDecide(t, ts.Client, acme, bash(t, "", grep, true), pb.Decision_DECISION_ALLOW)
	if _, err := ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: fetched.DecisionId, Command: grep}); err != nil {
		t.Fatal(err)
	}
	mustDecide(t, ts.Client, acme, bash(t, "", grep, true), pb.Decision_DECISION_ALLOW)
	mustDecide(t, ts.Client, acme, bash(t, "", "ls", true), pb.Decision_DECISION_ALLOW) // relies on nothing
	if got := unverified(); got != 0 {
		t.Fatalf("before any TTL passed: %v unverified", got)
	}
	clk.advance(2 * time.Minute)
	eventually(t, 10*time.Second, "one unverified allow", func() bool { return unverified() == 1 })
}

func startConfined(t *testing.T, clk *clock) *grpcapitest.Server {
	t.Helper()
	return confinedServer(t, clk)
}

// A remembered approval's allow has its execution like any other allow,
// in a session; the fetch is of exactly that call.
func TestGetExecutionServesARememberedApproval(t *testing.T) {
	clk := &clock{at: time.Unix(1_800_000_000, 0)}
	ts := startConfined(t, clk)
	acme := as(acmeToken)
	const grep = "grep -rn TODO ."
	ask := mustDecide(t, ts.Client, acme, bash(t, "s3", grep, false), pb.Decision_DECISION_ASK)
	if r, err := ts.Client.Confirm(acme, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow", Remember: true}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Confirm with remember: %v %v", r, err)
	}
	again := mustDecide(t, ts.Client, acme, bash(t, "s3", grep, false), pb.Decision_DECISION_ALLOW)
	if rule := again.Reasons[len(again.Reasons)-1].GetRule(); rule != "remembered_approval" {
		t.Fatalf("the second call was allowed by %s, want remembered_approval", rule)
	}
	// The same call sent confined is another call: not remembered, and
	// allowed here only because it runs confined.
	confined := mustDecide(t, ts.Client, acme, bash(t, "s3", grep, true), pb.Decision_DECISION_ALLOW)
	for _, r := range confined.Reasons {
		if r.GetRule() == "remembered_approval" {
			t.Errorf("the confined call took the unconfined call's remembered approval")
		}
	}
	if ex, err := ts.Client.GetExecution(acme, &pb.GetExecutionRequest{DecisionId: again.DecisionId, Command: grep}); err != nil || ex.GetCwd() == "" {
		t.Errorf("the remembered approval's execution: %v %v", ex, err)
	}
}
