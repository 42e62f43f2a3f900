package grpcapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const (
	acmeToken   = "acme-token-0123456789"
	globexToken = "globex-token-0123456789"
)

func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

func workspaceServer(t *testing.T, approver bool) *grpcapitest.Server {
	t.Helper()
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("w"), "agents/data.json": workspaceAgents})
	return startServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: approver, API: grpcapi.Config{Workspaces: &grpcapi.Workspaces{Tokens: map[string]string{acmeToken: "acme", globexToken: "globex"}}}})
}

func mustDecide(t *testing.T, c pb.DecisionServiceClient, ctx context.Context, req *pb.DecideRequest, want pb.Decision) *pb.DecideResponse {
	t.Helper()
	resp, err := c.Decide(ctx, req)
	if err != nil {
		t.Fatalf("Decide(%v): %v", req, err)
	}
	if resp.Decision != want {
		t.Fatalf("Decide(%v): %s, want %s (%s)", req, resp.Decision, want, resp.Message)
	}
	return resp
}

// A caller of another workspace finds nothing of acme's: its asks are not
// listed, its ids (asks or not) are NOT_FOUND exactly like ids never issued,
// and its sessions are not there to end.
func TestWorkspacesScopeConfirmListPendingEndSession(t *testing.T) {
	ts := workspaceServer(t, false)
	acme, globex := as(acmeToken), as(globexToken)
	ask := mustDecide(t, ts.Client, acme, &pb.DecideRequest{AgentId: "acme-coder", SessionId: "s1", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})}, pb.Decision_DECISION_ASK)
	allow := mustDecide(t, ts.Client, acme, &pb.DecideRequest{AgentId: "acme-coder", SessionId: "s1", ToolName: "Read"}, pb.Decision_DECISION_ALLOW)
	// The shared agent (no workspace) keeps each caller's sessions and asks apart.
	sharedAsk := mustDecide(t, ts.Client, acme, &pb.DecideRequest{AgentId: "shared", SessionId: "s1", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})}, pb.Decision_DECISION_ASK)

	list, err := ts.Client.ListPending(globex, &pb.ListPendingRequest{})
	if err != nil || len(list.Asks) != 0 {
		t.Fatalf("globex's ListPending: %v %v, want nothing of acme's", list, err)
	}
	list, err = ts.Client.ListPending(acme, &pb.ListPendingRequest{})
	if err != nil || len(list.Asks) != 2 {
		t.Fatalf("acme's ListPending: %v %v, want its 2 asks", list, err)
	}

	never := "0190aaaa-0000-7000-8000-000000000000"
	_, neverErr := ts.Client.Confirm(globex, &pb.ConfirmRequest{DecisionId: never, Result: "allow"})
	for what, id := range map[string]string{"an ask": ask.DecisionId, "an allow": allow.DecisionId, "an ask of the shared agent": sharedAsk.DecisionId} {
		_, err := ts.Client.Confirm(globex, &pb.ConfirmRequest{DecisionId: id, Result: "allow"})
		if status.Code(err) != codes.NotFound {
			t.Errorf("globex confirming acme's %s: %v, want NOT_FOUND", what, err)
			continue
		}
		if got, want := status.Convert(err).Message(), strings.ReplaceAll(status.Convert(neverErr).Message(), never, id); got != want {
			t.Errorf("globex confirming acme's %s: %q, want the message of an id never issued: %q", what, got, want)
		}
	}

	if r, err := ts.Client.EndSession(globex, &pb.EndSessionRequest{AgentId: "acme-coder", SessionId: "s1"}); err != nil || r.Found {
		t.Fatalf("globex ending acme's session: %v %v, want found=false", r, err)
	}
	if r, err := ts.Client.EndSession(globex, &pb.EndSessionRequest{AgentId: "shared", SessionId: "s1"}); err != nil || r.Found {
		t.Fatalf("globex ending acme's session of the shared agent: %v %v, want found=false", r, err)
	}
	// acme's ask survived all of it.
	if r, err := ts.Client.Confirm(acme, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("acme confirming its own ask: %v %v", r, err)
	}
	if r, err := ts.Client.EndSession(acme, &pb.EndSessionRequest{AgentId: "acme-coder", SessionId: "s1"}); err != nil || !r.Found {
		t.Fatalf("acme ending its session: %v %v, want found=true", r, err)
	}
}

// A denial count belongs to the caller's session: another workspace's
// denials under the same agent and session id do not halt acme's loop.
func TestWorkspacesKeepSessionsApart(t *testing.T) {
	ts := workspaceServer(t, false)
	for i := 0; i < 5; i++ {
		mustDecide(t, ts.Client, as(globexToken), &pb.DecideRequest{AgentId: "shared", SessionId: "s", ToolName: "mcp__x__y"}, pb.Decision_DECISION_DENY)
	}
	r := mustDecide(t, ts.Client, as(acmeToken), &pb.DecideRequest{AgentId: "shared", SessionId: "s", ToolName: "mcp__x__y"}, pb.Decision_DECISION_DENY)
	if r.Halt {
		t.Fatal("globex's denials halted acme's session")
	}
}

// With an approver listener, Confirm and ListPending are served there only:
// the agent's address refuses them, whoever asks.
func TestConfirmListenSeparatesTheApprover(t *testing.T) {
	ts := workspaceServer(t, true)
	acme := as(acmeToken)
	ask := mustDecide(t, ts.Client, acme, &pb.DecideRequest{AgentId: "acme-coder", SessionId: "s", ToolName: "Write"}, pb.Decision_DECISION_ASK)
	if _, err := ts.Client.Confirm(acme, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Confirm on the agent's address: %v, want PERMISSION_DENIED", err)
	}
	if _, err := ts.Client.ListPending(acme, &pb.ListPendingRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("ListPending on the agent's address: %v, want PERMISSION_DENIED", err)
	}
	// Refused before anything about the request is looked at.
	if _, err := ts.Client.Confirm(acme, &pb.ConfirmRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an empty Confirm on the agent's address: %v, want PERMISSION_DENIED", err)
	}
	list, err := ts.Approver.ListPending(acme, &pb.ListPendingRequest{})
	if err != nil || len(list.Asks) != 1 || list.Asks[0].DecisionId != ask.DecisionId {
		t.Fatalf("ListPending on the approver's address: %v %v", list, err)
	}
	// The approver's address still binds workspaces.
	if _, err := ts.Approver.Confirm(as(globexToken), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); status.Code(err) != codes.NotFound {
		t.Fatalf("globex on the approver's address: %v, want NOT_FOUND", err)
	}
	if r, err := ts.Approver.Confirm(acme, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Confirm on the approver's address: %v %v", r, err)
	}
	// Everything else stays on the agent's address.
	if _, err := ts.Client.EndSession(acme, &pb.EndSessionRequest{AgentId: "acme-coder", SessionId: "s"}); err != nil {
		t.Fatalf("EndSession on the agent's address: %v", err)
	}
}

// Status tells a bound caller of a rejected load only what is not another
// workspace's: an error about globex's agent is left out for acme, and
// shown to globex.
func TestStatusHidesAnotherWorkspacesErrors(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("w"), "agents/data.json": workspaceAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, API: grpcapi.Config{Workspaces: &grpcapi.Workspaces{Tokens: map[string]string{acmeToken: "acme", globexToken: "globex"}}}})
	broken := strings.Replace(workspaceAgents, `"globex-coder": {"workspace": "globex", "tools": [{"type": "agent_toolset"}]}`,
		`"globex-coder": {"workspace": "globex", "tools": [{"type": "globex-secret-tool-kind"}]}`, 1)
	if err := os.WriteFile(filepath.Join(dir, "agents/data.json"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ts.Engine.Reload(context.Background(), false); err == nil {
		t.Fatal("the broken bundle loaded")
	}
	acme, err := ts.Client.Status(as(acmeToken), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(acme.LastError, "globex-secret-tool-kind") || !strings.Contains(acme.LastError, "another workspace") {
		t.Errorf("acme sees %q", acme.LastError)
	}
	globex, err := ts.Client.Status(as(globexToken), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(globex.LastError, "globex-secret-tool-kind") {
		t.Errorf("globex sees %q", globex.LastError)
	}
}
