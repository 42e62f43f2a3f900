package confine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMatcherFindsProtectedEntries(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{".git/config", "a/b/.GIT./HEAD", "a/.Env", "a/.env.example", "c/config/secrets/k", "d/.git/x/.git/y"} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := newMatcher([]string{".git", ".env", "config/secrets"})
	found, truncated := m.find([]string{root}, 1000)
	slices.Sort(found)
	want := []string{root + "/.git", root + "/a/.Env", root + "/a/b/.GIT.", root + "/c/config/secrets", root + "/d/.git"}
	if truncated || !slices.Equal(found, want) {
		t.Errorf("found %q (truncated %v), want %q", found, truncated, want)
	}
	// A root inside a protected entry is protected whole.
	if found, _ := m.find([]string{root + "/d/.git/x"}, 1000); !slices.Equal(found, []string{root + "/d/.git/x"}) {
		t.Errorf("a root inside .git: found %q", found)
	}
	// The walk is bounded, and says so.
	if _, truncated := m.find([]string{root}, 3); !truncated {
		t.Error("a walk over its bound did not say it was truncated")
	}
}

func TestProfileIsValid(t *testing.T) {
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]string{p.Read, p.Write, p.Terminal} {
		for _, path := range list {
			if !filepath.IsAbs(path) || filepath.Clean(path) != path {
				t.Errorf("profile path %q is not absolute and clean", path)
			}
		}
	}
	if !slices.Contains(p.Write, "/dev/null") || !slices.Contains(p.Read, "/usr") {
		t.Errorf("profile %+v lacks /dev/null or /usr", p)
	}
}
