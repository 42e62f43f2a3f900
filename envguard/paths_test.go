package envguard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree builds a real directory tree for the resolver: files, directories
// and symlinks of every awkward kind.
func tree(t testing.TB) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"p/src/pkg", "p/src2", "p/docs", "secret", "loop"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"p/README.md", "p/src/main.go", "p/src2/x.go", "secret/key"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"p/docs/escape": root + "/secret",    // absolute link out of the root
		"p/docs/rel":    "../../secret",      // relative link out of the root
		"p/src/up":      root + "/p",         // link to an ancestor
		"p/src/inside":  "pkg",               // link that stays inside
		"p/dangling":    root + "/nowhere/x", // target does not exist
		"p/chain1":      "chain2",            // a chain of links ending outside
		"p/chain2":      "chain3",
		"p/chain3":      root + "/secret/key",
		"loop/a":        "b", // a loop
		"loop/b":        "a",
		"loop/self":     "self",           // a link to itself
		"p/newdir":      root + "/secret", // a new file under a symlinked dir
		"linkroot":      root + "/p/src",  // a scope root that is itself a link
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestResolve(t *testing.T) {
	root := tree(t)
	cwd := root + "/p"
	cases := []struct {
		raw, want string
		err       error
	}{
		{"README.md", root + "/p/README.md", nil},
		{root + "/p/README.md", root + "/p/README.md", nil},
		{"./src/../README.md", root + "/p/README.md", nil},
		{"../secret/key", root + "/secret/key", nil},
		{"docs/escape/key", root + "/secret/key", nil},
		{"docs/rel/key", root + "/secret/key", nil},
		{"src/up/README.md", root + "/p/README.md", nil},
		{"src/up/src/up/src/main.go", root + "/p/src/main.go", nil},
		{"src/inside/file.go", root + "/p/src/pkg/file.go", nil},
		{"dangling", root + "/nowhere/x", nil},
		{"chain1", root + "/secret/key", nil},
		{"newdir/new/file.txt", root + "/secret/new/file.txt", nil},
		{"src/new_file.go", root + "/p/src/new_file.go", nil},
		{"src/missing/../../README.md", root + "/p/README.md", nil},
		{"README.md/child", root + "/p/README.md/child", nil},
		{"/../../..", "/", nil},
		{"", root + "/p", nil},
		{root + "/loop/a", "", ErrUnresolved},
		{root + "/loop/self/x", "", ErrUnresolved},
		{"a\x00b", "", ErrInvalid},
		{strings.Repeat("a/", MaxPathBytes), "", ErrInvalid},
		{strings.Repeat("x", 300), "", ErrUnresolved}, // one segment past NAME_MAX
	}
	for _, c := range cases {
		got, err := Resolve(cwd, c.raw)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Resolve(%q) = %q, %v; want %v", c.raw, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
}

func TestResolveRelativeWithoutCwd(t *testing.T) {
	if _, err := Resolve("", "README.md"); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("got %v, want ErrUnresolved", err)
	}
	if _, err := Resolve("relative/cwd", "x"); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("relative cwd: got %v, want ErrUnresolved", err)
	}
}

// A scope root that is a symlink is resolved like any path, so paths under
// its target are inside it.
func TestResolveRootThroughSymlink(t *testing.T) {
	root := tree(t)
	r, err := Resolve("", root+"/linkroot")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resolve("", root+"/p/src/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !inside(p, r) {
		t.Fatalf("%s is not inside %s", p, r)
	}
}

// FuzzResolve: the resolver never panics, returns only clean absolute
// paths, and never calls a path inside a root that the kernel's own
// resolution puts outside it.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"README.md", "../secret/key", "docs/escape/key", "src/up/src/up/x", "chain1", "newdir/a/b",
		"/loop/a", "a\x00b", "", ".", "..", "//p//./src/../", "src/inside/../../docs/rel", "dangling/x", strings.Repeat("../", 50)} {
		f.Add(s)
	}
	root := tree(f)
	cwd := root + "/p"
	scope := root + "/p"
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Resolve(cwd, raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnresolved) {
				t.Fatalf("Resolve(%q): error %v wraps neither ErrInvalid nor ErrUnresolved", raw, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("Resolve(%q) = %q: not clean and absolute", raw, got)
		}
		if !inside(got, scope) {
			return
		}
		// What the kernel resolves, for the part that exists, must agree.
		existing := got
		for {
			if _, err := os.Lstat(existing); err == nil {
				break
			}
			existing = filepath.Dir(existing)
		}
		real, err := filepath.EvalSymlinks(existing)
		if err != nil {
			return
		}
		if !inside(real, scope) {
			t.Fatalf("Resolve(%q) = %q is inside %s, but its existing part %s is really %s", raw, got, scope, existing, real)
		}
	})
}

// Regression: a ".." after a missing segment climbs back into real
// directories, whose links must still be followed.
func TestResolveDotDotAfterMissingFollowsLinks(t *testing.T) {
	root := tree(t)
	got, err := Resolve(root+"/p", "missing/../docs/escape/key")
	if err != nil || got != root+"/secret/key" {
		t.Fatalf("got %q, %v; want %s/secret/key", got, err, root)
	}
}

// ~ and URLs are not plain paths: never taken as relative names.
func TestResolveHomeAndURLsAreNotPlainPaths(t *testing.T) {
	for _, raw := range []string{"~/.ssh/id_rsa", "~", "~root/.bashrc", "file:///etc/passwd", "FILE://x", "http://h/x", "s3+x.y-z://b/k"} {
		_, err := Resolve("/p", raw)
		if !errors.Is(err, ErrUnresolved) || !strings.Contains(err.Error(), "not a plain path") {
			t.Errorf("Resolve(%q): %v, want ErrUnresolved saying it is not a plain path", raw, err)
		}
	}
	for _, raw := range []string{"a~b", "./~", "dir/file://x", "1http://x", "://x", "a:b"} {
		if _, err := Resolve("/p", raw); err != nil {
			t.Errorf("Resolve(%q): %v, want a plain relative path", raw, err)
		}
	}
}

// inside is scope.rego's rule, for these tests: path equals root or lies
// below it by whole segments (/p/src2 is not inside /p/src).
func inside(path, root string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// A path the kernel walks without a symlink resolves exactly as the walk
// one segment at a time does; every other path takes that walk.
func TestLinkFreeAgreesWithTheWalk(t *testing.T) {
	root := linkTree(t)
	linkFree := 0
	for _, rel := range []string{"p/src/a/f.go", "p/src/a", "p/src", "p", "p/./src//a/", "p/src/a/f.go/", "p/src/a/f.go/..",
		"p/src/../docs", "p/src/new/file", "p/src/new/../a/f.go", "p/out", "p/out/x", "p/out/../x", "p/abs/deep", "p/loop",
		"p/dangling", "p/src/up/docs", "p/src/up/../p", "p/../../..", "other/deep/../../p/docs", "p/src/new.go", "p/./src/new",
		"p/src/a/f.go/x", "p/docs/...", "p/dangling/x", "p/loop/x", "p/abs/new", "nowhere/new", "p/src/new.go/.."} {
		for _, p := range []string{root + "/" + rel, "/proc/self/cwd/" + rel, "/", "/..", "//tmp", "/proc/self/cwd"} {
			got, gotErr := canonical(context.Background(), p)
			want, wantErr := walk(context.Background(), p)
			if got != want || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("%q: canonical %q, %v; the walk %q, %v", p, got, gotErr, want, wantErr)
			}
			if LinkFree(p) {
				linkFree++
			}
		}
	}
	if linkFree == 0 {
		t.Error("no path was link-free: the kernel's walk was never compared")
	}
}
