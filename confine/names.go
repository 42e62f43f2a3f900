package confine

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// matcher finds the protected entries in a run's roots, comparing names as
// the protected-paths guardrail does (protectednames: case folding, the
// code points HFS+ ignores, Windows' spellings).
type matcher struct {
	set      *protectednames.Set
	absolute []string
}

func newMatcher(names []string) *matcher {
	m := &matcher{set: protectednames.New(names)}
	for _, n := range names {
		if strings.HasPrefix(n, "/") {
			m.absolute = append(m.absolute, filepath.Clean(n))
		}
	}
	return m
}

// within tells whether path names a protected entry or lies inside one.
func (m *matcher) within(path string) bool {
	_, ok := m.set.Match(path)
	return ok
}

// find walks each root without following symlinks and returns the
// protected entries: a root inside one is one whole; below a root, the
// first entry on each path that matches (not what lies inside it). An
// absolute name is found when it exists. It examines at most max entries:
// truncated says the walk stopped before the end.
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
	if m.set.Empty() {
		return found, false
	}
	n := 0
	for _, root := range roots {
		if m.within(root) {
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
			if p != root && m.within(p) {
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
