package envguard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestExpandBraces(t *testing.T) {
	for _, c := range []struct {
		glob string
		want []string
	}{
		{"src/*.c", []string{"src/*.c"}},
		{"{..,x}/outside/*", []string{"../outside/*", "x/outside/*"}},
		{".{.,}/outside/*", []string{"../outside/*", "./outside/*"}},
		{"{/etc,x}/passwd", []string{"/etc/passwd", "x/passwd"}},
		{"{a,{b,{c,..}}}/x", []string{"a/x", "b/x", "c/x", "../x"}},
		{"{a,b}{c,d}", []string{"ac", "ad", "bc", "bd"}},
		{"{..}/x", []string{"{..}/x", "../x"}},
		{"{a}", []string{"{a}", "a"}},
		{`\{..,x}/y`, []string{`\{..,x}/y`}},
		{`{a\,b,c}`, []string{`a\,b`, "c"}},
		{"{a,b", []string{"{a,b"}},
		{"a,b}", []string{"a,b}"}},
		{"{1..3}", []string{"{1..3}", "1..3", "1", "2", "3"}},
		{"{+..0}", []string{"{+..0}", "+..0", "+", ",", "-", ".", "/", "0"}},
		{"{5..1..2}", []string{"{5..1..2}", "5..1..2", "5", "3", "1"}},
		{"{,}", []string{""}},
	} {
		got, err := ExpandBraces(c.glob)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ExpandBraces(%q) = %q, %v; want %q", c.glob, got, err, c.want)
		}
	}
	for _, glob := range []string{
		"{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b}", // 512
		"{1..300}", // a sequence
		strings.Repeat("{", 40) + "a,b" + strings.Repeat("}", 40), // nesting
		"{" + strings.Repeat("a,", 300) + "}",
	} {
		if got, err := ExpandBraces(glob); !errors.Is(err, ErrGlobUncheckable) || !errors.Is(err, ErrUnresolved) {
			t.Errorf("ExpandBraces(%.40q) = %d alternatives, %v; want uncheckable", glob, len(got), err)
		}
	}
	if got, err := ExpandBraces("{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}"); err != nil || len(got) != 256 {
		t.Errorf("256 alternatives: %d, %v", len(got), err)
	}
}

func TestGlobDir(t *testing.T) {
	for _, c := range []struct {
		glob, dir string
		err       bool
	}{
		{glob: "*.go", dir: ""},
		{glob: "src/*.c", dir: "src/"},
		{glob: "link_out/*", dir: "link_out/"},
		{glob: "/etc/pass*", dir: "/etc/"},
		{glob: "/etc/passwd", dir: "/etc/passwd"},
		{glob: "../outside/*", dir: "../outside/"},
		{glob: `\.\./outside/*`, dir: "../outside/"},
		{glob: `a/\*/b`, dir: "a/*/b"},
		{glob: "src/a..b/*", dir: "src/a..b/"},
		{glob: "/p/*/../../etc/x", err: true},
		{glob: `/p/*/\.\./x`, err: true},
		{glob: "**/*.go", dir: ""},
	} {
		dir, _, err := GlobDir(c.glob)
		if dir != c.dir || (err != nil) != c.err {
			t.Errorf("GlobDir(%q) = %q, %v; want %q, error %v", c.glob, dir, err, c.dir, c.err)
		}
	}
}

func FuzzExpandBraces(f *testing.F) {
	for _, s := range []string{"{a,{b,c}}", "{1..9}", `\{,}`, "{{{,}}}", "{a..}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, glob string) {
		alts, err := ExpandBraces(glob)
		if err != nil {
			return
		}
		if len(alts) == 0 || len(alts) > MaxGlobAlternatives {
			t.Fatalf("ExpandBraces(%q): %d alternatives", glob, len(alts))
		}
		for _, a := range alts {
			GlobDir(a)
		}
	})
}

// Where the symlinks a glob's wildcards can match or pass through lead.
func TestGlobLinks(t *testing.T) {
	root := tree(t)
	ctx := context.Background()
	for _, c := range []struct {
		dir, wild string
		want      []string
	}{
		{root + "/p", "docs/*", []string{root + "/secret", root + "/secret"}},
		{root + "/p", "d*/esc*", []string{root + "/secret"}},
		{root + "/p", "*/inside", []string{root + "/p/src/pkg", root + "/secret"}}, // newdir leads out
		{root + "/p", "src/*.go", nil},
		{root + "/p", "**/*", nil}, // not walked: a documented limit
		{root + "/p", "chain*", []string{root + "/secret/key", root + "/secret/key", root + "/secret/key"}},
		{root + "/p", "src/up/docs/*", []string{root + "/p", root + "/secret", root + "/secret"}},
	} {
		got, err := GlobLinks(ctx, c.dir, c.wild)
		slices.Sort(got)
		slices.Sort(c.want)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("GlobLinks(%q, %q) = %q, %v; want %q", c.dir, c.wild, got, err, c.want)
		}
	}
	if _, err := GlobLinks(ctx, root, "loop/*"); !errors.Is(err, ErrGlobUncheckable) {
		t.Errorf("a glob matching a symlink loop: %v, want uncheckable", err)
	}
	big := t.TempDir()
	for i := range MaxGlobEntries + 1 {
		if err := os.WriteFile(filepath.Join(big, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := GlobLinks(ctx, big, "*"); !errors.Is(err, ErrGlobUncheckable) {
		t.Errorf("more than %d entries: %v, want uncheckable", MaxGlobEntries, err)
	}
}
