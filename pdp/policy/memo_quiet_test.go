package policy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// quietTree is a workspace with files in and out of an agent's scopes,
// protected names, symlinks into and out of scope, and agents that use it.
func quietTree(t *testing.T) (root string, bs []*bundles.Bundle) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"src/a.go", "src/b.go", "src/deep/c.go", "src/.env", "docs/x.md", "other/y", ".env", ".git/config", "main.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"in": "src", "out": "other", "secret": ".env", "src/up": ".."} {
		if err := os.Symlink(filepath.Join(root, to), filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	agents := strings.ReplaceAll(`{"agents": {
		"scoped": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
			"execution_policy": {"cwd": "ROOT", "read_paths": ["ROOT"], "write_paths": ["ROOT/src", "ROOT/docs/"],
				"env": {"mode": "allowlist", "names": ["GOFLAGS"], "include_safe_env_vars": true}},
			"guardrails": {"deny_commands": ["curl", "rm -rf"], "ask_commands": ["git push"], "protected_paths": [".env"]}},
		"narrow": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}],
			"permission_callback": false,
			"execution_policy": {"cwd": "ROOT/src", "read_paths": ["ROOT/src"], "write_paths": [], "network": "none"}},
		"open": {"tools": [{"type": "agent_toolset"}]},
		"constrained": {"tools": [{"type": "agent_toolset", "configs": [{"name": "WebFetch", "args": {"url": {"pattern": "^https://"}}}]}]}
	}}`, "ROOT", root)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.json"), []byte(agents), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"roots": ["agents"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bs, err = (&bundles.Sources{Paths: []string{dir}}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return root, bs
}

// The memo keys a path no rule can fire on by its argument and access
// alone, and a command by everything of its analysis but the programs it
// runs. That holds only if the library decides every such call alike: here
// every file tool of the tables and a shell tool, over paths in and out of
// scope, protected, through links, invalid and unresolved, and commands
// that match, reach protected names or run nothing the rules know, are
// decided without a memo and grouped by their memo key: every call of a
// group must get the very same answer.
func TestPlainPathsDecideAlike(t *testing.T) {
	root, bs := quietTree(t)
	snap, err := NewSnapshot(context.Background(), bs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !snap.embedded {
		t.Fatal("the embedded library does not key plain paths alike: the test proves nothing")
	}
	paths := []any{"src/a.go", "src/b.go", "src/deep/c.go", "./src/a.go", "src/../src/b.go", root + "/src/a.go", "in/a.go", "in/deep",
		"src", "src/", "docs/x.md", "docs", "main.go", "other/y", "out/y", "../etc/passwd", "/etc/hostname", ".env", "src/.env", "secret",
		".git/config", "src/up/.env", "src/up/main.go", "missing/z", "src/new.go", "a\x00b", "~/x", "", 7.0}
	globs := []string{"**/*.go", "*.md", "src/**", ".env*", "**/.git/**", "*.{go,env}", "/etc/*", "x", "../*"}
	commands := []string{"cat src/a.go", "cat src/b.go", "cat main.go", "head -n 5 src/deep/c.go", "wc -l src/a.go src/b.go",
		"cat .env", "cat src/.env", "cat secret", "echo x > src/a.go", "echo x > .git/config", "curl -s http://x", "curl -s http://y",
		"rm -rf build", "rm -rf dist", "git push origin HEAD", "git push", "go test ./...", "go vet ./...", "bash -c \"$X\"", "eval $Y",
		"if then", "sed -n '1,5p' src/a.go", "sed -n '2,9p' src/b.go", "cat $(echo .env)", "ls src", "ls docs"}
	tools := slices.Sorted(maps.Keys(snap.tables.fileTools))
	var reqs []*pb.DecideRequest
	for _, agent := range []string{"scoped", "narrow", "open", "nobody"} {
		for _, tool := range tools {
			ft := snap.tables.fileTools[tool]
			for _, p := range paths {
				args := map[string]any{}
				for _, a := range ft.Args {
					args[a] = p
				}
				for name, values := range ft.ReadWhen {
					args[name] = values[0]
				}
				for _, u := range ft.URLs {
					if s, ok := p.(string); ok {
						args[u] = "file://" + filepath.Join(root, s)
					}
				}
				reqs = append(reqs, &pb.DecideRequest{AgentId: agent, ToolName: tool, Args: structOf(t, args)})
				for _, g := range ft.Globs {
					for _, glob := range globs {
						withGlob := map[string]any{g: glob}
						for k, v := range args {
							withGlob[k] = v
						}
						reqs = append(reqs, &pb.DecideRequest{AgentId: agent, ToolName: tool, Args: structOf(t, withGlob)})
					}
				}
			}
		}
		for tool := range snap.tables.shellTools {
			for _, c := range commands {
				reqs = append(reqs, &pb.DecideRequest{AgentId: agent, ToolName: tool, Args: structOf(t, map[string]any{"command": c}),
					Env: map[string]string{"PATH": "/usr/bin", "GOFLAGS": "-mod=mod", "AWS_SECRET_ACCESS_KEY": "x"}})
			}
		}
	}
	type group struct {
		first *pb.DecideRequest
		resp  *pb.DecideResponse
		n     int
	}
	groups := map[memoKey]*group{}
	ctx := context.Background()
	for _, req := range reqs {
		id := AgentID(req.GetAgentId())
		f, err := gather(ctx, snap, id, snap.agents[id], req)
		if err != nil {
			t.Fatal(err)
		}
		key := snap.key(f)
		resp, err := snap.Decide(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := groups[key]
		if g == nil {
			groups[key] = &group{first: req, resp: resp, n: 1}
			continue
		}
		g.n++
		if !proto.Equal(g.resp, resp) {
			t.Errorf("one memo key, two answers:\n  %s %s %v\n  → %v\n  %s %s %v\n  → %v", g.first.AgentId, g.first.ToolName, g.first.Args.AsMap(), g.resp,
				req.AgentId, req.ToolName, req.Args.AsMap(), resp)
		}
	}
	shared := 0
	for _, g := range groups {
		if g.n > 1 {
			shared++
		}
	}
	t.Logf("%d calls, %d memo keys, %d of them shared by several calls", len(reqs), len(groups), shared)
	if shared < 50 {
		t.Errorf("only %d keys shared: the plain-path keys were hardly exercised", shared)
	}
}

// A library that is not the embedded one keys every path by its name.
func TestReplacedLibraryKeysEveryPath(t *testing.T) {
	_, bs := quietTree(t)
	i := slices.IndexFunc(bs, func(b *bundles.Bundle) bool { return b.Name == "library" })
	lib := *bs[i]
	b := *lib.Bundle
	b.Modules = slices.Clone(b.Modules)
	for i, m := range b.Modules {
		if m.Parsed.Package.Path.String() == "data.toolpdp.text" {
			changed, err := ast.ParseModuleWithOpts(m.Path, string(m.Raw)+"\nunused := 1\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatal(err)
			}
			b.Modules[i].Parsed = changed
		}
	}
	lib.Bundle = &b
	bs[i] = &lib
	snap, err := NewSnapshot(context.Background(), bs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if snap.embedded {
		t.Fatal("a changed library module still keys plain paths alike")
	}
	keyOf := func(path string) memoKey {
		req := &pb.DecideRequest{AgentId: "scoped", ToolName: "Read", Args: structOf(t, map[string]any{"file_path": path})}
		f, err := gather(context.Background(), snap, "scoped", snap.agents["scoped"], req)
		if err != nil {
			t.Fatal(err)
		}
		return snap.key(f)
	}
	if keyOf("src/a.go") == keyOf("src/b.go") {
		t.Error("two paths share a key under a replaced library")
	}
}

// The memo key encodes every field an input can have: a field it did not
// know would be left out of the key, and calls that differ in it would
// share one answer.
func TestKeyKnowsEveryInputField(t *testing.T) {
	root, bs := quietTree(t)
	snap, err := NewSnapshot(context.Background(), bs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, f := range keyedFields {
		known[f] = true
	}
	for _, req := range []*pb.DecideRequest{
		{AgentId: "scoped", ToolName: "Read", Args: structOf(t, map[string]any{"file_path": "src/a.go"}), Env: map[string]string{"A": "b"}, SessionId: "s"},
		{AgentId: "scoped", ToolName: "Bash", Args: structOf(t, map[string]any{"command": "ls"}), Server: "x", Category: pb.Category_CATEGORY_ASK},
		{AgentId: "nobody", ToolName: "Grep", Args: structOf(t, map[string]any{"pattern": "x", "glob": "*.go"}),
			ExecutionPolicy: &pb.ExecutionPolicy{Cwd: root, ReadPaths: &pb.PathList{Paths: []string{root}}, Network: "none"}},
		{AgentId: "open", ToolName: "mcp__a__b"},
		{AgentId: "constrained", ToolName: "WebFetch", Args: structOf(t, map[string]any{"url": "http://x"})},
	} {
		for _, whole := range []bool{false, true} {
			in, err := buildInput(context.Background(), snap, AgentID(req.AgentId), snap.agents[req.AgentId], req, whole)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range in.(ast.Object).Keys() {
				if name := string(k.Value.(ast.String)); !known[name] {
					t.Errorf("%s: the input's field %q is not one the memo key encodes", req.ToolName, name)
				}
			}
		}
	}
	for _, f := range snap.memoFields {
		if !known[f] {
			t.Errorf("the library reads input.%s, which the memo key does not encode", f)
		}
	}
}

func structOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", m, err))
	}
	return s
}
