// Package netproxy is the proxy a confined run reaches the network
// through: HTTP CONNECT, absolute-URI HTTP requests and SOCKS5 CONNECT.
// Each new host:port of the run is one decision (a Decide of the tool
// Network, through Decider), made on the name before anything resolves
// it, and kept for the rest of the run. After an allow the proxy resolves
// the name itself, refuses the addresses of its refused table unless the
// run's rules allow them by address, and connects to the address it
// checked; a TLS tunnel must name the decided host in its ClientHello.
// Past that it relays bytes without reading them.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/toolpdp/toolpdp/envguard/netrules"
)

// Defaults of Config.
const (
	DefaultMaxHosts   = 64
	DefaultAskTimeout = 60 * time.Second
	dialTimeout       = 30 * time.Second
	headerTimeout     = 30 * time.Second
)

// Verdict is a decision's outcome as the proxy acts on it.
type Verdict int

const (
	Deny Verdict = iota
	Allow
	Ask
)

// Target is what one decision is about.
type Target struct {
	Host   netrules.Host
	Port   int
	Scheme string // "https", "http" or "tcp"
}

func (t Target) key() string { return net.JoinHostPort(t.Host.String(), strconv.Itoa(t.Port)) }

// Decision is a Decider's answer: for an ask, ID names it for Await.
type Decision struct {
	Verdict Verdict
	ID      string
	Message string
}

// Decider decides a run's connections: Decide once per new host:port,
// Await for a person's answer to an ask (allowed or not, and why).
type Decider interface {
	Decide(ctx context.Context, t Target) (Decision, error)
	Await(ctx context.Context, id string) (allowed bool, message string, err error)
}

// Config is one run's proxy.
type Config struct {
	Decider Decider
	// Rules are the run's network rules: only to let an allow (or ask)
	// entry that names an address or range, or a private name entry, reach
	// an address the refused table holds. Nil: nothing of the table is
	// reachable.
	Rules      *netrules.Rules
	MaxHosts   int           // hosts decided at most; 0: DefaultMaxHosts
	AskTimeout time.Duration // how long a held connection waits for a person; 0: DefaultAskTimeout
	// Lookup resolves a name (nil: the system's resolver).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	Logger *slog.Logger
}

// Record is one host:port the run decided, for the report.
type Record struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Scheme     string `json:"scheme"`
	Decision   string `json:"decision"` // allow, deny, or deny after an ask
	DecisionID string `json:"decision_id,omitempty"`
	Message    string `json:"message,omitempty"`
}

// Proxy serves one run.
type Proxy struct {
	cfg     Config
	refused *refusedTable

	mu    sync.Mutex
	hosts map[string]*outcome
	order []string
	// decideMu serialises a run's first decisions: a run holds at most one
	// network ask at a time, and an allow takes a Decide's time.
	decideMu sync.Mutex
	conns    sync.WaitGroup
}

// outcome is a host:port's decision, made once; waiters block on done.
type outcome struct {
	done    chan struct{}
	allowed bool
	rec     Record
}

// New is a proxy for one run.
func New(cfg Config) (*Proxy, error) {
	if cfg.Decider == nil {
		return nil, errors.New("netproxy: a Decider is required")
	}
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = DefaultMaxHosts
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	if cfg.Lookup == nil {
		cfg.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t, err := loadRefused(refusedJSON)
	if err != nil {
		return nil, err
	}
	return &Proxy{cfg: cfg, refused: t, hosts: map[string]*outcome{}}, nil
}

// Serve accepts connections on l until it is closed or ctx ends.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.handle(ctx, c)
		}()
	}
}

// Wait waits for the connections being served to end.
func (p *Proxy) Wait() { p.conns.Wait() }

// Records are the hosts decided, in the order they were first asked for.
func (p *Proxy) Records() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Record, 0, len(p.order))
	for _, k := range p.order {
		o := p.hosts[k]
		select {
		case <-o.done:
			out = append(out, o.rec)
		default:
			out = append(out, Record{Host: o.rec.Host, Port: o.rec.Port, Scheme: o.rec.Scheme, Decision: "pending"})
		}
	}
	return out
}

// errRefused is a connection the policy or the proxy refuses; its text is
// what the client is told.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

func refusedf(format string, args ...any) error { return &errRefused{fmt.Sprintf(format, args...)} }

// decide is t's decision: made once per host:port of the run, the ones
// that follow waiting for it. A person's ask holds the run's one ask slot.
func (p *Proxy) decide(ctx context.Context, t Target) error {
	k := t.key()
	p.mu.Lock()
	o, seen := p.hosts[k]
	if !seen {
		if len(p.hosts) >= p.cfg.MaxHosts {
			p.mu.Unlock()
			return refusedf("%s: this run has decided %d hosts, the most it may (--max-hosts-per-run)", k, p.cfg.MaxHosts)
		}
		o = &outcome{done: make(chan struct{}), rec: Record{Host: t.Host.String(), Port: t.Port, Scheme: t.Scheme}}
		p.hosts[k] = o
		p.order = append(p.order, k)
	}
	p.mu.Unlock()
	if seen {
		select {
		case <-o.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		o.allowed, o.rec.Decision, o.rec.DecisionID, o.rec.Message = p.first(ctx, t)
		close(o.done)
	}
	if !o.allowed {
		return refusedf("%s: %s", k, o.rec.Message)
	}
	return nil
}

// first decides t for the first time: allowed, and what the report says.
func (p *Proxy) first(ctx context.Context, t Target) (bool, string, string, string) {
	p.decideMu.Lock()
	defer p.decideMu.Unlock()
	d, err := p.cfg.Decider.Decide(ctx, t)
	if err != nil {
		// The sidecar cannot be reached: the host is refused for the run.
		return false, "deny", "", "the connection could not be decided (" + err.Error() + "), so it is refused"
	}
	switch d.Verdict {
	case Allow:
		return true, "allow", d.ID, d.Message
	case Ask:
		actx, cancel := context.WithTimeout(ctx, p.cfg.AskTimeout)
		defer cancel()
		ok, msg, err := p.cfg.Decider.Await(actx, d.ID)
		switch {
		case err != nil:
			return false, "deny", d.ID, fmt.Sprintf("nobody answered the ask in time (%v), so the connection is refused", err)
		case !ok:
			return false, "deny", d.ID, "a person denied the connection: " + msg
		}
		return true, "allow", d.ID, "a person allowed the connection"
	}
	return false, "deny", d.ID, d.Message
}

// dial resolves t's name (an address is its own), refuses the addresses
// of the refused table the rules do not allow by address, and connects to
// the first address that passes, exactly the one checked.
func (p *Proxy) dial(ctx context.Context, t Target) (net.Conn, error) {
	addrs := []netip.Addr{t.Host.Addr}
	if !t.Host.IsAddr() {
		lctx, cancel := context.WithTimeout(ctx, dialTimeout)
		var err error
		addrs, err = p.cfg.Lookup(lctx, t.Host.Name)
		cancel()
		if err != nil || len(addrs) == 0 {
			return nil, refusedf("%s: the name does not resolve: %v", t.key(), err)
		}
	}
	var why []string
	var d net.Dialer
	for _, a := range addrs {
		if r := p.refused.refused(a); r != "" && (p.cfg.Rules == nil || !p.cfg.Rules.MayReachRefused(t.Host, a, t.Port)) {
			why = append(why, fmt.Sprintf("%s is %s", a, r))
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := d.DialContext(dctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(t.Port)).String())
		cancel()
		if err == nil {
			return c, nil
		}
		why = append(why, err.Error())
	}
	return nil, refusedf("%s: refused: %v (an allow entry naming the address or its range, or a name entry with \"private\": true, lets a run reach such an address)", t.key(), why)
}

// ServeConn serves one connection a run opened to its proxy.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	p.conns.Add(1)
	defer p.conns.Done()
	p.handle(ctx, c)
}
