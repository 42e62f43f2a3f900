package decisionlog

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// When the queue is full and the log drops, decisions go on undelayed and
// the drop is counted.
func TestDecisionLogDropsWhenFull(t *testing.T) {
	blocked := &blockingWriter{release: make(chan struct{})}
	dlog, err := New(Config{Writer: blocked, QueueSize: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		dlog.Record(Entry{Kind: Decision, At: time.Now(), Req: &pb.DecideRequest{ToolName: "Read"}, Resp: &pb.DecideResponse{}})
	}
	close(blocked.release)
	dlog.Close()
	if got := testkit.CounterValue(t, dlog.dropped); got < 8 {
		t.Fatalf("dropped %v of 10 with a queue of 1 and a stuck writer", got)
	}
}

type blockingWriter struct{ release chan struct{} }

func (b *blockingWriter) Write(p []byte) (int, error) { <-b.release; return len(p), nil }

func TestNameMatcher(t *testing.T) {
	m := newNameMatcher(DefaultRedact)
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "X-API-KEY": true, "api-key": true, "pat": true, "GITHUB_PAT": true, "githubPat": true,
		"auth": true, "X-Auth": true, "bearer": true, "DB_PASSWORD": true, "aws_secret_access_key": true, "Cookie": true,
		"path": false, "file_path": false, "pattern": false, "author": false, "command": false, "PATH": false, "HOME": false,
	} {
		if got := m.masks(name); got != want {
			t.Errorf("masks(%q) = %v, want %v", name, got, want)
		}
	}
}

// A bundle's mask rules erase and overwrite by JSON pointer, list what they
// did, and ignore pointers to places that are not there.
func TestApplyMasks(t *testing.T) {
	line := map[string]any{"input": map[string]any{"args": map[string]any{"password": "p", "list": []any{"a", "b"}}}, "result": map[string]any{}}
	err := applyMasks(line, []any{
		"/input/args/password",
		"/input/args/missing",
		"/input/args/list/1",
		map[string]any{"op": "upsert", "path": "/result/note", "value": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"input":  map[string]any{"args": map[string]any{"list": []any{"a", nil}}},
		"result": map[string]any{"note": "x"},
		"erased": []any{"/input/args/password", "/input/args/list/1"},
		"masked": []any{"/result/note"},
	}
	if !reflect.DeepEqual(line, want) {
		t.Fatalf("got %v\nwant %v", line, want)
	}
	if err := applyMasks(line, []any{"/elsewhere/x", "no-slash", map[string]any{"op": "add", "path": "/input/x"}}); err == nil {
		t.Fatal("bad pointers and ops were not reported")
	}
}
