package envguard

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxGlobAlternatives bounds a glob's brace expansion: a glob with more
// alternatives cannot be checked.
const MaxGlobAlternatives = 256

// maxBraceDepth bounds how deeply braces may nest before a glob is
// uncheckable; maxExpandedBytes bounds what the expansion may write.
const (
	maxBraceDepth    = 32
	maxExpandedBytes = 1 << 20
)

// ErrGlobUncheckable marks a glob whose reach cannot be worked out: too
// many alternatives, braces nested too deeply, or a ".." after a wildcard.
var ErrGlobUncheckable = fmt.Errorf("%w: the glob cannot be checked", ErrUnresolved)

var errTooMany = fmt.Errorf("%w: its braces expand to more than %d alternatives", ErrGlobUncheckable, MaxGlobAlternatives)

// ExpandBraces returns every glob that glob's brace expressions can stand
// for, nested ones too: "{..,x}/outside/*" is "../outside/*" and
// "x/outside/*". Where glob matchers read braces differently, every reading
// is returned: "{a}" is both "{a}" (bash) and "a" (ripgrep's globset);
// "{a..c}" is "{a..c}", "a..c" and a, b, c. A backslash escapes a brace or
// comma. More than MaxGlobAlternatives alternatives is ErrGlobUncheckable.
func ExpandBraces(glob string) ([]string, error) {
	out, err := expandBraces(glob, 0)
	if err != nil {
		return nil, err
	}
	return dedupe(out), nil
}

func expandBraces(s string, depth int) ([]string, error) {
	if depth > maxBraceDepth {
		return nil, fmt.Errorf("%w: braces nested more than %d deep", ErrGlobUncheckable, maxBraceDepth)
	}
	open, close := braces(s)
	if open < 0 {
		return []string{s}, nil
	}
	prefix, body, suffix := s[:open], s[open+1:close], s[close+1:]
	var alts []string
	parts := splitTop(body)
	if len(parts) > 1 {
		for _, p := range parts {
			e, err := expandBraces(p, depth+1)
			if err != nil {
				return nil, err
			}
			alts = append(alts, e...)
			if len(alts) > MaxGlobAlternatives {
				return nil, errTooMany
			}
		}
	} else {
		inner, err := expandBraces(body, depth+1)
		if err != nil {
			return nil, err
		}
		for _, e := range inner {
			alts = append(alts, "{"+e+"}", e)
		}
		seq, err := sequence(body)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq...)
	}
	rest, err := expandBraces(suffix, depth)
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > MaxGlobAlternatives {
		return nil, errTooMany
	}
	out := make([]string, 0, len(alts)*len(rest))
	size := 0
	for _, a := range alts {
		for _, r := range rest {
			g := prefix + a + r
			if size += len(g); size > maxExpandedBytes {
				return nil, fmt.Errorf("%w: its braces expand past %d bytes", ErrGlobUncheckable, maxExpandedBytes)
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// braces finds the first "{" that has a matching "}", skipping escaped
// characters; -1 when there is none.
func braces(s string) (open, close int) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			if j := matching(s, i); j >= 0 {
				return i, j
			}
		}
	}
	return -1, -1
}

func matching(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// splitTop splits a brace body at its commas outside nested braces.
func splitTop(body string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, body[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, body[start:])
}

// sequence expands bash's {x..y[..step]}: numbers, or single characters
// (which may run through "." and "/": {+..0} holds both).
func sequence(body string) ([]string, error) {
	f := strings.Split(body, "..")
	if len(f) != 2 && len(f) != 3 {
		return nil, nil
	}
	step := 1
	if len(f) == 3 {
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, nil
		}
		step = max(n, -n, 1)
	}
	from, errFrom := strconv.Atoi(f[0])
	to, errTo := strconv.Atoi(f[1])
	if errFrom != nil || errTo != nil {
		if len(f[0]) != 1 || len(f[1]) != 1 {
			return nil, nil
		}
		from, to = int(f[0][0]), int(f[1][0])
	}
	if (max(from, to)-min(from, to))/step+1 > MaxGlobAlternatives {
		return nil, errTooMany
	}
	var out []string
	for i := from; ; {
		if errFrom != nil {
			out = append(out, string(rune(i)))
		} else {
			out = append(out, strconv.Itoa(i))
		}
		if i == to || (from < to && i+step > to) || (from > to && i-step < to) {
			break
		}
		if from < to {
			i += step
		} else {
			i -= step
		}
	}
	return out, nil
}

func dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// GlobDir is the directory a glob without braces (an alternative of
// ExpandBraces) reads: its literal part before the first unescaped *, ?
// or [, cut back to its last "/", escapes removed — or the whole glob,
// when it has no wildcard (it names one file); wild is the rest, from the
// segment with the first wildcard. A ".." segment after the first
// wildcard makes where it reaches uncheckable.
func GlobDir(glob string) (dir, wild string, err error) {
	i := wildcard(glob)
	if i < 0 {
		return unescape(glob), "", nil
	}
	literal := glob[:i]
	for _, seg := range strings.Split(glob[i:], "/") {
		if unescape(seg) == ".." {
			return "", "", fmt.Errorf("%w: a .. segment after a wildcard", ErrGlobUncheckable)
		}
	}
	if j := strings.LastIndex(literal, "/"); j >= 0 {
		return unescape(literal[:j+1]), glob[j+1:], nil
	}
	return "", glob, nil
}

// MaxGlobEntries bounds the directory entries GlobLinks reads for one
// glob; past it the glob is uncheckable.
const MaxGlobEntries = 10000

// GlobLinks is where the symlinks lead that a glob's wildcard segments can
// match or pass through below dir (the glob's literal directory, resolved;
// wild the rest of the glob): a matcher follows "l*_out/*" through
// link_out like "link_out/*". Each target is resolved like any path. A
// "**" segment is not walked: ripgrep and the glob libraries do not follow
// symlinks under it by default (a documented limit). Reading more than
// MaxGlobEntries entries, or a link that does not resolve, is
// ErrGlobUncheckable.
func GlobLinks(ctx context.Context, dir, wild string) ([]string, error) {
	var segs []string
	for _, s := range strings.Split(wild, "/") {
		if s != "" && s != "." {
			segs = append(segs, s)
		}
	}
	type step struct {
		dir string
		i   int
	}
	var targets []string
	queue, budget := []step{{dir, 0}}, MaxGlobEntries
	visit := func(p string, i int) error {
		info, err := os.Lstat(p)
		if err != nil {
			return nil // nothing there to match
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := canonical(ctx, p)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrGlobUncheckable, p, err)
			}
			if i+1 < len(segs) {
				// Passed through only when it leads to a directory.
				if info, err := os.Stat(target); err != nil || !info.IsDir() {
					return nil
				}
			}
			targets = append(targets, target)
			p = target
		}
		if i+1 < len(segs) {
			queue = append(queue, step{p, i + 1})
		}
		return nil
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrGlobUncheckable, err)
		}
		seg := segs[st.i]
		if seg == "**" || strings.HasPrefix(seg, "**") && strings.Trim(seg, "*") == "" {
			continue
		}
		if wildcard(seg) < 0 {
			if err := visit(filepath.Join(st.dir, unescape(seg)), st.i); err != nil {
				return nil, err
			}
			continue
		}
		entries, err := os.ReadDir(st.dir)
		if err != nil {
			continue // not a directory, or unreadable: the matcher reads nothing there either
		}
		if budget -= len(entries); budget < 0 {
			return nil, fmt.Errorf("%w: its wildcards reach more than %d directory entries", ErrGlobUncheckable, MaxGlobEntries)
		}
		pat := strings.ReplaceAll(seg, "[!", "[^")
		for _, e := range entries {
			if ok, err := path.Match(pat, e.Name()); !ok && err == nil {
				continue // a pattern no matcher reads is taken as matching
			}
			if e.Type()&fs.ModeSymlink == 0 && (!e.IsDir() || st.i+1 == len(segs)) {
				continue
			}
			if err := visit(filepath.Join(st.dir, e.Name()), st.i); err != nil {
				return nil, err
			}
		}
	}
	return targets, nil
}

func wildcard(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return i
		}
	}
	return -1
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
