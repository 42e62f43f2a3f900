package grpcapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const workspaceAgents = `{
  "acme-coder": {"workspace": "acme", "tools": [{"type": "agent_toolset"}]},
  "globex-coder": {"workspace": "globex", "tools": [{"type": "agent_toolset"}]},
  "shared": {"tools": [{"type": "agent_toolset"}]}}`

// testCA issues certificates for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolpdp test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) issue(t *testing.T, cn string, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestMTLSBindsCallersToWorkspaces(t *testing.T) {
	ca := newTestCA(t)
	serverCreds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.issue(t, "toolpdp", true)},
		ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	clientFor := func(cn string) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.issue(t, cn, false)}, RootCAs: ca.pool, MinVersion: tls.VersionTLS12})
	}
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("w"), "agents/data.json": workspaceAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, DialCreds: clientFor("acme"), API: grpcapi.Config{Creds: serverCreds, Workspaces: &grpcapi.Workspaces{MTLS: true}}})
	ctx := context.Background()
	for agent, want := range map[string]codes.Code{"acme-coder": codes.OK, "shared": codes.OK, "globex-coder": codes.PermissionDenied} {
		_, err := ts.Client.Decide(ctx, &pb.DecideRequest{AgentId: agent, ToolName: "Read"})
		if status.Code(err) != want {
			t.Errorf("acme's certificate, agent %s: %v, want %s", agent, err, want)
		}
	}
	// No client certificate: the TLS handshake itself fails.
	conn, err := grpc.NewClient(ts.Addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewDecisionServiceClient(conn).Decide(ctx, &pb.DecideRequest{ToolName: "Read"}); status.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want UNAVAILABLE (handshake refused)", err)
	}
	// A certificate from another CA is refused too.
	other := newTestCA(t)
	conn2, _ := grpc.NewClient(ts.Addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{other.issue(t, "acme", false)}, RootCAs: ca.pool, MinVersion: tls.VersionTLS12})))
	defer conn2.Close()
	if _, err := pb.NewDecisionServiceClient(conn2).Decide(ctx, &pb.DecideRequest{ToolName: "Read"}); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
}

func TestBearerTokensBindCallersToWorkspaces(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("w"), "agents/data.json": workspaceAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, API: grpcapi.Config{Workspaces: &grpcapi.Workspaces{Tokens: map[string]string{"acme-token-0123456789": "acme"}}}})
	call := func(token, agent string) codes.Code {
		ctx := context.Background()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err := ts.Client.Decide(ctx, &pb.DecideRequest{AgentId: agent, ToolName: "Read"})
		return status.Code(err)
	}
	cases := []struct {
		token, agent string
		want         codes.Code
	}{
		{"acme-token-0123456789", "acme-coder", codes.OK},
		{"acme-token-0123456789", "globex-coder", codes.PermissionDenied},
		{"acme-token-0123456789", "shared", codes.OK},
		{"", "acme-coder", codes.Unauthenticated},
		{"wrong-token-0123456789", "acme-coder", codes.Unauthenticated},
	}
	for _, c := range cases {
		if got := call(c.token, c.agent); got != c.want {
			t.Errorf("token %q agent %s: got %s, want %s", c.token, c.agent, got, c.want)
		}
	}
	// Health needs no token: probes and the fail-closed client can always ask.
	h, err := ts.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v %v", h, err)
	}
}
