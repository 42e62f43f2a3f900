package pdp

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Each host a run decides has its decision-log line: the tool Network,
// the host, and the outcome, in the agent and session of the command.
func TestNetworkDecisionsAreLogged(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"n": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"network": {"allow": ["proxy.golang.org"], "otherwise": "deny"}}}}`,
	})
	var out testkit.SyncBuffer
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dlog, err := decisionlog.New(decisionlog.Config{Writer: &out, QueueSize: 100, Block: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e := loadedEngine(t, Config{Bundles: []string{dir}, Logger: quiet, EvalTimeout: 5 * time.Second, MaxSessions: 10, MaxPending: 10, DecisionLog: dlog})
	allow := decide(t, e, "", &pb.DecideRequest{AgentId: "n", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "go mod download"})})
	want := map[string]string{"proxy.golang.org": "allow", "evil.example": "deny"}
	for host := range want {
		decide(t, e, "", &pb.DecideRequest{AgentId: "n", SessionId: "s", ToolName: "Network", Args: testkit.Struct(t, map[string]any{
			"host": host, "port": 443, "scheme": "https", "command": "go mod download", "for_decision": allow.DecisionId})})
	}
	dlog.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Type  string `json:"type"`
			Input struct {
				ToolName  string         `json:"tool_name"`
				SessionID string         `json:"session_id"`
				Args      map[string]any `json:"args"`
			} `json:"input"`
			Result struct {
				Decision string `json:"decision"`
			} `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if line.Type == "decision" && line.Input.ToolName == "Network" && line.Input.SessionID == "s" {
			got[line.Input.Args["host"].(string)] = strings.ToLower(strings.TrimPrefix(line.Result.Decision, "DECISION_"))
		}
	}
	if len(got) != len(want) || got["proxy.golang.org"] != "allow" || got["evil.example"] != "deny" {
		t.Errorf("Network lines in the decision log: %v, want %v\n%s", got, want, out.String())
	}
}
