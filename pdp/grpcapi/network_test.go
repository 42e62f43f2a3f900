package grpcapi_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// networkBundle has an agent whose shell calls run under network rules, one
// without a permission callback, and a security team's guardrail on hosts.
func networkBundle(t *testing.T) string {
	return testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{
		  "netted": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		             "max_consecutive_denials": 2,
		             "execution_policy": {"network": {"allow": ["Proxy.Golang.org", "*.npmjs.org:443", "127.0.0.1:8080", "*.corp.example"],
		                                              "ask": ["github.com"], "deny": ["evil.example"], "otherwise": "deny"}}},
		  "unattended": {"permission_callback": false,
		                 "tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		                 "execution_policy": {"network": {"ask": ["github.com"]}}}}`,
		"guardrails/hosts/hosts.rego": `package guardrails.hosts

import rego.v1

deny contains msg if {
	input.tool_name == "Network"
	endswith(input.args.host, ".corp.example")
	msg := sprintf("no connection to %s: corporate hosts are off limits", [input.args.host])
}
`,
	})
}

func network(t *testing.T, agent, sessionID, host string, port int, forDecision string) *pb.DecideRequest {
	return &pb.DecideRequest{AgentId: agent, SessionId: sessionID, ToolName: "Network", Args: testkit.Struct(t, map[string]any{
		"host": host, "port": port, "scheme": "https", "command": "go mod download", "for_decision": forDecision})}
}

// A connection of a confined run is decided by the network rules of the
// allow it names, in the order deny, ask, allow, otherwise, then by the
// guardrails; only that allow's rules count, in its own session.
func TestNetworkDecidedByTheAllowsRules(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{Bundles: []string{networkBundle(t)}, Approver: true})
	ctx := context.Background()
	allow := ts.Decide(t, &pb.DecideRequest{AgentId: "netted", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "go mod download"})})
	if allow.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the command: %v", allow)
	}
	ex := allow.GetExecution()
	want := &pb.NetworkRules{Allow: []string{"proxy.golang.org", "*.npmjs.org:443", "127.0.0.1:8080", "*.corp.example"}, Ask: []string{"github.com"}, Deny: []string{"evil.example"}, Otherwise: "deny"}
	if ex.GetNetwork() != "rules" || !slices.Equal(ex.GetNetworkRules().GetAllow(), want.Allow) || !slices.Equal(ex.GetNetworkRules().GetAsk(), want.Ask) ||
		!slices.Equal(ex.GetNetworkRules().GetDeny(), want.Deny) || ex.GetNetworkRules().GetOtherwise() != "deny" {
		t.Fatalf("execution network %q rules %v, want rules %v", ex.GetNetwork(), ex.GetNetworkRules(), want)
	}
	id := allow.DecisionId
	for _, c := range []struct {
		host string
		port int
		want pb.Decision
		rule string
	}{
		{"proxy.golang.org", 443, pb.Decision_DECISION_ALLOW, "network.allow[0]"},
		{"registry.npmjs.org", 443, pb.Decision_DECISION_ALLOW, "network.allow[1]"},
		{"registry.npmjs.org", 80, pb.Decision_DECISION_DENY, "network.otherwise"},
		{"npmjs.org", 443, pb.Decision_DECISION_DENY, "network.otherwise"},
		{"2130706433", 8080, pb.Decision_DECISION_ALLOW, "network.allow[2]"},
		{"[::ffff:127.0.0.1]", 8080, pb.Decision_DECISION_ALLOW, "network.allow[2]"},
		{"127.0.0.1", 8081, pb.Decision_DECISION_DENY, "network.otherwise"},
		{"EVIL.example.", 443, pb.Decision_DECISION_DENY, "network.deny[0]"},
		{"github.com", 443, pb.Decision_DECISION_ASK, "network.ask[0]"},
		{"build.corp.example", 443, pb.Decision_DECISION_DENY, "network.allow[3]"},
	} {
		r := ts.Decide(t, network(t, "netted", "s", c.host, c.port, id))
		if r.Decision != c.want || len(r.Reasons) == 0 || r.Reasons[0].Rule != c.rule {
			t.Errorf("%s:%d: %v, want %v by %s", c.host, c.port, r, c.want, c.rule)
		}
		if r.Halt {
			t.Errorf("%s:%d: the session halted: connections do not count toward the cap", c.host, c.port)
		}
	}
	// The guardrail read the canonical host and denied.
	r := ts.Decide(t, network(t, "netted", "s", "Build.Corp.Example.", 443, id))
	if r.Decision != pb.Decision_DECISION_DENY || !strings.Contains(r.Message, "no connection to build.corp.example") {
		t.Errorf("guardrail: %v", r)
	}
	// The request's own execution policy is not read: the rules are the allow's.
	loose := network(t, "netted", "s", "example.org", 443, id)
	loose.ExecutionPolicy = &pb.ExecutionPolicy{Network: "any"}
	if r := ts.Decide(t, loose); r.Decision != pb.Decision_DECISION_DENY {
		t.Errorf("a Network call's own execution_policy was read: %v", r)
	}
	for what, req := range map[string]*pb.DecideRequest{
		"an unknown decision": network(t, "netted", "s", "proxy.golang.org", 443, "no-such-decision"),
		"another session":     network(t, "netted", "other", "proxy.golang.org", 443, id),
		"another agent":       network(t, "unattended", "s", "proxy.golang.org", 443, id),
		"no for_decision":     network(t, "netted", "s", "proxy.golang.org", 443, ""),
	} {
		if r := ts.Decide(t, req); r.Decision != pb.Decision_DECISION_DENY {
			t.Errorf("%s: %v, want a deny", what, r)
		}
	}
	// A Network decision that names another Network decision is no grant.
	ask := ts.Decide(t, network(t, "netted", "s", "github.com", 443, id))
	if r := ts.Decide(t, network(t, "netted", "s", "proxy.golang.org", 443, ask.DecisionId)); r.Decision != pb.Decision_DECISION_DENY {
		t.Errorf("a Network decision served as a grant: %v", r)
	}

	// A network ask waits for a person: listed, and confirmed like any ask.
	pending, err := ts.Approver.ListPending(ctx, &pb.ListPendingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, p := range pending.Asks {
		listed = listed || p.DecisionId == ask.DecisionId
	}
	if !listed || !strings.Contains(ask.Message, "github.com:443") || !strings.Contains(ask.Message, "go mod download") {
		t.Errorf("the ask %v is not listed among %v, or its message does not show host, port and command", ask, pending.Asks)
	}
	if r, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "allow"}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("confirm allow: %v %v", r, err)
	}
	if r, err := ts.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: ask.DecisionId}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Errorf("await the answered network ask: %v %v", r, err)
	}
	ask2 := ts.Decide(t, network(t, "netted", "s", "github.com", 22, id))
	if _, err := ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask2.DecisionId, Result: "deny"}); err != nil {
		t.Fatal(err)
	}
	// Five denials and a person's deny later, the session's own calls go on.
	if r := ts.Decide(t, &pb.DecideRequest{AgentId: "netted", SessionId: "s", ToolName: "Read", Args: testkit.Struct(t, map[string]any{"file_path": "/etc/hostname"})}); r.Decision != pb.Decision_DECISION_ALLOW || r.Halt {
		t.Errorf("after the connections' denials, a call of the session: %v", r)
	}
}

// Without a permission callback nobody can answer a network ask: a deny.
func TestNetworkAskWithoutCallbackDenies(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{Bundles: []string{networkBundle(t)}})
	allow := ts.Decide(t, &pb.DecideRequest{AgentId: "unattended", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "git fetch"})})
	if allow.Decision != pb.Decision_DECISION_ALLOW || allow.GetExecution().GetNetworkRules().GetOtherwise() != "deny" {
		t.Fatalf("the command: %v", allow)
	}
	if r := ts.Decide(t, network(t, "unattended", "", "github.com", 443, allow.DecisionId)); r.Decision != pb.Decision_DECISION_DENY || !strings.Contains(r.Message, "permission_callback is false") {
		t.Errorf("a network ask without a callback: %v", r)
	}
}

// Network is never listed, and the wire's network rules are checked as a
// definition's are.
func TestNetworkReservedAndValidated(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{Bundles: []string{networkBundle(t)}})
	ctx := context.Background()
	f, err := ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "netted", Tools: []*pb.ToolRef{{Name: "Network"}, {Name: "Read"}}})
	if err != nil || len(f.Visible) != 1 || f.Visible[0].Name != "Read" {
		t.Errorf("FilterTools: %v %v; want Network hidden", f, err)
	}
	for policy, want := range map[*pb.ExecutionPolicy]string{
		{Network: "rules"}: "network_rules: required",
		{Network: "rules", NetworkRules: &pb.NetworkRules{Allow: []string{"a.example:0"}}}: `allow[0]: "a.example:0"`,
		{Network: "rules", NetworkRules: &pb.NetworkRules{Otherwise: "allow"}}:             `otherwise: "allow"`,
		{Network: "none", NetworkRules: &pb.NetworkRules{}}:                                "network_rules: set, but network is",
		{Network: "some"}: `"some" is not "none", "any", "rules" or empty`,
	} {
		_, err := ts.Client.Decide(ctx, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"}), ExecutionPolicy: policy})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want InvalidArgument naming %q", policy, err, want)
		}
	}
	r := ts.Decide(t, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"}),
		ExecutionPolicy: &pb.ExecutionPolicy{Network: "rules", NetworkRules: &pb.NetworkRules{Ask: []string{"GitHub.com."}}}})
	if r.GetExecution().GetNetwork() != "rules" || !slices.Equal(r.GetExecution().GetNetworkRules().GetAsk(), []string{"github.com"}) {
		t.Errorf("the wire's rules resolved: %v", r.GetExecution())
	}
}
