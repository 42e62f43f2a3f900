package bundles

import (
	"net/url"
)

// DisplayName is how a --bundle argument is shown in Status, logs, metrics
// and errors: a bundle server's URL without its userinfo and with every
// query masked whole (a presigned URL's signature is a credential, and a
// name alone may be one), and
// without its fragment. A path on disk is shown as given.
func DisplayName(p string) string {
	if !IsRemote(p) {
		return p
	}
	u, err := url.Parse(p)
	if err != nil {
		return "(a bundle server URL that does not parse)"
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "REDACTED", false
	}
	return u.String()
}
