package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/console"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/loadchild"
	"github.com/toolpdp/toolpdp/pdp/notify"
	"github.com/toolpdp/toolpdp/pdp/session"
	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// Server is toolpdp serving: the engine, its gRPC server, and every
// listener, opened.
type Server struct {
	cfg       Config
	registry  *prometheus.Registry
	dlog      *decisionlog.Log
	engine    *pdp.Engine
	api       *grpcapi.Server
	grpc      *grpc.Server
	probes    *grpc.Server   // health only, on HealthListen; nil without
	https     []*http.Server // metrics, and any other HTTP listener
	endpoints []*endpoint
	tokens    []*tokenfile.File // every credential file, kept current while serving
	approvers *approver.Tokens
	console   *console.Console // nil without ConsoleListen
	notifier  *notify.Notifier // nil without NotifyURLs
	store     session.Store    // closed last
}

// Run builds a server from cfg and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// New builds everything cfg describes, opens every listener, and loads the
// policy once: a bundle file missing or invalid at start is an error
// unless cfg.WaitForBundle (a bundle server is always waited for). Nothing
// is served until Run.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, registry: prometheus.NewRegistry()}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dlog, err = openDecisionLog(cfg.DecisionLog, cfg.Logger, s.registry); err != nil {
		return nil, err
	}
	ec := cfg.Engine
	ec.Logger, ec.Registerer, ec.DecisionLog = cfg.Logger, s.registry, s.dlog
	if len(cfg.LoadCommand) > 0 {
		ec.LoadChild = &loadchild.Config{Command: cfg.LoadCommand, Timeout: cfg.LoadTimeout, MemoryBytes: cfg.LoadMemoryBytes}
	}
	if err := s.openTokenFiles(&ec); err != nil {
		return nil, err
	}
	if ec.Verify, err = verification(cfg.Verification); err != nil {
		return nil, err
	}
	if ec.PendingTTL <= 0 && cfg.State.Durable() {
		ec.PendingTTL = DefaultDurablePendingTTL
	}
	if ec.Store, err = session.Open(ctx, cfg.State.URL, ec.Bounds(), session.OpenOptions{PasswordFile: cfg.State.PasswordFile, CACert: cfg.State.CACertFile}); err != nil {
		return nil, err
	}
	s.store = ec.Store
	if s.engine, err = pdp.New(ec); err != nil {
		return nil, err
	}
	if cfg.State.Durable() {
		cfg.Logger.Info("session state", "state", redactState(cfg.State.URL))
	}
	if cfg.State.AcceptReset {
		by := "serve --state-accept-reset"
		if host, err := os.Hostname(); err == nil {
			by += " on " + host
		}
		if _, _, err := s.engine.AcceptStateReset(ctx, by); err != nil {
			return nil, fmt.Errorf("--state-accept-reset: %w", err)
		}
	}
	ac := cfg.API
	ac.Logger, ac.Registerer, ac.SeparateApprover = cfg.Logger, s.registry, len(cfg.ConfirmListen) > 0
	if ac.Creds, err = transportCredentials(cfg.TLS, cfg.Logger); err != nil {
		return nil, err
	}
	if ac.Workspaces, err = s.workspaceBinding(cfg.TLS.ClientCAFile != "", cfg.WorkspaceTokens); err != nil {
		return nil, err
	}
	if err = s.approverSurfaces(cfg, ac.Workspaces); err != nil {
		return nil, err
	}
	ac.Approvers = s.approvers
	if s.grpc, s.api, err = grpcapi.New(s.engine, ac); err != nil {
		return nil, err
	}
	s.endpoints = s.endpointsOf(cfg)
	for _, e := range s.endpoints {
		if e.l, err = listen(e, cfg); err != nil {
			return nil, fmt.Errorf("%s %s: %w", e.option, e.addr, err)
		}
		if e.unix { // a gRPC listener: each connection holds buffers
			e.l = netutil.LimitListener(e.l, cfg.MaxConnections)
		}
	}
	if err := s.approverAddrs(cfg); err != nil {
		return nil, err
	}
	if err := s.engine.Reload(ctx, true); err != nil && !cfg.WaitForBundle && !s.engine.Remote() {
		return nil, err // logged by the engine
	}
	return s, nil
}

// endpointsOf is every listener cfg asks for, and what each serves: the one
// table a new listener is added to.
func (s *Server) endpointsOf(cfg Config) []*endpoint {
	var out []*endpoint
	for _, a := range cfg.Listen {
		out = append(out, &endpoint{option: "--listen", addr: a, unix: true, what: "serving", serve: s.grpc.Serve})
	}
	for _, a := range cfg.ConfirmListen {
		out = append(out, &endpoint{option: "--confirm-listen", addr: a, unix: true, what: "serving the approver (Confirm, ListPending)",
			serve: func(l net.Listener) error { return s.grpc.Serve(grpcapi.ApproverListener(l)) }})
	}
	for _, a := range cfg.ConsoleListen {
		out = append(out, &endpoint{option: "--console-listen", addr: a, unix: true, what: "serving the approvers' console", serve: s.serveHTTP(s.console)})
	}
	if cfg.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
		out = append(out, &endpoint{option: "--metrics-listen", addr: cfg.MetricsListen, what: "serving metrics", serve: s.serveHTTP(mux)})
	}
	if cfg.HealthListen != "" {
		// Kubelet's gRPC probes reach the pod's IP, not its loopback; what
		// this listener serves (SERVING or not, service names) is public.
		s.probes = grpc.NewServer()
		healthpb.RegisterHealthServer(s.probes, s.api.Health())
		reflection.Register(s.probes) // grpcurl ADDR list works here too
		out = append(out, &endpoint{option: "--health-listen", addr: cfg.HealthListen, public: true, what: "serving health probes", serve: s.probes.Serve})
	}
	return out
}

// serveHTTP serves h on a listener until the server stops.
func (s *Server) serveHTTP(h http.Handler) func(net.Listener) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	s.https = append(s.https, hs)
	return hs.Serve
}

// Run serves every listener until ctx ends or one fails, then stops
// gracefully: health turns NOT_SERVING, new calls are refused, in-flight
// ones get ShutdownGrace to finish, and the decision log is flushed. The
// engine keeps the policy current meanwhile (watches, polls, sweeps).
func (s *Server) Run(ctx context.Context) error {
	defer s.closeStore() // after every call has ended: writes what is queued
	defer s.dlog.Close() // after the servers have stopped: flushes what is queued
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.engine.Run(ctx) })
	if s.notifier != nil {
		g.Go(func() error { s.notifier.Run(ctx); return nil })
	}
	for _, f := range s.tokens {
		g.Go(func() error { f.Run(ctx, 0); return nil })
	}
	if s.cfg.Reload != nil {
		g.Go(func() error { s.reloadOn(ctx, s.cfg.Reload); return nil })
	}
	for _, e := range s.endpoints {
		s.cfg.Logger.Info(e.what, "listen", e.l.Addr().String(), "network", e.l.Addr().Network())
		g.Go(func() error {
			err := e.serve(e.l)
			if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, http.ErrServerClosed) {
				return nil // stopped before it started serving
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w", e.option, e.addr, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-ctx.Done()
		s.stop()
		return nil
	})
	return g.Wait()
}

// stop stops serving: the gRPC server gracefully, within the grace period;
// the probes and HTTP listeners after it, so they see NOT_SERVING meanwhile.
func (s *Server) stop() {
	log := s.cfg.Logger
	log.Info("shutting down", "grace", s.cfg.ShutdownGrace.String())
	s.api.Shutdown()
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.ShutdownGrace):
		log.Warn("grace period over; stopping in-flight calls")
		s.grpc.Stop()
	}
	if s.probes != nil {
		s.probes.Stop()
	}
	for _, hs := range s.https {
		_ = hs.Close()
	}
	log.Info("stopped")
}

// close releases what New opened when it fails half way.
func (s *Server) close() {
	for _, e := range s.endpoints {
		if e.l != nil {
			e.l.Close()
		}
	}
	s.dlog.Close()
	s.closeStore()
}

func (s *Server) closeStore() {
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.cfg.Logger.Error("closing the session state store", "error", err.Error())
		}
	}
}

// redactState is a --state URL without its password.
func redactState(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}

// Engine is the server's engine: its policy, sessions and OnSwap hooks.
func (s *Server) Engine() *pdp.Engine { return s.engine }

// Registry holds every metric the server exports on /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Addrs are the addresses the listeners of an option ("--listen",
// "--metrics-listen", …) are bound to: what port :0 became.
func (s *Server) Addrs(option string) []net.Addr {
	var out []net.Addr
	for _, e := range s.endpoints {
		if e.option == option && e.l != nil {
			out = append(out, e.l.Addr())
		}
	}
	return out
}

// ErrUsage marks a Config that no server can be built from as given (a
// usage error of the flags that made it).
var ErrUsage = errors.New("usage")

// openDecisionLog opens the decision log c asks for; nil when off.
func openDecisionLog(c DecisionLog, log *slog.Logger, reg prometheus.Registerer) (_ *decisionlog.Log, err error) {
	switch c.To {
	case "off", "":
		return nil, nil
	case "stdout":
		c.Writer = os.Stdout
	default:
		file := decisionlog.NewFile(c.To, c.MaxMB, c.MaxBackups)
		defer func() {
			if err != nil {
				file.Close()
			}
		}()
		c.Writer = file
	}
	c.Logger, c.Registerer = log, reg
	return decisionlog.New(c.Config)
}

// verification is the signature check v asks for, or nil.
func verification(v Verification) (*bundle.VerificationConfig, error) {
	if v.KeyFile == "" {
		return nil, nil
	}
	if _, err := os.Stat(v.KeyFile); err != nil {
		return nil, fmt.Errorf("--verification-key: %w", err)
	}
	// The path, not the PEM: OPA stats a key given inline as a path first,
	// and a PEM whose base64 runs 256 bytes without a "/" fails that stat
	// ("file name too long") for some keys.
	kc, err := keys.NewKeyConfig(v.KeyFile, v.Alg, "")
	if err != nil {
		return nil, fmt.Errorf("--verification-key %s: %w", v.KeyFile, err)
	}
	return bundle.NewVerificationConfig(map[string]*keys.Config{v.KeyID: kc}, v.KeyID, "", nil), nil
}
