package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// endpoint is one listener: the option that asked for it, what it serves,
// and how.
type endpoint struct {
	option string // "--listen", …: named in errors and logs
	addr   string
	unix   bool // may be unix:///path
	public bool // may listen beyond loopback without AllowNonLoopback: it serves only what anyone may see
	what   string
	serve  func(net.Listener) error
	l      net.Listener // once opened
}

// listen opens e's address under the one loopback policy: a TCP address
// beyond loopback needs AllowNonLoopback (and is logged), unless e is
// public. A unix socket replaces a stale socket file and gets SocketMode.
func listen(e *endpoint, cfg Config) (net.Listener, error) {
	if path, ok := strings.CutPrefix(e.addr, "unix://"); ok && e.unix {
		return listenUnix(path, cfg.SocketMode)
	}
	host, _, err := net.SplitHostPort(e.addr)
	if err != nil {
		if e.unix {
			return nil, fmt.Errorf("not host:port or unix:///path: %w", err)
		}
		return nil, fmt.Errorf("not host:port: %w", err)
	}
	if !isLoopback(host) && !e.public {
		if !cfg.AllowNonLoopback {
			return nil, fmt.Errorf("host %q is not loopback: pass --allow-non-loopback to listen beyond this machine", host)
		}
		cfg.Logger.Warn("listening beyond loopback: anyone who reaches this address can reach what it serves", "option", e.option, "listen", e.addr)
	}
	return net.Listen("tcp", e.addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func listenUnix(path string, mode os.FileMode) (net.Listener, error) {
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
