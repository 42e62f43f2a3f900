package decisionlog

import (
	"sort"
	"strconv"
	"strings"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// SecretFinder finds the secret values a call's command carries as
// arguments (mysql -pX, curl -u user:X), as the policy's shell analysis
// reads the command: each is masked wherever it appears in what is logged
// or shown, and the rest of the command stays readable.
type SecretFinder interface {
	CommandSecrets(req *pb.DecideRequest, secretName func(string) bool) []string
}

// minSecretLen: a value shorter than this is not searched for in the line
// (masking every "ab" would make the line unreadable and hide nothing).
const minSecretLen = 3

// clipMark ends a quote the policy cut short.
const clipMark = "…"

// commandSecrets are the spellings of req's command secrets to mask,
// longest first: each value as bash reads it and as it may be written
// inside the command (backslash-escaped, or inside double quotes).
func (m nameMatcher) commandSecrets(f SecretFinder, req *pb.DecideRequest) []string {
	if f == nil || req == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, v := range f.CommandSecrets(req, m.masks) {
		quoted := strconv.Quote(v) // as a message quotes it (%q)
		for _, s := range []string{v, backslashed(v), doubleQuoted(v), quoted[1 : len(quoted)-1]} {
			if len(s) >= minSecretLen && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// The characters a backslash escapes in v as written unquoted, and
// between double quotes.
const (
	unquotedSpecials = " \t\n\\'\"`$&|;<>()*?[]{}!#~"
	quotedSpecials   = "\\\"`$"
)

func backslashed(v string) string  { return escaped(v, unquotedSpecials) }
func doubleQuoted(v string) string { return escaped(v, quotedSpecials) }

// escaped is v with a backslash before each of specials.
func escaped(v, specials string) string {
	var b strings.Builder
	for _, r := range v {
		if strings.ContainsRune(specials, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// maskSecrets replaces every spelling of a secret in the strings of v (not
// its keys) with Redacted, in place, and returns v.
func maskSecrets(v any, spellings []string) any {
	if len(spellings) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		for _, s := range spellings {
			if strings.Contains(t, s) {
				t = strings.ReplaceAll(t, s, Redacted)
			}
		}
		if strings.Contains(t, clipMark) {
			// A message quoting the command may be cut inside a secret: what
			// is left of it before the cut is masked too.
			for _, s := range spellings {
				for k := len(s) - 1; k >= minSecretLen; k-- {
					if cut := s[:k] + clipMark; strings.Contains(t, cut) {
						t = strings.ReplaceAll(t, cut, Redacted+clipMark)
					}
				}
			}
		}
		return t
	case map[string]any:
		for k, x := range t {
			t[k] = maskSecrets(x, spellings)
		}
	case []any:
		for i, x := range t {
			t[i] = maskSecrets(x, spellings)
		}
	}
	return v
}

// MaskedText is a text about req (a decision's message or reason) as the
// decision log would write it: its command secrets (f's, nil: none) and
// every recognisable secret masked. A nil Log masks by the default names.
func (d *Log) MaskedText(s string, req *pb.DecideRequest, f SecretFinder) string {
	names := defaultNames
	if d != nil {
		names = d.names
	}
	return names.maskString(maskSecrets(s, names.commandSecrets(f, req)).(string))
}
