package envguard

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckNesting(t *testing.T) {
	deep := map[string]string{
		"parentheses":  strings.Repeat("(", 65) + "true" + strings.Repeat(")", 65),
		"substitution": strings.Repeat("$(", 65) + "true" + strings.Repeat(")", 65),
		"arithmetic":   "echo $((" + strings.Repeat("1+", 1100) + "1))",
		"and-list":     strings.Repeat("true && ", 1100) + "true",
		"if":           strings.Repeat("if :; then ", 65) + ":" + strings.Repeat("; fi", 65),
		"sh -c string": "bash -c '" + strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100) + "'",
		"array index":  "a[" + strings.Repeat("a[", 70) + "1" + strings.Repeat("]", 70) + "]=1",
	}
	for name, cmd := range deep {
		if err := CheckNesting(cmd); !errors.Is(err, ErrUncheckable) {
			t.Errorf("%s: %v; want ErrUncheckable", name, err)
		}
	}
	for _, cmd := range []string{
		"ls -la && git status | head -n 5",
		`find . -name '*.go' -exec grep -l "func (s \*Server)" {} \;`,
		"for f in *.go; do if [ -f \"$f\" ]; then echo $((i+1)); fi; done",
		"git commit -m 'fix (a) and [b] {c}'",
		"bash -c 'true && (cd x && make)'",
		"git push '" + strings.Repeat("\x01", 60000) + "'",
	} {
		if err := CheckNesting(cmd); err != nil {
			t.Errorf("%.60q: %v", cmd, err)
		}
	}
}
