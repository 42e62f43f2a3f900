package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const constrainedAgents = `{
	"c": {"tools": [
		{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}},
		 "configs": [{"name": "WebFetch", "args": {"url": {"type": "string", "pattern": "^https://docs\\.", "x-why": "docs only"}}}]},
		{"type": "mcp_toolset", "mcp_server_name": "ev", "configs": [{"name": "mcp__ev__echo", "args": {"message": {"maxLength": 10, "required": true}}}]},
		{"type": "custom", "name": "lookup", "args": {"id": {"pattern": "^[0-9]+$"}}}
	], "mcp_servers": [{"name": "ev"}]}
}`

func constrainedSnapshot(t *testing.T) *Snapshot {
	t.Helper()
	snap, err := NewSnapshot(context.Background(), constrainedBundles(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func constrainedBundles(t *testing.T) []*bundles.Bundle {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(`{"agents": `+constrainedAgents+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"roots": ["agents"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bs, err := (&bundles.Sources{Paths: []string{dir}}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// A library that does not read input.arguments would leave every
// constraint unchecked: such a bundle set does not load.
func TestConstraintsNeedALibraryThatReadsThem(t *testing.T) {
	bs := constrainedBundles(t)
	i := slices.IndexFunc(bs, func(b *bundles.Bundle) bool { return b.Name == "library" })
	lib := *bs[i]
	b := *lib.Bundle
	b.Modules = slices.Clone(b.Modules)
	replaced := false
	for j, m := range b.Modules {
		if m.Parsed.Package.Path.String() == "data.toolpdp.arguments" {
			deaf, err := ast.ParseModuleWithOpts(m.Path, "package toolpdp.arguments\n\nimport rego.v1\n\nreasons := set()\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatal(err)
			}
			b.Modules[j].Parsed, replaced = deaf, true
		}
	}
	if !replaced {
		t.Fatal("the library has no toolpdp.arguments module")
	}
	lib.Bundle = &b
	bs[i] = &lib
	_, err := NewSnapshot(context.Background(), bs, time.Now())
	if err == nil || !strings.Contains(err.Error(), "agent 'c'") || !strings.Contains(err.Error(), "input.arguments") {
		t.Errorf("a library deaf to the constraints: %v", err)
	}
}

// The input carries what the call breaks, under the set it may meet: a
// custom tool's own constraints, or its toolset's, the tool named
// canonically (bare or in full, under its server or the custom tools' one).
func TestInputCarriesBrokenConstraints(t *testing.T) {
	snap := constrainedSnapshot(t)
	for _, c := range []struct {
		req  *pb.DecideRequest
		want string // the input's arguments; "" none
	}{
		{&pb.DecideRequest{AgentId: "c", ToolName: "WebFetch", Args: structOf(t, map[string]any{"url": "https://docs.x"})}, `{"toolset": []}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "WebFetch", Args: structOf(t, map[string]any{"url": "http://x"})},
			`{"toolset": [{"arg": "url", "keyword": "pattern", "message": "argument \"url\": does not match pattern \"^https://docs\\\\.\""}]}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "echo", Server: "ev"},
			`{"toolset": [{"arg": "message", "keyword": "required", "message": "argument \"message\": required, and the call does not give it"}]}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "mcp__ev__echo", Args: structOf(t, map[string]any{"message": "hi"})}, `{"toolset": []}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "mcp__orca__lookup", Args: structOf(t, map[string]any{"id": "7"})}, `{"custom": []}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "lookup", Args: structOf(t, map[string]any{"id": "x"})},
			`{"custom": [{"arg": "id", "keyword": "pattern", "message": "argument \"id\": does not match pattern \"^[0-9]+$\""}]}`},
		{&pb.DecideRequest{AgentId: "c", ToolName: "Read"}, ""},
		{&pb.DecideRequest{AgentId: "c", ToolName: "echo"}, ""},
	} {
		in, err := snap.Input(c.req)
		if err != nil {
			t.Fatal(err)
		}
		got := in.(ast.Object).Get(ast.StringTerm("arguments"))
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s/%s: arguments %v, want none", c.req.Server, c.req.ToolName, got)
		case c.want != "" && (got == nil || got.Value.Compare(ast.MustParseTerm(c.want).Value) != 0):
			t.Errorf("%s/%s: arguments %v, want %s", c.req.Server, c.req.ToolName, got, c.want)
		}
	}
}

// The memo key tells apart calls whose constraints find different things,
// and keys alike calls whose constraints hold alike.
func TestKeyHoldsBrokenConstraints(t *testing.T) {
	snap := constrainedSnapshot(t)
	if ok, why := snap.Memoizable(); !ok {
		t.Fatal(why)
	}
	keyOf := func(msg string) memoKey {
		req := &pb.DecideRequest{AgentId: "c", ToolName: "echo", Server: "ev", Args: structOf(t, map[string]any{"message": msg})}
		f, err := gather(context.Background(), snap, "c", snap.agents["c"], req)
		if err != nil {
			t.Fatal(err)
		}
		return snap.key(f)
	}
	if keyOf("short") == keyOf("much too long a message") {
		t.Error("a call keeping to its constraints and one breaking them share a key")
	}
}

// A pinned definition keeps its constraints: written and read again, it
// checks what it checked, and its encoding names them.
func TestPinnedDefinitionKeepsConstraints(t *testing.T) {
	snap := constrainedSnapshot(t)
	body, _, err := snap.agents["c"].Encoded()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"maxLength"`) {
		t.Errorf("the pin %s does not hold the constraints", body)
	}
	pinned, err := DecodeAgent(body)
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.DecideRequest{AgentId: "c", ToolName: "echo", Server: "ev", Args: structOf(t, map[string]any{"message": "much too long a message"})}
	resp, err := snap.Decide(context.Background(), req, pinned)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Decision != pb.Decision_DECISION_DENY || !strings.Contains(resp.Message, "maxLength") {
		t.Errorf("the pinned definition decided %v %q, want the maxLength deny", resp.Decision, resp.Message)
	}
	if _, err := DecodeAgent([]byte(strings.Replace(string(body), `"maxLength"`, `"minLength"`, 1))); err == nil || !strings.Contains(err.Error(), "minLength") {
		t.Errorf("a pin with a keyword outside the subset: %v", err)
	}
}

// One snapshot's compiled constraints serve concurrent calls alike.
func TestConstraintsConcurrently(t *testing.T) {
	snap := constrainedSnapshot(t)
	memo := NewMemo(64, 0)
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 25; i++ {
				msg, want := "short", pb.Decision_DECISION_ASK
				if (g+i)%2 == 1 {
					msg, want = "much too long a message", pb.Decision_DECISION_DENY
				}
				req := &pb.DecideRequest{AgentId: "c", ToolName: "echo", Server: "ev", Args: structOf(t, map[string]any{"message": msg})}
				resp, _, err := snap.DecideMemo(context.Background(), req, nil, memo)
				if err != nil || resp.Decision != want {
					errs <- fmt.Sprintf("echo %q: %v %v %q, want %v", msg, err, resp.Decision, resp.Message, want)
					return
				}
			}
			errs <- ""
		}()
	}
	for g := 0; g < 8; g++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// A misspelt args is an unknown key naming the one meant, on a configs
// entry and on a custom tool alike: a constraint must never silently not
// be there.
func TestMisspeltArgsIsRefused(t *testing.T) {
	for agents, want := range map[string]string{
		`{"c": {"tools": [{"type": "agent_toolset", "configs": [{"name": "WebFetch", "arg": {"url": {"maxLength": 9}}}]}]}}`: `b: agent 'c': tools[0].configs[0].arg: unknown key (did you mean "args"?)`,
		`{"c": {"tools": [{"type": "custom", "name": "lookup", "arg": {"id": {"maxLength": 9}}}]}}`:                          `b: agent 'c': tools[0].arg: unknown key (did you mean "args"?)`,
		`{"c": {"tools": [{"type": "agent_toolset", "configs": ["WebFetch"]}]}}`:                                             `b: agent 'c': tools[0].configs[0]: must be an object, got a string`,
		`{"c": {"tools": [{"type": "agent_toolset", "configs": [{"name": "WebFetch", "args": [{"url": {}}]}]}]}}`:            `b: agent 'c': tools[0].configs[0].args: must be an object, got an array`,
	} {
		_, err := validateAgents(agentsBundle(t, agents), nil, map[string]Definition{}, false)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", agents, err, want)
		}
	}
}
