package grpcapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/decisionrun"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// conformanceDir is shared/conformance, beside the repository.
const conformanceDir = "../../../shared/conformance"

// pendingList is testkit.PendingConformance's file, named in skips.
const pendingList = "testdata/conformance-pending"

// conformanceFiles lists shared/conformance; a clone standing alone (no
// shared/ beside it) skips, saying so: CI has it.
func conformanceFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Skipf("skipped: no conformance corpus at %s (the shared/ directory is not beside this clone; CI runs it)", conformanceDir)
	}
	return files
}

// TestConformance runs every file of shared/conformance through a
// real server over gRPC, with reloads done by rewriting the bundle on disk.
func TestConformance(t *testing.T) {
	pending := testkit.PendingConformance(t)
	for _, f := range conformanceFiles(t) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			if issue, ok := pending[name]; ok {
				t.Skipf("pending: issue %s (%s)", issue, pendingList)
			}
			res := runConformance(t, f)
			for _, fl := range res.Failures {
				t.Errorf("%s", fl)
			}
		})
	}
}

// runConformance runs one corpus file against a fresh server whose bundle
// holds the file's agents; reload_agents rewrites that bundle on disk.
func runConformance(t *testing.T, file string) decisionrun.Result {
	t.Helper()
	c, err := decisionrun.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := decisionrun.MakeTree(c, root); err != nil {
		t.Fatal(err)
	}
	bdir := t.TempDir()
	rev := 1
	writeAgentsBundle(t, bdir, decisionrun.Sub(mustJSON(t, c.Agents), root), fmt.Sprintf("r%d", rev))
	ts := startServer(t, grpcapitest.Options{Bundles: []string{bdir}, Watch: true})
	target := decisionrun.Target{Client: ts.Client, ReloadAgents: func(_ context.Context, agents []byte) error {
		rev++
		want := fmt.Sprintf("r%d", rev)
		writeAgentsBundle(t, bdir, agents, want)
		eventually(t, time.Minute, "reload to "+want, func() bool {
			return ts.Decide(t, &pb.DecideRequest{AgentId: "__probe__", ToolName: "Read"}).PolicyRevision == "library-0.1.0,"+want
		})
		return nil
	}}
	res, err := decisionrun.Run(context.Background(), c, root, target)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// writeAgentsBundle writes agents/data.json and .manifest, each replaced by
// rename as an editor or a deploy tool would.
func writeAgentsBundle(t *testing.T, dir string, agents []byte, revision string) {
	t.Helper()
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), agents)
	writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(fmt.Sprintf(`{"revision": %q, "roots": ["agents"]}`, revision)))
}

func writeFileAtomic(t testing.TB, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformanceShellSteps runs the shell and protected-name steps of the
// revision-3 file (its first fifteen) on their own, so that they are
// checked while the file's other step kinds are still being built.
func TestConformanceShellSteps(t *testing.T) {
	src := filepath.Join(conformanceDir, "14-revision3.json")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("skipped: %v (the shared/ directory is not beside this clone; CI runs it)", err)
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var steps []json.RawMessage
	if err := json.Unmarshal(c["steps"], &steps); err != nil {
		t.Fatal(err)
	}
	if len(steps) < 15 {
		t.Fatalf("%s has %d steps, want at least 15", src, len(steps))
	}
	c["steps"] = mustJSON(t, steps[:15])
	file := filepath.Join(t.TempDir(), "14-shell.json")
	if err := os.WriteFile(file, mustJSON(t, c), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fl := range runConformance(t, file).Failures {
		t.Errorf("%s", fl)
	}
}

// TestConformanceConfined runs the project's own corpus of confined calls
// (testdata/conformance/confined.json): what DecideRequest.confined
// changes, only where the agent's definition trusts it, and that the flag
// is part of a call's identity for the decision cache.
func TestConformanceConfined(t *testing.T) {
	res := runConformance(t, filepath.Join("..", "..", "testdata", "conformance", "confined.json"))
	if res.Steps == 0 {
		t.Fatal("no step ran")
	}
	for _, fl := range res.Failures {
		t.Errorf("%s", fl)
	}
}
