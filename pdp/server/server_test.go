package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// start builds a server from cfg and runs it until the test ends.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of its context ending")
		}
	})
	return s
}

// writeCert writes a self-signed certificate for 127.0.0.1 with Common
// Name cn, and its key, as PEM files; their modification time is at,
// so a rewrite within the same clock tick still reads as a change.
func writeCert(t *testing.T, certFile, keyFile, cn string, at time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// servedCN is the Common Name of the certificate a new TLS connection to
// addr is served.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// A certificate rewritten on disk is what the next connection is served,
// without a restart; a rewrite that does not load keeps the last good one.
func TestTLSReloadsWhenFilesChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	now := time.Now()
	writeCert(t, certFile, keyFile, "first", now.Add(-time.Minute))
	s := start(t, Config{Listen: []string{"127.0.0.1:0"}, TLS: TLSFiles{CertFile: certFile, KeyFile: keyFile}})
	addr := s.Addrs("--listen")[0].String()
	if cn := servedCN(t, addr); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}

	// gRPC over it works: the handshake is a real one.
	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(pemBytes)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health over TLS: %v, %v", resp, err)
	}

	writeCert(t, certFile, keyFile, "second", now)
	if cn := servedCN(t, addr); cn != "second" {
		t.Fatalf("after the files changed: served %q, want second", cn)
	}

	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cn := servedCN(t, addr); cn != "second" {
		t.Fatalf("after a broken rewrite: served %q, want the last good (second)", cn)
	}
}

// Every TCP listener is held to the same loopback policy, /metrics
// included; only the health listener, which serves nothing private, may
// listen beyond loopback without being allowed to.
func TestOneLoopbackPolicy(t *testing.T) {
	for option, cfg := range map[string]Config{
		"--listen":         {Listen: []string{"0.0.0.0:0"}},
		"--confirm-listen": {Listen: []string{"127.0.0.1:0"}, ConfirmListen: []string{"0.0.0.0:0"}},
		"--metrics-listen": {Listen: []string{"127.0.0.1:0"}, MetricsListen: "0.0.0.0:0"},
	} {
		_, err := New(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), option+" 0.0.0.0:0: host \"0.0.0.0\" is not loopback: pass --allow-non-loopback") {
			t.Errorf("%s beyond loopback: %v, want a refusal naming the option", option, err)
		}
	}
	s := start(t, Config{Listen: []string{"127.0.0.1:0"}, HealthListen: "0.0.0.0:0", MetricsListen: "0.0.0.0:0", AllowNonLoopback: true})
	if len(s.Addrs("--health-listen")) != 1 || len(s.Addrs("--metrics-listen")) != 1 {
		t.Fatalf("listeners: health %v, metrics %v", s.Addrs("--health-listen"), s.Addrs("--metrics-listen"))
	}
	s = start(t, Config{Listen: []string{"127.0.0.1:0"}, HealthListen: "0.0.0.0:0"})
	if len(s.Addrs("--health-listen")) != 1 {
		t.Fatal("the health listener was refused beyond loopback")
	}
}

// A unix socket gets its mode, and is gone once the server has stopped.
func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "toolpdp.sock")
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Listen: []string{"unix://" + sock}, SocketMode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	info, err := os.Stat(sock)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, %v; want mode 0600", info, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket file left behind: %v", err)
	}
}
