package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolpdp/toolpdp/pdp/tokenfile"
	lib "github.com/toolpdp/toolpdp/rego"
)

// Sources are the bundles a policy is built from: paths on disk (a
// directory or an `opa build` .tar.gz) and http(s) URLs of an OPA bundle
// server, polled with ETags. The embedded library and default agent are
// added by Read.
type Sources struct {
	Paths  []string
	Verify *bundle.VerificationConfig // nil: signatures are not checked
	Remote Credentials                // how to authenticate to bundle servers
	Limits Limits                     // bounds on each bundle read
	// DownloadTimeout bounds one download from a bundle server, headers
	// and body; DefaultDownloadTimeout when zero.
	DownloadTimeout time.Duration

	mu      sync.Mutex
	remote  map[string]*remoteBundle
	now     func() time.Time
	every   time.Duration // the poll interval, once polling started
	metrics *sourceMetrics
	pollNow []chan struct{} // one per bundle server: PollNow
}

type remoteBundle struct {
	bundle      *bundle.Bundle
	files       []file // the download's, as read: what Freeze hands on
	etag        string
	digest      string // of the bundle's files: the same content, whatever the ETag says
	err         error  // the last download's, nil after one that succeeded
	everErr     error  // the last error, kept until a bundle arrives: what a never-downloaded source reports
	lastSuccess time.Time
	started     time.Time // polling began: staleness counts from here until a first success
	log         failureLog
}

// ErrNotDownloaded is the error of a bundle server's bundle before its
// first download: a start-up state, not a rejected bundle.
var ErrNotDownloaded = errors.New("not downloaded yet")

// Credentials authenticate toolpdp to private bundle servers, as the
// credentials of an OPA service config do: a bearer token read from a
// file (re-read when it changes), or a TLS client certificate (re-read at
// each handshake); CACert trusts a private CA. A URL's own userinfo is sent
// as basic auth. Every credential goes only to the origin (scheme, host,
// port) of the --bundle URL: a redirect elsewhere is followed without it.
type Credentials struct {
	TokenFile   string // bearer token file
	TokenScheme string // "Bearer" when empty
	ClientCert  string // PEM client certificate (with ClientKey)
	ClientKey   string
	CACert      string // PEM CA bundle trusted for the server's certificate
	// Token, when set, is the token of TokenFile already opened (and kept
	// current by its owner); otherwise the sources open it.
	Token *tokenfile.File
}

// IsRemote reports whether a --bundle argument names a bundle server.
func IsRemote(p string) bool {
	return strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://")
}

// Read reads every bundle: the library unless a user bundle replaces it,
// the default agent when there is no user bundle, then the user bundles.
func (s *Sources) Read() ([]*Bundle, error) {
	var users []*Bundle
	for _, p := range s.Paths {
		b, err := s.read(p)
		if err != nil {
			return nil, err
		}
		b.Name = DisplayName(p)
		users = append(users, b)
	}
	return withEmbedded(s.Paths, users)
}

// withEmbedded is the user bundles (read from paths) with the embedded
// library unless one replaces it, and the default agent when there is none.
func withEmbedded(paths []string, users []*Bundle) ([]*Bundle, error) {
	replaced := false
	for i, b := range users {
		if claims(b.Bundle, LibraryRoot) && !replacesLibrary(b.Bundle) {
			return nil, fmt.Errorf("bundle %s: roots %v reach into the library's %q: give the root %q to replace the whole library, or move the packages elsewhere (guardrails: package guardrails.<name>)",
				paths[i], *b.Bundle.Manifest.Roots, LibraryRoot, LibraryRoot)
		}
		replaced = replaced || replacesLibrary(b.Bundle)
	}
	var out []*Bundle
	if !replaced {
		l, err := ReadFS("library", lib.Library())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if len(users) == 0 {
		d, err := ReadFS("default", lib.Default())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return append(out, users...), nil
}

func (s *Sources) read(p string) (*Bundle, error) {
	if !IsRemote(p) {
		return readPath(p, resolveMount(p), s.Verify, s.Limits)
	}
	name := DisplayName(p)
	s.mu.Lock()
	var b *bundle.Bundle
	var failed error
	if r := s.remote[p]; r != nil {
		b, failed = r.bundle, r.everErr
	}
	s.mu.Unlock()
	switch {
	case b == nil && failed == nil:
		return nil, fmt.Errorf("bundle %s: %w", name, ErrNotDownloaded)
	case b == nil:
		// Still a start-up state: the failure itself is reported (and
		// counted) as the download's (DownloadErrors), not again as a
		// rejected load.
		return nil, fmt.Errorf("bundle %s: %w (the last download failed)", name, ErrNotDownloaded)
	}
	// Shared, not copied: a downloaded bundle got its roots on arrival and
	// nothing changes it after.
	return &Bundle{Name: name, Bundle: b}, nil
}

// Names are the sources as shown to people: DisplayName of each.
func (s *Sources) Names() []string {
	out := make([]string, len(s.Paths))
	for i, p := range s.Paths {
		out[i] = DisplayName(p)
	}
	return out
}

// Hash digests the sources' content: the files of every path, as Read
// reads them (bounded: an error names the file), and the content of every
// download. It changes when, and only when, content does: a bundle server
// whose ETag changes with the same bytes does not cause a reload.
func (s *Sources) Hash() (string, error) {
	h := sha256.New()
	for _, p := range s.Paths {
		if IsRemote(p) {
			s.mu.Lock()
			if r := s.remote[p]; r != nil {
				fmt.Fprintf(h, "%s\x00%s\x00", p, r.digest)
			}
			s.mu.Unlock()
			continue
		}
		files, err := collect(resolveMount(p), readsAll(s.Verify), s.Limits)
		if err != nil {
			return "", fmt.Errorf("bundle %s: %w", p, err)
		}
		fmt.Fprintf(h, "%s\x00%s\x00", p, digest(files))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// resolveMount reads a Kubernetes ConfigMap or Secret volume through its
// ..data symlink, which the kubelet swaps atomically: reading the mount
// directory itself could see old and new files mixed mid-swap.
func resolveMount(p string) string {
	if target, err := filepath.EvalSymlinks(filepath.Join(p, "..data")); err == nil {
		return target
	}
	return p
}
