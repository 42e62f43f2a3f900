package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/client"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A confined command runs through the real toolpdp binary, inside the
// scopes the real server decided.
func TestCommandConfined(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "toolpdp")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/toolpdp").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bundle := t.TempDir()
	def := `{"agents": {"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}}`
	if err := os.WriteFile(filepath.Join(bundle, "data.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(serve(t, bundle))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp := c.Check(ctx, &pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: structOf(t, map[string]any{"command": "make"}),
		Env: map[string]string{"PATH": "/usr/bin:/bin", "SECRET": "s"},
		ExecutionPolicy: &pb.ExecutionPolicy{Cwd: work, ReadPaths: &pb.PathList{Paths: []string{work}}, WritePaths: &pb.PathList{Paths: []string{work}},
			Network: "none", Env: &pb.EnvSpec{Mode: "allowlist", Names: []string{"PATH"}}}})
	if resp.GetDecision() != pb.Decision_DECISION_ALLOW {
		t.Fatalf("decision %v: %s", resp.GetDecision(), resp.GetMessage())
	}
	cmd, err := client.Command(ctx, resp, client.RunOptions{Confine: true, Toolpdp: bin}, "bash", "-c",
		"echo in > inside.txt; echo out > "+root+"/outside.txt; cat; env")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("from stdin\n"), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(work, "inside.txt")); err != nil {
		t.Errorf("the write inside write_paths failed: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(root, "outside.txt")); err == nil {
		t.Error("the confined command wrote outside write_paths")
	}
	if !strings.Contains(stdout.String(), "from stdin") || strings.Contains(stdout.String(), "SECRET") {
		t.Errorf("stdout %q: want the command's own stdin and no SECRET", stdout.String())
	}
	if !strings.Contains(stderr.String(), "toolpdp exec: writes: enforced") {
		t.Errorf("no report on stderr:\n%s", stderr.String())
	}

	// Asked to confine without toolpdp: nothing runs.
	if _, err := client.Command(ctx, resp, client.RunOptions{Confine: true, Toolpdp: "/nonexistent/toolpdp"}, "true"); !errors.Is(err, client.ErrConfinementUnavailable) {
		t.Errorf("missing toolpdp: %v, want ErrConfinementUnavailable", err)
	}
	// Only an allow runs.
	ask := c.Check(ctx, &pb.DecideRequest{ToolName: "Bash", Args: structOf(t, map[string]any{"command": "make"})})
	if _, err := client.Command(ctx, ask, client.RunOptions{}, "true"); !errors.Is(err, client.ErrNotAllowed) {
		t.Errorf("an ask: %v, want ErrNotAllowed", err)
	}
}

func structOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
