package policy

import (
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	if got := Clip("short", 10); got != "short" {
		t.Errorf("Clip short: %q", got)
	}
	got := Clip(strings.Repeat("é", 100), 11)
	if len(got) > 11 || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éééé") {
		t.Errorf("Clip cuts on a character: %q", got)
	}
	long := "command " + strings.Repeat("x", 5000) + " is denied; do not run it"
	if c := clipMiddle(long, MaxMessageBytes); len(c) > MaxMessageBytes || !strings.HasSuffix(c, "do not run it") || !strings.HasPrefix(c, "command x") {
		t.Errorf("clipMiddle: %d bytes, %q…%q", len(c), c[:20], c[len(c)-20:])
	}
}
