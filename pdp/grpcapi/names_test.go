package grpcapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// One table of spellings, through a real server, fed to every path a
// protected name can take: a file tool's path, a redirect target and a
// writing program's operand are judged by the same comparison.
func TestProtectedSpellingsAreOneRule(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "p")
	for _, d := range []string{"p/src", "p/.git", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"cwd": "` + p + `", "read_paths": ["` + p + `"], "write_paths": ["` + p + `"]},
		  "guardrails": {"deny_commands": ["curl"], "protected_paths": [".env"]}}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	decide := func(tool string, args map[string]any) *pb.DecideResponse {
		return ts.Decide(t, &pb.DecideRequest{AgentId: "coder", ToolName: tool, Args: testkit.Struct(t, args)})
	}
	written := []string{
		".git/config", ".GIT/config", "src/.gi\u200ct/config", "src/.gi\ufefft/config", "\u200e.git/hooks/x",
		".git./hooks/x", ".git .//hooks/x", ".git::$INDEX_ALLOCATION/config", "GIT~1/config",
		".mcp.j\u017fon", ".MCP.JSON", ".claude/settings.json", ".c\u200dlaude/x", ".codex./x",
	}
	for _, name := range written {
		if r := decide("Write", map[string]any{"file_path": name, "content": "x"}); r.Decision != pb.Decision_DECISION_DENY || !strings.Contains(r.Message, "protected") {
			t.Errorf("Write %q: %v %q, want a protected_paths deny", name, r.Decision, r.Message)
		}
		if r := decide("Bash", map[string]any{"command": "echo x > '" + name + "'"}); r.Decision == pb.Decision_DECISION_ALLOW {
			t.Errorf("Bash echo x > %q: allowed", name)
		}
		if r := decide("Bash", map[string]any{"command": "cp a '" + name + "'"}); r.Decision == pb.Decision_DECISION_ALLOW {
			t.Errorf("Bash cp a %q: allowed", name)
		}
	}
	for _, name := range []string{".env", ".ENV", ".e\u200cnv", ".env.", ".env::$DATA", "src/../.env", "ENV~1"} {
		if r := decide("Write", map[string]any{"file_path": name, "content": "x"}); r.Decision != pb.Decision_DECISION_DENY {
			t.Errorf("Write %q: %v, want deny", name, r.Decision)
		}
		if r := decide("Read", map[string]any{"file_path": name}); r.Decision != pb.Decision_DECISION_DENY {
			t.Errorf("Read %q: %v, want deny", name, r.Decision)
		}
	}
	for _, name := range []string{"src/main.c", ".gitignore", ".github/x.yml", "src/.environment", "my.git"} {
		if r := decide("Write", map[string]any{"file_path": name, "content": "x"}); r.Decision != pb.Decision_DECISION_ALLOW {
			t.Errorf("Write %q: %v %q, want allow", name, r.Decision, r.Message)
		}
		if r := decide("Bash", map[string]any{"command": "echo x > '" + name + "'"}); r.Decision != pb.Decision_DECISION_ALLOW {
			t.Errorf("Bash echo x > %q: %v %q, want allow", name, r.Decision, r.Message)
		}
	}
}

// Every search glob is checked, relative ones too, after its braces are
// expanded, its literal directory resolved through symlinks.
func TestSearchGlobsStayInScope(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "p")
	for _, d := range []string{"p/src", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"link_out": filepath.Join(root, "outside"), "src/deep": filepath.Join(root, "outside"),
		"innocent": ".env", "src/file_out": filepath.Join(root, "outside", "secret")} {
		if err := os.Symlink(target, filepath.Join(p, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"p/.env", "outside/secret", "p/src/a.c"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"cwd": "` + p + `", "read_paths": ["` + p + `"]}, "guardrails": {"protected_paths": [".env"]}}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	glob := func(tool, arg, pattern string) pb.Decision {
		args := map[string]any{arg: pattern}
		if tool == "Grep" {
			args["pattern"] = "x" // a regular expression, not a path
		}
		return ts.Decide(t, &pb.DecideRequest{AgentId: "coder", ToolName: tool, Args: testkit.Struct(t, args)}).Decision
	}
	outside := []string{
		"{..,x}/outside/secret", ".{.,}/outside/*", "{/etc,x}/passwd", "{a,{b,{c,..}}}/outside/*", "{..}/outside/*",
		"link_out/*", "link_out/secret", "src/../link_out/*", `\.\./outside/*`, "{+..0}{+..0}/outside/*",
		"*/../../outside/*", "~/x/*", "file:///etc/*", strings.Repeat("{a,b}", 9) + "/*", ".e{m..o}v",
		// Wildcards that match a symlink leading out, or to a protected name.
		"l*_out/*", "l?nk_out/secret", "[l]ink_out/*", "*/secret", "src/d*/*", "src/*/secret", "src/file_*", "inno*", "{x,l*}/*",
		"*.c ../outside/*", "*.c\t.env", "*.c,../outside/*", "*.go,.env", // some tools split a glob argument at blanks or commas
	}
	for _, g := range outside {
		if d := glob("Glob", "pattern", g); d != pb.Decision_DECISION_DENY {
			t.Errorf("Glob %q: %v, want deny", g, d)
		}
		if d := glob("Grep", "glob", g); d != pb.Decision_DECISION_DENY {
			t.Errorf("Grep glob %q: %v, want deny", g, d)
		}
	}
	for _, g := range []string{"src/*.c", "**/*.go", "*.{ts,tsx}", "{src,.}/*.c", "src/{a,b}/*", "*.go,*.c", "src/*.c *.md"} {
		if d := glob("Glob", "pattern", g); d != pb.Decision_DECISION_ALLOW {
			t.Errorf("Glob %q: %v, want allow", g, d)
		}
	}
}
