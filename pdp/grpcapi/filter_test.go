package grpcapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const filterAgents = `{
  "lister": {
    "tools": [
      {"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}},
       "configs": [{"name": "WebSearch", "enabled": false}]},
      {"type": "mcp_toolset", "mcp_server_name": "tickets",
       "configs": [{"name": "delete_project", "enabled": false}, {"name": "close_ticket", "permission_policy": {"type": "always_ask"}}]},
      {"type": "custom", "name": "lookup_order"}
    ],
    "mcp_servers": [{"name": "tickets", "type": "url", "url": "https://mcp.example/tickets"}, {"name": "wiki", "type": "url", "url": "https://mcp.example/wiki"}],
    "guardrails": {"deny_commands": ["curl"]},
    "asks_via_client": true
  }
}`

// FilterTools lists what some call could allow or ask, and says why each
// other tool is hidden; it counts nothing.
func TestFilterTools(t *testing.T) {
	dir := t.TempDir()
	writeAgentsBundle(t, dir, []byte(filterAgents), "r1")
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools := []*pb.ToolRef{
		{Name: "Read"}, {Name: "Bash"}, {Name: "WebSearch"}, {Name: "lookup_order"},
		{Name: "create_ticket", Server: "tickets"}, {Name: "close_ticket", Server: "tickets"}, {Name: "delete_project", Server: "tickets"},
		{Name: "mcp__tickets__delete_project"}, {Name: "search", Server: "wiki"}, {Name: "drop", Server: "undeclared"},
	}
	resp, err := ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "lister", SessionId: "s1", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	visible := map[string]bool{}
	for _, v := range resp.GetVisible() {
		visible[v.GetServer()+"/"+v.GetName()] = true
	}
	hidden := map[string]string{}
	for _, h := range resp.GetHidden() {
		hidden[h.GetTool().GetServer()+"/"+h.GetTool().GetName()] = h.GetReason()
	}
	for _, want := range []string{"/Read", "/Bash", "/lookup_order", "tickets/create_ticket", "tickets/close_ticket"} {
		if !visible[want] {
			t.Errorf("%s hidden (%q), want visible", want, hidden[want])
		}
	}
	// A wiki toolset is not declared for the agent: its toolset is off.
	for _, want := range []string{"/WebSearch", "tickets/delete_project", "/mcp__tickets__delete_project", "wiki/search", "undeclared/drop"} {
		if hidden[want] == "" {
			t.Errorf("%s visible, want hidden with a reason", want)
		}
	}
	if !strings.Contains(hidden["undeclared/drop"], "undeclared") && !strings.Contains(hidden["undeclared/drop"], "mcp_servers") {
		t.Errorf("an undeclared server's tool is hidden for %q", hidden["undeclared/drop"])
	}
	if !resp.GetAsksViaClient() || resp.GetAllowSampling() {
		t.Errorf("asks_via_client %v, allow_sampling %v: want the definition's true and false", resp.GetAsksViaClient(), resp.GetAllowSampling())
	}

	// Listing counts nothing: two denials later, no halt from FilterTools.
	for i := 0; i < 3; i++ {
		if _, err := ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "lister", SessionId: "s1", Tools: tools}); err != nil {
			t.Fatal(err)
		}
	}
	if d := ts.Decide(t, &pb.DecideRequest{AgentId: "lister", SessionId: "s1", ToolName: "Bash", Args: &structpb.Struct{Fields: map[string]*structpb.Value{"command": structpb.NewStringValue("curl x")}}}); d.GetHalt() {
		t.Error("FilterTools counted toward the session's cap")
	}

	// An unknown agent: everything hidden.
	resp, err = ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "nobody", Tools: tools[:2]})
	if err != nil || len(resp.GetVisible()) != 0 || len(resp.GetHidden()) != 2 {
		t.Errorf("unknown agent: %v, %v", resp, err)
	}

	// The agent removed while the session runs: everything hidden.
	writeAgentsBundle(t, dir, []byte(`{"other": {}}`), "r2")
	eventually(t, 10*time.Second, "reload to r2", func() bool { return strings.HasSuffix(ts.Revision(t), "r2") })
	resp, err = ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "lister", SessionId: "s1", Tools: tools[:2]})
	if err != nil || len(resp.GetVisible()) != 0 || !strings.Contains(resp.GetHidden()[0].GetReason(), "removed") {
		t.Errorf("removed agent: %v, %v", resp, err)
	}

	// Bounds: too many tools, a nameless tool.
	many := make([]*pb.ToolRef, grpcapi.MaxFilterTools+1)
	for i := range many {
		many[i] = &pb.ToolRef{Name: "Read"}
	}
	for _, bad := range []*pb.FilterToolsRequest{{AgentId: "other", Tools: many}, {AgentId: "other", Tools: []*pb.ToolRef{{Name: ""}}}} {
		if _, err := ts.Client.FilterTools(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("FilterTools with %d tools: %v, want INVALID_ARGUMENT", len(bad.GetTools()), err)
		}
	}
}
