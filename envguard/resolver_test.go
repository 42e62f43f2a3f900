package envguard

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The resolver answers exactly as ResolveContext and the walk do, for paths with and
// without symlinks, missing segments, files in the middle, dot segments and
// what is not a plain path; a prefix of a walked path answers alike too.
func TestResolverAgreesWithResolveContext(t *testing.T) {
	root := linkTree(t)
	cwd := root + "/p"
	raws := []string{
		"src/a/f.go", "src/a", "src", ".", "", "./src//a/", "src/a/f.go/", "src/a/f.go/..", "src/../docs",
		"src/new/file", "src/new/../a/f.go", "src/a/new.go", "docs/new", "docs/new/", "out", "out/x", "out/new", "out/../x", "abs/deep", "loop", "dangling",
		"src/up/docs", "src/up/../p", root, root + "/p/src/a/f.go", root + "/p/out/../p", "/", "/..", "//p",
		"~/x", "file:///etc/passwd", "http://x/y", "a\x00b", "/proc/self/cwd",
	}
	for _, cwd := range []string{cwd, "", "relative", cwd + "/out", cwd + "/src/a/f.go"} {
		r := NewResolver(context.Background())
		for _, raw := range raws {
			got, gotErr := r.Resolve(cwd, raw)
			want, wantErr := ResolveContext(context.Background(), cwd, raw)
			if got != want || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("cwd %q, %q: resolver %q, %v; envguard %q, %v", cwd, raw, got, gotErr, want, wantErr)
			}
			if wantErr == nil {
				// and as the walk alone, one segment at a time
				abs := raw
				if !filepath.IsAbs(raw) {
					abs = cwd + "/" + raw
				}
				if walked, err := walk(context.Background(), abs); err != nil || walked != got {
					t.Errorf("cwd %q, %q: resolver %q; the walk %q, %v", cwd, raw, got, walked, err)
				}
			}
		}
	}
}

// A symlink re-pointed between two decisions is seen by the second: the
// resolver keeps nothing from one decision to the next.
func TestResolverSeesARepointedLink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"inside", "outside"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "scope")
	if err := os.Mkdir(link, 0o755); err != nil {
		t.Fatal(err)
	}
	first, err := NewResolver(context.Background()).Resolve(root, "scope")
	if err != nil || first != link {
		t.Fatalf("a plain directory: %q, %v", first, err)
	}
	for _, target := range []string{"inside", "outside"} {
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		got, err := NewResolver(context.Background()).Resolve(root, "scope")
		if want := filepath.Join(root, target); err != nil || got != want {
			t.Errorf("scope pointing at %s: %q, %v, want %q", target, got, err, want)
		}
	}
}

// A done context is envguard's error, not a fast answer.
func TestResolverStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := NewResolver(ctx).Resolve("/", "tmp"); err == nil {
		t.Fatalf("resolved %q with a cancelled context", got)
	}
}

// A link-free path takes one kernel walk, and its prefixes none.
func TestResolverWalksOnce(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "p/src"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(context.Background())
	for _, c := range [][2]string{{"p/src", root + "/p/src"}, {"p", root + "/p"}, {"p/", root + "/p"}, {root, root}} {
		if got, err := r.Resolve(root, c[0]); err != nil || got != c[1] {
			t.Errorf("%q: %q, %v, want %q", c[0], got, err, c[1])
		}
	}
	if len(r.walked) != 1 {
		t.Errorf("walked %q, want the first path only", r.walked)
	}
}

// linkTree is p/src/a/f.go, p/docs and other/deep, with links out of p,
// absolute, looping, dangling and climbing.
func linkTree(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"p/src/a", "p/docs", "other/deep"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "p/src/a/f.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"p/out": "../other/deep", "p/abs": root + "/other", "p/loop": "loop", "p/dangling": "nowhere/x", "p/src/up": ".."} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
