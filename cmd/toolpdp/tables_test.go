package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/rego"
)

// A bundle that replaces the library with a misspelt table key — at the top
// of the tables or inside an entry — is rejected by a real load (check, and
// serve as the built binary), naming the file, the key's place and the key
// it is closest to; an owner's own x- key is accepted. Decoding alone would
// drop the key, and the table it meant would silently be no table.
func TestMisspeltTableKeyRejected(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(tables map[string]any)
		want   string
	}{
		{"top-level", func(tb map[string]any) { tb["wrapers"] = tb["wrappers"]; delete(tb, "wrappers") },
			`toolpdp.tables.wrapers: unknown key (did you mean "wrappers"?)`},
		{"inside an entry", func(tb map[string]any) {
			arch := tb["wrappers"].(map[string]any)["arch"].(map[string]any)
			arch["long_flag"] = arch["long_flags"]
			delete(arch, "long_flags")
		}, `toolpdp.tables.wrappers["arch"].long_flag: unknown key (did you mean "long_flags"?)`},
		{"nothing like it", func(tb map[string]any) { tb["zzzzzzzzzz"] = []any{} },
			`toolpdp.tables.zzzzzzzzzz: unknown key; the keys known here are `},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := libraryCopy(t, c.change)
			_, _, err := runCmd(t, "", "check", dir)
			want := filepath.Join(dir, "toolpdp/tables/data.json") + ": " + c.want
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("check: %v\nwant an error containing %q", err, want)
			}
			t.Logf("rejected: %s", want)
		})
	}
	t.Run("serve", func(t *testing.T) {
		dir := libraryCopy(t, func(tb map[string]any) { tb["wrapers"] = tb["wrappers"]; delete(tb, "wrappers") })
		out, err := exec.Command(binary(t), "serve", "--bundle", dir, "--listen", "unix://"+filepath.Join(t.TempDir(), "s.sock"),
			"--metrics-listen", "", "--decision-log", "off").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `toolpdp.tables.wrapers: unknown key (did you mean \"wrappers\"?)`) {
			t.Fatalf("serve of a misspelt table key: %v\n%s", err, out)
		}
	})
	t.Run("x- key", func(t *testing.T) {
		dir := libraryCopy(t, func(tb map[string]any) { tb["x-notes"] = "ours" })
		// The copy runs the library's own tests as a bundle's, which need
		// the default agent beside it; only the tables matter here.
		if _, _, err := runCmd(t, "", "check", dir); err != nil && strings.Contains(err.Error(), "toolpdp.tables") {
			t.Fatalf("check of an owner's x- key: %v", err)
		}
	})
}

// libraryCopy writes the embedded library to a new directory as a bundle
// that replaces it, with change made to its tables.
func libraryCopy(t *testing.T, change func(tables map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(rego.Library(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(rego.Library(), p)
		if err != nil {
			return err
		}
		if p == "toolpdp/tables/data.json" {
			var tables map[string]any
			if err := json.Unmarshal(b, &tables); err != nil {
				return err
			}
			change(tables)
			if b, err = json.Marshal(tables); err != nil {
				return err
			}
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		return os.WriteFile(full, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
