package grpcapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// testServer is a real toolpdp server on loopback (or a unix socket) and a
// client connected to it over gRPC.
type testServer struct {
	addr     string
	conn     *grpc.ClientConn
	client   pb.DecisionServiceClient
	health   healthpb.HealthClient
	engine   *pdp.Engine
	registry *prometheus.Registry
	approver pb.DecisionServiceClient // on the --confirm-listen address, when serverOpts.approver
}

type serverOpts struct {
	bundles   []string
	unix      bool               // listen on a unix socket instead of TCP
	watch     bool               // run the engine: watch files, poll bundle servers, sweep sessions
	register  func(*grpc.Server) // extra services, registered before Serve
	now       func() time.Time   // clock; time.Now when nil
	sessions  int                // sessions held at most; 1000 when 0
	idle      time.Duration      // session idle timeout; 1h when 0
	noLoad    bool               // do not load before serving
	logTo     io.Writer          // server log; discarded when nil
	timeout   time.Duration      // evaluation bound; 5s when zero
	poll      time.Duration      // watcher's content poll; 500ms when zero
	verify    *bundle.VerificationConfig
	creds     credentials.TransportCredentials // server TLS
	dialTLS   credentials.TransportCredentials // the test client's
	bind      *Workspaces
	approver  bool             // a separate approver listener (serve --confirm-listen)
	approvers *approver.Tokens // tokens the approver listener requires
	remember  time.Duration    // --remember-ttl
	dlog      *decisionlog.Log
	remote    bundles.Credentials // for bundle servers
}

func startServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	if o.logTo == nil {
		o.logTo = io.Discard
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	if o.poll == 0 {
		o.poll = 500 * time.Millisecond
	}
	if o.sessions == 0 {
		o.sessions = 1000
	}
	log := slog.New(slog.NewJSONHandler(o.logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	watching := make(chan struct{})
	engine, err := pdp.New(pdp.Config{Bundles: o.bundles, Verify: o.verify, Remote: o.remote, Logger: log, Registerer: reg, Now: o.now,
		EvalTimeout: o.timeout, MaxSessions: o.sessions, SessionIdle: o.idle, MaxPending: 1000, RememberTTL: o.remember,
		DecisionLog: o.dlog, Debounce: 200 * time.Millisecond, Poll: o.poll, Watching: func() { close(watching) }})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := New(engine, Config{MaxArgsBytes: 64 << 10, Logger: log, Registerer: reg, Creds: o.creds, Workspaces: o.bind,
		SeparateApprover: o.approver, Approvers: o.approvers})
	if err != nil {
		t.Fatal(err)
	}
	if o.register != nil {
		o.register(srv)
	}
	network, address := "tcp", "127.0.0.1:0"
	if o.unix {
		network, address = "unix", filepath.Join(t.TempDir(), "toolpdp.sock")
	}
	l, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !o.noLoad {
		if err := engine.Reload(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = srv.Serve(l) }()
	watched := make(chan struct{})
	if o.watch {
		go func() {
			defer close(watched)
			if err := engine.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
		<-watching
	} else {
		close(watched)
	}
	target := l.Addr().String()
	if o.unix {
		target = "unix://" + address
	}
	clientCreds := insecure.NewCredentials()
	if o.dialTLS != nil {
		clientCreds = o.dialTLS
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(clientCreds))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: target, conn: conn, client: pb.NewDecisionServiceClient(conn), health: healthpb.NewHealthClient(conn),
		engine: engine, registry: reg}
	var approverConn *grpc.ClientConn
	if o.approver {
		al, err := net.Listen("unix", filepath.Join(t.TempDir(), "approver.sock"))
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(ApproverListener(al)) }()
		if approverConn, err = grpc.NewClient("unix://"+al.Addr().String(), grpc.WithTransportCredentials(clientCreds)); err != nil {
			t.Fatal(err)
		}
		ts.approver = pb.NewDecisionServiceClient(approverConn)
	}
	t.Cleanup(func() {
		conn.Close()
		if approverConn != nil {
			approverConn.Close()
		}
		cancel()
		<-watched
		srv.Stop()
	})
	return ts
}

func (ts *testServer) decide(t *testing.T, req *pb.DecideRequest) *pb.DecideResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ts.client.Decide(ctx, req)
	if err != nil {
		t.Fatalf("Decide(%v): %v", req, err)
	}
	return resp
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reloads is the value of toolpdp_bundle_reloads_total{result}.
func (ts *testServer) reloads(t *testing.T, result string) float64 {
	return ts.metric(t, "toolpdp_bundle_reloads_total", result)
}

// revision is the policy revision a Decide is answered with now.
func (ts *testServer) revision(t *testing.T) string {
	t.Helper()
	return ts.decide(t, &pb.DecideRequest{AgentId: "__probe__", ToolName: "Read"}).PolicyRevision
}

// metric is the value of the registry's counter or gauge name: of its
// series with these label values, or of its first series when none are
// given.
func (ts *testServer) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matchLabels(m.GetLabel(), labels) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func matchLabels(got []*dto.LabelPair, want []string) bool {
	for i, v := range want {
		if i >= len(got) || got[i].GetValue() != v {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer safe for a server's log and a test to share.
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
