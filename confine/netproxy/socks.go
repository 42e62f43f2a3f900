package netproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
)

// SOCKS5 reply codes.
const (
	socksOK             = 0
	socksNotAllowed     = 2
	socksHostUnreach    = 4
	socksCmdUnsupported = 7
	socksAddrUnsupport  = 8
)

// socks serves one SOCKS5 connection: no authentication, CONNECT only
// (no BIND, no UDP ASSOCIATE), to a name or an address.
func (p *Proxy) socks(ctx context.Context, c net.Conn, br *bufio.Reader) {
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		_, _ = c.Write([]byte{5, 0xff})
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, 4)
		if req[3] == 4 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksAddrUnsupport)
		return
	}
	pb := make([]byte, 2)
	if _, err := io.ReadFull(br, pb); err != nil {
		return
	}
	if req[1] != 1 {
		// BIND and UDP ASSOCIATE would let the run receive or send outside
		// any decision.
		socksReply(c, socksCmdUnsupported)
		return
	}
	port := int(binary.BigEndian.Uint16(pb))
	scheme := "tcp"
	if port == 443 {
		scheme = "https"
	}
	t, err := target(net.JoinHostPort(host, strconv.Itoa(port)), scheme, 0)
	if err != nil {
		socksReply(c, socksHostUnreach)
		return
	}
	if err := p.decide(ctx, t); err != nil {
		p.cfg.Logger.Warn("connection refused", "host", t.Host.String(), "port", t.Port, "reason", err.Error())
		socksReply(c, socksNotAllowed)
		return
	}
	if t.Scheme == "https" {
		socksReply(c, socksOK)
		p.tunnelTLS(ctx, c, br, t)
		return
	}
	up, err := p.dial(ctx, t)
	if err != nil {
		p.refusedLog(t, err)
		socksReply(c, socksHostUnreach)
		return
	}
	defer up.Close()
	socksReply(c, socksOK)
	p.relayChecked(c, br, up, t)
}

func socksReply(c net.Conn, code byte) {
	_, _ = c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}
