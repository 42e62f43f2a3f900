// Package localserver starts a real toolpdp server in this process — the
// engine and gRPC service serve builds, on a unix socket or loopback TCP —
// with a client connected to it over gRPC. `toolpdp test` runs a bundle's
// decision tests against it, and the Go tests do through grpcapitest, so
// each of them calls the same server. It is part of the release binary, so
// it links nothing of Go's testing package.
package localserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Options shape a server. Zero values are a server of the embedded
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
	Dir       string                           // where the unix sockets go; a new temporary directory, removed at Close, when empty

	// Engine and API are the engine's and the service's other options.
	// Bundles, Logger, Registerer and Watching are set from the fields
	// above, and so is API.SeparateApprover; an EvalTimeout of 0 is 5s
	// (a decision test is about what is decided, not how fast, and a
	// bundle's tests run on laptops and loaded CI machines), and Poll 0 is
	// 500ms.
	Engine pdp.Config
	API    grpcapi.Config
}

// DefaultEvalTimeout is the evaluation bound of a server whose Options say
// none.
const DefaultEvalTimeout = 5 * time.Second

// Server is a running server and a client of it.
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
		ec.EvalTimeout = DefaultEvalTimeout
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
	dir := o.Dir
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

// String names the server in failures.
func (s *Server) String() string { return fmt.Sprintf("toolpdp test server at %s", s.Addr) }
