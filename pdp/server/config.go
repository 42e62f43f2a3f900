// Package server runs toolpdp as a service: it builds the engine, the
// decision log and the gRPC server from one Config, opens every listener
// under one loopback policy, serves TLS from files it reads again when they
// change, serves metrics and health probes, and stops gracefully.
//
// Adding an option: a field in Config (with its default in withDefaults
// and a Default… constant when it has one), a flag in cmd/toolpdp/serve.go
// that writes it. Adding a listener: a field here and one row in
// Server.endpoints, which says what the listener serves and whether it may
// listen beyond loopback.
package server

import (
	"log/slog"
	"os"
	"time"

	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
)

// Defaults of Config: what a zero field means, and what serve's flags and
// docs/OPERATING.md show.
const (
	DefaultListen        = "127.0.0.1:8787" // loopback only: nothing off the machine reaches it by accident
	DefaultMetricsListen = "127.0.0.1:8788"
	DefaultSocketMode    = os.FileMode(0o660)
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxConnections bounds the connections of one gRPC listener
	// open at once; more wait to be accepted.
	DefaultMaxConnections = 256
	DefaultLogMaxMB       = 100 // a decision-log file is rotated past this size
	DefaultLogMaxBackups  = 5   // rotated decision-log files kept
)

// Config is everything a Server is built from.
type Config struct {
	// Listeners. TCP addresses are host:port; the gRPC ones also take
	// unix:///path. Every TCP address must be loopback unless
	// AllowNonLoopback, but HealthListen's (it serves only health).
	Listen           []string // the agents' gRPC addresses; DefaultListen when empty
	ConfirmListen    []string // the approver's gRPC addresses: Confirm and ListPending only there
	MetricsListen    string   // HTTP /metrics; "" serves none
	HealthListen     string   // gRPC health only, for Kubernetes probes; "" serves none
	AllowNonLoopback bool
	SocketMode       os.FileMode // of unix sockets: who may ask
	MaxConnections   int         // of each gRPC listener at once; DefaultMaxConnections when 0

	TLS TLSFiles // none: plaintext

	// WorkspaceTokens are WORKSPACE=FILE: a bearer token, read from FILE,
	// binds a caller to WORKSPACE. The file is read again when it changes
	// (tokenfile): a rotated token is accepted and the old one refused
	// without a restart. One file named twice is an error.
	WorkspaceTokens []string

	// ApproverTokens are [WORKSPACE=]FILE: the bearer tokens every
	// approver surface (ConfirmListen, ConsoleListen) takes. A TCP approver
	// address refuses to start without one; none may equal a workspace
	// token.
	ApproverTokens []string
	// ConsoleListen are the web console's HTTP addresses, host:port or
	// unix:///path.
	ConsoleListen []string
	// Notify: a signed JSON POST to each URL for every new ask and answer.
	NotifyURLs       []string
	NotifySecretFile string // the HMAC key of the signature
	ConsoleURL       string // the console's address for people, linked from notifications

	// Reload, when set, is a signal (serve's SIGHUP) at each of which the
	// server re-reads its bundles — bundle servers are polled at once — and
	// its credential files, and reloads what changed.
	Reload <-chan os.Signal

	Verification Verification // bundle signatures; none: not checked
	DecisionLog  DecisionLog
	State        State // where session state lives; in memory when its URL is empty

	// WaitForBundle starts the server even when a bundle file is missing or
	// invalid at start (every decision denies until one loads). A bundle
	// server is always waited for.
	WaitForBundle bool
	ShutdownGrace time.Duration // how long in-flight calls may take to finish once stopping

	// Load bounds each bundle load: a child process (LoadCommand, this
	// binary's hidden load-child command) loads it first, killed past
	// LoadTimeout or LoadMemoryBytes. No LoadCommand loads in process only.
	LoadCommand     []string
	LoadTimeout     time.Duration
	LoadMemoryBytes int64

	Logger *slog.Logger // nil: discarded

	// Engine and API are the engine's and the gRPC service's own options;
	// the server sets their Logger, Registerer, DecisionLog, Verify, Creds,
	// Workspaces and SeparateApprover from the fields above.
	Engine pdp.Config
	API    grpcapi.Config
}

// State is the session state store: "memory" (or ""), file:PATH, or a
// redis:// or rediss:// URL, with the password and CA files a shared
// store may need.
type State struct {
	URL          string
	PasswordFile string // the Redis password; "" for none or the URL's
	CACertFile   string // PEM CA bundle trusted for rediss://; the system's when ""
	AcceptReset  bool   // accept at start that the store lost its data
}

// Durable reports whether the store outlives the process.
func (s State) Durable() bool { return s.URL != "" && s.URL != "memory" }

// DefaultDurablePendingTTL is how long an ask waits for a person with a
// durable store, which a restart does not empty (pdp.DefaultPendingTTL in
// memory).
const DefaultDurablePendingTTL = 24 * time.Hour

// TLSFiles are PEM files: a certificate and its key serve TLS; a client
// CA as well requires client certificates signed by it (mTLS), whose
// Common Name is the caller's workspace.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

// Verification is the key bundles must be signed with (.signatures.json).
type Verification struct {
	KeyFile string // PEM public key or HMAC secret; "" checks no signature
	KeyID   string // the key id the signatures name; "default" when empty
	Alg     string // RS256 when empty
}

// DecisionLog is where decisions are logged, as JSON lines, and the
// queue's options.
type DecisionLog struct {
	To         string // "stdout", "off" (or ""), or a file path rotated by size
	MaxMB      int    // a file is rotated past this size
	MaxBackups int    // rotated files kept
	decisionlog.Config
}

// withDefaults is c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.Listen) == 0 {
		c.Listen = []string{DefaultListen}
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.SocketMode == 0 {
		c.SocketMode = DefaultSocketMode
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DecisionLog.MaxMB <= 0 {
		c.DecisionLog.MaxMB = DefaultLogMaxMB
	}
	if c.DecisionLog.MaxBackups <= 0 {
		c.DecisionLog.MaxBackups = DefaultLogMaxBackups
	}
	if c.Verification.KeyID == "" {
		c.Verification.KeyID = "default"
	}
	if c.Verification.Alg == "" {
		c.Verification.Alg = "RS256"
	}
	return c
}
