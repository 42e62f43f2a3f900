package mcpproxy

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Front is what the HTTP endpoint checks before a request reaches a
// session: where a browser says the request comes from, and who sends it.
//
// A web page the person opens can POST to a loopback port, and with DNS
// rebinding read the answers too; the browser always names the page's
// origin, so a request from a page that is neither on this machine nor
// named with --allowed-origin is refused. A request without Origin is no
// browser's, and passes. Off loopback anyone who reaches the address can
// POST, so there a bearer token is required, as the sidecar requires one
// of TCP approvers.
type Front struct {
	origins map[string]bool        // normalised allowed origins
	token   func() (string, error) // nil: no token required
	next    http.Handler
}

// NewFront wraps next. allowed are --allowed-origin values
// (scheme://host[:port]); token, when not nil, is the bearer token every
// request must carry, read at each request so a rotated file takes effect.
func NewFront(next http.Handler, allowed []string, token func() (string, error)) (*Front, error) {
	f := &Front{origins: map[string]bool{}, token: token, next: next}
	for _, a := range allowed {
		o, err := normaliseOrigin(a)
		if err != nil {
			return nil, fmt.Errorf("--allowed-origin %q: %v", a, err)
		}
		f.origins[o] = true
	}
	return f, nil
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin, present := r.Header["Origin"]
	if present {
		if len(origin) != 1 || !f.allowed(origin[0]) {
			http.Error(w, fmt.Sprintf("the Origin %q is not allowed: only loopback origins and those named with --allowed-origin may reach this MCP endpoint", strings.Join(origin, ", ")), http.StatusForbidden)
			return
		}
		// A browser client on an allowed origin needs CORS to read the
		// answers; a preflight carries no credentials, so it is answered
		// before the token check.
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin[0])
		h.Set("Access-Control-Expose-Headers", sessionHeader)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Protocol-Version, "+sessionHeader)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if f.token != nil {
		want, err := f.token()
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if err != nil || !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolpdp mcp-proxy"`)
			http.Error(w, "a bearer token is required: Authorization: Bearer TOKEN (the one in --listen-token-file)", http.StatusUnauthorized)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

func (f *Front) allowed(origin string) bool {
	o, err := normaliseOrigin(origin)
	if err != nil {
		return false
	}
	if f.origins[o] {
		return true
	}
	u, _ := url.Parse(o)
	return IsLoopbackHost(u.Hostname())
}

// normaliseOrigin is an origin as browsers send it — scheme://host[:port],
// lower case, no default port — or an error saying why s is none.
func normaliseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("not an http or https origin")
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("an origin is scheme://host[:port], nothing more")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// IsLoopbackHost is true for localhost and loopback addresses
// (127.0.0.0/8, ::1).
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
