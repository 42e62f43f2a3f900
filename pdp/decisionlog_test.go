package pdp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// syncBuffer is a bytes.Buffer safe for the writer goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDecisionLogLines(t *testing.T) {
	dir := writeBundle(t, map[string]string{".manifest": manifest("dl1"), "agents/data.json": sessionAgents})
	snap, err := Load(context.Background(), &Sources{Paths: []string{dir}}, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	dlog, err := NewDecisionLog(DecisionLogConfig{Writer: &out, QueueSize: 100, Block: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EvalTimeout: time.Second,
		Sessions: NewSessions(10, time.Hour), Pending: NewPending(10, time.Hour), DecisionLog: dlog})
	e.Swap(snap)
	ctx := context.Background()
	e.Decide(ctx, &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "rm", Env: map[string]string{"GITHUB_TOKEN": "ghp_x", "PATH": "/bin"},
		Args: mustStruct(t, map[string]any{"path": "/x", "nested": map[string]any{"password": "hunter2"}})})
	ask := e.Decide(ctx, &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash"})
	if _, err := e.Confirm(context.Background(), &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: "not now"}); err != nil {
		t.Fatal(err)
	}
	dlog.Close()

	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q does not parse: %v", sc.Text(), err)
		}
		kinds = append(kinds, line["type"].(string))
		if line["type"] != "decision" {
			continue
		}
		for _, k := range []string{"decision_id", "timestamp", "path", "input", "result", "bundles", "metrics"} {
			if _, ok := line[k]; !ok {
				t.Errorf("decision line lacks %q: %s", k, sc.Text())
			}
		}
		if rev := line["bundles"].(map[string]any)[dir].(map[string]any)["revision"]; rev != "dl1" {
			t.Errorf("bundles: %v", line["bundles"])
		}
		if line["path"] != DecisionPath {
			t.Errorf("path %v", line["path"])
		}
	}
	if strings.Join(kinds, ",") != "decision,tool.permission_denied,decision,tool.confirmation" {
		t.Fatalf("kinds %v", kinds)
	}
	text := out.String()
	if strings.Contains(text, "ghp_x") || strings.Contains(text, "hunter2") || !strings.Contains(text, `"GITHUB_TOKEN":"[REDACTED]"`) || !strings.Contains(text, `"PATH":"/bin"`) {
		t.Fatalf("redaction:\n%s", text)
	}
	if !strings.Contains(text, `"deny_message":"not now"`) || !strings.Contains(text, `"reasons":[`) {
		t.Fatalf("confirmation or reasons missing:\n%s", text)
	}
}

// When the queue is full and the log drops, decisions go on undelayed and
// the drop is counted.
func TestDecisionLogDropsWhenFull(t *testing.T) {
	blocked := &blockingWriter{release: make(chan struct{})}
	dlog, err := NewDecisionLog(DecisionLogConfig{Writer: blocked, QueueSize: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		dlog.record(logEntry{kind: "decision", at: time.Now(), req: &pb.DecideRequest{ToolName: "Read"}, resp: &pb.DecideResponse{}})
	}
	close(blocked.release)
	dlog.Close()
	if got := counterValue(t, dlog.dropped); got < 8 {
		t.Fatalf("dropped %v of 10 with a queue of 1 and a stuck writer", got)
	}
}

type blockingWriter struct{ release chan struct{} }

func (b *blockingWriter) Write(p []byte) (int, error) { <-b.release; return len(p), nil }
