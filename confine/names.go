package confine

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/cases"
)

// foldName is a path segment as the file systems agents run on compare
// it: Unicode case folding (APFS: "ſ" is "s"), without the code points
// HFS+ ignores, and without Windows' trailing dots and spaces or a
// ":stream" suffix. ".GIT", ".git." and ".git::$DATA" all fold to ".git".
func foldName(s string) string {
	if s == "." || s == ".." {
		return s
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200C && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x206A && r <= 0x206F, r == 0xFEFF:
			return -1
		}
		return r
	}, s)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, ". ")
	return cases.Fold().String(s)
}

func foldSegments(p string) []string {
	var out []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" {
			out = append(out, foldName(s))
		}
	}
	return out
}

// matcher tells whether a path is a protected entry: a relative name
// matches as the last whole segments of the path (".git",
// "config/secrets"), an absolute one as the path itself.
type matcher struct {
	relative [][]string
	absolute []string
}

func newMatcher(names []string) *matcher {
	m := &matcher{}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "/"):
			m.absolute = append(m.absolute, filepath.Clean(n))
		case len(foldSegments(n)) > 0:
			m.relative = append(m.relative, foldSegments(n))
		}
	}
	return m
}

func (m *matcher) matches(path string) bool {
	segs := foldSegments(path)
	for _, name := range m.relative {
		if len(name) <= len(segs) && equalSegments(segs[len(segs)-len(name):], name) {
			return true
		}
	}
	return false
}

// within tells whether path lies inside a protected entry: a relative
// name appears as whole segments anywhere in it.
func (m *matcher) within(path string) bool {
	segs := foldSegments(path)
	for _, name := range m.relative {
		for i := 0; i+len(name) <= len(segs); i++ {
			if equalSegments(segs[i:i+len(name)], name) {
				return true
			}
		}
	}
	for _, a := range m.absolute {
		if path == a || strings.HasPrefix(path, strings.TrimSuffix(a, "/")+"/") {
			return true
		}
	}
	return false
}

func (m *matcher) foundSet(roots []string, max int) map[string]bool {
	found, _ := m.find(roots, max)
	set := make(map[string]bool, len(found))
	for _, f := range found {
		set[f] = true
	}
	return set
}

// newSince lists the entries found now that were not in before.
func (m *matcher) newSince(before map[string]bool, roots []string, max int) []string {
	found, _ := m.find(roots, max)
	var out []string
	for _, f := range found {
		if !before[f] {
			out = append(out, f)
		}
	}
	return out
}

func equalSegments(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// find walks each root without following symlinks and returns the
// entries that match, not descending into a match; an absolute name is
// found when it exists. It examines at most max entries: truncated says
// the walk stopped before the end.
func (m *matcher) find(roots []string, max int) (found []string, truncated bool) {
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			found = append(found, p)
		}
	}
	for _, a := range m.absolute {
		if _, err := os.Lstat(a); err == nil {
			add(a)
		}
	}
	if len(m.relative) == 0 {
		return found, false
	}
	n := 0
	for _, root := range roots {
		if m.within(root) { // the whole root is protected
			add(root)
			continue
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable here is unreadable to the command too
			}
			if n++; n > max {
				truncated = true
				return filepath.SkipAll
			}
			if m.matches(p) {
				add(p)
				if d.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
		if err != nil || truncated {
			break
		}
	}
	return found, truncated
}
