package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
	"github.com/toolpdp/toolpdp/telemetry"
)

// startTraced serves the embedded default agent on loopback, traced into
// an in-memory exporter; a client of it.
func startTraced(t *testing.T) (pb.DecisionServiceClient, *grpc.ClientConn, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	engine, err := pdp.New(pdp.Config{Logger: log, Registerer: reg, EvalTimeout: testkit.EvalTimeout})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := grpcapi.New(engine, grpcapi.Config{MaxArgsBytes: 64 << 10, Logger: log, Registerer: reg, Options: telemetry.ServerOptions(tp)})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Reload(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	return pb.NewDecisionServiceClient(conn), conn, exp
}

// attrs of the one span named name. A server span ends after the response
// is on its way, so it is waited for.
func attrs(t *testing.T, exp *tracetest.InMemoryExporter, name string) map[attribute.Key]attribute.Value {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var found []map[attribute.Key]attribute.Value
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				m := map[attribute.Key]attribute.Value{}
				for _, a := range s.Attributes {
					m[a.Key] = a.Value
				}
				found = append(found, m)
			}
		}
		switch {
		case len(found) == 1:
			return found[0]
		case len(found) > 1 || time.Now().After(deadline):
			t.Fatalf("%d spans named %s; want 1 (spans: %v)", len(found), name, exp.GetSpans())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSpanPerRPCWithDecisionAttributes(t *testing.T) {
	client, conn, exp := startTraced(t)
	ctx := context.Background()
	const secret = "hunter2-do-not-trace"
	args, _ := structpb.NewStruct(map[string]any{"command": "echo " + secret})
	ask, err := client.Decide(ctx, &pb.DecideRequest{SessionId: "s1", ToolName: "Bash", Args: args, Env: map[string]string{"TOKEN": secret}, CallId: "c1"})
	if err != nil || ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Bash: %v %v", ask, err)
	}
	got := attrs(t, exp, "toolpdp.v1.DecisionService/Decide")
	t.Logf("Decide span attributes: %v", got)
	want := map[attribute.Key]string{
		telemetry.AttrDecision: "ask", telemetry.AttrAgent: "default",
		telemetry.AttrRevision: ask.PolicyRevision, telemetry.AttrRule: ask.Reasons[0].Rule,
	}
	for k, v := range want {
		if got[k].AsString() != v || v == "" {
			t.Errorf("%s = %q; want %q", k, got[k].AsString(), v)
		}
	}
	if got["rpc.system"].AsString() != "grpc" && got["rpc.system.name"].AsString() != "grpc" {
		t.Errorf("not otelgrpc's span: %v", got)
	}
	// Never the arguments, the env or the message quoting them.
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), secret) {
				t.Errorf("span %s attribute %s carries the tool's arguments: %s", s.Name, a.Key, a.Value.String())
			}
		}
		for _, e := range s.Events {
			for _, a := range e.Attributes {
				if strings.Contains(a.Value.String(), secret) {
					t.Errorf("span %s event %s carries the tool's arguments", s.Name, e.Name)
				}
			}
		}
	}

	// An allow, a deny, Confirm and ReportResult: each its own span.
	exp.Reset()
	allow, err := client.Decide(ctx, &pb.DecideRequest{AgentId: "default", SessionId: "s1", ToolName: "Read", CallId: "c2"})
	if err != nil || allow.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Read: %v %v", allow, err)
	}
	if a := attrs(t, exp, "toolpdp.v1.DecisionService/Decide"); a[telemetry.AttrDecision].AsString() != "allow" || a[telemetry.AttrRule].AsString() == "" || a[telemetry.AttrHalt].AsBool() {
		t.Errorf("allow span: %v", a)
	}
	if _, err := client.ReportResult(ctx, &pb.ReportResultRequest{DecisionId: allow.DecisionId, IsError: true, Error: secret}); err != nil {
		t.Fatal(err)
	}
	if a := attrs(t, exp, "toolpdp.v1.DecisionService/ReportResult"); !a[telemetry.AttrIsError].AsBool() {
		t.Errorf("ReportResult span: %v", a)
	}
	exp.Reset()
	if _, err := client.Decide(ctx, &pb.DecideRequest{ToolName: "mcp__github__create_issue"}); err != nil {
		t.Fatal(err)
	}
	if a := attrs(t, exp, "toolpdp.v1.DecisionService/Decide"); a[telemetry.AttrDecision].AsString() != "deny" || a[telemetry.AttrAxis].AsString() != "permission" {
		t.Errorf("deny span: %v", a)
	}
	if _, err := client.Confirm(ctx, &pb.ConfirmRequest{DecisionId: ask.DecisionId, Result: "deny", DenyMessage: secret}); err != nil {
		t.Fatal(err)
	}
	if a := attrs(t, exp, "toolpdp.v1.DecisionService/Confirm"); a[telemetry.AttrDecision].AsString() != "deny" {
		t.Errorf("Confirm span: %v", a)
	}

	// Health checks are not traced: probes every few seconds are noise.
	// (The Status after it is, and once its span is in, the check's would be.)
	exp.Reset()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Status(ctx, &pb.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	if a := attrs(t, exp, "toolpdp.v1.DecisionService/Status"); a[telemetry.AttrRevision].AsString() == "" {
		t.Errorf("Status span: %v", a)
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans for a health check and a Status; want 1: %v", n, exp.GetSpans())
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	ctx := context.Background()
	for name, kv := range map[string]map[string]string{
		"nothing set":   {},
		"SDK disabled":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		if tp, err := telemetry.FromEnv(ctx, env(kv)); tp != nil || err != nil {
			t.Errorf("%s: %v %v; want tracing off", name, tp, err)
		}
	}
	for name, kv := range map[string]map[string]string{
		"http": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		"grpc": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
	} {
		tp, err := telemetry.FromEnv(ctx, env(kv))
		if tp == nil || err != nil {
			t.Errorf("%s: %v %v; want a provider", name, tp, err)
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = tp.Shutdown(sctx) // nothing listens; nothing was traced
		cancel()
	}
	if _, err := telemetry.FromEnv(ctx, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Errorf("an unsupported protocol: %v", err)
	}
}
