package netproxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xproxy "golang.org/x/net/proxy"

	"github.com/toolpdp/toolpdp/confine/netproxy"
	"github.com/toolpdp/toolpdp/envguard/netrules"
	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// counted is a loopback listener that counts the connections it accepts
// and the bytes they read: a denied host's listener must see none.
type counted struct {
	net.Listener
	n, bytes atomic.Int64
}

func (c *counted) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c.n.Add(1)
	return &countingConn{Conn: conn, bytes: &c.bytes}, nil
}

type countingConn struct {
	net.Conn
	bytes *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.bytes.Add(int64(n))
	return n, err
}

func listen(t *testing.T, addr string) *counted {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	return &counted{Listener: l}
}

// upstream is a real HTTP (or HTTPS) server on a loopback address.
func upstream(t *testing.T, addr string, tlsOn bool) (*httptest.Server, *counted, int) {
	l := listen(t, addr)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "reached %s host %s", r.URL.Path, r.Host)
	}))
	s.Listener = l
	if tlsOn {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, l, l.Addr().(*net.TCPAddr).Port
}

type rig struct {
	ts      *grpcapitest.Server
	proxy   *netproxy.Proxy
	addr    string
	lookups sync.Map // name -> times looked up
}

// start runs a toolpdp server whose agent has rules, decides the command's
// allow, and serves a proxy for that run on loopback.
func start(t *testing.T, rules string, o func(*netproxy.Config)) *rig {
	t.Helper()
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"run": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "execution_policy": {"network": ` + rules + `}}}`,
		"guardrails/hosts/hosts.rego": `package guardrails.hosts

import rego.v1

deny contains msg if {
	input.tool_name == "Network"
	endswith(input.args.host, ".example")
	msg := sprintf("no connection to %s", [input.args.host])
}
`,
	})
	r := &rig{ts: grpcapitest.NewServer(t, grpcapitest.Options{Bundles: []string{dir}, Approver: true})}
	allow := r.ts.Decide(t, &pb.DecideRequest{AgentId: "run", SessionId: "s", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "make fetch"})})
	if allow.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the command: %v", allow)
	}
	nr := allow.GetExecution().GetNetworkRules()
	parsed, err := netrules.Parse(nr.GetAllow(), nr.GetAsk(), nr.GetDeny(), nr.GetOtherwise(), nr.GetPrivate()...)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]netip.Addr{
		"api.test":    {netip.MustParseAddr("127.0.0.1")},
		"meta.test":   {netip.MustParseAddr("169.254.169.254")},
		"ten.test":    {netip.MustParseAddr("10.1.2.3")},
		"mapped.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
		"six.test":    {netip.MustParseAddr("64:ff9b::a9fe:a9fe")},
	}
	cfg := netproxy.Config{
		Decider: &netproxy.Sidecar{Client: r.ts.Client, AgentID: "run", SessionID: "s", ForDecision: allow.DecisionId, Command: "make fetch"},
		Rules:   parsed,
		// The test's names: a resolver the test controls stands in for DNS.
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			v, _ := r.lookups.LoadOrStore(host, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			if a, ok := names[host]; ok {
				return a, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
	}
	if o != nil {
		o(&cfg)
	}
	if r.proxy, err = netproxy.New(cfg); err != nil {
		t.Fatal(err)
	}
	l := listen(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.proxy.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	r.addr = l.Addr().String()
	return r
}

func (r *rig) looked(name string) int64 {
	v, ok := r.lookups.Load(name)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func (r *rig) client(tlsConf *tls.Config) *http.Client {
	u, _ := url.Parse("http://" + r.addr)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// HTTP through the proxy: an allowed host is reached, a denied one never
// sees a connection, each host is decided once, and a name is decided
// before it is resolved.
func TestProxyDecidesEachHost(t *testing.T) {
	_, a, portA := upstream(t, "127.0.0.1:0", false)
	_, b, portB := upstream(t, "127.0.0.1:0", false)
	r := start(t, fmt.Sprintf(`{"allow": ["127.0.0.1:%d", "*.example", "mapped.test", "ten.test", "meta.test", "six.test"], "otherwise": "deny"}`, portA), nil)
	c := r.client(nil)
	for i := 0; i < 2; i++ {
		if code, body := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/a", portA)); code != 200 || body != fmt.Sprintf("reached /a host 127.0.0.1:%d", portA) {
			t.Fatalf("allowed host: %d %q", code, body)
		}
	}
	if code, body := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/b", portB)); code != http.StatusForbidden || !strings.Contains(body, "otherwise") {
		t.Errorf("denied host: %d %q", code, body)
	}
	if n := b.n.Load(); n != 0 {
		t.Errorf("the denied host's listener saw %d connections", n)
	}
	if n := a.n.Load(); n != 2 {
		t.Errorf("the allowed host saw %d connections, want 2 (one per absolute-URI request)", n)
	}
	// A guardrail denies the name; it is never resolved.
	if code, body := get(t, c, "http://x.example/"); code != http.StatusForbidden || !strings.Contains(body, "no connection to x.example") {
		t.Errorf("guardrail: %d %q", code, body)
	}
	if n := r.looked("x.example"); n != 0 {
		t.Errorf("a denied name was resolved %d times", n)
	}
	// Names allowed by name that resolve into refused ranges are refused,
	// the loopback listener included.
	for name, why := range map[string]string{"meta.test": "cloud metadata", "ten.test": "private", "six.test": "NAT64"} {
		if code, body := get(t, c, "http://"+name+"/"); code != http.StatusBadGateway || !strings.Contains(body, why) {
			t.Errorf("%s: %d %q, want refused as %s", name, code, body, why)
		}
	}
	if code, body := get(t, c, fmt.Sprintf("http://mapped.test:%d/", portB)); code != http.StatusBadGateway || !strings.Contains(body, "loopback") {
		t.Errorf("mapped.test: %d %q, want refused as loopback", code, body)
	}
	if n := b.n.Load(); n != 0 {
		t.Errorf("a name resolving to ::ffff:127.0.0.1 reached the loopback listener (%d connections)", n)
	}
	var decided []string
	for _, rec := range r.proxy.Records() {
		decided = append(decided, fmt.Sprintf("%s:%d=%s", rec.Host, rec.Port, rec.Decision))
	}
	want := []string{fmt.Sprintf("127.0.0.1:%d=allow", portA), fmt.Sprintf("127.0.0.1:%d=deny", portB), "x.example:80=deny"}
	for _, w := range want {
		found := false
		for _, d := range decided {
			found = found || d == w
		}
		if !found {
			t.Errorf("the records %q lack %s", decided, w)
		}
	}
	if len(decided) != 7 {
		t.Errorf("records %q: want one per host:port, 7", decided)
	}
}

// An https CONNECT must name the decided host in its ClientHello; the
// upstream sees nothing of a tunnel that does not.
func TestProxyConnectChecksTheServerName(t *testing.T) {
	s, l, port := upstream(t, "127.0.0.1:0", true)
	r := start(t, fmt.Sprintf(`{"allow": ["127.0.0.1:%d", "api.test:%d"]}`, port, port), nil)
	pool := s.Client().Transport.(*http.Transport).TLSClientConfig
	byAddress := r.client(pool)
	if code, body := get(t, byAddress, fmt.Sprintf("https://127.0.0.1:%d/t", port)); code != 200 || !strings.Contains(body, "reached /t") {
		t.Fatalf("https to an allowed address: %d %q", code, body)
	}
	insecure := &tls.Config{InsecureSkipVerify: true} // the test server's certificate does not name api.test
	byName := r.client(insecure)
	if code, body := get(t, byName, fmt.Sprintf("https://api.test:%d/n", port)); code != 200 || !strings.Contains(body, "reached /n") {
		t.Fatalf("https to an allowed name: %d %q", code, body)
	}
	// The allowed tunnels' last bytes (a TLS close_notify as they close)
	// are theirs: counted before the refused ones are tried.
	byAddress.CloseIdleConnections()
	byName.CloseIdleConnections()
	before := settled(&l.bytes)
	for host, sni := range map[string]string{"api.test": "other.test", "127.0.0.1": "api.test"} {
		conn, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s: %v %v", host, resp, err)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		if err := tc.Handshake(); err == nil {
			t.Errorf("CONNECT %s with server name %q: the handshake went through", host, sni)
		}
		conn.Close()
	}
	if n := l.bytes.Load() - before; n != 0 {
		t.Errorf("the upstream read %d bytes of tunnels whose server name was not the decided host", n)
	}
}

// SOCKS5 CONNECT with a host name is decided like the others; BIND and
// UDP ASSOCIATE are refused.
func TestProxySOCKS5(t *testing.T) {
	_, _, port := upstream(t, "127.0.0.1:0", false)
	_, b, portB := upstream(t, "127.0.0.1:0", false)
	r := start(t, fmt.Sprintf(`{"allow": ["api.test:%d", "127.0.0.1:%d"]}`, port, port), nil)
	d, err := xproxy.SOCKS5("tcp", r.addr, nil, xproxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	dc := d.(xproxy.ContextDialer)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dc.DialContext, DisableKeepAlives: true}}
	if code, body := get(t, c, fmt.Sprintf("http://api.test:%d/s", port)); code != 200 || !strings.Contains(body, "reached /s") {
		t.Fatalf("socks5 to an allowed name: %d %q", code, body)
	}
	if _, err := d.Dial("tcp", fmt.Sprintf("api.test:%d", portB)); err == nil {
		t.Error("socks5 to a port no rule allows was connected")
	}
	if b.n.Load() != 0 {
		t.Error("the denied port's listener saw a connection")
	}
	for cmd, name := range map[byte]string{2: "BIND", 3: "UDP ASSOCIATE"} {
		conn, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		conn.Write([]byte{5, 1, 0})
		reply := make([]byte, 2)
		io.ReadFull(conn, reply)
		conn.Write([]byte{5, cmd, 0, 3, 8, 'a', 'p', 'i', '.', 't', 'e', 's', 't', byte(port >> 8), byte(port)})
		rep := make([]byte, 10)
		if _, err := io.ReadFull(conn, rep); err != nil || rep[1] != 7 {
			t.Errorf("%s: reply %v %v, want command not supported (7)", name, rep, err)
		}
		conn.Close()
	}
}

// A network ask holds the connection until a person answers; a run
// decides at most MaxHosts hosts; a sidecar that cannot be reached refuses
// every new host.
func TestProxyAsksAndBounds(t *testing.T) {
	_, ask, portAsk := upstream(t, "127.0.0.2:0", false)
	_, _, portA := upstream(t, "127.0.0.1:0", false)
	r := start(t, fmt.Sprintf(`{"allow": ["127.0.0.1:%d"], "ask": ["127.0.0.2"]}`, portA), func(c *netproxy.Config) { c.MaxHosts = 3 })
	ctx := context.Background()
	answer := func(result string) {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			p, err := r.ts.Approver.ListPending(ctx, &pb.ListPendingRequest{})
			if err == nil && len(p.Asks) == 1 {
				if _, err := r.ts.Approver.Confirm(ctx, &pb.ConfirmRequest{DecisionId: p.Asks[0].DecisionId, Result: result}); err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Error("the network ask was never listed")
	}
	c := r.client(nil)
	var answered sync.WaitGroup
	answered.Add(1)
	go func() { defer answered.Done(); answer("allow") }()
	if code, body := get(t, c, fmt.Sprintf("http://127.0.0.2:%d/q", portAsk)); code != 200 || !strings.Contains(body, "reached /q") {
		t.Fatalf("an allowed ask: %d %q", code, body)
	}
	answered.Wait()
	answered.Add(1)
	go func() { defer answered.Done(); answer("deny") }()
	if code, body := get(t, c, fmt.Sprintf("http://127.0.0.2:%d/q", portAsk+1)); code != http.StatusForbidden || !strings.Contains(body, "a person denied") {
		t.Errorf("a denied ask: %d %q", code, body)
	}
	answered.Wait()
	if n := ask.n.Load(); n != 1 {
		t.Errorf("the asked host saw %d connections, want the one a person allowed", n)
	}
	// The third host is the last one decided.
	get(t, c, fmt.Sprintf("http://127.0.0.1:%d/", portA))
	if code, body := get(t, c, "http://api.test/"); code != http.StatusForbidden || !strings.Contains(body, "max-hosts-per-run") {
		t.Errorf("past the bound: %d %q", code, body)
	}

	// An ask nobody answers in time is refused.
	r3 := start(t, `{"ask": ["127.0.0.2"]}`, func(c *netproxy.Config) { c.AskTimeout = 300 * time.Millisecond })
	if code, body := get(t, r3.client(nil), fmt.Sprintf("http://127.0.0.2:%d/late", portAsk)); code != http.StatusForbidden || !strings.Contains(body, "nobody answered") {
		t.Errorf("an ask nobody answers: %d %q", code, body)
	}
	if n := ask.n.Load(); n != 1 {
		t.Errorf("the asked host saw %d connections after an unanswered ask, want 1", n)
	}

	// The sidecar goes away: a new host is refused, a decided one still goes.
	r.ts.Close()
	if code, body := get(t, c, fmt.Sprintf("http://127.0.0.1:%d/again", portA)); code != 200 {
		t.Errorf("a host decided before the sidecar went away: %d %q", code, body)
	}
	r2 := start(t, fmt.Sprintf(`{"allow": ["127.0.0.1:%d"]}`, portA), nil)
	r2.ts.Close()
	if code, body := get(t, r2.client(nil), fmt.Sprintf("http://127.0.0.1:%d/", portA)); code != http.StatusForbidden || !strings.Contains(body, "could not be decided") {
		t.Errorf("with the sidecar gone: %d %q", code, body)
	}
}

// A name entry marked private reaches a refused range by that name only.
func TestProxyPrivateName(t *testing.T) {
	_, a, port := upstream(t, "127.0.0.1:0", false)
	r := start(t, `{"allow": [{"host": "api.test", "private": true}, "mapped.test"]}`, nil)
	c := r.client(nil)
	if code, body := get(t, c, fmt.Sprintf("http://api.test:%d/p", port)); code != 200 || !strings.Contains(body, "reached /p") {
		t.Fatalf("a private name: %d %q", code, body)
	}
	if code, body := get(t, c, fmt.Sprintf("http://mapped.test:%d/p", port)); code != http.StatusBadGateway || !strings.Contains(body, "loopback") {
		t.Errorf("a name not marked private: %d %q", code, body)
	}
	if n := a.n.Load(); n != 1 {
		t.Errorf("the upstream saw %d connections, want the private name's one", n)
	}
}

// settled is n once it has not changed for a moment (bounded).
func settled(n *atomic.Int64) int64 {
	last := n.Load()
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		now := n.Load()
		if now == last {
			return now
		}
		last = now
	}
	return last
}
