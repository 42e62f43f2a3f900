package pdp

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// benchEngine is an engine on the embedded default, or on bundle paths.
func benchEngine(b *testing.B, paths ...string) *Engine {
	b.Helper()
	snap, err := Load(context.Background(), &Sources{Paths: paths}, time.Minute, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(EngineConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EvalTimeout: time.Second,
		Sessions: NewSessions(1000, time.Hour), Pending: NewPending(1000, time.Hour)})
	e.Swap(snap)
	return e
}

func benchDecide(b *testing.B, e *Engine, req *pb.DecideRequest, want pb.Decision) {
	b.Helper()
	ctx := context.Background()
	if got := e.Decide(ctx, req).Decision; got != want {
		b.Fatalf("%s: got %s, want %s", req.ToolName, got, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.Decide(ctx, req)
	}
}

// BenchmarkDecideDefault is the in-process decision on the embedded default.
func BenchmarkDecideDefault(b *testing.B) {
	e := benchEngine(b)
	b.Run("builtin-by-category", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "Read"}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("bash-parsed", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "Bash", Args: mustStruct(b, map[string]any{"command": "go test ./... && git status"})}, pb.Decision_DECISION_ASK)
	})
	b.Run("undeclared-server", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{ToolName: "mcp__github__create_issue"}, pb.Decision_DECISION_DENY)
	})
}

// BenchmarkDecideRealistic: 10 agents × 30 tools × 5 MCP servers, scope
// checks, 20 command guardrails (testdata/bench).
func BenchmarkDecideRealistic(b *testing.B) {
	e := benchEngine(b, "../testdata/bench")
	b.Run("builtin-by-category", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Grep", Args: mustStruct(b, map[string]any{"pattern": "x"})}, pb.Decision_DECISION_ALLOW)
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
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Read", Args: mustStruct(b, map[string]any{"file_path": "/usr/lib/os-release"})}, pb.Decision_DECISION_ALLOW)
	})
	b.Run("bash-guardrails-env", func(b *testing.B) {
		benchDecide(b, e, &pb.DecideRequest{AgentId: "agent3", ToolName: "Bash", Category: pb.Category_CATEGORY_SAFE,
			Args: mustStruct(b, map[string]any{"command": "cd src && go test ./... | tee out.txt"}),
			Env:  map[string]string{"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "GOFLAGS": "-mod=mod"}}, pb.Decision_DECISION_ALLOW)
	})
}

// BenchmarkGRPC is the round trip over loopback TCP and a unix socket, with
// health Check as the transport floor.
func BenchmarkGRPC(b *testing.B) {
	for _, unix := range []bool{false, true} {
		name := "tcp"
		if unix {
			name = "unix"
		}
		ts := startServer(&testing.T{}, serverOpts{unix: unix})
		req := &pb.DecideRequest{ToolName: "Read"}
		b.Run(name+"/decide", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ts.client.Decide(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
