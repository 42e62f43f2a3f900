package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A command's analysis is kept by the snapshot, but the files it names are
// resolved on every call: the same command in a cwd where its target is a
// symlink to a protected name, then where it is a plain file, then back.
func TestKeptAnalysisResolvesPathsPerCall(t *testing.T) {
	snap, linked, plain := linkedAndPlain(t)
	args, _ := structpb.NewStruct(map[string]any{"command": "echo hi > x"})
	protected := func(cwd string) []any {
		in, err := snap.Input(&pb.DecideRequest{ToolName: "Bash", Args: args, ExecutionPolicy: &pb.ExecutionPolicy{Cwd: cwd}})
		if err != nil {
			t.Fatal(err)
		}
		return jsonOf(t, in)["command"].(map[string]any)["protected"].([]any)
	}
	for i, c := range []struct {
		cwd  string
		want int
	}{{linked, 1}, {plain, 0}, {linked, 1}} {
		if got := protected(c.cwd); len(got) != c.want {
			t.Errorf("call %d in %s: protected %v, want %d", i, c.cwd, got, c.want)
		}
	}
	if n := snap.shellMemo.kept.len(); n != 1 {
		t.Errorf("%d analyses kept, want the one command's", n)
	}
}

// An analysis cut short by its context is not kept: the next call with
// time to spare analyses the command.
func TestCutShortAnalysisIsNotKept(t *testing.T) {
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := structpb.NewStringValue("ls | wc -l")
	if s := snap.shellMemo.analyze(ctx, v); s.err == nil {
		t.Fatalf("a cancelled analysis: %+v", s)
	}
	if s := snap.shellMemo.analyze(context.Background(), v); s.err != nil || len(s.leaves) != 2 {
		t.Fatalf("then with time: %+v", s)
	}
	if again := snap.shellMemo.analyze(context.Background(), v); again.err != nil || len(again.leaves) != 2 {
		t.Fatalf("kept: %+v", again)
	}
	if n := snap.shellMemo.kept.len(); n != 1 {
		t.Errorf("%d analyses kept, want 1", n)
	}
}

// A list argv and a string are told apart, and so are argvs that join to
// the same text.
func TestCommandKeys(t *testing.T) {
	list := func(s ...any) *structpb.Value { v, _ := structpb.NewList(s); return structpb.NewListValue(v) }
	keys := map[string]bool{}
	for _, v := range []*structpb.Value{structpb.NewStringValue("a b"), list("a", "b"), list("a b"), list("a\x00b"), list("a", "", "b")} {
		k, ok := commandKey(v)
		if !ok || keys[k] {
			t.Errorf("%v: key %q, %v, or seen before", v, k, ok)
		}
		keys[k] = true
	}
	if _, ok := commandKey(list("a", 1.0)); ok {
		t.Error("a list with a number has a key")
	}
}

func jsonOf(t *testing.T, v ast.Value) map[string]any {
	t.Helper()
	raw, err := ast.JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(map[string]any)
}

// Concurrent decisions share a kept analysis and its terms: each still
// gets the files its own cwd reaches (run under -race).
func TestKeptAnalysisSharedConcurrently(t *testing.T) {
	snap, linked, plain := linkedAndPlain(t)
	args, _ := structpb.NewStruct(map[string]any{"command": "echo hi > x && ls | wc -l"})
	errs := make(chan string, 8)
	for g := range 8 {
		go func() {
			for i := range 40 {
				cwd, want := linked, 1
				if (g+i)%2 == 1 {
					cwd, want = plain, 0
				}
				in, err := snap.Input(&pb.DecideRequest{ToolName: "Bash", Args: args, ExecutionPolicy: &pb.ExecutionPolicy{Cwd: cwd}})
				if err != nil {
					errs <- err.Error()
					return
				}
				cmd := jsonOf(t, in)["command"].(map[string]any)
				if got := cmd["protected"].([]any); len(got) != want || len(cmd["leaves"].([]any)) != 3 {
					errs <- fmt.Sprintf("in %s: %v", cwd, cmd)
					return
				}
			}
			errs <- ""
		}()
	}
	for range 8 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// linkedAndPlain is a snapshot of the default policy and two directories
// holding x: in linked a symlink to .git/config, in plain a file.
func linkedAndPlain(t *testing.T) (snap *Snapshot, linked, plain string) {
	t.Helper()
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	linked, plain = filepath.Join(root, "linked"), filepath.Join(root, "plain")
	for _, d := range []string{linked + "/.git", plain} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".git/config", filepath.Join(linked, "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return snap, linked, plain
}
