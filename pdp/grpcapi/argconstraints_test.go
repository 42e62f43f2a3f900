package grpcapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// argsAgents constrain arguments of a built-in tool, of MCP tools (one
// named bare, one in full) and of a custom tool, with every keyword of the
// subset; an asked tool shows that a kept constraint never allows.
const argsAgents = `{
  "args": {
    "tools": [
      {"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}},
       "configs": [
         {"name": "WebFetch", "args": {"url": {"type": "string", "pattern": "^https://docs\\."}}},
         {"name": "Write", "permission_policy": {"type": "always_ask"}, "args": {"content": {"maxLength": 5}}}
       ]},
      {"type": "mcp_toolset", "mcp_server_name": "everything",
       "default_config": {"permission_policy": {"type": "always_allow"}},
       "configs": [
         {"name": "echo", "args": {"message": {"maxLength": 10}}},
         {"name": "mcp__everything__get-sum", "args": {
            "a": {"type": "integer", "minimum": 0, "maximum": 100, "required": true},
            "b": {"type": "number"}}},
         {"name": "pick", "args": {
            "colour": {"enum": ["red", "green"]},
            "mode": {"const": "safe"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "x-note": {"x-owner": "team-a"}}},
         {"name": "resources/read", "args": {"uri": {"type": "string", "pattern": "^file:///srv/docs/", "required": true}}}
       ]},
      {"type": "custom", "name": "lookup_order", "args": {"id": {"type": "string", "pattern": "^[0-9]+$"}}}
    ],
    "mcp_servers": [{"name": "everything", "type": "stdio"}]
  }
}`

func argsCall(t *testing.T, tool, server string, args map[string]any) *pb.DecideRequest {
	return &pb.DecideRequest{AgentId: "args", ToolName: tool, Server: server, Args: testkit.Struct(t, args)}
}

// wantConstraintDeny holds resp to a deny of rule argument_constraint whose
// message names the argument and the keyword.
func wantConstraintDeny(t *testing.T, what string, resp *pb.DecideResponse, arg, keyword string) {
	t.Helper()
	if resp.GetDecision() != pb.Decision_DECISION_DENY {
		t.Errorf("%s: %v (%q), want a deny", what, resp.GetDecision(), resp.GetMessage())
		return
	}
	found := false
	for _, r := range resp.GetReasons() {
		if r.GetRule() == "argument_constraint" && r.GetEffect() == pb.Decision_DECISION_DENY {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: reasons %v, want one of rule argument_constraint", what, resp.GetReasons())
	}
	if !strings.Contains(resp.GetMessage(), `"`+arg+`"`) || !strings.Contains(resp.GetMessage(), keyword) {
		t.Errorf("%s: message %q, want it to name argument %q and keyword %s", what, resp.GetMessage(), arg, keyword)
	}
}

// A call whose arguments break a constraint of its tool's entry is denied,
// naming the argument and the keyword; one that keeps to them is decided
// as it would be without them, for built-in, MCP and custom tools alike.
func TestArgumentConstraints(t *testing.T) {
	dir := t.TempDir()
	writeAgentsBundle(t, dir, []byte(argsAgents), "r1")
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})

	long := "a message well over ten characters"
	wantConstraintDeny(t, "echo, a long message", ts.Decide(t, argsCall(t, "echo", "everything", map[string]any{"message": long})), "message", "maxLength")
	wantConstraintDeny(t, "mcp__everything__echo, a long message", ts.Decide(t, argsCall(t, "mcp__everything__echo", "", map[string]any{"message": long})), "message", "maxLength")
	if d := ts.Decide(t, argsCall(t, "echo", "everything", map[string]any{"message": "short"})); d.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Errorf("echo, a short message: %v %q, want allow", d.GetDecision(), d.GetMessage())
	}
	if d := ts.Decide(t, argsCall(t, "echo", "everything", map[string]any{})); d.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Errorf("echo, no message (not required): %v %q, want allow", d.GetDecision(), d.GetMessage())
	}

	wantConstraintDeny(t, "WebFetch off docs", ts.Decide(t, argsCall(t, "WebFetch", "", map[string]any{"url": "https://evil.example/x", "prompt": "x"})), "url", "pattern")
	wantConstraintDeny(t, "WebFetch, a url that is no string", ts.Decide(t, argsCall(t, "WebFetch", "", map[string]any{"url": 7})), "url", "type")
	if d := ts.Decide(t, argsCall(t, "WebFetch", "", map[string]any{"url": "https://docs.example.com/x", "prompt": "x"})); d.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Errorf("WebFetch on docs: %v %q, want allow", d.GetDecision(), d.GetMessage())
	}

	// Constraints only tighten: the asked tool stays asked when they hold.
	if d := ts.Decide(t, argsCall(t, "Write", "", map[string]any{"file_path": "/tmp/x", "content": "ok"})); d.GetDecision() != pb.Decision_DECISION_ASK {
		t.Errorf("Write, short content: %v %q, want the entry's ask", d.GetDecision(), d.GetMessage())
	}
	wantConstraintDeny(t, "Write, long content", ts.Decide(t, argsCall(t, "Write", "", map[string]any{"file_path": "/tmp/x", "content": "too long"})), "content", "maxLength")

	// A custom tool bypasses the policy, but not its own constraints.
	wantConstraintDeny(t, "lookup_order, not a number", ts.Decide(t, argsCall(t, "lookup_order", "", map[string]any{"id": "1; drop"})), "id", "pattern")
	if d := ts.Decide(t, argsCall(t, "lookup_order", "", map[string]any{"id": "42"})); d.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Errorf("lookup_order 42: %v %q, want allow", d.GetDecision(), d.GetMessage())
	}

	// Every keyword of the subset.
	for _, c := range []struct {
		tool             string
		args             map[string]any
		arg, keyword     string // "" arg: allowed
		messageFragments []string
	}{
		{tool: "get-sum", args: map[string]any{"a": 2, "b": 3.5}},
		{tool: "get-sum", args: map[string]any{"b": 3}, arg: "a", keyword: "required"},
		{tool: "get-sum", args: map[string]any{"a": 2.5}, arg: "a", keyword: "type", messageFragments: []string{"integer"}},
		{tool: "get-sum", args: map[string]any{"a": -1}, arg: "a", keyword: "minimum", messageFragments: []string{"0"}},
		{tool: "get-sum", args: map[string]any{"a": 101}, arg: "a", keyword: "maximum", messageFragments: []string{"100"}},
		{tool: "get-sum", args: map[string]any{"a": 1, "b": "3"}, arg: "b", keyword: "type", messageFragments: []string{"number"}},
		{tool: "pick", args: map[string]any{"colour": "red", "mode": "safe", "tags": []any{"a", "bcd"}, "x-note": 1}},
		{tool: "pick", args: map[string]any{"colour": "blue"}, arg: "colour", keyword: "enum", messageFragments: []string{"red", "green"}},
		{tool: "pick", args: map[string]any{"mode": "fast"}, arg: "mode", keyword: "const", messageFragments: []string{"safe"}},
		{tool: "pick", args: map[string]any{"tags": "a"}, arg: "tags", keyword: "type", messageFragments: []string{"array"}},
		{tool: "pick", args: map[string]any{"tags": []any{"ok", "long", 3}}, arg: "tags", keyword: "maxLength", messageFragments: []string{"[1]", "[2]", "type"}},
		// The gateway decides resources/read with the uri as its argument.
		{tool: "resources/read", args: map[string]any{"uri": "file:///srv/docs/guide.md"}},
		{tool: "resources/read", args: map[string]any{"uri": "file:///etc/passwd"}, arg: "uri", keyword: "pattern"},
		// A name equal but for case is never the constrained argument unchecked.
		{tool: "echo", args: map[string]any{"Message": "a message well over ten characters"}, arg: "message", keyword: "name", messageFragments: []string{`"Message"`}},
		{tool: "get-sum", args: map[string]any{"a": 1, "A": 1000}, arg: "a", keyword: "name", messageFragments: []string{`"A"`}},
	} {
		what := c.tool + " " + testkit.Struct(t, c.args).String()
		d := ts.Decide(t, argsCall(t, c.tool, "everything", c.args))
		if c.arg == "" {
			if d.GetDecision() != pb.Decision_DECISION_ALLOW {
				t.Errorf("%s: %v %q, want allow", what, d.GetDecision(), d.GetMessage())
			}
			continue
		}
		wantConstraintDeny(t, what, d, c.arg, c.keyword)
		for _, frag := range c.messageFragments {
			if !strings.Contains(d.GetMessage(), frag) {
				t.Errorf("%s: message %q, want %q in it", what, d.GetMessage(), frag)
			}
		}
	}
}

// The decision cache keys what the constraints found: calls differing
// only in the constrained argument get their own answers, first and again.
func TestArgumentConstraintsWithTheDecisionCache(t *testing.T) {
	dir := t.TempDir()
	writeAgentsBundle(t, dir, []byte(argsAgents), "r1")
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	for i := 0; i < 3; i++ {
		for _, c := range []struct {
			message string
			want    pb.Decision
		}{
			{"short", pb.Decision_DECISION_ALLOW},
			{"a message well over ten characters", pb.Decision_DECISION_DENY},
			{"tiny", pb.Decision_DECISION_ALLOW},
			{"another message over ten", pb.Decision_DECISION_DENY},
		} {
			d := ts.Decide(t, argsCall(t, "echo", "everything", map[string]any{"message": c.message}))
			if d.GetDecision() != c.want {
				t.Fatalf("round %d, echo %q: %v %q, want %v", i, c.message, d.GetDecision(), d.GetMessage(), c.want)
			}
			if c.want == pb.Decision_DECISION_DENY && !strings.Contains(d.GetMessage(), "maxLength") {
				t.Fatalf("round %d, echo %q: message %q", i, c.message, d.GetMessage())
			}
		}
	}
	if hits := ts.Metric(t, "toolpdp_decision_cache_lookups_total", "hit"); hits == 0 {
		t.Fatal("no decision came from the cache: this test would not test it")
	}
}

// Listing is decided without arguments: a tool whose constraint requires
// an argument is listed all the same, and its call decided with them.
func TestArgumentConstraintsDoNotHideTools(t *testing.T) {
	dir := t.TempDir()
	writeAgentsBundle(t, dir, []byte(argsAgents), "r1")
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ts.Client.FilterTools(ctx, &pb.FilterToolsRequest{AgentId: "args", Tools: []*pb.ToolRef{
		{Name: "get-sum", Server: "everything"}, {Name: "echo", Server: "everything"}, {Name: "WebFetch"}, {Name: "lookup_order"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetVisible()) != 4 {
		t.Errorf("visible %v, hidden %v: want every tool listed", resp.GetVisible(), resp.GetHidden())
	}
}

// A schema outside the subset, or one that does not compile, rejects the
// bundle naming the file, the agent, the tool, the argument and what is
// wrong; the last good policy keeps deciding.
func TestArgumentConstraintsRejectBadSchemas(t *testing.T) {
	dir := t.TempDir()
	writeAgentsBundle(t, dir, []byte(argsAgents), "r1")
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	file := filepath.Join(dir, "agents", "data.json")
	echo := `{"name": "echo", "args": {"message": {"maxLength": 10}}}`
	for _, c := range []struct {
		name, entry string
		want        []string
		old         string // what entry replaces; the echo entry when ""
	}{
		{name: "a keyword outside the subset", entry: `{"name": "echo", "args": {"message": {"minLength": 1}}}`,
			want: []string{"agent 'args'", `tool "echo"`, `argument "message"`, `keyword "minLength"`, "maxLength"}},
		{name: "a pattern that is no regular expression", entry: `{"name": "echo", "args": {"message": {"pattern": "a(b"}}}`,
			want: []string{"agent 'args'", `tool "echo"`, `argument "message"`, "pattern", "regex"}},
		{name: "both at once, each reported", entry: `{"name": "echo", "args": {"message": {"minLength": 1, "pattern": "a(b"}}}`,
			want: []string{`keyword "minLength"`, "not valid regex"}},
		{name: "a maxLength that is no number", entry: `{"name": "echo", "args": {"message": {"maxLength": "ten"}}}`,
			want: []string{`tool "echo"`, `argument "message"`, "maxLength"}},
		{name: "a type JSON does not have", entry: `{"name": "echo", "args": {"message": {"type": "text"}}}`,
			want: []string{`tool "echo"`, `argument "message"`, "type"}},
		{name: "required inside items", entry: `{"name": "echo", "args": {"message": {"items": {"required": true}}}}`,
			want: []string{`tool "echo"`, `argument "message"`, "items.required"}},
		{name: "required not a boolean", entry: `{"name": "echo", "args": {"message": {"required": ["message"]}}}`,
			want: []string{`tool "echo"`, `argument "message"`, "required", "true or false"}},
		{name: "a constraint that is no object", entry: `{"name": "echo", "args": {"message": 10}}`,
			want: []string{`tool "echo"`, `argument "message"`, "object"}},
		{name: "args on a default_config", entry: `"mcp_server_name": "everything",
       "default_config": {"permission_policy": {"type": "always_allow"}, "args": {"message": {"maxLength": 1}}},`,
			want: []string{"tools[1].default_config.args", "unknown key"}, old: `"mcp_server_name": "everything",
       "default_config": {"permission_policy": {"type": "always_allow"}},`},
		{name: "one tool constrained in two entries", entry: `{"name": "echo", "args": {"message": {"maxLength": 1}}}, {"name": "mcp__everything__echo", "args": {"message": {"maxLength": 2}}}`,
			want: []string{`tool "echo"`, "two entries"}},
	} {
		old := c.old
		if old == "" {
			old = echo
		}
		bad := strings.Replace(argsAgents, old, c.entry, 1)
		if bad == argsAgents {
			t.Fatalf("%s: nothing replaced", c.name)
		}
		writeAgentsBundle(t, dir, []byte(bad), "bad")
		err := ts.Engine.Reload(ctx, true)
		if err == nil {
			t.Errorf("%s: the bundle loaded", c.name)
			continue
		}
		for _, w := range append([]string{file}, c.want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want %q in it", c.name, err, w)
			}
		}
		// The last good policy still decides, constraints and all.
		wantConstraintDeny(t, c.name+": echo after the rejected reload", ts.Decide(t, argsCall(t, "echo", "everything", map[string]any{"message": "a message well over ten characters"})), "message", "maxLength")
		if rev := ts.Revision(t); !strings.HasSuffix(rev, ",r1") {
			t.Errorf("%s: serving revision %q, want r1 still", c.name, rev)
		}
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}
