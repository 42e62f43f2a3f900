package confine

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ConnServer serves one connection a run opened to its proxy: the run's
// network when its network is decided per connection.
type ConnServer interface {
	ServeConn(ctx context.Context, c net.Conn)
}

// ProxyPort is where a run with a proxy reaches it: 127.0.0.1 of the run's
// own network namespace, where nothing else listens when the run starts.
const ProxyPort = 3128

// stepRelay is the run's process listening for its command's connections
// to the proxy.
const stepRelay = "proxy_relay"

// relayFD is the descriptor the run's process hands connections over on:
// a unix socket pair with the caller's process, which serves them.
const relayFD = 5

// proxyEnv is what a run with a proxy finds in its environment: every
// spelling HTTP clients, git, curl, pip, npm and Go read.
func proxyEnv(m map[string]string) {
	http := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	for k, v := range map[string]string{"HTTP_PROXY": http, "HTTPS_PROXY": http, "ALL_PROXY": "socks5h://127.0.0.1:" + strconv.Itoa(ProxyPort)} {
		m[k] = v
		m[lower(k)] = v
	}
	delete(m, "NO_PROXY")
	delete(m, "no_proxy")
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// relayPair is the caller's end and the run's end of the socket pair
// connections are handed over on.
func relayPair() (caller, run *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy relay: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "relay"), os.NewFile(uintptr(fds[1]), "relay"), nil
}

// serveRelay receives the run's connections on the caller's end and
// serves each with s, until the run's end closes.
func serveRelay(ctx context.Context, caller *os.File, s ConnServer) {
	defer caller.Close()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(int(caller.Fd()), buf, oob, 0)
		if err != nil || n == 0 {
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			continue
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			f := os.NewFile(uintptr(fd), "run connection")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				continue
			}
			go s.ServeConn(ctx, c)
		}
	}
}

// listenRelay is the run's process listening on the proxy's address in the
// run's network namespace.
func listenRelay() (*net.TCPListener, error) {
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ProxyPort})
	if err != nil {
		return nil, fmt.Errorf("proxy relay: %w", err)
	}
	return l, nil
}

// relay hands every connection the command makes to the proxy's address
// over to the caller's process, which serves it: the run's process never
// reads a byte of it.
func relay(l *net.TCPListener, to *os.File) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			return
		}
		f, err := c.File()
		c.Close()
		if err != nil {
			continue
		}
		err = unix.Sendmsg(int(to.Fd()), []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0)
		f.Close()
		if err != nil {
			return
		}
	}
}
