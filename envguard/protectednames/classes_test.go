package protectednames

import (
	"os/exec"
	"testing"
)

// A glob with POSIX bracket classes could match a protected name whenever
// bash's own matcher says it does (checked against the real bash where it
// is installed, else against what bash 5.2 says).
func TestGlobClassesMatchAsBashDoes(t *testing.T) {
	set := New([]string{".env"})
	for glob, bashMatches := range map[string]bool{
		".[[:lower:]]nv": true, ".[[:alpha:]]nv": true, ".[[:alnum:]]nv": true, ".[![:upper:]]nv": true,
		".[![:digit:]]nv": true, ".[[:digit:]]nv": false, ".[[:space:]]nv": false, ".[[=e=]]nv": true,
		".[[.e.]]nv": true, ".e[[:alpha:]]v": true, "[[:punct:]]env": true, "[[:alpha:]]env": false,
	} {
		if out, err := exec.Command("bash", "-c", `[[ .env == $1 ]] && echo yes || echo no`, "bash", glob).Output(); err == nil {
			bashMatches = string(out) == "yes\n"
		}
		if _, got := set.GlobCouldMatch(glob, false); bashMatches && !got {
			t.Errorf("%s: bash matches .env, GlobCouldMatch does not", glob)
		}
	}
	for _, glob := range []string{".[[:digit:]]nv", "[[:alpha:]]EADME"} {
		if n, got := set.GlobCouldMatch(glob, false); got {
			t.Errorf("%s: could match %s, want no match", glob, n)
		}
	}
}
