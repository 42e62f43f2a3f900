package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// The built binary with OTEL_EXPORTER_OTLP_ENDPOINT set exports a span per
// RPC, with what was decided, to an OTLP/HTTP receiver.
func TestServeExportsSpansOverOTLP(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]map[string]string{} // span name -> string attributes
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectorpb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					m := map[string]string{}
					for _, a := range s.Attributes {
						m[a.Key] = a.Value.GetStringValue()
					}
					spans[s.Name] = m
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()

	sock := filepath.Join(t.TempDir(), "toolpdp.sock")
	p := startBinaryEnv(t, binary(t), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=50"},
		"serve", "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
	conn := dialUnix(t, sock)
	waitServing(t, conn, p)
	resp, err := pb.NewDecisionServiceClient(conn).Decide(context.Background(), &pb.DecideRequest{AgentId: "default", ToolName: "Read"})
	if err != nil {
		t.Fatal(err)
	}
	// SIGTERM flushes what is batched.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("still running after SIGTERM\n%s", p.stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	got := spans["toolpdp.v1.DecisionService/Decide"]
	if got == nil {
		t.Fatalf("no Decide span exported; got %v\n%s", spans, p.stderr.String())
	}
	for k, v := range map[string]string{"toolpdp.decision": "allow", "toolpdp.agent_id": "default", "toolpdp.policy_revision": resp.PolicyRevision} {
		if got[k] != v {
			t.Errorf("%s = %q; want %q (all: %v)", k, got[k], v, got)
		}
	}
	if got["toolpdp.rule"] == "" {
		t.Errorf("no deciding rule: %v", got)
	}
	if _, ok := spans["grpc.health.v1.Health/Check"]; ok {
		t.Errorf("health checks are traced")
	}
}
