package grpcapi_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A shell tool's allow carries what a confined run needs: the scopes with
// their symlinks resolved, the network rule and the protected names.
func TestDecideReturnsTheConfinedScopes(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	root, _ = filepath.EvalSymlinks(root)
	real = filepath.Join(root, "real")
	ts := startServer(t, grpcapitest.Options{})
	resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"}),
		ExecutionPolicy: &pb.ExecutionPolicy{Cwd: root, ReadPaths: &pb.PathList{Paths: []string{"link", root}},
			WritePaths: &pb.PathList{}, Network: "none"}})
	// The default agent asks for Bash; an ask carries the execution the
	// allow will.
	ex := resp.GetExecution()
	if got := ex.GetReadPaths().GetPaths(); !slices.Equal(got, []string{real, root}) {
		t.Errorf("read_paths %q, want %q", got, []string{real, root})
	}
	if ex.GetWritePaths() == nil || len(ex.GetWritePaths().GetPaths()) != 0 {
		t.Errorf("write_paths %v, want set and empty (nothing may be written)", ex.GetWritePaths())
	}
	if ex.GetNetwork() != "none" {
		t.Errorf("network %q, want none", ex.GetNetwork())
	}
	if !slices.Contains(ex.GetReadOnlyNames(), ".git") || !slices.Contains(ex.GetReadOnlyNames(), ".claude") {
		t.Errorf("read_only_names %q, want the version-control and agent-configuration names", ex.GetReadOnlyNames())
	}

	// Without scopes in the policy, none is reported: absent is not enforced.
	resp = ts.Decide(t, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"}),
		ExecutionPolicy: &pb.ExecutionPolicy{Cwd: root}})
	if ex := resp.GetExecution(); ex.GetReadPaths() != nil || ex.GetWritePaths() != nil || ex.GetNetwork() != "" {
		t.Errorf("execution %v: scopes or network reported that the policy does not set", ex)
	}
}
