package bundles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/plugins/rest"

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

	mu     sync.Mutex
	remote map[string]*remoteBundle
}

type remoteBundle struct {
	bundle *bundle.Bundle
	etag   string
	digest string // of the bundle's content: a server that sends no ETag still sends the same bytes
	err    error
}

// ErrNotDownloaded is the error of a bundle server's bundle before its
// first download: a start-up state, not a rejected bundle.
var ErrNotDownloaded = errors.New("not downloaded yet")

// Credentials authenticate toolpdp to private bundle servers, as the
// credentials of an OPA service config do (and through OPA's own REST
// client): a bearer token read from a file at each request, or a TLS client
// certificate; CACert trusts a private CA. Empty: none.
type Credentials struct {
	TokenFile   string // bearer token, re-read on each request (rotation works)
	TokenScheme string // "Bearer" when empty
	ClientCert  string // PEM client certificate (with ClientKey)
	ClientKey   string
	CACert      string // PEM CA bundle trusted for the server's certificate
}

// serviceConfig is the OPA service config (plugins/rest) for the server at
// base with c's credentials.
func (c Credentials) serviceConfig(base string) ([]byte, error) {
	type bearer struct {
		TokenPath string `json:"token_path"`
		Scheme    string `json:"scheme,omitempty"`
	}
	type clientTLS struct {
		Cert       string `json:"cert"`
		PrivateKey string `json:"private_key"`
	}
	type creds struct {
		Bearer    *bearer    `json:"bearer,omitempty"`
		ClientTLS *clientTLS `json:"client_tls,omitempty"`
	}
	type tlsConfig struct {
		CACert string `json:"ca_cert"`
	}
	cfg := struct {
		URL         string     `json:"url"`
		Credentials creds      `json:"credentials"`
		TLS         *tlsConfig `json:"tls,omitempty"`
	}{URL: base}
	if (c.ClientCert == "") != (c.ClientKey == "") {
		return nil, errors.New("a client certificate needs both a certificate and its key")
	}
	if c.TokenFile != "" && c.ClientCert != "" {
		return nil, errors.New("give a bearer token or a client certificate, not both (OPA's service config takes one credential)")
	}
	if c.TokenFile != "" {
		cfg.Credentials.Bearer = &bearer{TokenPath: c.TokenFile, Scheme: c.TokenScheme}
	}
	if c.ClientCert != "" {
		cfg.Credentials.ClientTLS = &clientTLS{Cert: c.ClientCert, PrivateKey: c.ClientKey}
	}
	if c.CACert != "" {
		cfg.TLS = &tlsConfig{CACert: c.CACert}
	}
	return json.Marshal(cfg)
}

// IsRemote reports whether a --bundle argument names a bundle server.
func IsRemote(p string) bool {
	return strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://")
}

// Read reads every bundle: the library unless a user bundle replaces it,
// the default agent when there is no user bundle, then the user bundles.
func (s *Sources) Read() ([]*Bundle, error) {
	var users []*Bundle
	replaced := false
	for _, p := range s.Paths {
		b, err := s.read(p)
		if err != nil {
			return nil, err
		}
		b.Name = p
		if claims(b.Bundle, LibraryRoot) && !replacesLibrary(b.Bundle) {
			return nil, fmt.Errorf("bundle %s: roots %v reach into the library's %q: give the root %q to replace the whole library, or move the packages elsewhere (guardrails: package guardrails.<name>)",
				p, *b.Bundle.Manifest.Roots, LibraryRoot, LibraryRoot)
		}
		replaced = replaced || replacesLibrary(b.Bundle)
		users = append(users, b)
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
		return ReadPath(resolveMount(p), s.Verify)
	}
	s.mu.Lock()
	r := s.remote[p]
	s.mu.Unlock()
	switch {
	case r == nil || (r.bundle == nil && r.err == nil):
		return nil, fmt.Errorf("bundle %s: %w", p, ErrNotDownloaded)
	case r.err != nil && r.bundle == nil:
		return nil, fmt.Errorf("bundle %s: %w", p, r.err)
	}
	// Shared, not copied: a downloaded bundle got its roots on arrival and
	// nothing changes it after.
	return &Bundle{Name: p, Bundle: r.bundle}, nil
}

// Hash digests the sources' content: every file of every path, and the
// ETag of every download. It changes when, and only when, content does.
func (s *Sources) Hash() (string, error) {
	h := sha256.New()
	for _, p := range s.Paths {
		if IsRemote(p) {
			s.mu.Lock()
			if r := s.remote[p]; r != nil {
				fmt.Fprintf(h, "%s\x00%s\x00%s\x00", p, r.etag, r.digest)
			}
			s.mu.Unlock()
			continue
		}
		if err := hashTree(h, resolveMount(p)); err != nil {
			return "", fmt.Errorf("bundle %s: %w", p, err)
		}
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

func hashTree(h io.Writer, root string) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), "..") {
			return filepath.SkipDir // kubelet's timestamped dirs: ..data already chose one
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		if err := hashFile(h, root, f); err != nil {
			return err
		}
	}
	return nil
}

func hashFile(h io.Writer, root, path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a dangling link or a file removed mid-walk: the next event reloads
		}
		return err
	}
	defer f.Close()
	rel, _ := filepath.Rel(root, path)
	fmt.Fprintf(h, "%s\x00", rel)
	_, err = io.Copy(h, f)
	return err
}

// startRemote starts polling every http(s) source, until ctx ends; changed
// is called after each new download (or failure). Each poll sends the last
// ETag, so an unchanged bundle costs the server a 304.
func (s *Sources) startRemote(ctx context.Context, every time.Duration, log *slog.Logger, changed func()) error {
	secs := max(int64(every/time.Second), 1)
	maxSecs := 2 * secs
	for _, p := range s.Paths {
		if !IsRemote(p) {
			continue
		}
		u, err := url.Parse(p)
		if err != nil {
			return fmt.Errorf("bundle %s: %w", p, err)
		}
		base := u.Scheme + "://" + u.Host
		svc, err := s.Remote.serviceConfig(base)
		if err != nil {
			return fmt.Errorf("bundle %s: %w", p, err)
		}
		client, err := rest.New(svc, nil)
		if err != nil {
			return fmt.Errorf("bundle %s: %w", p, err)
		}
		cfg := download.Config{Polling: download.PollingConfig{MinDelaySeconds: &secs, MaxDelaySeconds: &maxSecs}}
		if err := cfg.ValidateAndInjectDefaults(); err != nil {
			return fmt.Errorf("bundle %s: %w", p, err)
		}
		path := p
		d := download.New(cfg, client, u.RequestURI()).
			WithBundleParserOpts(ast.ParserOptions{RegoVersion: ast.RegoV1}).
			WithSizeLimitBytes(MaxBytes).
			WithCallback(func(_ context.Context, up download.Update) error {
				s.update(path, up, log)
				changed()
				return nil
			})
		if s.Verify != nil {
			d = d.WithBundleVerificationConfig(s.Verify)
		}
		s.mu.Lock()
		if s.remote == nil {
			s.remote = map[string]*remoteBundle{}
		}
		s.remote[path] = &remoteBundle{}
		s.mu.Unlock()
		d.Start(ctx)
		go func() { <-ctx.Done(); d.Stop(context.Background()) }()
	}
	return nil
}

func (s *Sources) update(p string, up download.Update, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.remote[p]
	switch {
	case up.Error != nil:
		r.err = up.Error // the last good download, if any, stays
		log.Warn("bundle download failed; the last good bundle stays", "bundle", p, "error", up.Error.Error())
	case up.Bundle != nil:
		inferRoots(up.Bundle)
		r.bundle, r.etag, r.digest, r.err = up.Bundle, up.ETag, contentDigest(up.Bundle), nil
	}
}

// contentDigest digests what a downloaded bundle holds — manifest, data,
// modules — so that a server sending no ETag, whose every poll is a fresh
// download, does not cause a reload when nothing changed.
func contentDigest(b *bundle.Bundle) string {
	h := sha256.New()
	enc := json.NewEncoder(h) // map keys sorted: the same content, the same bytes
	_ = enc.Encode(b.Manifest)
	_ = enc.Encode(b.Data)
	mods := make([]bundle.ModuleFile, len(b.Modules))
	copy(mods, b.Modules)
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	for _, m := range mods {
		fmt.Fprintf(h, "%s\x00%d\x00", m.Path, len(m.Raw))
		h.Write(m.Raw)
	}
	for _, w := range b.WasmModules {
		fmt.Fprintf(h, "%s\x00%d\x00", w.Path, len(w.Raw))
		h.Write(w.Raw)
	}
	return hex.EncodeToString(h.Sum(nil))
}
