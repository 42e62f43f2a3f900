package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fmt --check and --diff fail on unformatted Rego and change nothing; fmt
// formats it as OPA's formatter does; then --check passes. A file that does
// not parse exits 3.
func TestFmt(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "guardrails", "team.rego")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	messy := "package guardrails.team\nimport rego.v1\ndeny contains   \"no\" if { input.tool_name==\"Write\" }\n"
	if err := os.WriteFile(f, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	code := func(err error) int {
		var c exitCode
		if errors.As(err, &c) {
			return int(c)
		}
		if err != nil {
			return -1
		}
		return 0
	}

	out, _, err := runCmd(t, "", "fmt", "--check", dir)
	if code(err) != 1 || strings.TrimSpace(out) != f {
		t.Errorf("fmt --check: code %d, stdout %q; want 1 and the file", code(err), out)
	}
	out, _, err = runCmd(t, "", "fmt", "--diff", dir)
	if code(err) != 1 || !strings.Contains(out, `+deny contains "no" if input.tool_name == "Write"`) || !strings.Contains(out, "--- "+f) {
		t.Errorf("fmt --diff: code %d, stdout %q", code(err), out)
	}
	if b, _ := os.ReadFile(f); string(b) != messy {
		t.Fatalf("--check/--diff changed the file")
	}

	if _, _, err := runCmd(t, "", "fmt", dir); err != nil {
		t.Fatalf("fmt: %v", err)
	}
	if _, _, err := runCmd(t, "", "fmt", "--check", dir); err != nil {
		t.Errorf("fmt --check after fmt: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte("package x\ndeny if {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runCmd(t, "", "fmt", "--check", dir); code(err) != 3 || !strings.Contains(errOut, "broken.rego") {
		t.Errorf("fmt on a file that does not parse: code %d, stderr %q; want 3 naming the file", code(err), errOut)
	}
}
