package grpcapi_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Each finished call is logged at its level: a successful one at debug, a
// refused one at its code's. With the logger above debug, a successful call
// leaves no line and a refused one still does, with its code, its error and
// how long it took.
func TestCallLogLevels(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var logs testkit.SyncBuffer
		ts := startServer(t, grpcapitest.Options{LogTo: &logs, LogLevel: level})
		if _, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{ToolName: "Read"}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{}); err == nil {
			t.Fatal("a Decide without tool_name was answered")
		}
		var ok, refused []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(line, `"msg":"finished call"`) || !strings.Contains(line, `"grpc.method":"Decide"`) {
				continue
			}
			if strings.Contains(line, `"grpc.code":"OK"`) {
				ok = append(ok, line)
			} else {
				refused = append(refused, line)
			}
		}
		if want := map[slog.Level]int{slog.LevelDebug: 1, slog.LevelInfo: 0}[level]; len(ok) != want {
			t.Errorf("logger at %v: %d lines of successful calls, want %d:\n%s", level, len(ok), want, logs.String())
		}
		if len(refused) != 1 || !strings.Contains(refused[0], `"grpc.code":"InvalidArgument"`) || !strings.Contains(refused[0], `"grpc.error":`) ||
			!strings.Contains(refused[0], `"grpc.time_ms":`) || strings.Count(refused[0], `"grpc.time_ms"`) != 1 {
			t.Errorf("logger at %v: the refused call's lines: %q", level, refused)
		}
		ts.Close()
	}
}
