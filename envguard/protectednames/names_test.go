package protectednames

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var library = New([]string{".git", ".claude", ".codex", ".mcp.json", ".env", "config/secrets", "/etc/secrets/"})

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		path, want string
	}{
		// As written, at any depth, as a directory or a file.
		{".git", ".git"},
		{"src/.git/config", ".git"},
		{"/p/.git/hooks/pre-commit", ".git"},
		{"a/b/.claude/settings.json", ".claude"},
		{".mcp.json", ".mcp.json"},
		// Case, ASCII and Unicode folding.
		{".GIT/config", ".git"},
		{"src/.mcp.j\u017fon", ".mcp.json"}, // ſ folds to s (APFS)
		{".codex/\u212a", ".codex"},         // Kelvin sign, beside the name
		{".\u0130git", ""},                  // İ is not I on any of them
		{".g\u0131t/config", ".git"},        // NTFS upper-cases ı to I
		{".CLAUDE/x", ".claude"},            // all upper
		{".Env", ".env"},                    // mixed
		{"\uff0egit", ""},                   // a fullwidth dot is another name everywhere
		{"src/.g\u0069\u0307t", ""},         // a combining dot makes another name
		{".e\u0301nv", ""},                  // so does an accent
		// Code points HFS+ ignores.
		{"src/.gi\u200ct/config", ".git"},
		{"src/.gi\ufefft/config", ".git"},
		{".e\u200cnv", ".env"},
		{"\u200e.git\u202e/x", ".git"},
		{".g\u206ait", ".git"},
		{".c\u200dl\u200fa\u202aude", ".claude"},
		// Windows: trailing dots and spaces, streams, backslashes, 8.3.
		{".git./hooks/x", ".git"},
		{".git . ./hooks/x", ".git"},
		{".git::$INDEX_ALLOCATION/config", ".git"},
		{".env:secret", ".env"},
		{".env.:x", ".env"},
		{`src\.git\config`, ".git"},
		{"GIT~1/config", ".git"},
		{"src/git~2/hooks", ".git"},
		{"CLAUDE~1/settings.json", ".claude"},
		{"MCP~1.JSO", ".mcp.json"},
		{"MC1A2B~1.JSO", ".mcp.json"},
		{"MCP~1", ""}, // the short name keeps the extension
		{"ENV~1", ".env"},
		// Multi-segment and absolute names.
		{"a/config/secrets/b", "config/secrets"},
		{"a/CONFIG/Secrets.", "config/secrets"},
		{"a/config/b/secrets", ""},
		{"/etc/secrets/key", "/etc/secrets/"},
		{"/ETC/secrets", "/etc/secrets/"},
		{"etc/secrets/key", ""}, // relative: not under /etc
		{"/p/etc/secrets", ""},
		// Not protected.
		{".gitignore", ""},
		{".github/workflows/x.yml", ""},
		{"my.git/x", ""},
		{".git2", ""},
		{"src/main.c", ""},
		{".environment", ""},
		{"...", ""},
		{"", ""},
		{".", ""},
		{"/", ""},
	} {
		got, _ := library.Match(c.path)
		if got != c.want {
			t.Errorf("Match(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestRootProtectsEverythingAbsolute(t *testing.T) {
	s := New([]string{"/"})
	if _, ok := s.Match("/etc/passwd"); !ok {
		t.Error(`"/" does not protect /etc/passwd`)
	}
	if _, ok := s.Match("etc/passwd"); ok {
		t.Error(`"/" protects a relative path`)
	}
	if !New([]string{"", "./"}).Empty() {
		t.Error("an empty relative name is kept")
	}
}

func TestGlobCouldMatch(t *testing.T) {
	reads := New([]string{".env", "config/secrets"})
	for _, c := range []struct {
		glob string
		want bool
	}{
		{".env", true},
		{"*.env", true},
		{".e[n]v", true},
		{".E[N]V", true},
		{".e[!x]v", true},
		{".e[^x]v", true},
		{"**/.env", true},
		{"src/.env*", true},
		{"secret?", true},
		{".e\u200cnv", true},
		{".env:x", true},
		{".env.", true},
		{".e[", true}, // no matcher reads it: taken as matching
		{"*", false},
		{"**", false},
		{"src/*.c", false},
		{"*.go", false},
		{".e[!n]v", false},
	} {
		_, got := reads.GlobCouldMatch(c.glob, false)
		if got != c.want {
			t.Errorf("GlobCouldMatch(%q) = %v, want %v", c.glob, got, c.want)
		}
	}
}

// Every spelling that a file system takes for the same name has the
// same key: case changed rune by rune along its fold orbit, ignorable code
// points inserted anywhere, trailing dots and spaces, a stream.
func FuzzKeySpellings(f *testing.F) {
	for _, s := range []string{".git", ".mcp.json", ".env", "ſ", "K", "straße", "İı", "\u200c", "a:b", "x. .", "Σς"} {
		f.Add(s, uint64(0x5bd1e995))
	}
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		if !utf8.ValidString(s) || strings.ContainsAny(s, "/\\:") {
			return
		}
		want := Key(s)
		if Key(want) != want {
			t.Fatalf("Key is not idempotent: Key(%q) = %q, Key of that = %q", s, want, Key(want))
		}
		var b strings.Builder
		for _, r := range s {
			seed = seed*6364136223846793005 + 1442695040888963407
			for n := seed >> 60; n > 0; n-- {
				r = unicode.SimpleFold(r)
			}
			if seed>>58&3 == 0 {
				b.WriteRune(0x200C + rune(seed>>40&3))
			}
			b.WriteRune(r)
		}
		if seed&1 == 1 {
			b.WriteString(". ")
		}
		if seed&2 == 2 {
			b.WriteString(":$DATA")
		}
		variant := b.String()
		if bare := strings.Map(func(r rune) rune {
			if Ignorable(r) {
				return -1
			}
			return r
		}, s); strings.TrimRight(bare, ". ") == "" {
			return // dots and spaces alone are names of their own
		}
		if got := Key(variant); got != want {
			t.Fatalf("Key(%q) = %q, but Key(%q) = %q", variant, got, s, want)
		}
		if strings.ToUpper(s) != s && Key(strings.ToUpper(s)) != want {
			t.Fatalf("Key(upper %q) = %q, want %q", s, Key(strings.ToUpper(s)), want)
		}
	})
}

// A path that holds a protected name's spelling as a segment always
// matches, whatever surrounds it; Match never panics.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{"src/.git/config", ".gi\u200ct", "a\\b", "GIT~1", "/etc/secrets", "~1.", "\xff"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		library.Match(before)
		library.GlobCouldMatch(before, false)
		if strings.ContainsAny(before, "/\\") || strings.ContainsAny(after, "/\\") {
			return
		}
		p := before + "/.G\u200cit. /" + after
		if got, ok := library.Match(p); !ok {
			t.Fatalf("Match(%q) = %q, false", p, got)
		}
	})
}

func BenchmarkMatchASCII(b *testing.B) {
	for b.Loop() {
		library.Match("/home/user/project/src/pkg/module/file.go")
	}
}

func BenchmarkMatchUnicode(b *testing.B) {
	for b.Loop() {
		library.Match("/home/usér/projet/src/.gi\u200ct/config")
	}
}

// split is strings.FieldsFunc at / and \ with "." segments dropped.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "/", "//a//b/", `a\b/c`, "./a/./b/.", "..", "é/\xff/x", `\\server\share`, "a/.git/./config"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		var want []string
		for _, s := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
			if s != "." {
				want = append(want, s)
			}
		}
		if got := split(p); !slices.Equal(got, want) {
			t.Fatalf("split(%q) = %q, want %q", p, got, want)
		}
	})
}
