// Package protectednames decides whether a path names a protected file or
// directory (.git, .claude, .env, a list in data), comparing names the way
// the file systems agents run on compare them, so that no spelling one of
// them reads as a protected name slips past:
//
//   - Unicode case folding (APFS, NTFS, ext4 casefold): ſ is s, K is k,
//     ß is ss, and NTFS's upper-casing (ı is I);
//   - Unicode normalization (HFS+ and APFS store or compare decomposed forms);
//   - the code points HFS+ ignores in names: U+200C–U+200F, U+202A–U+202E,
//     U+206A–U+206F, U+FEFF (git's rule for .git, CVE-2014-9390);
//   - Windows' trailing dots and spaces (".git." is .git), ":stream"
//     suffixes (".git::$INDEX_ALLOCATION" is the .git directory), "\" as a
//     separator, and 8.3 short names (GIT~1 may be .git).
//
// It is the one comparison toolpdp has: the file tools' paths, the shell
// analysis' redirect targets and writing programs' operands are all judged
// here. A false match only makes toolpdp stricter; a missed one is an escape,
// so where file systems differ the wider reading wins.
package protectednames

import (
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
	"mvdan.cc/sh/v3/pattern"
)

// Key is the form under which file systems compare one path segment: two
// segments some file system takes for the same name have the same key.
// A key is for comparing only; it is not a name to show.
func Key(segment string) string {
	s := segment
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i] // a Windows stream of the file before the colon
	}
	return fold(s)
}

// fold is Key without the stream suffix cut.
func fold(s string) string {
	if ascii(s) {
		return trimWindows(strings.ToUpper(s))
	}
	s = strings.Map(func(r rune) rune {
		if Ignorable(r) {
			return -1
		}
		return r
	}, s)
	s = trimWindows(s)
	// Full case folding (ß → ss), then each rune to one representative of
	// everything it folds or upper-cases with: NTFS upper-cases (ı → I),
	// which folding alone keeps apart.
	s = norm.NFD.String(cases.Fold().String(norm.NFD.String(s)))
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(canonical(r))
	}
	return b.String()
}

// Ignorable reports whether HFS+ ignores r in a file name.
func Ignorable(r rune) bool {
	switch {
	case r >= 0x200C && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x206A && r <= 0x206F, r == 0xFEFF:
		return true
	}
	return false
}

// trimWindows drops the trailing dots and spaces Windows drops from a name;
// "." and ".." are navigation, and a name of dots alone is kept as written.
func trimWindows(s string) string {
	if t := strings.TrimRight(s, ". "); t != "" && s != "." && s != ".." {
		return t
	}
	return s
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// canonical is the smallest rune of r's case orbit joined with those of its
// simple upper- and lower-case mappings: s, S and ſ are all S.
func canonical(r rune) rune {
	least := r
	for _, start := range [3]rune{r, unicode.ToUpper(r), unicode.ToLower(r)} {
		for c := unicode.SimpleFold(start); ; c = unicode.SimpleFold(c) {
			least = min(least, c)
			if c == start {
				break
			}
		}
	}
	return least
}

// Set is a list of protected names, compiled once. A name without a
// leading "/" (".git", "config/secrets") is protected as whole segments
// anywhere in a path; an absolute one ("/etc/secrets") as a directory and
// everything below it.
type Set struct {
	names []entry
}

type entry struct {
	name     string
	absolute bool
	keys     []string // Key of each segment
	short    []short  // each segment's 8.3 short form
}

// New compiles names; empty names are skipped.
func New(names []string) *Set {
	s := &Set{names: make([]entry, 0, len(names))}
	for _, n := range names {
		abs := strings.HasPrefix(n, "/")
		segs := split(n)
		if len(segs) == 0 && !abs {
			continue
		}
		e := entry{name: n, absolute: abs, keys: make([]string, len(segs)), short: make([]short, len(segs))}
		for i, seg := range segs {
			e.keys[i] = Key(seg)
			e.short[i] = shortForm(e.keys[i])
		}
		s.names = append(s.names, e)
	}
	return s
}

// Empty reports whether the set protects nothing.
func (s *Set) Empty() bool { return s == nil || len(s.names) == 0 }

// Directories reports a listed name written as a directory (a trailing
// "/") or as a path of several segments: a name inside one may be reached
// from a directory the caller cannot see.
func (s *Set) Directories() bool {
	if s == nil {
		return false
	}
	for _, e := range s.names {
		if e.absolute || len(e.keys) > 1 || strings.HasSuffix(e.name, "/") || strings.HasSuffix(e.name, `\`) {
			return true
		}
	}
	return false
}

// Names are the names of the set, as listed.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.names))
	for i, e := range s.names {
		out[i] = e.name
	}
	return out
}

// Match returns the first listed name that p names, as written: a
// relative p is compared by its segments (a relative name anywhere in it),
// and "/" or "\" both separate segments.
func (s *Set) Match(p string) (string, bool) {
	if s.Empty() || p == "" {
		return "", false
	}
	var segBuf, keyBuf [16]string // most paths: no allocation for the lists
	segs := splitInto(segBuf[:0], p)
	keys := keyBuf[:0]
	for _, seg := range segs {
		keys = append(keys, Key(seg))
	}
	abs := strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`)
	for _, e := range s.names {
		if e.absolute {
			if abs && e.matchesAt(segs, keys, 0) {
				return e.name, true
			}
			continue
		}
		for i := 0; i+len(e.keys) <= len(keys); i++ {
			if e.matchesAt(segs, keys, i) {
				return e.name, true
			}
		}
	}
	return "", false
}

func (e *entry) matchesAt(segs, keys []string, at int) bool {
	if at+len(e.keys) > len(keys) {
		return false
	}
	for j, k := range e.keys {
		if keys[at+j] != k && !e.short[j].matches(keys[at+j]) {
			return false
		}
	}
	return true
}

// split is p's segments, "/" and "\" both separating, empty ones and "."
// dropped.
func split(p string) []string { return splitInto(nil, p) }

// splitInto is split appending to out.
func splitInto(out []string, p string) []string {
	for len(p) > 0 {
		i := strings.IndexAny(p, `/\`)
		if i < 0 {
			i = len(p)
		}
		if f := p[:i]; f != "" && f != "." {
			out = append(out, f)
		}
		if i == len(p) {
			break
		}
		p = p[i+1:]
	}
	return out
}

// GlobCouldMatch returns the first listed name whose last segment some
// segment of glob could match (".env", "*.env", ".e[n]v"). A segment of
// only "*" is not counted — a shell's * does not match a leading dot, and
// "*" would reach every protected file — unless dotfiles is set (bash's
// dotglob), when it matches every name. glob has no braces left (expand
// them first). Both negations ([!x] and ripgrep's [^x]) are negation; a
// segment no matcher can read matches.
func (s *Set) GlobCouldMatch(glob string, dotfiles bool) (string, bool) {
	if s.Empty() {
		return "", false
	}
	for _, seg := range strings.Split(glob, "/") {
		if strings.Trim(seg, "*") == "" {
			if dotfiles && seg != "" {
				return s.names[0].name, true
			}
			continue
		}
		key := globKey(seg)
		match := pathMatcher(key)
		if strings.Contains(key, "[:") || strings.Contains(key, "[=") || strings.Contains(key, "[.") {
			// Bracket expressions holding POSIX classes ([[:alpha:]],
			// [[=e=]], [[.e.]]), which path.Match reads as other characters.
			match = bashMatcher(key)
		}
		for _, e := range s.names {
			if len(e.keys) == 0 {
				continue
			}
			if match(e.keys[len(e.keys)-1]) {
				return e.name, true
			}
		}
	}
	return "", false
}

// globKey is Key for a glob segment; a ":" inside a bracket expression is
// one of its characters, not a stream.
func globKey(seg string) string {
	if strings.Contains(seg, "[") {
		return fold(seg)
	}
	return Key(seg)
}

var posixClass = regexp.MustCompile(`\[:[A-Za-z]+:\]`)

// pathMatcher matches a glob segment as path.Match does; a pattern it
// cannot read matches everything (it is not proved to miss).
func pathMatcher(glob string) func(string) bool {
	pat := strings.ReplaceAll(glob, "[!", "[^")
	return func(name string) bool {
		ok, err := path.Match(pat, name)
		return ok || err != nil
	}
}

// bashMatcher matches a glob segment as bash does, POSIX classes
// included; one whose classes cannot be read ([[=e=]], [[.e.]], which
// depend on the locale) matches everything.
func bashMatcher(glob string) func(string) bool {
	// Keys are case-folded, class names with them; a class of one case
	// ([:lower:], [:upper:], negated or not) says nothing of a folded
	// name: it could be any.
	caseClass := false
	glob = posixClass.ReplaceAllStringFunc(glob, func(c string) string {
		c = strings.ToLower(c)
		caseClass = caseClass || c == "[:lower:]" || c == "[:upper:]"
		return c
	})
	if caseClass {
		return func(string) bool { return true }
	}
	expr, err := pattern.Regexp(glob, pattern.EntireString)
	if err != nil {
		return func(string) bool { return true }
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return func(string) bool { return true }
	}
	return re.MatchString
}
