package pdp

import (
	"context"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/opafloor"
	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// benchEngine is an engine on the embedded default, or on bundle paths,
// with the decision cache as serve has it by default (cache 0) or off (-1).
func benchEngine(b *testing.B, cache int, paths ...string) *Engine {
	b.Helper()
	return loadedEngine(b, Config{Bundles: paths, EvalTimeout: time.Second, MaxSessions: 1000, MaxPending: 1000, DecisionCache: cache})
}

func benchDecide(b *testing.B, e *Engine, req *pb.DecideRequest, want pb.Decision) {
	b.Helper()
	ctx := context.Background()
	if got, err := e.Decide(ctx, "", req); err != nil || got.Decision != want {
		b.Fatalf("%s: got %v (%v), want %s", req.ToolName, got, err, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, _ = e.Decide(ctx, "", req)
	}
}

// BenchmarkDecideDefault is the in-process decision on the embedded default,
// repeated: from the second call on, the decision cache answers.
func BenchmarkDecideDefault(b *testing.B) { decideDefault(b, benchEngine(b, 0)) }

// BenchmarkDecideDefaultUncached is the same with the decision cache off:
// every call evaluates the policy.
func BenchmarkDecideDefaultUncached(b *testing.B) { decideDefault(b, benchEngine(b, -1)) }

func decideDefault(b *testing.B, e *Engine) {
	b.Run("builtin-by-category", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "Read"}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("bash-parsed", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(b, map[string]any{"command": "go test ./... && git status"})}, pb.Decision_DECISION_ASK)
	})
	b.Run("undeclared-server", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "mcp__github__create_issue"}, pb.Decision_DECISION_DENY)
	})
}

// BenchmarkDecideRealistic: 10 agents × 30 tools × 5 MCP servers, scope
// checks, 20 command guardrails (testdata/bench).
func BenchmarkDecideRealistic(b *testing.B) {
	decideRealistic(b, benchEngine(b, 0, "../testdata/bench"))
}

// BenchmarkDecideRealisticUncached is the same with the decision cache off.
func BenchmarkDecideRealisticUncached(b *testing.B) {
	decideRealistic(b, benchEngine(b, -1, "../testdata/bench"))
}

func decideRealistic(b *testing.B, e *Engine) {
	b.Run("builtin-by-category", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Grep", Args: testkit.Struct(b, map[string]any{"pattern": "x"})}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("configs-hit", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "tool_7"}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("mcp-toolset-default", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "unlisted", Server: "wiki"}, pb.Decision_DECISION_ASK)
	})
	b.Run("undeclared-server", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "mcp__crm__export"}, pb.Decision_DECISION_DENY)
	})
	b.Run("read-with-scope-check", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Read", Args: testkit.Struct(b, map[string]any{"file_path": "/usr/lib/os-release"})}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("bash-guardrails-env", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Bash", Category: pb.Category_CATEGORY_SAFE,
			Args: testkit.Struct(b, map[string]any{"command": "cd src && go test ./... | tee out.txt"}),
			Env:  map[string]string{"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "GOFLAGS": "-mod=mod"}}, pb.Decision_DECISION_ALLOW)
	})
}

// BenchmarkDecideTrace replays the shared agent-sessions trace in order,
// one decision per iteration, each pass of its requests on a fresh engine
// (so the decision cache holds only what the trace repeats), as the trace
// harness (go run ./bench -trace) measures in process.
func BenchmarkDecideTrace(b *testing.B) {
	bdir, reqs := testkit.ReplayOrSkip(b, "../../shared/traces/agent-sessions.json")
	ctx := context.Background()
	var e *Engine
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(reqs) == 0 {
			b.StopTimer()
			e = benchEngine(b, 0, bdir)
			b.StartTimer()
		}
		if _, err := e.Decide(ctx, "", reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOPAFloor is the cheapest OPA evaluation there is, a prepared
// `x := 1`: the yardstick for the in-process decision. The trace
// harness (go run ./bench -trace) measures the same loop.
func BenchmarkOPAFloor(b *testing.B) {
	pq, err := opafloor.Prepare(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	opafloor.Loop(b, pq)
}
