package policy

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// inputOf is the input the embedded default policy decides req on, as JSON.
func inputOf(t *testing.T, req *pb.DecideRequest) map[string]any {
	t.Helper()
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	in, err := snap.Input(req)
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, in)
}

func readDefault(t *testing.T) []*bundles.Bundle {
	t.Helper()
	bs, err := (&bundles.Sources{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// A file tool's paths are resolved against the call's cwd, its scope roots
// resolved too; the agent's index entry and guardrails come along.
func TestInputOfAFileTool(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := structpb.NewStruct(map[string]any{"file_path": "src/../main.go", "glob": "/etc/*"})
	in := inputOf(t, &pb.DecideRequest{ToolName: "Grep", Args: args,
		ExecutionPolicy: &pb.ExecutionPolicy{Cwd: root, ReadPaths: &pb.PathList{Paths: []string{root, root}}}})
	if in["agent_id"] != DefaultAgent || in["agent"] == nil || in["guardrails"] == nil {
		t.Fatalf("agent_id %v, agent %v, guardrails %v", in["agent_id"], in["agent"] != nil, in["guardrails"] != nil)
	}
	scope := in["scope"].(map[string]any)
	if read := scope["read"].([]any); len(read) != 1 || read[0] != root {
		t.Errorf("scope.read = %v, want [%s] once", read, root)
	}
	paths := in["paths"].([]any)
	if len(paths) < 2 {
		t.Fatalf("paths = %v, want the file, the glob's directory and where the symlinks its wildcard matches in /etc lead", paths)
	}
	file, glob := paths[0].(map[string]any), paths[1].(map[string]any)
	if file["resolved"] != root+"/main.go" || file["access"] != "read" || file["error"] != "" {
		t.Errorf("file path: %v", file)
	}
	if glob["arg"] != "glob" || glob["resolved"] != "/etc" {
		t.Errorf("glob path: %v", glob)
	}
	if g := in["globs"].([]any); len(g) != 1 || g[0].(map[string]any)["raw"] != "/etc/*" {
		t.Errorf("globs = %v", g)
	}
	if in["policy"].(map[string]any)["cwd"] != root {
		t.Errorf("policy = %v", in["policy"])
	}
}

// A shell tool's command is analysed: its leaves, and whether any command
// argument was there at all. Other tools have no paths and no command.
func TestInputOfAShellTool(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"command": "ls -l | grep x"})
	cmd := inputOf(t, &pb.DecideRequest{ToolName: "Bash", Args: args})["command"].(map[string]any)
	leaves := cmd["leaves"].([]any)
	if len(leaves) != 2 || leaves[0].(map[string]any)["name"] != "ls" || leaves[1].(map[string]any)["name"] != "grep" || cmd["missing"] != false {
		t.Errorf("command = %v", cmd)
	}
	if cmd := inputOf(t, &pb.DecideRequest{ToolName: "Bash"})["command"].(map[string]any); cmd["missing"] != true {
		t.Errorf("no command argument: %v", cmd)
	}
	other := inputOf(t, &pb.DecideRequest{ToolName: "WebSearch", AgentId: "ghost", Category: pb.Category_CATEGORY_SAFE})
	if _, ok := other["command"]; ok || len(other["paths"].([]any)) != 0 || other["agent"] != nil || other["category"] != "SAFE" {
		t.Errorf("input = %v", other)
	}
}

// Decide evaluates with the snapshot alone: the same call gets the same
// answer however often it is made, and the response names the revision.
func TestDecideIsStateless(t *testing.T) {
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.DecideRequest{SessionId: "s", ToolName: "mcp__gh__x"}
	for range 10 {
		resp, err := snap.Decide(context.Background(), req, nil)
		if err != nil || resp.Decision != pb.Decision_DECISION_DENY || resp.Halt || resp.PolicyRevision != snap.Revision {
			t.Fatalf("%v, %v", resp, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if resp, err := snap.Decide(ctx, &pb.DecideRequest{ToolName: "Read"}, nil); err == nil || resp.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("a cancelled call: %v, %v", resp, err)
	}
}

// The library's permission axis is the one place mcp__S__X names are
// split; Go asks it (for remembered approvals) rather than splitting again.
func TestCanonicalTool(t *testing.T) {
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, server, wantServer, wantName string
		ok                                 bool
	}{
		{"Read", "", "", "Read", true},
		{"mcp__gh__create_issue", "", "gh", "create_issue", true},
		{"mcp__gh__create_issue", "gh", "gh", "create_issue", true},
		{"create_issue", "gh", "gh", "create_issue", true},
		{"mcp__a__b__c", "", "a", "b__c", true},
		{"mcp__a__b__c", "a__b", "a__b", "c", true},
		{"mcp__gh__x", "other", "", "", false},
		{"mcp__x", "", "", "", false},
		{"mcp____x", "", "", "", false},
		{"mcp__s__", "", "", "", false},
	} {
		server, name, ok := snap.CanonicalTool(context.Background(), c.name, c.server)
		if server != c.wantServer || name != c.wantName || ok != c.ok {
			t.Errorf("CanonicalTool(%q, %q) = %q, %q, %v; want %q, %q, %v", c.name, c.server, server, name, ok, c.wantServer, c.wantName, c.ok)
		}
	}
}

// A decision's input leaves out the raw arguments when no module reads
// them; Input, for people, keeps them. A bundle's own guardrail Rego may
// read anything: its decisions get them, and decide by them.
func TestDecisionInputLeavesOutUnreadArgs(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"file_path": "/x"})
	req := &pb.DecideRequest{ToolName: "Read", Args: args}
	rule := "package guardrails.mine\n\nimport rego.v1\n\ndeny contains \"not /x\" if input.args.file_path == \"/x\"\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		args  bool
	}{
		{"the default library", nil, false},
		{"a guardrail package", map[string]string{".manifest": testkit.Manifest("r1"), "guardrails/mine.rego": rule}, true},
	} {
		bs := readDefault(t)
		if c.files != nil {
			more, err := (&bundles.Sources{Paths: []string{testkit.WriteBundle(t, c.files)}}).Read()
			if err != nil {
				t.Fatal(err)
			}
			bs = more
		}
		snap, err := NewSnapshot(context.Background(), bs, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		decided, err := buildInput(context.Background(), snap, DefaultAgent, snap.Agent(DefaultAgent), req, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, has := jsonOf(t, decided)["args"]; has != c.args {
			t.Errorf("%s: the decision's input has args: %v, want %v", c.name, has, c.args)
		}
		whole, err := snap.Input(req)
		if err != nil {
			t.Fatal(err)
		}
		if jsonOf(t, whole)["args"] == nil {
			t.Errorf("%s: Input has no args", c.name)
		}
		resp, err := snap.Decide(context.Background(), req, nil)
		if want := map[bool]pb.Decision{false: pb.Decision_DECISION_ALLOW, true: pb.Decision_DECISION_DENY}[c.args]; err != nil || resp.Decision != want {
			t.Errorf("%s: %v (%v), want %v", c.name, resp, err, want)
		}
	}
}
