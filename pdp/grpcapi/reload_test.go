package grpcapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	"github.com/toolpdp/toolpdp/pdp/localserver"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

const goodAgents = `{"a": {"tools": [{"type": "agent_toolset"}]}}`

// A Kubernetes ConfigMap volume: visible names are links into ..data, which
// links to a timestamped directory; an update writes a new directory and
// swaps ..data by rename.
type configMap struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMap(t *testing.T, files map[string]string) *configMap {
	c := &configMap{t: t, dir: t.TempDir()}
	c.update(files)
	for name := range files {
		top := strings.Split(name, "/")[0]
		if _, err := os.Lstat(filepath.Join(c.dir, top)); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", top), filepath.Join(c.dir, top)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *configMap) update(files map[string]string) {
	c.n++
	ts := fmt.Sprintf("..2026_11_30_10_00_%02d.%d", c.n, c.n)
	for name, content := range files {
		p := filepath.Join(c.dir, ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(c.dir, "..data_tmp")); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(c.dir, "..data_tmp"), filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
			c.t.Fatal(err)
		}
	}
}

// swaps records every policy the server swaps in, the one in force first.
type swaps chan *policy.Snapshot

func watchSwaps(t *testing.T, ts *grpcapitest.Server) swaps {
	ch := make(swaps, 64)
	ts.Engine.OnSwap(func(s *policy.Snapshot) {
		select {
		case ch <- s:
		default:
			t.Error("more than 64 swaps")
		}
	})
	return ch
}

// next waits for the next swap.
func (ch swaps) next(t *testing.T, what string) *policy.Snapshot {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no swap within 10s: %s", what)
		return nil
	}
}

// revisions waits for swaps until one serves want; the revisions swapped
// in until then, want included.
func (ch swaps) until(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	for len(got) == 0 || got[len(got)-1] != want {
		got = append(got, ch.next(t, want+" serving").Revision)
	}
	return got
}

// One ConfigMap update is one swap: a later change is the very next one.
func TestConfigMapSwapReloadsExactlyOnce(t *testing.T) {
	cm := newConfigMap(t, map[string]string{".manifest": testkit.Manifest("cm1"), "agents/data.json": goodAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{cm.dir}, Watch: true, Engine: pdp.Config{Poll: time.Hour}})
	sw := watchSwaps(t, ts)
	if got := sw.next(t, "the policy in force").Revision; got != "library-0.1.0,cm1" {
		t.Fatalf("revision %q", got)
	}
	cm.update(map[string]string{".manifest": testkit.Manifest("cm2"), "agents/data.json": goodAgents})
	if got := sw.until(t, "library-0.1.0,cm2"); len(got) != 1 {
		t.Fatalf("swaps %v for one ConfigMap update, want exactly one", got)
	}
	cm.update(map[string]string{".manifest": testkit.Manifest("cm3"), "agents/data.json": goodAgents})
	if got := sw.until(t, "library-0.1.0,cm3"); len(got) != 1 {
		t.Fatalf("swaps %v after the update was served, want only the next update's", got)
	}
}

// A burst of in-place writes is one swap: a later change is the very next one.
func TestBurstOfWritesReloadsOnce(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("b0"), "agents/data.json": goodAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true, Engine: pdp.Config{Poll: time.Hour}})
	sw := watchSwaps(t, ts)
	sw.next(t, "the policy in force")
	write := func(rev string) {
		if err := os.WriteFile(filepath.Join(dir, ".manifest"), []byte(testkit.Manifest(rev)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 50; i++ { // in place, as an editor without atomic save writes
		write(fmt.Sprintf("b%d", i))
	}
	if got := sw.until(t, "library-0.1.0,b50"); len(got) != 1 {
		t.Fatalf("swaps %v for a burst of 50 writes, want one", got)
	}
	write("b51")
	if got := sw.until(t, "library-0.1.0,b51"); len(got) != 1 {
		t.Fatalf("swaps %v after the burst was served, want only the next write's", got)
	}
}

func TestEditorRenameAndReplace(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("e1"), "agents/data.json": goodAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true, Engine: pdp.Config{Poll: time.Hour}})
	sw := watchSwaps(t, ts)
	sw.next(t, "the policy in force")
	// vim-style: write a new file beside, rename over the old.
	writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest("e2")))
	sw.until(t, "library-0.1.0,e2")
	// A new subdirectory, moved in whole, is read and then watched: a
	// change inside it alone (the poll is an hour away) is the next swap.
	staged := filepath.Join(t.TempDir(), "b")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, filepath.Join(staged, "data.json"), []byte(`{"tools": []}`))
	if err := os.Rename(staged, filepath.Join(dir, "agents", "b")); err != nil {
		t.Fatal(err)
	}
	if s := sw.next(t, "agent b defined"); s.Agent("b") == nil {
		t.Fatalf("the swap after agents/b appeared has no agent b")
	}
	writeFileAtomic(t, filepath.Join(dir, "agents", "b", "data.json"), []byte(`{"tools": [], "max_consecutive_denials": 7}`))
	if s := sw.next(t, "agent b changed"); s.Agent("b").Denials() != 7 {
		t.Fatalf("the swap after agents/b/data.json changed: denials %d, want 7", s.Agent("b").Denials())
	}
	if got := ts.Decide(t, &pb.DecideRequest{AgentId: "b", ToolName: "Read"}).Reasons[0].Rule; got != "agent_toolset" {
		t.Fatalf("agent b's Read: rule %q", got)
	}
}

// Each broken change is rejected whole; the last good revision serves on.
func TestBrokenChangesKeepLastGoodRevision(t *testing.T) {
	cases := []struct {
		name, file, content, wantErr string
	}{
		{"broken rego", "guardrails/x/x.rego", "package guardrails.x\n\ndeny contains 1 if {\n", "x.rego:"},
		{"broken data.json", "agents/data.json", `{"a": {`, "agents/data.json"},
		{"invalid agent definition", "agents/data.json", `{"a": {"tools": [{"type": "mcp_toolset"}]}}`, "agent 'a': tools[0].mcp_server_name: required"},
		{"failing bundle test", "guardrails/x/x_test.rego", "package guardrails.x_test\n\nimport rego.v1\n\ntest_fails if { 1 == 2 }\n", "guardrails.x_test.test_fails: failed"},
		{"unknown builtin (sandboxed)", "guardrails/x/x.rego", "package guardrails.x\n\nimport rego.v1\n\ndeny contains r.body if { r := http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1\"}) }\n", "http.send"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("good"), "agents/data.json": goodAgents})
			ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true})
			writeFileAtomic(t, filepath.Join(dir, c.file), []byte(c.content))
			writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest("bad")))
			eventually(t, 10*time.Second, "the change rejected", func() bool { return ts.Reloads(t, "rejected") >= 1 })
			if got := ts.Revision(t); got != "library-0.1.0,good" {
				t.Fatalf("revision %q after a broken change, want the last good", got)
			}
			st, err := ts.Client.Status(context.Background(), &pb.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(st.LastError, c.wantErr) || st.PolicyRevision != "library-0.1.0,good" {
				t.Fatalf("status: revision %q, last error %q; want it to contain %q", st.PolicyRevision, st.LastError, c.wantErr)
			}
			h, err := ts.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health %v %v: the last good policy still serves", h, err)
			}
		})
	}
}

// writeTarball writes files as an `opa build`-style .tar.gz, replacing path
// by rename.
func writeTarball(t *testing.T, path string, files map[string]string) {
	t.Helper()
	writeFileAtomic(t, path, testkit.Tarball(t, files))
}

func TestReplacedTarballIsPickedUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	writeTarball(t, path, map[string]string{".manifest": testkit.Manifest("t1"), "agents/data.json": goodAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{path}, Watch: true, Engine: pdp.Config{Poll: time.Hour}})
	if got := ts.Revision(t); got != "library-0.1.0,t1" {
		t.Fatalf("revision %q", got)
	}
	writeTarball(t, path, map[string]string{".manifest": testkit.Manifest("t2"), "agents/data.json": goodAgents})
	eventually(t, 10*time.Second, "t2 serving", func() bool { return ts.Revision(t) == "library-0.1.0,t2" })
}

// Decisions from several goroutines while 25 reloads happen, a fifth of
// them broken: no RPC fails, and every answer names a good revision. Each
// reload compiles the whole library beside the callers, several seconds
// under the race detector on a loaded machine: 25 interleave every kind of
// swap with the calls as 100 did, at a quarter of the time.
func TestDecisionsDuringReloads(t *testing.T) {
	const reloads = 25
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest("r0"), "agents/data.json": goodAgents})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	good := sync.Map{}
	good.Store("library-0.1.0,r0", true)
	ctx, cancel := context.WithCancel(context.Background())
	var errs, calls atomic.Int64
	var bad sync.Map
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000 && ctx.Err() == nil; i++ {
				resp, err := ts.Client.Decide(context.Background(), &pb.DecideRequest{AgentId: "a", ToolName: "Read"})
				calls.Add(1)
				if err != nil {
					errs.Add(1)
					continue
				}
				if _, ok := good.Load(resp.PolicyRevision); !ok || resp.Decision != pb.Decision_DECISION_ALLOW {
					bad.Store(resp.PolicyRevision+" "+resp.Decision.String(), true)
				}
			}
		}()
	}
	for i := 1; i <= reloads; i++ {
		rev := fmt.Sprintf("r%d", i)
		agents := goodAgents
		if i%5 == 0 {
			agents = `{"a": {"tools": [{"type": "agent_toolset", "configs": [{"name": "x", "permission_policy": {"type": "never"}}]}]}}`
		} else {
			good.Store("library-0.1.0,"+rev, true) // stored before it can serve
		}
		writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(agents))
		writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest(rev)))
		err := ts.Engine.Reload(context.Background(), false)
		if (err != nil) != (i%5 == 0) {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d of %d calls failed during reloads", errs.Load(), calls.Load())
	}
	bad.Range(func(k, _ any) bool {
		t.Errorf("answer from a bad revision or with a wrong decision: %v", k)
		return true
	})
	if ok, rejected := ts.Reloads(t, "ok"), ts.Reloads(t, "rejected"); ok != reloads*4/5+1 || rejected != reloads/5 {
		t.Fatalf("reloads ok=%v rejected=%v, want %d (with the first) and %d", ok, rejected, reloads*4/5+1, reloads/5)
	}
	t.Logf("%d decisions during %d reloads", calls.Load(), reloads)
}

// A bundle served by an OPA-protocol bundle server, polled with ETags.
func TestRemoteBundleServer(t *testing.T) {
	var mu sync.Mutex
	body, etag := tarball(t, map[string]string{".manifest": testkit.Manifest("h1"), "agents/data.json": goodAgents}), `"h1"`
	var notModified atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("If-None-Match") == etag {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	ts := startServer(t, grpcapitest.Options{Bundles: []string{srv.URL + "/bundles/acme.tar.gz"}, NoLoad: true, Watch: true})
	eventually(t, 15*time.Second, "h1 serving", func() bool { return ts.Revision(t) == "library-0.1.0,h1" })
	eventually(t, 15*time.Second, "a poll answered 304", func() bool { return notModified.Load() > 0 })
	mu.Lock()
	body, etag = tarball(t, map[string]string{".manifest": testkit.Manifest("h2"), "agents/data.json": goodAgents}), `"h2"`
	mu.Unlock()
	eventually(t, 15*time.Second, "h2 serving", func() bool { return ts.Revision(t) == "library-0.1.0,h2" })
}

// A bundle server that sends no ETag (python3 -m http.server) and wants a
// bearer token: an unchanged bundle is downloaded at every poll but loaded
// once, and the start (before the first download) is no rejection.
func TestRemoteBundleServerWithoutETag(t *testing.T) {
	body := tarball(t, map[string]string{".manifest": testkit.Manifest("n1"), "agents/data.json": goodAgents})
	var polls, unauthorized atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-token-for-bundles" {
			unauthorized.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		polls.Add(1)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret-token-for-bundles\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// serve's first load comes before the first download: not a rejection.
	var logs testkit.SyncBuffer
	reg := prometheus.NewRegistry()
	early, err := pdp.New(pdp.Config{Bundles: []string{srv.URL + "/b.tar.gz"}, Registerer: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := early.Reload(context.Background(), true); !errors.Is(err, bundles.ErrNotDownloaded) {
		t.Fatalf("a load before the first download: %v", err)
	}
	ts := startServer(t, grpcapitest.Options{Bundles: []string{srv.URL + "/b.tar.gz"}, NoLoad: true, Watch: true, LogTo: &logs, Engine: pdp.Config{Remote: bundles.Credentials{TokenFile: token}}})
	eventually(t, 15*time.Second, "n1 serving", func() bool { return ts.Revision(t) == "library-0.1.0,n1" })
	eventually(t, 15*time.Second, "two more polls", func() bool { return polls.Load() >= 3 })
	if n := ts.Reloads(t, "ok"); n != 1 {
		t.Errorf("%v loads of an unchanged bundle, want 1", n)
	}
	for _, c := range []*grpcapitest.Server{ts, {Server: &localserver.Server{Registry: reg}}} {
		if n := c.Reloads(t, "rejected"); n != 0 {
			t.Errorf("%v rejections counted before the first download, want 0", n)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("an error logged at start:\n%s", logs.String())
	}
	if unauthorized.Load() > 0 {
		t.Errorf("%d requests without the bearer token", unauthorized.Load())
	}
}

func tarball(t *testing.T, files map[string]string) []byte {
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	writeTarball(t, p, files)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signed bundles: a good signature loads; a wrong key or no signature is
// rejected like a broken bundle.
func TestSignedBundles(t *testing.T) {
	priv, pub := rsaKeys(t)
	_, otherPub := rsaKeys(t)
	signed := signedBundle(t, priv, "s1")
	unsigned := filepath.Join(t.TempDir(), "u.tar.gz")
	writeTarball(t, unsigned, map[string]string{".manifest": testkit.Manifest("u1"), "agents/data.json": goodAgents})

	vc := func(pubPEM string) *bundle.VerificationConfig {
		// From a file: OPA stats a key given inline as a path first, and a
		// PEM whose base64 runs 256 bytes without a "/" is "file name too
		// long" (a flaky failure, depending on the random key).
		keyFile := filepath.Join(t.TempDir(), "pub.pem")
		if err := os.WriteFile(keyFile, []byte(pubPEM), 0o600); err != nil {
			t.Fatal(err)
		}
		kc, err := keys.NewKeyConfig(keyFile, "RS256", "")
		if err != nil {
			t.Fatal(err)
		}
		return bundle.NewVerificationConfig(map[string]*keys.Config{"ci": kc}, "ci", "", nil)
	}
	if _, err := policy.Load(context.Background(), &bundles.Sources{Paths: []string{signed}, Verify: vc(pub)}, time.Minute, time.Now()); err != nil {
		t.Fatalf("good signature: %v", err)
	}
	if _, err := policy.Load(context.Background(), &bundles.Sources{Paths: []string{signed}, Verify: vc(otherPub)}, time.Minute, time.Now()); err == nil || !strings.Contains(err.Error(), "verification") {
		t.Fatalf("wrong key: got %v", err)
	}
	if _, err := policy.Load(context.Background(), &bundles.Sources{Paths: []string{unsigned}, Verify: vc(pub)}, time.Minute, time.Now()); err == nil || !strings.Contains(err.Error(), ".signatures.json") {
		t.Fatalf("no signature: got %v", err)
	}
	// Through a server: a signed bundle replaced by an unsigned one keeps serving the signed.
	ts := startServer(t, grpcapitest.Options{Bundles: []string{signed}, Watch: true, Engine: pdp.Config{Verify: vc(pub)}})
	writeTarball(t, signed, map[string]string{".manifest": testkit.Manifest("s2"), "agents/data.json": goodAgents})
	eventually(t, 10*time.Second, "unsigned replacement rejected", func() bool { return ts.Reloads(t, "rejected") >= 1 })
	if got := ts.Revision(t); got != "library-0.1.0,s1" {
		t.Fatalf("revision %q", got)
	}
}

func rsaKeys(t *testing.T) (privPEM, pubPEM string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// signedBundle writes a tarball signed as `opa build --signing-key` would.
func signedBundle(t *testing.T, privPEM, rev string) string {
	dir := testkit.WriteBundle(t, map[string]string{".manifest": testkit.Manifest(rev), "agents/data.json": goodAgents})
	b, err := bundles.ReadPath(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Bundle.GenerateSignature(bundle.NewSigningConfig(privPEM, "RS256", ""), "ci", false); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(*b.Bundle); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "signed.tar.gz")
	writeFileAtomic(t, p, buf.Bytes())
	return p
}

// With no bundle yet (--wait-for-bundle), every decision denies and health
// is NOT_SERVING; when the bundle appears, it serves.
func TestWaitForBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	var logs testkit.SyncBuffer
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}, Watch: true, NoLoad: true, LogTo: &logs})
	if resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Read"}); resp.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("before the bundle: %s", resp.Decision)
	}
	// serve --wait-for-bundle: the failed first load says no policy serves.
	_ = ts.Engine.Reload(context.Background(), true)
	if l := logs.String(); strings.Contains(l, "last good policy") || !strings.Contains(l, "no policy is loaded") {
		t.Errorf("the log of a failed first load:\n%s", l)
	}
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, filepath.Join(dir, "agents", "data.json"), []byte(goodAgents))
	writeFileAtomic(t, filepath.Join(dir, ".manifest"), []byte(testkit.Manifest("w1")))
	eventually(t, 10*time.Second, "w1 serving", func() bool { return ts.Revision(t) == "library-0.1.0,w1" })
	h, err := ts.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", h, err)
	}
}

// A private bundle server that wants a client certificate: the bundle loads
// with --bundle-client-cert/--bundle-client-key/--bundle-ca-cert, and a
// server whose certificate the CA did not sign is refused.
func TestRemoteBundleServerWithClientCertificate(t *testing.T) {
	body := tarball(t, map[string]string{".manifest": testkit.Manifest("m1"), "agents/data.json": goodAgents})
	ca := newTestCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "toolpdp" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "bundles", true)}, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	var refused testkit.SyncBuffer // the server's log of handshakes without a client certificate
	srv.Config.ErrorLog = log.New(&refused, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writePEM := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	client := ca.issue(t, "toolpdp", false)
	keyDER, err := x509.MarshalPKCS8PrivateKey(client.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	creds := bundles.Credentials{
		ClientCert: writePEM("client.pem", "CERTIFICATE", client.Certificate[0]),
		ClientKey:  writePEM("client.key", "PRIVATE KEY", keyDER),
		CACert:     writePEM("ca.pem", "CERTIFICATE", ca.cert.Raw),
	}
	ts := startServer(t, grpcapitest.Options{Bundles: []string{srv.URL + "/b.tar.gz"}, NoLoad: true, Watch: true, Engine: pdp.Config{Remote: creds}})
	eventually(t, 15*time.Second, "m1 serving", func() bool { return ts.Revision(t) == "library-0.1.0,m1" })

	// Without the client certificate the server refuses: nothing loads.
	bare := startServer(t, grpcapitest.Options{Bundles: []string{srv.URL + "/b.tar.gz"}, NoLoad: true, Watch: true, Engine: pdp.Config{Remote: bundles.Credentials{CACert: creds.CACert}}})
	eventually(t, 15*time.Second, "a handshake refused for want of a certificate", func() bool {
		return strings.Contains(refused.String(), "certificate")
	})
	if r := bare.Decide(t, &pb.DecideRequest{AgentId: "a", ToolName: "Read"}); r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("with no client certificate the bundle loaded: %s %v", r.Decision, r.Reasons)
	}
}
