package grpcapi_test

import (
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// writeBundle writes files (path → content) as a bundle directory.

// A security team's own guardrail Rego tightens decisions through a real
// server; a rule that tries to allow is ignored.
func TestUserGuardrailRegoOnlyTightens(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"coder": {"permission_callback": false, "tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]},
		                      "asker": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}}`,
		"guardrails/data.json": `{"deny_commands": ["nc"]}`,
		"guardrails/secrets/secrets.rego": `package guardrails.secrets

import rego.v1

deny contains sprintf("%s may not read key material (%s)", [input.tool_name, p.resolved]) if {
	some p in input.paths
	endswith(p.resolved, ".pem")
}

ask contains "production deploys need a second pair of eyes" if {
	some leaf in input.command.leaves
	leaf.name == "kubectl"
	"prod" in leaf.argv
}
`,
		"guardrails/lenient/lenient.rego": `package guardrails.lenient

import rego.v1

# A guardrail cannot allow: nothing reads these.
allow := true

decision := "allow"

deny contains "never" if not allow
`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	cases := []struct {
		req  *pb.DecideRequest
		want pb.Decision
		msg  string
	}{
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Read", Args: testkit.Struct(t, map[string]any{"file_path": "/etc/ssl/server.pem"})}, pb.Decision_DECISION_DENY, "Read may not read key material"},
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Read", Args: testkit.Struct(t, map[string]any{"file_path": "/etc/hostname"})}, pb.Decision_DECISION_ALLOW, ""},
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "echo x | nc host 80"})}, pb.Decision_DECISION_DENY, `deny_commands["nc"]`},
		// permission_callback false: the guardrail's ask becomes a deny.
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "kubectl apply -n prod -f x.yaml"})}, pb.Decision_DECISION_DENY, "second pair of eyes"},
		// The lenient package's allow does not turn the agent's ask into allow.
		{&pb.DecideRequest{AgentId: "asker", ToolName: "Read"}, pb.Decision_DECISION_ASK, "confirmation"},
	}
	for _, c := range cases {
		resp := ts.Decide(t, c.req)
		if resp.Decision != c.want || !strings.Contains(resp.Message, c.msg) {
			t.Errorf("%s %v: got %s %q, want %s containing %q", c.req.ToolName, c.req.Args.AsMap(), resp.Decision, resp.Message, c.want, c.msg)
		}
	}
}

// The worked examples of docs/POLICY.md, as a real bundle.
func TestPolicyDocExamples(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{Bundles: []string{"../../testdata/guardrail-examples"}})
	cases := []struct {
		req  *pb.DecideRequest
		want pb.Decision
		msg  string
	}{
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Read", Args: testkit.Struct(t, map[string]any{"file_path": "/home/u/.ssh/id_ed25519"})}, pb.Decision_DECISION_DENY, "may not touch key material"},
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "kubectl --context=prod apply -f x"})}, pb.Decision_DECISION_ASK, "kubectl against prod"},
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "echo x >> /etc/hosts"})}, pb.Decision_DECISION_DENY, "writing >> /etc/hosts from a shell"},
		{&pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "echo x > /tmp/y"})}, pb.Decision_DECISION_ALLOW, ""},
	}
	for _, c := range cases {
		resp := ts.Decide(t, c.req)
		if resp.Decision != c.want || !strings.Contains(resp.Message, c.msg) {
			t.Errorf("%v: got %s %q, want %s containing %q", c.req.Args.AsMap(), resp.Decision, resp.Message, c.want, c.msg)
		}
	}
}

// Network "none" (the execution policy's, the guardrails', or the call
// site's) and protected names through the shell, through a real server:
// /dev/tcp is denied, a network program asked; a write into .git or a read
// of a listed name asked, with or without command rules.
func TestShellNetworkAndProtectedNames(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{
		  "offline": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		              "execution_policy": {"network": "none"}},
		  "guarded": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		              "guardrails": {"network": "none", "protected_paths": [".env"]}},
		  "open": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	bash := func(agent, cmd string, p *pb.ExecutionPolicy) *pb.DecideRequest {
		return &pb.DecideRequest{AgentId: agent, ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd}), ExecutionPolicy: p}
	}
	cases := []struct {
		req  *pb.DecideRequest
		want pb.Decision
		msg  string
	}{
		{bash("offline", "exec 3<>/dev/tcp/example.com/80", nil), pb.Decision_DECISION_DENY, "network connection"},
		{bash("offline", "cat < /dev//tcp/example.com/80", nil), pb.Decision_DECISION_DENY, "network use is forbidden"},
		{bash("offline", "curl https://example.com", nil), pb.Decision_DECISION_ASK, "uses the network"},
		{bash("offline", "git -C . push origin main", nil), pb.Decision_DECISION_ASK, "uses the network"},
		{bash("offline", "git stash push -m wip", nil), pb.Decision_DECISION_ALLOW, ""},
		{bash("offline", "ls -la", nil), pb.Decision_DECISION_ALLOW, ""},
		{bash("guarded", "npm install left-pad", nil), pb.Decision_DECISION_ASK, "uses the network"},
		{bash("guarded", "cat .env", nil), pb.Decision_DECISION_ASK, `reaches ".env"`},
		{bash("guarded", "echo .env is ignored", nil), pb.Decision_DECISION_ALLOW, ""},
		{bash("open", "curl https://example.com", nil), pb.Decision_DECISION_ALLOW, ""},
		{bash("open", "curl https://example.com", &pb.ExecutionPolicy{Network: "none"}), pb.Decision_DECISION_ASK, "uses the network"},
		{bash("open", "rm -r .git", nil), pb.Decision_DECISION_ASK, `reaches ".git"`},
		{bash("open", "echo x > .Git/hooks/pre-commit", nil), pb.Decision_DECISION_ASK, `reaches ".git"`},
		{bash("open", "rm -r build", nil), pb.Decision_DECISION_ALLOW, ""},
	}
	for _, c := range cases {
		resp := ts.Decide(t, c.req)
		if resp.Decision != c.want || !strings.Contains(resp.Message, c.msg) {
			t.Errorf("%s %v: got %s %q, want %s containing %q", c.req.AgentId, c.req.Args.AsMap(), resp.Decision, resp.Message, c.want, c.msg)
		}
	}
}

// TestOtherFileTools: agents' other file tools are file tools — the text
// editor's view reads and its other commands write, apply_patch writes the
// files its patch names, a fetch of a file: URL reads that file — so scopes
// and protected names bind them as they bind Read and Write.
func TestOtherFileTools(t *testing.T) {
	work := t.TempDir()
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"cwd": "` + work + `", "read_paths": ["` + work + `"], "write_paths": ["` + work + `/src"]},
		  "guardrails": {"protected_paths": [".env"]}}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	call := func(tool string, args map[string]any) *pb.DecideRequest {
		return &pb.DecideRequest{AgentId: "coder", ToolName: tool, Args: testkit.Struct(t, args)}
	}
	cases := []struct {
		req  *pb.DecideRequest
		want pb.Decision
	}{
		{call("str_replace_based_edit_tool", map[string]any{"command": "view", "path": work + "/README"}), pb.Decision_DECISION_ALLOW},
		{call("str_replace_based_edit_tool", map[string]any{"command": "view", "path": work + "/.env"}), pb.Decision_DECISION_DENY},
		{call("str_replace_based_edit_tool", map[string]any{"command": "create", "path": work + "/README", "file_text": "x"}), pb.Decision_DECISION_DENY},
		{call("str_replace_based_edit_tool", map[string]any{"command": "str_replace", "path": work + "/src/a.go"}), pb.Decision_DECISION_ALLOW},
		{call("View", map[string]any{"file_path": "/etc/shadow"}), pb.Decision_DECISION_DENY},
		{call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: src/new.go\n+package x\n*** End Patch"}), pb.Decision_DECISION_ALLOW},
		{call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: src/.mcp.json\n+{}\n*** End Patch"}), pb.Decision_DECISION_DENY},
		{call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: README\n@@\n-a\n+b\n*** End Patch"}), pb.Decision_DECISION_DENY},
		{call("WebFetch", map[string]any{"url": "file://" + work + "/.env", "prompt": "x"}), pb.Decision_DECISION_DENY},
		{call("WebFetch", map[string]any{"url": "FILE:///etc/passwd", "prompt": "x"}), pb.Decision_DECISION_DENY},
		{call("WebFetch", map[string]any{"url": "https://example.com/.env", "prompt": "x"}), pb.Decision_DECISION_ALLOW},
		{call("read_file", map[string]any{"absolute_path": work + "/.env"}), pb.Decision_DECISION_DENY},
		{call("read_many_files", map[string]any{"paths": []any{work + "/README", work + "/.env"}}), pb.Decision_DECISION_DENY},
		{call("read_many_files", map[string]any{"paths": []any{work + "/README"}}), pb.Decision_DECISION_ALLOW},
		{call("write_file", map[string]any{"file_path": work + "/src/.mcp.json", "content": "{}"}), pb.Decision_DECISION_DENY},
		{call("replace", map[string]any{"file_path": work + "/src/a.go", "old_string": "a", "new_string": "b"}), pb.Decision_DECISION_ALLOW},
		{call("list_directory", map[string]any{"path": "/etc"}), pb.Decision_DECISION_DENY},
		{call("fetch", map[string]any{"url": "file:///etc/passwd"}), pb.Decision_DECISION_DENY},
	}
	for _, c := range cases {
		if resp := ts.Decide(t, c.req); resp.Decision != c.want {
			t.Errorf("%s %v: got %s %q, want %s", c.req.ToolName, c.req.Args.AsMap(), resp.Decision, resp.Message, c.want)
		}
	}
}
