package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Tests of the built binary against bundle servers that misbehave, started
// on loopback by each test.

const bundleAgents = `{"coder": {"tools": [{"type": "agent_toolset"}]}}`

// packTarball writes an `opa build`-style .tar.gz to w: each file add is
// given, in order. It stops at the first error (a client that hung up).
func packTarball(w io.Writer, files func(add func(name string, body []byte) error) error) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := files(func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	})
	for _, c := range []io.Closer{tw, gz} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// revisionTarball is a good bundle of revision rev.
func revisionTarball(t *testing.T, rev string) []byte {
	t.Helper()
	var buf strings.Builder
	err := packTarball(&buf, func(add func(string, []byte) error) error {
		if err := add(".manifest", []byte(`{"revision": "`+rev+`", "roots": ["agents"]}`)); err != nil {
			return err
		}
		return add("agents/data.json", []byte(bundleAgents))
	})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(buf.String())
}

// bundleServer answers with whatever its current handler does.
type bundleServer struct {
	*httptest.Server
	mu      sync.Mutex
	handler http.HandlerFunc
}

func newBundleServer(t *testing.T) *bundleServer {
	s := &bundleServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		h := s.handler
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *bundleServer) set(h http.HandlerFunc) { s.mu.Lock(); s.handler = h; s.mu.Unlock() }

func serveBytes(b []byte, etag string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		w.Write(b)
	}
}

// sidecar is the binary serving on a unix socket, with its metrics on a
// loopback port.
type sidecar struct {
	p       *process
	conn    *grpc.ClientConn
	metrics string
}

func startSidecar(t *testing.T, env []string, args ...string) *sidecar {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	metrics := freePort(t)
	all := append([]string{"serve", "--listen", "unix://" + sock, "--metrics-listen", metrics, "--decision-log", "off"}, args...)
	s := &sidecar{p: startBinaryEnv(t, binary(t), env, all...), metrics: metrics}
	s.conn = dialUnix(t, sock)
	until(t, 20*time.Second, "the socket", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return s
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *sidecar) status(t *testing.T, md ...string) *pb.StatusResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := pb.NewDecisionServiceClient(s.conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatalf("Status: %v\n%s", err, s.p.stderr.String())
	}
	return st
}

// metric is the value of the first sample whose line starts with name.
func (s *sidecar) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") && strings.Contains(line, "} ") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return v
		}
	}
	return -1
}

func until(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// rssWatch samples a process's peak RSS until stopped.
func rssWatch(p *process) (peak func() int64, stop func()) {
	var max atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
						max.Store(kb << 10)
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return max.Load, func() { close(done); wg.Wait() }
}

// A 2 GiB tarball of 2,048 one-MiB files OPA ignores, downloaded at start
// as a crash-looping pod would, is refused by the bundle bound while the
// sidecar stays under the shipped memory limit with the shipped
// environment; the next good revision loads.
func TestBundleServerManySmallFilesStayInsideTheMemoryLimit(t *testing.T) {
	srv := newBundleServer(t)
	filler := make([]byte, 1<<20)
	for i := range filler {
		filler[i] = byte(i * 7919 >> 3) // compresses, but not to nothing
	}
	var sent atomic.Int64
	srv.set(func(w http.ResponseWriter, r *http.Request) {
		_ = packTarball(w, func(add func(string, []byte) error) error {
			for i := range 2048 {
				if err := add(fmt.Sprintf("docs/%04d.txt", i), filler); err != nil {
					return err
				}
				sent.Add(1)
			}
			return nil
		})
	})
	var env []string
	for k, v := range manifestEnv(t) {
		if !strings.HasPrefix(k, "TOOLPDP_") {
			env = append(env, k+"="+v)
		}
	}
	s := startSidecar(t, env, "--bundle", srv.URL+"/bundle.tar.gz", "--poll-interval", "500ms")
	peak, stop := rssWatch(s.p)
	until(t, 30*time.Second, "the bound named in Status", func() bool {
		return strings.Contains(s.status(t).LastError, "--max-bundle-bytes")
	})
	time.Sleep(time.Second) // a few more polls of the same bomb
	stop()
	limit := manifestMemoryLimit(t)
	t.Logf("peak RSS %d MiB (limit %d MiB); %d of 2048 files sent before the sidecar hung up", peak()>>20, limit>>20, sent.Load())
	if peak() >= limit {
		t.Fatalf("peak RSS %d MiB ≥ the %d MiB limit", peak()>>20, limit>>20)
	}
	if n := s.metric(t, `toolpdp_bundle_reloads_total{result="rejected"}`); n < 1 {
		t.Errorf("rejected counter %v", n)
	}
	srv.set(serveBytes(revisionTarball(t, "after-the-bomb"), ""))
	until(t, 30*time.Second, "the next revision", func() bool { return strings.Contains(s.status(t).PolicyRevision, "after-the-bomb") })
}

// Each kind of failure shows in Status (named by its source, without the
// URL's credentials), in the rejected counter and the log; a stalled body
// is surfaced within the download deadline, and the next valid revision
// loads after it. An ETag that changes over the same content reloads
// nothing.
func TestBundleServerFailuresAreSurfaced(t *testing.T) {
	srv := newBundleServer(t)
	other := newBundleServer(t)
	other.set(serveBytes(revisionTarball(t, "elsewhere"), ""))
	srv.set(serveBytes(revisionTarball(t, "r1"), `"r1"`))
	const userinfo, signature = "reader:hunter2-password", "sig-0f3c9a7e5d"
	src := strings.Replace(srv.URL, "http://", "http://"+userinfo+"@", 1) + "/b.tar.gz?X-Amz-Signature=" + signature
	s := startSidecar(t, nil, "--bundle", src, "--poll-interval", "200ms", "--bundle-download-timeout", "1s")
	until(t, 20*time.Second, "r1 serving", func() bool { return s.status(t).PolicyRevision == "library-0.1.0,r1" })
	var shown strings.Builder // every Status seen, to search for credentials

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		w.Write(revisionTarball(t, "never")[:20])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"stalled body", stall, "did not finish within 1s"},
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, "500 Internal Server Error"},
		{"garbage", serveBytes([]byte("<html>not a bundle</html>"), ""), "not a .tar.gz bundle"},
		{"truncated", serveBytes(revisionTarball(t, "cut")[:40], ""), "unexpected EOF"},
		{"bad roots", func(w http.ResponseWriter, r *http.Request) {
			_ = packTarball(w, func(add func(string, []byte) error) error {
				if err := add(".manifest", []byte(`{"revision": "x", "roots": ["agents"]}`)); err != nil {
					return err
				}
				return add("elsewhere/x.rego", []byte("package elsewhere\n\nimport rego.v1\n\nx := 1\n"))
			})
		}, "do not permit"},
		{"duplicate files", func(w http.ResponseWriter, r *http.Request) {
			_ = packTarball(w, func(add func(string, []byte) error) error {
				if err := add(".manifest", []byte(`{"revision": "x"}`)); err != nil {
					return err
				}
				return add(".manifest", []byte(`{"revision": "y"}`))
			})
		}, "multiple manifest"},
		{"redirect to file://", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "file:///etc/passwd")
			w.WriteHeader(http.StatusFound)
		}, "only http(s)"},
	}
	for _, c := range cases {
		before := s.metric(t, `toolpdp_bundle_reloads_total{result="rejected"}`)
		srv.set(c.handler)
		took := until(t, 10*time.Second, c.name+" in Status", func() bool {
			st := s.status(t)
			shown.WriteString(protojson.Format(st))
			return strings.Contains(st.LastError, c.want) && len(st.Sources) == 1 && strings.Contains(st.Sources[0].LastError, c.want)
		})
		st := s.status(t)
		if !strings.Contains(st.LastError, srv.URL+"/b.tar.gz") || st.PolicyRevision != "library-0.1.0,r1" {
			t.Errorf("%s: last error %q does not name the source, or %q serves", c.name, st.LastError, st.PolicyRevision)
		}
		if after := s.metric(t, `toolpdp_bundle_reloads_total{result="rejected"}`); after <= before {
			t.Errorf("%s: rejected counter %v → %v", c.name, before, after)
		}
		t.Logf("%s: in Status after %s", c.name, took.Round(10*time.Millisecond))
	}
	// After the failures, the next valid revision loads; a new ETag at each
	// poll over the same content is no reload.
	var polls atomic.Int64
	r2 := revisionTarball(t, "r2")
	srv.set(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, time.Now().UnixNano()))
		w.Write(r2)
	})
	until(t, 30*time.Second, "r2 serving", func() bool { return s.status(t).PolicyRevision == "library-0.1.0,r2" })
	ok := s.metric(t, `toolpdp_bundle_reloads_total{result="ok"}`)
	start := polls.Load()
	until(t, 10*time.Second, "five more polls", func() bool { return polls.Load() >= start+5 })
	if again := s.metric(t, `toolpdp_bundle_reloads_total{result="ok"}`); again != ok {
		t.Errorf("%v reloads of one content under changing ETags", again-ok)
	}
	st := s.status(t)
	shown.WriteString(protojson.Format(st))
	if st.LastError != "" || st.Sources[0].LastError != "" || st.Sources[0].Stale || st.Sources[0].LastSuccessUnixNanos == 0 {
		t.Errorf("after recovery: %v", st)
	}
	if ts := s.metric(t, "toolpdp_bundle_last_successful_download_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > 10*time.Second {
		t.Errorf("last successful download %v", ts)
	}
	// A redirect to a server on another port is followed without the
	// URL's credentials.
	var leaked atomic.Value
	other.set(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		serveBytes(revisionTarball(t, "elsewhere"), "")(w, r)
	})
	srv.set(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/b.tar.gz", http.StatusFound)
	})
	until(t, 30*time.Second, "the redirected bundle", func() bool { return strings.Contains(s.status(t).PolicyRevision, "elsewhere") })
	if a, _ := leaked.Load().(string); a != "" {
		t.Errorf("the other origin received Authorization %q", a)
	}
	for _, secret := range []string{"hunter2", signature} {
		if strings.Contains(shown.String(), secret) || strings.Contains(s.p.stderr.String(), secret) {
			t.Errorf("%q shown in Status or stderr", secret)
		}
	}
	if !strings.Contains(s.p.stderr.String(), "bundle download failed") {
		t.Errorf("no failure logged:\n%s", s.p.stderr.String())
	}
}

// The bundle server's bearer token goes to its origin only: a redirect to
// another port gets none, and the token's file is re-read when it rotates.
func TestBundleServerTokenStaysWithItsOrigin(t *testing.T) {
	other := newBundleServer(t)
	var leaked atomic.Int64
	other.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		serveBytes(revisionTarball(t, "redirected"), "")(w, r)
	})
	srv := newBundleServer(t)
	var want atomic.Value
	want.Store("Bearer first-bundle-token")
	var refused atomic.Int64
	srv.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want.Load().(string) {
			refused.Add(1)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, other.URL+"/b.tar.gz?v="+strconv.FormatInt(time.Now().UnixNano(), 10), http.StatusTemporaryRedirect)
	})
	token := filepath.Join(t.TempDir(), "bundle-token")
	writeAtomic(t, token, "first-bundle-token\n")
	s := startSidecar(t, nil, "--bundle", srv.URL+"/b.tar.gz", "--bundle-token-file", token, "--poll-interval", "200ms")
	until(t, 20*time.Second, "the redirected bundle serving", func() bool { return strings.Contains(s.status(t).PolicyRevision, "redirected") })
	if leaked.Load() > 0 || refused.Load() > 0 {
		t.Fatalf("%d requests to the other port carried a token; %d to the server lacked it", leaked.Load(), refused.Load())
	}
	// Rotation: the server wants the new token; the file is rewritten.
	want.Store("Bearer second-bundle-token")
	writeAtomic(t, token, "second-bundle-token\n")
	n := refused.Load()
	time.Sleep(3 * time.Second)
	until(t, 5*time.Second, "no refusals after the rotation", func() bool {
		st := s.status(t)
		return st.Sources[0].LastError == "" && refused.Load() <= n+15
	})
	if leaked.Load() > 0 {
		t.Errorf("%d requests to the other port carried a token", leaked.Load())
	}
}

func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// secretVolume lays files out as the kubelet mounts a Secret: each name a
// symlink into ..data, which points at a timestamped directory; update
// swaps ..data to a new one.
type secretVolume struct {
	t   *testing.T
	dir string
	n   int
}

func newSecretVolume(t *testing.T, files map[string]string) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) update(files map[string]string) {
	v.n++
	ts := fmt.Sprintf("..2026_12_01_%02d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o700); err != nil {
		v.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o600); err != nil {
			v.t.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

// A workspace token rotated by a Secret update takes effect without a
// restart and the old token is refused; SIGHUP re-reads at once, reloads
// bundles (a bundle server is polled then) and leaves the process serving;
// one token file named for two workspaces is a start-up error.
func TestTokenRotationAndSIGHUP(t *testing.T) {
	secrets := newSecretVolume(t, map[string]string{"acme": "acme-token-0000000001", "globex": "globex-token-000000001"})
	srv := newBundleServer(t)
	srv.set(serveBytes(revisionTarball(t, "h1"), `"h1"`))
	s := startSidecar(t, nil, "--bundle", srv.URL+"/b.tar.gz", "--poll-interval", "1h",
		"--workspace-token", "acme="+filepath.Join(secrets.dir, "acme"), "--workspace-token", "globex="+filepath.Join(secrets.dir, "globex"))
	until(t, 20*time.Second, "h1 serving", func() bool {
		return s.status(t, "authorization", "Bearer acme-token-0000000001").PolicyRevision == "library-0.1.0,h1"
	})
	call := func(token string) codes.Code {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		_, err := pb.NewDecisionServiceClient(s.conn).Decide(ctx, &pb.DecideRequest{AgentId: "coder", ToolName: "Read"})
		return grpcstatus.Code(err)
	}
	if c := call("acme-token-0000000002"); c != codes.Unauthenticated {
		t.Fatalf("a token not yet in force: %s", c)
	}
	secrets.update(map[string]string{"acme": "acme-token-0000000002", "globex": "globex-token-000000001"})
	took := until(t, 10*time.Second, "the rotated token accepted", func() bool { return call("acme-token-0000000002") == codes.OK })
	t.Logf("rotation in force after %s", took.Round(10*time.Millisecond))
	if c := call("acme-token-0000000001"); c != codes.Unauthenticated {
		t.Errorf("the old token after rotation: %s", c)
	}
	if c := call("globex-token-000000001"); c != codes.OK {
		t.Errorf("the other workspace's token: %s", c)
	}

	// SIGHUP: the bundle server is polled now (the poll interval is an hour).
	srv.set(serveBytes(revisionTarball(t, "h2"), `"h2"`))
	if err := s.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	until(t, 30*time.Second, "h2 after SIGHUP", func() bool {
		return s.status(t, "authorization", "Bearer acme-token-0000000002").PolicyRevision == "library-0.1.0,h2"
	})
	select {
	case <-s.p.done:
		t.Fatalf("SIGHUP ended the process: %v", s.p.waitErr)
	default:
	}
	if !strings.Contains(s.p.stderr.String(), "SIGHUP") {
		t.Errorf("SIGHUP not logged:\n%s", s.p.stderr.String())
	}

	// One file for two workspaces.
	out := startBinary(t, binary(t), "serve", "--listen", "unix://"+filepath.Join(t.TempDir(), "x.sock"), "--metrics-listen", "",
		"--workspace-token", "acme="+filepath.Join(secrets.dir, "acme"), "--workspace-token", "globex="+filepath.Join(secrets.dir, "acme"))
	select {
	case <-out.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a token file named twice started a server")
	}
	if !strings.Contains(out.stderr.String(), "same token file") {
		t.Errorf("exit %v, stderr:\n%s", out.waitErr, out.stderr.String())
	}
}
