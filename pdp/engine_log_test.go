package pdp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

func TestDecisionLogLines(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("dl1"), "agents/data.json": testkit.SessionAgents})
	var out testkit.SyncBuffer
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &out, QueueSize: 100, Block: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := loadedEngine(t, Config{Bundles: []string{dir}, EvalTimeout: time.Second, MaxSessions: 10, MaxPending: 10, DecisionLog: dlog})
	ctx := context.Background()
	e.Decide(ctx, "", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "rm", Env: map[string]string{"GITHUB_TOKEN": "ghp_x", "PATH": "/bin"},
		Args: testkit.Struct(t, map[string]any{"path": "/x", "nested": map[string]any{"password": "hunter2"}})})
	ask := e.Decide(ctx, "", &pb.DecideRequest{AgentId: "a", SessionId: "s", ToolName: "bash"})
	if _, err := e.Confirm("", &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: "not now"}); err != nil {
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
		if line["path"] != decisionlog.DecisionPath {
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

// loadedEngine is an engine built from c, with its bundles loaded.
func loadedEngine(tb testing.TB, c Config) *Engine {
	tb.Helper()
	e, err := New(c)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Reload(context.Background(), true); err != nil {
		tb.Fatal(err)
	}
	return e
}
