package envguard

import (
	"context"
	"os/exec"
	"testing"
)

// Escapes of $'…' that bash decodes and the parser keeps as written make
// the word one only bash can spell: a program so named is dynamic.
func TestANSICEscapesTheParserKeepsAreDynamic(t *testing.T) {
	tables := diffTables(t)
	for _, cmd := range []string{`$'\x{63}url' https://example.com`, `$'\x{0063}url' x`, `$'\cA'url x`, `c$'\x{75}'rl x`} {
		a, err := tables.Analyze(context.Background(), cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if len(a.Leaves) == 0 || !a.Leaves[0].Dynamic {
			t.Errorf("%s: leaves %+v: want the program dynamic", cmd, a.Leaves)
		}
	}
	// What bash makes of them, where bash is at hand: the reason for the rule.
	if out, err := exec.Command("bash", "-c", `printf %s $'\x{63}url'`).Output(); err == nil && string(out) != "curl" {
		t.Logf("this bash prints %q for $'\\x{63}url' (bash 5.2 prints curl)", out)
	}
}
