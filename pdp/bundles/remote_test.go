package bundles

import (
	"context"
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

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// watchRemote polls src every 50ms until the test ends, counting changes.
func watchRemote(t *testing.T, s *Sources) (changes *atomic.Int64, failures *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changes, failures = &atomic.Int64{}, &atomic.Int64{}
	if err := s.startRemote(ctx, 50*time.Millisecond, slog.New(slog.DiscardHandler), func() { changes.Add(1) },
		func(string, error) { failures.Add(1) }); err != nil {
		t.Fatal(err)
	}
	return changes, failures
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server that sends headers and then stalls is cut off at the deadline,
// the failure named in the source's status; the next good answer loads.
func TestDownloadDeadlineCoversTheBody(t *testing.T) {
	good := testkit.Tarball(t, map[string]string{".manifest": testkit.Manifest("r2"), "guardrails/x/x.rego": guard})
	var stall atomic.Bool
	stall.Store(true)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall.Load() {
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			w.Write(good[:10])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Write(good)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	s := &Sources{Paths: []string{srv.URL + "/b.tar.gz"}, DownloadTimeout: 300 * time.Millisecond}
	_, failures := watchRemote(t, s)
	waitFor(t, "a stall reported", func() bool { return failures.Load() > 0 })
	st := s.Status()[0]
	if !strings.Contains(st.LastError, "did not finish within 300ms") || !strings.Contains(st.LastError, "--bundle-download-timeout") {
		t.Errorf("last error %q", st.LastError)
	}
	if errs := s.DownloadErrors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), srv.URL) {
		t.Errorf("download errors %v: want one naming the source", errs)
	}
	stall.Store(false)
	waitFor(t, "the next revision", func() bool {
		bs, err := s.Read()
		return err == nil && bs[len(bs)-1].Revision() == "r2"
	})
	if st := s.Status()[0]; st.LastError != "" || st.LastSuccess.IsZero() || st.Stale {
		t.Errorf("after a good download: %+v", st)
	}
}

// The bearer token goes to the bundle server's origin only: a redirect to
// another port of the same host is followed without it.
func TestRedirectToAnotherOriginCarriesNoToken(t *testing.T) {
	good := testkit.Tarball(t, map[string]string{".manifest": testkit.Manifest("r1"), "guardrails/x/x.rego": guard})
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write(good)
	}))
	t.Cleanup(other.Close)
	var gotToken atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotToken.Store(r.Header.Get("Authorization") == "Bearer first-token-0123456789")
		http.Redirect(w, r, other.URL+"/b.tar.gz", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("first-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Sources{Paths: []string{srv.URL + "/b.tar.gz"}, Remote: Credentials{TokenFile: token}}
	watchRemote(t, s)
	waitFor(t, "the redirected bundle", func() bool { _, err := s.Read(); return err == nil })
	if !gotToken.Load() {
		t.Error("the bundle server itself got no token")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen {
		if h != "" {
			t.Errorf("the other origin got Authorization %q", h)
		}
	}
}

// An ETag that changes with every answer, over the same content, is no
// change: nothing reloads.
func TestChangingETagSameContentIsNoChange(t *testing.T) {
	good := testkit.Tarball(t, map[string]string{".manifest": testkit.Manifest("r1"), "guardrails/x/x.rego": guard})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+time.Now().String()+`"`)
		n.Add(1)
		w.Write(good)
	}))
	t.Cleanup(srv.Close)
	s := &Sources{Paths: []string{srv.URL + "/b.tar.gz"}}
	changes, _ := watchRemote(t, s)
	waitFor(t, "five polls", func() bool { return n.Load() >= 5 })
	if c := changes.Load(); c != 1 {
		t.Errorf("%d changes announced for one content", c)
	}
}

// Every kind of bad answer is a failure naming the source, and the
// credentials of its URL are never shown.
func TestDownloadFailuresAreReportedWithoutCredentials(t *testing.T) {
	cases := map[string]struct {
		handler http.HandlerFunc
		want    string
	}{
		"500":     {func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, "500"},
		"garbage": {func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("not a tarball")) }, "not a .tar.gz"},
		"truncated": {func(w http.ResponseWriter, r *http.Request) {
			w.Write(testkit.Tarball(t, map[string]string{"a.rego": strings.Repeat("#", 5000)})[:60])
		}, "unexpected EOF"},
		"bad rego": {func(w http.ResponseWriter, r *http.Request) {
			w.Write(testkit.Tarball(t, map[string]string{"a.rego": "package"}))
		}, "rejected"},
		"file redirect": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "file:///etc/passwd")
			w.WriteHeader(302)
		}, "only http(s)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			t.Cleanup(srv.Close)
			src := strings.Replace(srv.URL, "http://", "http://user:hunter2-password@", 1) + "/b.tar.gz?X-Amz-Signature=deadbeefsecret"
			s := &Sources{Paths: []string{src}}
			_, failures := watchRemote(t, s)
			waitFor(t, "a failure", func() bool { return failures.Load() > 0 })
			st := s.Status()[0]
			if !strings.Contains(st.LastError, c.want) {
				t.Errorf("last error %q, want %q", st.LastError, c.want)
			}
			all := st.Name + st.LastError + s.DownloadErrors()[0].Error()
			if strings.Contains(all, "hunter2") || strings.Contains(all, "deadbeef") {
				t.Errorf("a credential shown: %s", all)
			}
		})
	}
}

// One server that stalls delays no other; a 304 to a request that named no
// ETag is a failure, not a success with nothing to keep.
func TestServersArePolledApart(t *testing.T) {
	good := testkit.Tarball(t, map[string]string{".manifest": `{"revision": "g", "roots": ["guardrails/a"]}`, "guardrails/a/x.rego": strings.Replace(guard, "guardrails.x", "guardrails.a", 1)})
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); stalled.Close() })
	var n atomic.Int64
	fine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); w.Write(good) }))
	t.Cleanup(fine.Close)
	bogus := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) }))
	t.Cleanup(bogus.Close)
	s := &Sources{Paths: []string{stalled.URL + "/b.tar.gz", fine.URL + "/b.tar.gz", bogus.URL + "/b.tar.gz"}, DownloadTimeout: 5 * time.Second}
	watchRemote(t, s)
	waitFor(t, "ten polls of the fine server while the other stalls", func() bool { return n.Load() >= 10 })
	waitFor(t, "the bogus 304 reported", func() bool { return strings.Contains(s.Status()[2].LastError, "304") })
	if st := s.Status()[2]; !st.LastSuccess.IsZero() {
		t.Errorf("a bogus 304 counted as a success: %+v", st)
	}
}
