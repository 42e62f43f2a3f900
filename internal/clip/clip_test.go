package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHead(t *testing.T) {
	if got := Head("short", 10); got != "short" {
		t.Errorf("Head short: %q", got)
	}
	if got := Head(strings.Repeat("é", 100), 11); got != strings.Repeat("é", 5) {
		t.Errorf("Head cuts on a character: %q", got)
	}
	if got := Head("abc", -1); got != "" {
		t.Errorf("Head with a negative bound: %q", got)
	}
}

func TestMiddle(t *testing.T) {
	long := "command " + strings.Repeat("x", 5000) + " is denied; do not run it"
	if c := Middle(long, 1024); len(c) > 1024 || !strings.HasSuffix(c, "do not run it") || !strings.HasPrefix(c, "command x") {
		t.Errorf("Middle: %d bytes, %q…%q", len(c), c[:20], c[len(c)-20:])
	}
	if c := Middle(strings.Repeat("日本", 500), 100); len(c) > 100 || !utf8.ValidString(c) {
		t.Errorf("Middle splits a character or overruns: %d bytes, valid %v", len(c), utf8.ValidString(c))
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 5)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 4096
		if h := Head(s, n); len(h) > max(n, 0) || (utf8.ValidString(s) && !utf8.ValidString(h)) || !strings.HasPrefix(s, h) {
			t.Fatalf("Head(%q, %d) = %q", s, n, h)
		}
		if m := Middle(s, n); len(s) > n && n >= 5 && (len(m) > n || (utf8.ValidString(s) && !utf8.ValidString(m))) {
			t.Fatalf("Middle(%q, %d) = %q", s, n, m)
		}
	})
}
