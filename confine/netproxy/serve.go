package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolpdp/toolpdp/envguard/netrules"
)

// handle serves one client connection: SOCKS5 when its first byte is 5,
// HTTP otherwise.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == 5 {
		p.socks(ctx, c, br)
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, "not an HTTP proxy request: "+err.Error())
		return
	}
	if req.Method == http.MethodConnect {
		p.connect(ctx, c, br, req)
		return
	}
	p.forward(ctx, c, req)
}

// target reads HOST:PORT as the rules read hosts, defaulting the port.
func target(hostport, scheme string, defaultPort int) (Target, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		host, portText = hostport, ""
	}
	port := defaultPort
	if portText != "" {
		if port, err = netrules.ParsePort(portText); err != nil {
			return Target{}, err
		}
	}
	if port == 0 {
		return Target{}, fmt.Errorf("%q names no port", hostport)
	}
	h, err := netrules.ParseHost(host)
	if err != nil {
		return Target{}, err
	}
	return Target{Host: h, Port: port, Scheme: scheme}, nil
}

// connect serves an HTTP CONNECT tunnel: decided, then the client's first
// bytes read (a ClientHello must name the decided host), then dialled and
// relayed.
func (p *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request) {
	scheme := "tcp"
	if strings.HasSuffix(req.Host, ":443") {
		scheme = "https"
	}
	t, err := target(req.Host, scheme, 0)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, "CONNECT "+req.Host+": "+err.Error())
		return
	}
	if err := p.decide(ctx, t); err != nil {
		writeStatus(c, http.StatusForbidden, err.Error())
		return
	}
	if t.Scheme != "https" {
		up, err := p.dial(ctx, t)
		if err != nil {
			writeStatus(c, http.StatusBadGateway, err.Error())
			return
		}
		defer up.Close()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		p.relayChecked(c, br, up, t)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	p.tunnelTLS(ctx, c, br, t)
}

// tunnelTLS serves an https tunnel (port 443): the ClientHello is read and
// checked before the upstream is dialled, so a tunnel naming another host
// reaches nothing.
func (p *Proxy) tunnelTLS(ctx context.Context, c net.Conn, br *bufio.Reader, t Target) {
	hello, err := p.checkHello(c, br, t)
	if err != nil {
		p.refusedLog(t, err)
		return
	}
	up, err := p.dial(ctx, t)
	if err != nil {
		p.refusedLog(t, err)
		return
	}
	defer up.Close()
	if _, err := up.Write(hello); err != nil {
		return
	}
	relay(c, br, up)
}

// relayChecked relays a tunnel of another port: the upstream's bytes at
// once (its protocol may speak first), the client's once its first bytes
// are seen — a TLS ClientHello among them must name the decided host,
// else the tunnel closes before any of them reach the upstream.
func (p *Proxy) relayChecked(c net.Conn, br *bufio.Reader, up net.Conn, t Target) {
	_ = c.SetReadDeadline(time.Time{})
	down := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, up)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(down)
	}()
	if first, err := br.Peek(1); err == nil && first[0] == 0x16 {
		hello, err := p.readHello(br, t)
		if err != nil {
			p.refusedLog(t, err)
			c.Close()
			up.Close()
			<-down
			return
		}
		if _, err := up.Write(hello); err != nil {
			c.Close()
			<-down
			return
		}
	}
	_, _ = io.Copy(up, br)
	if tc, ok := up.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	<-down
}

func (p *Proxy) refusedLog(t Target, err error) {
	p.cfg.Logger.Warn("connection refused", "host", t.Host.String(), "port", t.Port, "reason", err.Error())
}

// checkHello reads what the client sends first on an https tunnel (port
// 443): a ClientHello whose server name is the decided host — none only
// when the host is an address — or the tunnel is closed before anything
// reaches the upstream. The bytes read are returned to be sent on
// unchanged.
func (p *Proxy) checkHello(c net.Conn, br *bufio.Reader, t Target) ([]byte, error) {
	if t.Scheme != "https" {
		// Another port's protocol may have the server speak first: it is
		// relayed as TCP, to the address checked.
		return nil, nil
	}
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	defer c.SetReadDeadline(time.Time{})
	first, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("an https tunnel sent no ClientHello: %w", err)
	}
	if first[0] != 0x16 {
		return nil, errors.New("an https tunnel did not begin with a TLS ClientHello")
	}
	return p.readHello(br, t)
}

// readHello reads a TLS ClientHello and checks its server name against
// the decided host; the bytes read are returned to be sent on unchanged.
func (p *Proxy) readHello(br *bufio.Reader, t Target) ([]byte, error) {
	rec := &recording{r: br}
	var sni string
	errSeen := errors.New("hello read")
	_ = tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, errSeen
	}}).Handshake()
	if !rec.seen {
		return nil, errors.New("the tunnel's TLS ClientHello could not be read")
	}
	rec.seen = false
	name := strings.TrimSuffix(strings.ToLower(sni), ".")
	switch {
	case t.Host.IsAddr() && name == "":
	case !t.Host.IsAddr() && name == t.Host.Name:
	default:
		return nil, fmt.Errorf("the ClientHello names %q, not the host decided (%s)", sni, t.Host)
	}
	return rec.buf, nil
}

// recording is a connection that only reads, keeping what it read: what
// crypto/tls reads of a ClientHello is sent on unchanged.
type recording struct {
	r    io.Reader
	buf  []byte
	seen bool
}

func (r *recording) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.buf = append(r.buf, b[:n]...)
	r.seen = true
	return n, err
}
func (r *recording) Write(b []byte) (int, error)      { return 0, errors.New("read only") }
func (r *recording) Close() error                     { return nil }
func (r *recording) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (r *recording) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (r *recording) SetDeadline(time.Time) error      { return nil }
func (r *recording) SetReadDeadline(time.Time) error  { return nil }
func (r *recording) SetWriteDeadline(time.Time) error { return nil }

// forward serves one absolute-URI request on a connection of its own to
// the decided host, its Host header that host, and closes: a second
// request on the client's connection would need a decision of its own.
func (p *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request) {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		writeStatus(c, http.StatusBadRequest, fmt.Sprintf("%s %s: a proxy request needs an absolute http:// URI (https goes through CONNECT)", req.Method, req.RequestURI))
		return
	}
	t, err := target(req.URL.Host, "http", 80)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, err.Error())
		return
	}
	if err := p.decide(ctx, t); err != nil {
		writeStatus(c, http.StatusForbidden, err.Error())
		return
	}
	up, err := p.dial(ctx, t)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, err.Error())
		return
	}
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	host := t.Host.String()
	if t.Host.Addr.Is6() {
		host = "[" + host + "]"
	}
	if t.Port != 80 {
		host += ":" + strconv.Itoa(t.Port)
	}
	req.Host = host
	req.URL.Host = host
	req.RequestURI = ""
	req.Close = true
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization"} {
		req.Header.Del(h)
	}
	out := *req.URL
	out.Scheme, out.Host = "", ""
	req.URL = &out
	if err := req.Write(up); err != nil {
		writeStatus(c, http.StatusBadGateway, err.Error())
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, err.Error())
		return
	}
	defer resp.Body.Close()
	resp.Close = true
	_ = resp.Write(c)
}

// relay copies both ways until either side ends.
func relay(client net.Conn, fromClient io.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, fromClient)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, up)
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// writeStatus answers a proxy request that goes no further.
func writeStatus(c net.Conn, code int, msg string) {
	msg = strings.ReplaceAll(msg, "\n", " ")
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}
