package decisionlog

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// DefaultRedact are the names whose values the decision log masks, in env,
// args (at any depth), the execution env, and NAME=value, NAME: value and
// --NAME value inside any logged string. A name is compared by its letters
// and digits, lowercased: an entry of five or more of them masks a name
// containing it ("api_key" masks X-API-KEY, "token" masks GITHUB_TOKEN); a
// shorter entry masks a name having it as a whole word ("pat" masks
// GITHUB_PAT and pat, not path).
var DefaultRedact = []string{"token", "secret", "password", "passwd", "passphrase", "pwd", "pass", "credential", "creds", "api_key", "apikey",
	"private_key", "private", "authorization", "auth", "bearer", "cookie", "session_key", "access_key", "signature", "pat", "key", "webhook", "sshpass"}

// Redacted replaces a masked value in the decision log.
const Redacted = "[REDACTED]"

// nameMatcher tells the names DefaultRedact (or the configured list) masks.
type nameMatcher struct {
	contains []string // entries of 5+ letters and digits: masked when contained
	words    []string // shorter entries: masked as a whole word
}

func newNameMatcher(list []string) nameMatcher {
	var m nameMatcher
	for _, e := range list {
		n := alnumLower(e)
		switch {
		case n == "":
		case len(n) >= 5:
			m.contains = append(m.contains, n)
		default:
			m.words = append(m.words, n)
		}
	}
	return m
}

// masks reports whether a value under this name is masked.
func (m nameMatcher) masks(name string) bool {
	joined := alnumLower(name)
	for _, e := range m.contains {
		if strings.Contains(joined, e) {
			return true
		}
	}
	masked := false
	if len(m.words) > 0 {
		eachWord(name, func(w string) {
			masked = masked || slices.Contains(m.words, w)
		})
	}
	return masked
}

func alnumLower(s string) string {
	plain := true // already lowercase ASCII letters and digits: no copy
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
	}
	if plain {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// eachWord calls f with each word of a name, lowercased: words end at
// non-alphanumerics and at lower-to-upper case changes ("X-API-KEY",
// "githubPat", "GITHUB_PAT" → x api key, github pat, github pat).
func eachWord(s string, f func(string)) {
	start, prevLower := -1, false
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		if start >= 0 && (!alnum || unicode.IsUpper(r) && prevLower) {
			f(strings.ToLower(s[start:i]))
			start = -1
		}
		if alnum && start < 0 {
			start = i
		}
		prevLower = unicode.IsLower(r)
	}
	if start >= 0 {
		f(strings.ToLower(s[start:]))
	}
}

// secretShape is one recognisable kind of secret inside a string. keep is
// how many leading submatches stay (a scheme, a name and its "="); the rest
// of the match becomes Redacted.
type secretShape struct {
	name   string
	marker string // a substring every match holds, checked before the regexp runs ("" for none)
	re     *regexp.Regexp
	keep   int
}

// secretShapes are the token shapes masked wherever they appear in a log
// line. A small list of our own, after the shapes of gitleaks' default rules
// (github-pat, github-oauth, github-fine-grained-pat, openai-api-key,
// slack-*-token, aws-access-token, jwt, private-key, and URLs with a
// password); their rules are TOML for a scanner, not an importable Go set.
// Each errs toward masking: lengths are minimums, not exact.
var secretShapes = []secretShape{
	{"pem-private-key", "PRIVATE KEY", regexp.MustCompile(`(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY[ A-Z]*-----|\z)`), 0},
	{"github-token", "gh", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{16,}`), 0},
	{"github-fine-grained-pat", "github_pat_", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{16,}`), 0},
	{"sk-key", "sk-", regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), 0}, // OpenAI, Anthropic (sk-ant-…), Stripe-like
	{"slack-token", "xox", regexp.MustCompile(`\bxox[a-z]-[A-Za-z0-9-]{8,}`), 0},
	{"aws-access-key-id", "", regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b`), 0},
	{"jwt", "eyJ", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), 0},
	{"bearer", "", regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}`), 1},
	{"authorization-header", "", regexp.MustCompile(`(?i)\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:basic|bearer|token|digest)\s+)?)[^\s"',;]+`), 1},
	{"url-password", "://", regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"'<>]*:)[^\s/@"'<>]+(@)`), 1},
	{"userinfo-password", "@", regexp.MustCompile(`(\b[A-Za-z0-9._-]+:)[^\s/@"'<>:]{3,}(@[A-Za-z0-9.-]+)`), 1}, // user:pw@host without a scheme
	{"gitlab-token", "gl", regexp.MustCompile(`\bgl(?:pat|dt|ptt|rt|cbt|oas|ft)-[A-Za-z0-9_-]{16,}`), 0},
	{"google-api-key", "AIza", regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`), 0},
	{"stripe-key", "_live_", regexp.MustCompile(`\b(?:sk|rk|pk)_live_[0-9A-Za-z]{16,}`), 0},
	{"stripe-test-key", "_test_", regexp.MustCompile(`\b(?:sk|rk)_test_[0-9A-Za-z]{16,}`), 0},
	{"npm-token", "npm_", regexp.MustCompile(`\bnpm_[A-Za-z0-9]{30,}`), 0},
	{"huggingface-token", "hf_", regexp.MustCompile(`\bhf_[A-Za-z0-9]{30,}`), 0},
	{"slack-webhook", "hooks.slack.com", regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+`), 0},
	{"token-scheme", "", regexp.MustCompile(`(?i)\b(token\s+)[A-Za-z0-9._~+/=-]{12,}`), 1},
	{"password-is", "", regexp.MustCompile(`(?i)\b((?:password|passphrase|passwd|pwd)\s+(?:is|was|=|:)\s+)\S+`), 1},
}

// assignment finds NAME=value, NAME: value and "NAME": "value" inside a
// string, flagValue --NAME value; the value is masked when the name is.
var (
	assignment = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_.-]*)(["']?\s*[=:]\s*["']?)("[^"]*"|'[^']*'|[^\s"'&;|,)]+)`)
	flagValue  = regexp.MustCompile(`--([A-Za-z][A-Za-z0-9_.-]*)(\s+)("[^"]*"|'[^']*'|[^\s"'&;|,)]+)`)
)

var authSchemes = map[string]bool{"basic": true, "bearer": true, "token": true, "digest": true}

// holdsSecret reports whether a value under a masked name is the secret
// itself: not when the name is a switch (--skip-password, --no-auth) or
// names where the secret is (--password-file, --passphrase-fd,
// --token-stdin, --key-id). A value of --NAME that is the next option is
// none either.
func holdsSecret(name string) bool {
	n := strings.ToLower(name)
	for _, p := range []string{"skip-", "no-", "without-", "skip_", "no_"} {
		if strings.HasPrefix(n, p) {
			return false
		}
	}
	for _, suffix := range []string{"file", "fd", "stdin", "path", "id", "type", "count", "length", "dir", "env", "helper", "format", "size", "mode"} {
		if strings.HasSuffix(n, "-"+suffix) || strings.HasSuffix(n, "_"+suffix) {
			return false
		}
	}
	return true
}

// maskString masks every recognisable secret in s: the shapes above, and
// values assigned to a masked name.
func (m nameMatcher) maskString(s string) string {
	for _, sh := range secretShapes {
		// Replacing copies the string even when nothing matches: look first.
		if sh.marker != "" && !strings.Contains(s, sh.marker) || !sh.re.MatchString(s) {
			continue
		}
		s = replaceKeeping(sh.re, s, sh.keep)
	}
	for _, re := range []*regexp.Regexp{assignment, flagValue} {
		if !strings.ContainsAny(s, "=: ") || !re.MatchString(s) {
			continue
		}
		s = re.ReplaceAllStringFunc(s, func(match string) string {
			sub := re.FindStringSubmatch(match)
			if !m.masks(sub[1]) || sub[3] == Redacted || authSchemes[strings.ToLower(sub[3])] || !holdsSecret(sub[1]) || re == flagValue && strings.HasPrefix(sub[3], "-") {
				return match // an auth scheme: the authorization-header shape masked what follows
			}
			return strings.TrimSuffix(match, sub[3]) + Redacted
		})
	}
	return s
}

// replaceKeeping replaces each match of re in s by its first keep
// submatches followed by Redacted (and, for a trailing group, that group:
// url-password keeps the "@").
func replaceKeeping(re *regexp.Regexp, s string, keep int) string {
	return re.ReplaceAllStringFunc(s, func(match string) string {
		if keep == 0 {
			return Redacted
		}
		sub := re.FindStringSubmatch(match)
		var b strings.Builder
		for i := 1; i <= keep && i < len(sub); i++ {
			b.WriteString(sub[i])
		}
		b.WriteString(Redacted)
		if re.NumSubexp() > keep {
			b.WriteString(sub[len(sub)-1])
		}
		return b.String()
	})
}

// maskValue masks a decoded JSON value in place: strings by shape, object
// keys by shape, and, where byName, the values of masked names. It returns
// the masked value.
func (m nameMatcher) maskValue(v any, byName bool) any {
	switch t := v.(type) {
	case string:
		return m.maskString(t)
	case map[string]any:
		for k, x := range t {
			nk := m.maskString(k)
			if nk != k {
				delete(t, k)
			}
			if byName && m.masks(k) {
				t[nk] = Redacted
				continue
			}
			t[nk] = m.maskValue(x, byName)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = m.maskValue(x, byName)
		}
		return t
	}
	return v
}
