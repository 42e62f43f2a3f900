package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
)

// DefaultListen is where serve listens when no --listen is given: loopback
// only, so nothing off the pod reaches it by accident.
const DefaultListen = "127.0.0.1:8787"

type serveConfig struct {
	bundles          listFlag
	listens          listFlag
	confirmListens   listFlag
	metricsListen    string
	allowNonLoopback bool
	socketMode       string
	evalTimeout      time.Duration
	maxArgsBytes     int
	maxInflight      int64
	maxWaiters       int
	maxSessions      int
	sessionIdle      time.Duration
	maxPending       int
	maxPendingBytes  int64
	maxSessionBytes  int64
	logQueueBytes    int64
	pendingTTL       time.Duration
	rememberTTL      time.Duration
	debounce         time.Duration
	poll             time.Duration
	waitForBundle    bool
	grace            time.Duration
	logLevel         string
	decisionLog      string
	logQueue         int
	logWhenFull      string
	logMaxMB         int
	logMaxBackups    int
	logRedact        string
	tlsCert          string
	tlsKey           string
	tlsClientCA      string
	workspaceTokens  listFlag
	healthListen     string
	verifyKey        string
	verifyKeyID      string
	verifyAlg        string
	remote           bundles.Credentials
	decisionCache    cacheFlag
}

func serveFlags(stderr io.Writer) (*serveConfig, func([]string) error) {
	c, fs := serveFlagSet(stderr)
	return c, func(args []string) error { return parseEnv(fs, args) }
}

// serveFlagSet defines serve's flags, bound to a fresh config.
func serveFlagSet(stderr io.Writer) (*serveConfig, *flag.FlagSet) {
	c := &serveConfig{}
	fs := newFlagSet("serve", stderr)
	fs.Var(&c.bundles, "bundle", "a bundle: a directory, an opa build .tar.gz, or the http(s):// URL of a bundle server, polled with ETags (repeatable; env: comma-separated); none: the embedded default agent")
	fs.StringVar(&c.remote.TokenFile, "bundle-token-file", "", "file holding a bearer token for http(s) bundle servers, re-read at each request (OPA's credentials.bearer.token_path)")
	fs.StringVar(&c.remote.TokenScheme, "bundle-token-scheme", "Bearer", "the Authorization scheme of --bundle-token-file")
	fs.StringVar(&c.remote.ClientCert, "bundle-client-cert", "", "PEM client certificate for http(s) bundle servers, with --bundle-client-key (OPA's credentials.client_tls)")
	fs.StringVar(&c.remote.ClientKey, "bundle-client-key", "", "PEM private key of --bundle-client-cert")
	fs.StringVar(&c.remote.CACert, "bundle-ca-cert", "", "PEM CA bundle trusted for http(s) bundle servers' certificates (OPA's tls.ca_cert)")
	fs.Var(&c.listens, "listen", "gRPC address, host:port or unix:///path (repeatable; default "+DefaultListen+")")
	fs.Var(&c.confirmListens, "confirm-listen", "the approver's gRPC address, host:port or unix:///path (repeatable): Confirm and ListPending are served only there, and refused elsewhere with PERMISSION_DENIED; give it a socket the agent's tools cannot reach")
	fs.StringVar(&c.metricsListen, "metrics-listen", "127.0.0.1:8788", "HTTP address for /metrics; empty disables it")
	fs.BoolVar(&c.allowNonLoopback, "allow-non-loopback", false, "allow a TCP --listen address that is not loopback")
	fs.StringVar(&c.socketMode, "unix-socket-mode", "0660", "file mode of unix sockets: who may ask")
	fs.DurationVar(&c.evalTimeout, "eval-timeout", 100*time.Millisecond, "bound on one policy evaluation; past it the call is denied")
	fs.IntVar(&c.maxArgsBytes, "max-args-bytes", 1<<20, "bound on a request's encoded args; larger is INVALID_ARGUMENT")
	fs.Int64Var(&c.maxInflight, "max-inflight-bytes", grpcapi.DefaultMaxInflightBytes, "encoded bytes of Decide requests decided at once; more wait, and past 5s are RESOURCE_EXHAUSTED")
	fs.IntVar(&c.maxWaiters, "max-waiters", grpcapi.DefaultMaxWaiters, "AwaitDecision calls waiting for a person's answer at once; more are RESOURCE_EXHAUSTED")
	fs.IntVar(&c.maxSessions, "max-sessions", pdp.DefaultMaxSessions, "sessions held at most; the longest idle are released first")
	fs.DurationVar(&c.sessionIdle, "session-idle-timeout", pdp.DefaultSessionIdle, "a session unused this long is released")
	fs.IntVar(&c.maxPending, "max-pending", pdp.DefaultMaxPending, "asks awaiting Confirm held at most")
	fs.Int64Var(&c.maxPendingBytes, "max-pending-bytes", session.DefaultMaxPendingBytes, "bytes the asks awaiting Confirm hold at most; the oldest are forgotten first")
	fs.Int64Var(&c.maxSessionBytes, "max-session-bytes", session.DefaultMaxSessionBytes, "bytes the sessions hold at most; the longest idle are released first")
	fs.DurationVar(&c.pendingTTL, "pending-ttl", pdp.DefaultPendingTTL, "an ask nobody answers within this expires: a deny, as its AwaitDecision tells the agent")
	fs.DurationVar(&c.rememberTTL, "remember-ttl", pdp.DefaultRememberTTL, "a remembered approval (Confirm with remember) holds this long at most; it also ends with its session and with any reload")
	fs.DurationVar(&c.debounce, "watch-debounce", pdp.DefaultDebounce, "file events closer than this give one reload")
	fs.DurationVar(&c.poll, "poll-interval", pdp.DefaultPoll, "how often bundle content is re-hashed, for events a file system misses")
	c.decisionCache = cacheFlag(policy.DefaultMemoEntries)
	fs.Var(&c.decisionCache, "decision-cache", "decisions cached per policy snapshot (answers identical to evaluating; off for policies with non-deterministic builtins or data.guardrails Rego): true, false or 0 (off), or a size")
	fs.BoolVar(&c.waitForBundle, "wait-for-bundle", false, "start even if a --bundle is missing or invalid; deny until it loads")
	fs.DurationVar(&c.grace, "shutdown-grace", 10*time.Second, "on SIGTERM, how long in-flight calls may take to finish")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.decisionLog, "decision-log", "stdout", "where decisions are logged as JSON lines: stdout, off, or a file path (rotated by size)")
	fs.IntVar(&c.logQueue, "decision-log-queue", 10000, "decisions waiting to be written at most")
	fs.Int64Var(&c.logQueueBytes, "decision-log-queue-bytes", decisionlog.DefaultQueueBytes, "memory the queued decisions hold at most (estimated)")
	fs.StringVar(&c.logWhenFull, "decision-log-when-full", "drop", "when the queue is full: drop (and count in toolpdp_decision_log_dropped_total) or block")
	fs.IntVar(&c.logMaxMB, "decision-log-max-mb", 100, "a decision-log file is rotated past this size")
	fs.IntVar(&c.logMaxBackups, "decision-log-max-backups", 5, "rotated decision-log files kept")
	fs.StringVar(&c.logRedact, "decision-log-redact", strings.Join(decisionlog.DefaultRedact, ","), "names whose values the decision log masks, in env, args and NAME=value text (comma-separated; 5+ letters: a name containing one; shorter: a whole word)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate: serve gRPC over TLS (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM CA bundle: require client certificates signed by it (mTLS); a certificate's Common Name is its workspace")
	fs.Var(&c.workspaceTokens, "workspace-token", "WORKSPACE=FILE: a bearer token, read from FILE, that binds a caller to WORKSPACE (repeatable)")
	fs.StringVar(&c.healthListen, "health-listen", "", "an extra gRPC address serving only grpc.health.v1, for Kubernetes probes (may be non-loopback)")
	fs.StringVar(&c.verifyKey, "verification-key", "", "PEM public key (or HMAC secret) file: bundles must be signed with it (.signatures.json)")
	fs.StringVar(&c.verifyKeyID, "verification-key-id", "default", "the key id the bundles' signatures name")
	fs.StringVar(&c.verifyAlg, "verification-alg", "RS256", "the signing algorithm of --verification-key")
	withSynopsis(fs, `toolpdp serve [--bundle PATH|URL]... [--listen ADDR]... [flags]

Every flag can also be set by the environment variable TOOLPDP_<FLAG>
(--metrics-listen: TOOLPDP_METRICS_LISTEN); the flag wins. A repeatable
flag takes a comma-separated list there.`)
	return c, fs
}

func serve(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
	c, parseArgs := serveFlags(stderr)
	if err := parseArgs(args); err != nil {
		return err
	}
	if len(c.listens) == 0 {
		c.listens = listFlag{DefaultListen}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	mode, err := strconv.ParseUint(c.socketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("%w: --unix-socket-mode: %q is not an octal file mode", errUsage, c.socketMode)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dlog, err := decisionLog(c, log, reg)
	if err != nil {
		return err
	}
	defer dlog.Close() // after the server has stopped: flushes what is queued
	vc, err := verification(c.verifyKey, c.verifyKeyID, c.verifyAlg)
	if err != nil {
		return err
	}
	engine, err := pdp.New(pdp.Config{Bundles: c.bundles, Verify: vc, Remote: c.remote, Logger: log, Registerer: reg, EvalTimeout: c.evalTimeout,
		MaxSessions: c.maxSessions, SessionIdle: c.sessionIdle, MaxSessionBytes: c.maxSessionBytes,
		MaxPending: c.maxPending, PendingTTL: c.pendingTTL, MaxPendingBytes: c.maxPendingBytes, RememberTTL: c.rememberTTL,
		DecisionLog: dlog, Debounce: c.debounce, Poll: c.poll, DecisionCache: c.decisionCache.config()})
	if err != nil {
		return err
	}
	creds, err := transportCredentials(c.tlsCert, c.tlsKey, c.tlsClientCA)
	if err != nil {
		return err
	}
	workspaces, err := workspaceBinding(c.tlsClientCA != "", c.workspaceTokens, log)
	if err != nil {
		return err
	}
	tracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer tracing.shutdown() // after the server has stopped: flushes the last spans
	srv, s, err := grpcapi.New(engine, grpcapi.Config{MaxArgsBytes: c.maxArgsBytes, MaxInflightBytes: c.maxInflight, MaxWaiters: c.maxWaiters, Logger: log, Registerer: reg,
		Creds: creds, Workspaces: workspaces, SeparateApprover: len(c.confirmListens) > 0, Options: tracing.options})
	if err != nil {
		return err
	}

	listeners, err := listenAll("--listen", c.listens, c.allowNonLoopback, os.FileMode(mode), log)
	if err != nil {
		return err
	}
	approvers, err := listenAll("--confirm-listen", c.confirmListens, c.allowNonLoopback, os.FileMode(mode), log)
	if err != nil {
		closeAll(listeners)
		return err
	}
	for i, l := range approvers {
		approvers[i] = grpcapi.ApproverListener(l)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A bundle server is waited for (every decision denies until it answers);
	// a missing or broken file at start is an error exit unless asked to wait.
	if err := engine.Reload(ctx, true); err != nil && !c.waitForBundle && !engine.Remote() {
		closeAll(append(listeners, approvers...))
		return err // logged by the engine
	}

	errs := make(chan error, len(listeners)+len(approvers)+2)
	go func() {
		if err := engine.Run(ctx); err != nil {
			errs <- err
		}
	}()
	if c.metricsListen != "" {
		stopMetrics, err := serveMetrics(c.metricsListen, reg, log)
		if err != nil {
			closeAll(append(listeners, approvers...))
			return err
		}
		defer stopMetrics()
	}

	for _, l := range listeners {
		log.Info("serving", "listen", l.Addr().String(), "network", l.Addr().Network())
		go func(l net.Listener) { errs <- srv.Serve(l) }(l)
	}
	for _, l := range approvers {
		log.Info("serving the approver (Confirm, ListPending)", "listen", l.Addr().String(), "network", l.Addr().Network())
		go func(l net.Listener) { errs <- srv.Serve(l) }(l)
	}
	var probes *grpc.Server
	if c.healthListen != "" {
		if probes, err = serveHealth(c.healthListen, s, errs, log); err != nil {
			srv.Stop()
			return err
		}
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		cancel()
		srv.Stop()
		return err
	}
	return shutdown(srv, probes, s, c.grace, log)
}

// serveHealth serves only grpc.health.v1 on addr, for kubelet's gRPC probes,
// which reach the pod's IP, not its loopback.
func serveHealth(addr string, s *grpcapi.Server, errs chan<- error, log *slog.Logger) (*grpc.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-listen %s: %w", addr, err)
	}
	probes := grpc.NewServer()
	healthpb.RegisterHealthServer(probes, s.Health())
	reflection.Register(probes) // grpcurl ADDR list works here too
	log.Info("serving health probes", "listen", l.Addr().String())
	go func() { errs <- probes.Serve(l) }()
	return probes, nil
}

// transportCredentials is TLS when a certificate is given, mTLS when a
// client CA is given too; nil for plaintext.
func transportCredentials(certFile, keyFile, clientCA string) (credentials.TransportCredentials, error) {
	if certFile == "" && keyFile == "" {
		if clientCA != "" {
			return nil, fmt.Errorf("%w: --tls-client-ca needs --tls-cert and --tls-key", errUsage)
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pemBytes, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

// workspaceBinding reads --workspace-token files; nil when nothing binds.
func workspaceBinding(mtls bool, specs []string, log *slog.Logger) (*grpcapi.Workspaces, error) {
	if !mtls && len(specs) == 0 {
		return nil, nil
	}
	w := &grpcapi.Workspaces{MTLS: mtls, Tokens: map[string]string{}, Logger: log}
	for _, spec := range specs {
		ws, file, ok := strings.Cut(spec, "=")
		if !ok || ws == "" || file == "" {
			return nil, fmt.Errorf("%w: --workspace-token %q is not WORKSPACE=FILE", errUsage, spec)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--workspace-token %s: %w", ws, err)
		}
		token := strings.TrimSpace(string(raw))
		if len(token) < 16 {
			return nil, fmt.Errorf("--workspace-token %s: the token in %s is shorter than 16 characters", ws, file)
		}
		w.Tokens[token] = ws
	}
	return w, nil
}

// shutdown: health turns NOT_SERVING, new calls are refused, in-flight ones
// get until grace to finish.
func shutdown(srv, probes *grpc.Server, s *grpcapi.Server, grace time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "grace", grace.String())
	s.Shutdown()
	if probes != nil {
		defer probes.Stop() // after the main server: probes see NOT_SERVING meanwhile
	}
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		log.Warn("grace period over; stopping in-flight calls")
		srv.Stop()
	}
	log.Info("stopped")
	return nil
}

// decisionLog opens the decision log the flags ask for; nil when off.
func decisionLog(c *serveConfig, log *slog.Logger, reg prometheus.Registerer) (*decisionlog.Log, error) {
	var w io.Writer
	switch c.decisionLog {
	case "off", "":
		return nil, nil
	case "stdout":
		w = os.Stdout
	default:
		w = &lumberjack.Logger{Filename: c.decisionLog, MaxSize: c.logMaxMB, MaxBackups: c.logMaxBackups}
	}
	if c.logWhenFull != "drop" && c.logWhenFull != "block" {
		return nil, fmt.Errorf("%w: --decision-log-when-full: %q is not drop or block", errUsage, c.logWhenFull)
	}
	var redact []string
	for _, r := range strings.Split(c.logRedact, ",") {
		if r = strings.TrimSpace(r); r != "" {
			redact = append(redact, r)
		}
	}
	return decisionlog.New(decisionlog.Config{Writer: w, QueueSize: c.logQueue, QueueBytes: c.logQueueBytes, Block: c.logWhenFull == "block",
		Redact: redact, Logger: log, Registerer: reg})
}

// verification is the signature check --verification-key asks for, or nil.
func verification(keyFile, id, alg string) (*bundle.VerificationConfig, error) {
	if keyFile == "" {
		return nil, nil
	}
	if _, err := os.Stat(keyFile); err != nil {
		return nil, fmt.Errorf("--verification-key: %w", err)
	}
	// The path, not the PEM: OPA stats a key given inline as a path first,
	// and a PEM whose base64 runs 256 bytes without a "/" fails that stat
	// ("file name too long") for some keys.
	kc, err := keys.NewKeyConfig(keyFile, alg, "")
	if err != nil {
		return nil, fmt.Errorf("--verification-key %s: %w", keyFile, err)
	}
	return bundle.NewVerificationConfig(map[string]*keys.Config{id: kc}, id, "", nil), nil
}

// listenAll opens every --listen address: unix:///path (a stale socket file
// is removed first; the socket gets mode), or host:port on loopback unless
// allowed otherwise.
func listenAll(flag string, addrs []string, allowNonLoopback bool, mode os.FileMode, log *slog.Logger) ([]net.Listener, error) {
	var out []net.Listener
	for _, a := range addrs {
		l, err := listen(a, allowNonLoopback, mode, log)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("%s %s: %w", flag, a, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func listen(addr string, allowNonLoopback bool, mode os.FileMode, log *slog.Logger) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" {
			return nil, errors.New("no socket path")
		}
		if err := removeStaleSocket(path); err != nil {
			return nil, err
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(path, mode); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("not host:port or unix:///path: %w", err)
	}
	if !isLoopback(host) {
		if !allowNonLoopback {
			return nil, fmt.Errorf("host %q is not loopback: pass --allow-non-loopback to listen beyond this machine", host)
		}
		log.Warn("listening beyond loopback: anyone who reaches this address can ask for decisions", "listen", addr)
	}
	return net.Listen("tcp", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// removeStaleSocket removes a socket file left by a previous run, but
// nothing else: a regular file at the path is an error, and a socket that
// still answers belongs to a live server.
func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("%s is in use by a running server", path)
	}
	return os.Remove(path)
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener failed", "error", err.Error())
		}
	}()
	log.Info("serving metrics", "listen", l.Addr().String())
	return func() { _ = hs.Close() }, nil
}
