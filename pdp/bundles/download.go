package bundles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/toolpdp/toolpdp/pdp/tokenfile"
)

// A bundle server is polled by toolpdp's own client, not OPA's downloader:
// OPA's bounds only the wait for headers (a server that stalls mid-body
// stops its polling for good), buffers every tarball entry before reading
// it, and forwards credentials on any redirect to the same host name.

// DefaultDownloadTimeout bounds one download, headers and body together.
const DefaultDownloadTimeout = 30 * time.Second

// staleAfterPolls: a source not refreshed for this many polls is stale.
const staleAfterPolls = 3

// failureLogEvery bounds how often a failing source is logged: its first
// failure at once, then one line (with the count of failures since) per
// interval while it keeps failing.
const failureLogEvery = time.Minute

const maxRedirects = 10

// maxHeaderBytes bounds a bundle server's response headers.
const maxHeaderBytes = 64 << 10

// maxErrorBytes bounds the error kept and shown for a source: a hostile
// server chooses its status line and, through OPA's parse errors, some of
// the text quoted back.
const maxErrorBytes = 1 << 10

// client is one bundle server's HTTP client: the credentials go only to
// the origin (scheme, host and port) of the URL given, never to another
// one a redirect names.
type client struct {
	http   *http.Client
	url    *url.URL // without userinfo
	name   string   // DisplayName of the source
	origin string
	basic  *url.Userinfo
	token  *tokenfile.File
	scheme string
}

func newClient(src string, c Credentials, token *tokenfile.File) (*client, error) {
	u, err := url.Parse(src)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a credential
		}
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" {
		return nil, errors.New("a bundle server URL needs a host")
	}
	cl := &client{name: DisplayName(src), basic: u.User, token: token, scheme: c.TokenScheme}
	if cl.scheme == "" {
		cl.scheme = "Bearer"
	}
	u.User = nil
	cl.url, cl.origin = u, originOf(u)
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.MaxResponseHeaderBytes = maxHeaderBytes
	cl.http = &http.Client{Transport: &originAuth{base: tr, c: cl}, CheckRedirect: cl.checkRedirect}
	return cl, nil
}

// originOf is a URL's origin with its port made explicit.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// checkRedirect follows redirects to http(s) only, never from https to
// http; originAuth decides what each hop carries.
func (c *client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("more than %d redirects", maxRedirects)
	}
	switch strings.ToLower(req.URL.Scheme) {
	case "https":
	case "http":
		if strings.EqualFold(via[len(via)-1].URL.Scheme, "https") {
			return errors.New("a redirect from https to http: refused, the bundle would travel in the clear")
		}
	default:
		return fmt.Errorf("a redirect to a %q URL: only http(s) is followed", req.URL.Scheme)
	}
	req.Header.Del("Authorization") // Go copies headers on a same-host redirect; originAuth sets them again where they belong
	return nil
}

// originAuth adds the credentials to requests for the configured origin
// only.
type originAuth struct {
	base http.RoundTripper
	c    *client
}

func (t *originAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != t.c.origin {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if t.c.token != nil {
		token, err := t.c.token.Token()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", t.c.scheme+" "+token)
	} else if t.c.basic != nil {
		pw, _ := t.c.basic.Password()
		req.SetBasicAuth(t.c.basic.Username(), pw)
	}
	return t.base.RoundTrip(req)
}

// tlsConfig is the TLS a bundle server is reached with: the CA given, and
// the client certificate, read again at each handshake so a rotated
// certificate is used without a restart.
func (c Credentials) tlsConfig() (*tls.Config, error) {
	if (c.ClientCert == "") != (c.ClientKey == "") {
		return nil, errors.New("a client certificate needs both a certificate and its key")
	}
	if c.TokenFile != "" && c.ClientCert != "" {
		return nil, errors.New("give a bearer token or a client certificate, not both")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pemBytes, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("--bundle-ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("--bundle-ca-cert %s: no PEM certificate in it", c.CACert)
		}
		cfg.RootCAs = pool
	}
	if c.ClientCert != "" {
		if _, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey); err != nil {
			return nil, fmt.Errorf("--bundle-client-cert: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
			return &cert, err
		}
	}
	return cfg, nil
}

// fetched is one download's outcome.
type fetched struct {
	files       []file
	etag        string
	notModified bool
}

// fetch downloads the bundle once, headers and body within timeout,
// sending etag so an unchanged bundle costs a 304.
func (c *client) fetch(ctx context.Context, etag string, timeout time.Duration, lim Limits, all bool) (*fetched, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "toolpdp")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download: %w", c.failure(ctx, timeout, err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return &fetched{etag: etag, notModified: true}, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("download: the server answered %s", resp.Status)
	}
	files, err := readTarball(resp.Body, c.url.Path, lim, all)
	if err != nil {
		return nil, fmt.Errorf("download: %w", c.failure(ctx, timeout, err))
	}
	return &fetched{files: files, etag: resp.Header.Get("ETag")}, nil
}

// failure says what went wrong without the URL (a *url.Error quotes it
// whole, query secrets included), naming a deadline as such.
func (c *client) failure(ctx context.Context, timeout time.Duration, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the download did not finish within %s (--bundle-download-timeout): %w", timeout, err)
	}
	return err
}

// failureLog rate-limits the log of one source's failures.
type failureLog struct {
	last       time.Time
	suppressed int
}

func (f *failureLog) failed(log *slog.Logger, name string, err error, now time.Time) {
	if !f.last.IsZero() && now.Sub(f.last) < failureLogEvery {
		f.suppressed++
		return
	}
	log.Warn("bundle download failed; the last good bundle stays", "bundle", name, "error", err.Error(), "failures_not_logged", f.suppressed)
	f.last, f.suppressed = now, 0
}

func (f *failureLog) recovered(log *slog.Logger, name string) {
	if !f.last.IsZero() {
		log.Info("bundle downloads succeed again", "bundle", name, "failures_not_logged", f.suppressed)
	}
	f.last, f.suppressed = time.Time{}, 0
}
