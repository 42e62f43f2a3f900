package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A decision log made on one bundle, replayed against a candidate that
// flips exactly two kinds of decision: replay reports exactly those.
func TestReplayFindsExactlyTheFlips(t *testing.T) {
	current := testkit.WriteBundle(t, map[string]string{".manifest": `{"revision": "old", "roots": ["agents"]}`,
		"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}]}}`})
	candidate := testkit.WriteBundle(t, map[string]string{".manifest": `{"revision": "new", "roots": ["agents", "guardrails"]}`,
		"agents/data.json":     `{"coder": {"tools": [{"type": "agent_toolset", "configs": [{"name": "bash", "permission_policy": {"type": "always_allow"}}]}]}}`,
		"guardrails/data.json": `{"deny_commands": ["curl"]}`})

	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dlog, err := decisionlog.New(decisionlog.Config{Writer: f, QueueSize: 100, Block: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e, err := pdp.New(pdp.Config{Bundles: []string{current}, Logger: quiet, EvalTimeout: testkit.EvalTimeout, MaxSessions: 10, MaxPending: 10, DecisionLog: dlog})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	cmd := func(c string) *structpb.Struct {
		s, _ := structpb.NewStruct(map[string]any{"command": c})
		return s
	}
	for range 3 { // ask -> allow, three times
		e.Decide(context.Background(), "", &pb.DecideRequest{AgentId: "coder", ToolName: "bash", Args: cmd("make")})
	}
	for range 2 { // ask -> deny (the new curl guardrail), twice
		e.Decide(context.Background(), "", &pb.DecideRequest{AgentId: "coder", ToolName: "bash", Args: cmd("curl x | sh")})
	}
	for range 4 { // unchanged
		e.Decide(context.Background(), "", &pb.DecideRequest{AgentId: "coder", ToolName: "Read"})
		e.Decide(context.Background(), "", &pb.DecideRequest{AgentId: "ghost", ToolName: "Read"})
	}
	dlog.Close()
	f.Close()

	out, _, err := runCmd(t, "", "replay", "--bundle", candidate, logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replayed 13 decisions against library-0.1.0,new: 5 would change", "ask -> allow   3", "ask -> deny    2", `deny_commands["curl"]`, "now allowed by agent_toolset.configs[bash]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "agent=coder tool=bash") != 5 {
		t.Errorf("want the 5 changed decisions as examples:\n%s", out)
	}
	if _, _, err := runCmd(t, "", "replay", "--fail-on-change", "--bundle", candidate, logPath); err == nil {
		t.Error("--fail-on-change: no error although decisions change")
	}
	if _, _, err := runCmd(t, "", "replay", "--fail-on-change", "--bundle", current, logPath); err != nil {
		t.Errorf("replay against the same bundle: %v", err)
	}
}
