package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A session pinned to a definition whose own guardrails do not combine
// with the policy in force is denied, saying so; it never runs with its
// command rules dropped.
func TestPinnedGuardrailsThatDoNotCompileDeny(t *testing.T) {
	snap, err := NewSnapshot(context.Background(), readDefault(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	current := snap.Agent(DefaultAgent)
	if current == nil {
		t.Fatal("no default agent")
	}
	pinned := &Agent{ID: current.ID, Index: current.Index, Definition: current.Definition,
		ownGuardrails: ast.MustParseTerm(`{"deny_commands": [1]}`).Value}
	args, _ := structpb.NewStruct(map[string]any{"command": "ls"})
	req := &pb.DecideRequest{ToolName: "Bash", Args: args}
	for range 2 { // the second answer comes from the cached merge
		resp, _, err := snap.DecideMemo(context.Background(), req, pinned, nil)
		if err == nil || resp.GetDecision() != pb.Decision_DECISION_DENY || len(resp.Reasons) == 0 || resp.Reasons[0].Rule != "pinned_guardrails" ||
			!strings.Contains(resp.GetMessage(), "pinned guardrails do not combine") {
			t.Fatalf("got %v (%v), want a deny by pinned_guardrails", resp, err)
		}
	}
}
