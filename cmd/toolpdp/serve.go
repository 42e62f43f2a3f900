package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/loadchild"
	"github.com/toolpdp/toolpdp/pdp/server"
)

// serveConfig is what serve's flags set: the server's Config, and the few
// flags that are text until serve reads them.
type serveConfig struct {
	server.Config
	logLevel    string
	whenFull    string // --decision-log-when-full: drop or block
	logRedact   string // comma-separated
	unknownKeys string // --unknown-keys: error or warn
	loadMemMB   int64
}

func serveFlags(stderr io.Writer) (*serveConfig, func([]string) error) {
	c, fs := serveFlagSet(stderr)
	return c, func(args []string) error { return parseEnv(fs, args) }
}

// serveFlagSet defines serve's flags, bound to a fresh config. Each
// default is the constant of the package that uses the value.
func serveFlagSet(stderr io.Writer) (*serveConfig, *flag.FlagSet) {
	c := &serveConfig{}
	e, api, dl := &c.Engine, &c.API, &c.DecisionLog
	fs := newFlagSet("serve", stderr)
	fs.Var((*listFlag)(&e.Bundles), "bundle", "a bundle: a directory, an opa build .tar.gz, or the http(s):// URL of a bundle server, polled with ETags (repeatable; env: comma-separated); none: the embedded default agent")
	fs.StringVar(&e.Remote.TokenFile, "bundle-token-file", "", "file holding a bearer token for http(s) bundle servers, re-read when it changes, sent only to the --bundle URL's own origin (OPA's credentials.bearer.token_path)")
	fs.StringVar(&e.Remote.TokenScheme, "bundle-token-scheme", "Bearer", "the Authorization scheme of --bundle-token-file")
	fs.StringVar(&e.Remote.ClientCert, "bundle-client-cert", "", "PEM client certificate for http(s) bundle servers, with --bundle-client-key (OPA's credentials.client_tls)")
	fs.StringVar(&e.Remote.ClientKey, "bundle-client-key", "", "PEM private key of --bundle-client-cert")
	fs.StringVar(&e.Remote.CACert, "bundle-ca-cert", "", "PEM CA bundle trusted for http(s) bundle servers' certificates (OPA's tls.ca_cert)")
	fs.Int64Var(&e.BundleLimits.MaxBytes, "max-bundle-bytes", bundles.DefaultMaxBundleBytes, "bytes all files of one bundle may hold together, files OPA ignores included; a bundle over it is rejected")
	fs.IntVar(&e.BundleLimits.MaxEntries, "max-bundle-entries", bundles.DefaultMaxBundleEntries, "files and directories one bundle may hold; a bundle over it is rejected")
	fs.DurationVar(&e.DownloadTimeout, "bundle-download-timeout", bundles.DefaultDownloadTimeout, "bound on one download from a bundle server, headers and body: a server that stalls past it is a failed download")
	fs.Var((*listFlag)(&c.Listen), "listen", "gRPC address, host:port or unix:///path (repeatable; default "+server.DefaultListen+")")
	fs.Var((*listFlag)(&c.ConfirmListen), "confirm-listen", "the approver's gRPC address, host:port or unix:///path (repeatable): Confirm and ListPending are served only there, and refused elsewhere with PERMISSION_DENIED; give it a socket the agent's tools cannot reach")
	fs.StringVar(&c.MetricsListen, "metrics-listen", server.DefaultMetricsListen, "HTTP address for /metrics; empty disables it")
	fs.BoolVar(&c.AllowNonLoopback, "allow-non-loopback", false, "allow TCP addresses that are not loopback (--listen, --confirm-listen, --metrics-listen)")
	c.SocketMode = server.DefaultSocketMode
	fs.Var((*modeFlag)(&c.SocketMode), "unix-socket-mode", "file mode of unix sockets: who may ask")
	fs.DurationVar(&e.EvalTimeout, "eval-timeout", pdp.DefaultEvalTimeout, "bound on one policy evaluation; past it the call is denied")
	fs.IntVar(&api.MaxArgsBytes, "max-args-bytes", grpcapi.DefaultMaxArgsBytes, "bound on a request's encoded args; larger is INVALID_ARGUMENT")
	fs.Int64Var(&api.MaxInflightBytes, "max-inflight-bytes", grpcapi.DefaultMaxInflightBytes, "encoded bytes of Decide requests decided at once; more wait, and past 5s are RESOURCE_EXHAUSTED")
	fs.Int64Var(&api.MaxReceiveBytes, "max-receive-bytes", grpcapi.DefaultMaxReceiveBytes, "bytes of requests being received at once, on every method, counted at the largest message size before a message is read; more wait up to 1s, then RESOURCE_EXHAUSTED")
	fs.IntVar(&c.MaxConnections, "max-connections", server.DefaultMaxConnections, "connections each gRPC listener holds open at once; more wait to be accepted")
	fs.IntVar(&api.MaxWaiters, "max-waiters", grpcapi.DefaultMaxWaiters, "AwaitDecision calls waiting for a person's answer at once; more are RESOURCE_EXHAUSTED")
	fs.StringVar(&c.State.URL, "state", "memory", "where session state lives (pins, counts and halts, asks, remembered approvals): memory; file:PATH, an embedded store on local disk that a restart keeps (one process per file); or redis://… or rediss://…, a Redis replicas share (its maxmemory-policy must be noeviction)")
	fs.StringVar(&c.State.PasswordFile, "state-password-file", "", "file holding the --state Redis password (instead of one in the URL)")
	fs.StringVar(&c.State.CACertFile, "state-ca-cert", "", "PEM CA bundle trusted for a rediss:// --state (the system's when unset)")
	fs.BoolVar(&c.State.AcceptReset, "state-accept-reset", false, "accept at start that the --state store lost its data (its epoch vanished or changed), as `toolpdp state accept-reset` does; recorded in the decision log")
	fs.IntVar(&e.MaxSessions, "max-sessions", pdp.DefaultMaxSessions, "sessions held at most; the longest idle that are not halted are released first, and a new session is refused while every one is halted")
	fs.IntVar(&e.MaxSessionsPerAgent, "max-sessions-per-agent", 0, "sessions of one agent held at most (agents the policy does not define share one bound); 0: half of --max-sessions")
	fs.DurationVar(&e.SessionIdle, "session-idle-timeout", pdp.DefaultSessionIdle, "a session unused this long is released")
	fs.IntVar(&e.MaxPending, "max-pending", pdp.DefaultMaxPending, "asks awaiting Confirm held at most")
	fs.Int64Var(&e.MaxPendingBytes, "max-pending-bytes", pdp.DefaultMaxPendingBytes, "bytes the asks awaiting Confirm hold at most; the oldest are forgotten first")
	fs.Int64Var(&e.MaxSessionBytes, "max-session-bytes", pdp.DefaultMaxSessionBytes, "bytes the sessions hold at most; the longest idle are released first")
	fs.DurationVar(&e.PendingTTL, "pending-ttl", 0, "an ask nobody answers within this expires: a deny, as its AwaitDecision tells the agent (0: "+pdp.DefaultPendingTTL.String()+" with --state memory, "+server.DefaultDurablePendingTTL.String()+" with a durable store)")
	fs.DurationVar(&e.RememberTTL, "remember-ttl", pdp.DefaultRememberTTL, "a remembered approval (Confirm with remember) holds this long at most; it also ends with its session and with any reload")
	fs.DurationVar(&e.ExecutionTTL, "execution-ttl", pdp.DefaultExecutionTTL, "an allowed shell call's execution can be fetched for its confined run (GetExecution, toolpdp exec --decision) this long after the decision, once; an allow that relied on confinement and was never fetched is logged confinement_unverified")
	fs.DurationVar(&e.Debounce, "watch-debounce", pdp.DefaultDebounce, "file events closer than this give one reload")
	fs.DurationVar(&e.Poll, "poll-interval", pdp.DefaultPoll, "how often bundle content is re-hashed, for events a file system misses")
	e.DecisionCache = pdp.DefaultDecisionCache
	fs.Var(cacheFlag{&e.DecisionCache}, "decision-cache", "decisions cached per policy snapshot (answers identical to evaluating; off for policies with non-deterministic builtins or data.guardrails Rego): true, false or 0 (off), or a size")
	fs.BoolVar(&c.WaitForBundle, "wait-for-bundle", false, "start even if a --bundle is missing or invalid; deny until it loads")
	fs.DurationVar(&c.LoadTimeout, "load-timeout", loadchild.DefaultTimeout, "bound on one bundle load (compile, index, the bundle's tests), run in a child process first; past it the bundle is rejected and the last good policy keeps serving")
	fs.Int64Var(&c.loadMemMB, "load-memory-mb", loadchild.DefaultMemoryBytes>>20, "memory (MiB, RLIMIT_DATA) the load's child process may use; past it the bundle is rejected. With the serving process it must fit the container's limit")
	fs.StringVar(&c.unknownKeys, "unknown-keys", "error", "an unknown key in an agent definition: error (the bundle is rejected, naming the key meant) or warn (served with a warning: for migrating a bundle only)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", server.DefaultShutdownGrace, "on SIGTERM, how long in-flight calls may take to finish")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&dl.To, "decision-log", "stdout", "where decisions are logged as JSON lines: stdout, off, or a file path (rotated by size)")
	fs.IntVar(&dl.QueueSize, "decision-log-queue", decisionlog.DefaultQueueSize, "decisions waiting to be written at most")
	fs.Int64Var(&dl.QueueBytes, "decision-log-queue-bytes", decisionlog.DefaultQueueBytes, "memory the queued decisions hold at most (estimated)")
	fs.StringVar(&c.whenFull, "decision-log-when-full", "drop", "when the queue is full: drop (and count in toolpdp_decision_log_dropped_total) or block")
	fs.BoolVar(&dl.Required, "decision-log-required", false, "no audit, no allow: a decision whose log line cannot be written now (a full disk, a full queue) is answered deny; for deployments whose every allowed call must be on record")
	fs.IntVar(&dl.MaxMB, "decision-log-max-mb", server.DefaultLogMaxMB, "a decision-log file is rotated past this size")
	fs.IntVar(&dl.MaxBackups, "decision-log-max-backups", server.DefaultLogMaxBackups, "rotated decision-log files kept")
	fs.StringVar(&c.logRedact, "decision-log-redact", strings.Join(decisionlog.DefaultRedact, ","), "names whose values the decision log masks, in env, args and NAME=value text (comma-separated; 5+ letters: a name containing one; shorter: a whole word)")
	fs.StringVar(&c.TLS.CertFile, "tls-cert", "", "PEM certificate: serve gRPC over TLS (with --tls-key); read again when it changes")
	fs.StringVar(&c.TLS.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.TLS.ClientCAFile, "tls-client-ca", "", "PEM CA bundle: require client certificates signed by it (mTLS); a certificate's Common Name is its workspace")
	fs.Var((*listFlag)(&c.ApproverTokens), "approver-token-file", "[WORKSPACE=]FILE: a bearer token, read from FILE (re-read when it changes), that every approver surface (--confirm-listen, --console-listen) takes; its file name is who answered, in the decision log (repeatable). A TCP approver address needs one")
	fs.Var((*listFlag)(&c.ConsoleListen), "console-listen", "the approvers' web console, host:port or unix:///path (repeatable): pending asks shown in full, answered from a browser")
	fs.Var((*listFlag)(&c.NotifyURLs), "notify-url", "a webhook (a Slack incoming webhook, a chat bot) POSTed a signed JSON notification for every new ask and every answer (repeatable)")
	fs.StringVar(&c.NotifySecretFile, "notify-secret-file", "", "file holding the HMAC-SHA256 key notifications are signed with (X-Toolpdp-Signature-256: sha256=<hex>); required with --notify-url")
	fs.StringVar(&c.ConsoleURL, "console-url", "", "the console's address as people reach it, linked from notifications")
	fs.Var((*listFlag)(&c.WorkspaceTokens), "workspace-token", "WORKSPACE=FILE: a bearer token, read from FILE, that binds a caller to WORKSPACE (repeatable)")
	fs.StringVar(&c.HealthListen, "health-listen", "", "an extra gRPC address serving only grpc.health.v1, for Kubernetes probes (may be non-loopback)")
	fs.StringVar(&c.Verification.KeyFile, "verification-key", "", "PEM public key (or HMAC secret) file: bundles must be signed with it (.signatures.json)")
	fs.StringVar(&c.Verification.KeyID, "verification-key-id", "default", "the key id the bundles' signatures name")
	fs.StringVar(&c.Verification.Alg, "verification-alg", "RS256", "the signing algorithm of --verification-key")
	withSynopsis(fs, `toolpdp serve [--bundle PATH|URL]... [--listen ADDR]... [flags]

Every flag can also be set by the environment variable TOOLPDP_<FLAG>
(--metrics-listen: TOOLPDP_METRICS_LISTEN); the flag wins. A repeatable
flag takes a comma-separated list there.`)
	return c, fs
}

// serve: flags → config → run.
func serve(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
	// SIGHUP re-reads bundles and credentials, as for many daemons;
	// unhandled it would end the process. Caught first, before any work.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	c, parseArgs := serveFlags(stderr)
	if err := parseArgs(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	if b := c.Engine.BundleLimits; b.MaxBytes <= 0 || b.MaxEntries <= 0 || c.Engine.DownloadTimeout <= 0 {
		return fmt.Errorf("%w: --max-bundle-bytes, --max-bundle-entries and --bundle-download-timeout must be positive", errUsage)
	}
	if c.whenFull != "drop" && c.whenFull != "block" {
		return fmt.Errorf("%w: --decision-log-when-full: %q is not drop or block", errUsage, c.whenFull)
	}
	c.DecisionLog.Block = c.whenFull == "block"
	switch c.unknownKeys {
	case "error":
	case "warn":
		c.Engine.WarnUnknownKeys = true
	default:
		return fmt.Errorf("%w: --unknown-keys: %q is not error or warn", errUsage, c.unknownKeys)
	}
	if c.loadMemMB <= 0 || c.LoadTimeout <= 0 {
		return fmt.Errorf("%w: --load-memory-mb and --load-timeout must be positive", errUsage)
	}
	c.LoadMemoryBytes = c.loadMemMB << 20
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("serve: the bundle loads' child process: %w", err)
	}
	c.LoadCommand = []string{exe, loadChildCommand}
	for _, r := range strings.Split(c.logRedact, ",") {
		if r = strings.TrimSpace(r); r != "" {
			c.DecisionLog.Redact = append(c.DecisionLog.Redact, r)
		}
	}
	c.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	tracing, err := startTracing(ctx, c.Logger)
	if err != nil {
		return err
	}
	defer tracing.shutdown() // after the server has stopped: flushes the last spans
	c.API.Options = tracing.options
	c.Reload = hup
	return server.Run(ctx, c.Config)
}
