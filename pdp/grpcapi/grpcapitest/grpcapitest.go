// Package grpcapitest starts a real toolpdp server — the engine and gRPC
// service serve builds, on a unix socket or loopback TCP — with a client
// connected to it over gRPC. The gRPC tests, the Go client's tests and
// `toolpdp test` use it, so each of them calls the same server.
package grpcapitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Options shape a test server. Zero values are a server of the embedded
// default agent on loopback TCP, loaded, not watching.
type Options struct {
	Bundles   []string
	Unix      bool                             // listen on a unix socket instead of loopback TCP
	Watch     bool                             // run the engine: watch files, poll bundle servers, sweep sessions
	NoLoad    bool                             // do not load before serving
	Approver  bool                             // a separate approver listener (serve --confirm-listen), on a unix socket
	Register  func(*grpc.Server)               // extra services, registered before Serve
	LogTo     io.Writer                        // the server's log (JSON, debug level); discarded when nil
	LogLevel  slog.Leveler                     // the lowest level logged; debug when nil
	DialCreds credentials.TransportCredentials // the client's; plaintext when nil

	// Engine and API are the engine's and the service's other options.
	// Bundles, Logger, Registerer and Watching are set from the fields
	// above, and so is API.SeparateApprover; an EvalTimeout of 0 is testkit.EvalTimeout
	// (tests run on loaded machines, under the race detector), and Poll 0
	// is 500ms.
	Engine pdp.Config
	API    grpcapi.Config

	unixDir string // NewServer's: the test's own temporary directory
}

// Server is a running test server and a client of it.
type Server struct {
	Addr     string // its gRPC target: 127.0.0.1:port or unix:///path
	Conn     *grpc.ClientConn
	Client   pb.DecisionServiceClient
	Health   healthpb.HealthClient
	Approver pb.DecisionServiceClient // on the approver's address, with Options.Approver
	Engine   *pdp.Engine
	API      *grpcapi.Server
	Registry *prometheus.Registry

	stop func()
}

// NewServer starts a server for the test and stops it when the test ends.
func NewServer(tb testing.TB, o Options) *Server {
	tb.Helper()
	if o.Unix {
		o.unixDir = tb.TempDir()
	}
	s, err := Start(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Start starts a server; Close stops it.
func Start(o Options) (_ *Server, err error) {
	if o.LogTo == nil {
		o.LogTo = io.Discard
	}
	if o.LogLevel == nil {
		o.LogLevel = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(o.LogTo, &slog.HandlerOptions{Level: o.LogLevel}))
	reg := prometheus.NewRegistry()
	watching := make(chan struct{})
	ec := o.Engine
	ec.Bundles, ec.Logger, ec.Registerer, ec.Watching = o.Bundles, log, reg, func() { close(watching) }
	if ec.EvalTimeout == 0 {
		ec.EvalTimeout = testkit.EvalTimeout
	}
	if ec.Poll == 0 {
		ec.Poll = 500 * time.Millisecond
	}
	engine, err := pdp.New(ec)
	if err != nil {
		return nil, err
	}
	ac := o.API
	ac.Logger, ac.Registerer, ac.SeparateApprover = log, reg, o.Approver
	srv, api, err := grpcapi.New(engine, ac)
	if err != nil {
		return nil, err
	}
	if o.Register != nil {
		o.Register(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Engine: engine, API: api, Registry: reg}
	var closers []func()
	s.stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	closers = append(closers, srv.Stop, cancel)
	if !o.NoLoad {
		if err := engine.Reload(ctx, true); err != nil {
			return nil, err
		}
	}
	dir := o.unixDir
	if dir == "" && (o.Unix || o.Approver) {
		if dir, err = os.MkdirTemp("", "grpcapitest-"); err != nil {
			return nil, err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
	}
	network, address := "tcp", "127.0.0.1:0"
	if o.Unix {
		network, address = "unix", filepath.Join(dir, "toolpdp.sock")
	}
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(l) }()
	if o.Watch {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			if err := engine.Run(ctx); err != nil {
				log.Error("the engine's watcher stopped", "error", err.Error())
			}
		}()
		closers = append(closers, func() { cancel(); <-watched })
		select {
		case <-watching:
		case <-watched:
			return nil, errors.New("the engine's watcher stopped before its watches were in place")
		}
	}
	s.Addr = l.Addr().String()
	if o.Unix {
		s.Addr = "unix://" + address
	}
	creds := o.DialCreds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	if s.Conn, err = grpc.NewClient(s.Addr, grpc.WithTransportCredentials(creds)); err != nil {
		return nil, err
	}
	closers = append(closers, func() { s.Conn.Close() })
	s.Client, s.Health = pb.NewDecisionServiceClient(s.Conn), healthpb.NewHealthClient(s.Conn)
	if o.Approver {
		al, err := net.Listen("unix", filepath.Join(dir, "approver.sock"))
		if err != nil {
			return nil, err
		}
		go func() { _ = srv.Serve(grpcapi.ApproverListener(al)) }()
		conn, err := grpc.NewClient("unix://"+al.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { conn.Close() })
		s.Approver = pb.NewDecisionServiceClient(conn)
	}
	return s, nil
}

// Close stops the server: its client, its watcher, then the gRPC server.
func (s *Server) Close() { s.stop() }

// Decide calls Decide, failing tb on any error.
func (s *Server) Decide(tb testing.TB, req *pb.DecideRequest) *pb.DecideResponse {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.Client.Decide(ctx, req)
	if err != nil {
		tb.Fatalf("Decide(%v): %v", req, err)
	}
	return resp
}

// Revision is the policy revision a Decide is answered with now.
func (s *Server) Revision(tb testing.TB) string {
	tb.Helper()
	return s.Decide(tb, &pb.DecideRequest{AgentId: "__probe__", ToolName: "Read"}).PolicyRevision
}

// Reloads is the value of toolpdp_bundle_reloads_total{result}.
func (s *Server) Reloads(tb testing.TB, result string) float64 {
	tb.Helper()
	return s.Metric(tb, "toolpdp_bundle_reloads_total", result)
}

// Metric is the value of the registry's counter or gauge name: of its
// series with these label values, or of its first series when none are
// given; 0 when it has none.
func (s *Server) Metric(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
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

// String names the server in failures.
func (s *Server) String() string { return fmt.Sprintf("toolpdp test server at %s", s.Addr) }
