package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --write changes the pins of one server in one agent's definition and
// nothing else, in each shape a bundle's agents file takes.
func TestWritePins(t *testing.T) {
	pins := []toolPin{{Name: "a", Digest: "sha256:" + strings.Repeat("1", 64)}, {Name: "b", Digest: "sha256:" + strings.Repeat("2", 64)}}
	const wantPins = `"tools": [
        {
          "name": "a",
          "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111"
        },`
	for name, c := range map[string]struct{ in, want, err string }{
		"keyed by agent": {in: `{"z": {"version": 3}, "coder": {"mcp_servers": [{"name": "other"}, {"name": "gh", "url": "https://x", "tools": [{"name": "old", "digest": "sha256:` + strings.Repeat("0", 64) + `"}]}], "max_consecutive_denials": 5.0, "x-html": "<&>"}}`,
			want: `"max_consecutive_denials": 5.0`},
		"under agents":         {in: `{"agents": {"coder": {"mcp_servers": [{"name": "gh"}]}}}`, want: `"agents": {`},
		"the agent's own file": {in: `{"mcp_servers": [{"name": "gh"}], "workspace": "acme"}`, want: `"workspace": "acme"`},
		"undeclared server":    {in: `{"coder": {"mcp_servers": [{"name": "other"}]}}`, err: `server "gh" is not declared; declare it first`},
		"no such agent":        {in: `{"writer": {"mcp_servers": [{"name": "gh"}]}}`, err: `defines no agent 'coder'`},
		"duplicate key":        {in: `{"coder": {}, "coder": {}}`, err: `duplicate key "coder"`},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "data.json")
			if err := os.WriteFile(file, []byte(c.in), 0o640); err != nil {
				t.Fatal(err)
			}
			err := writePins(file, "coder", "gh", pins)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, _ := os.ReadFile(file)
			got := string(out)
			if !strings.Contains(got, c.want) || !strings.Contains(strings.ReplaceAll(got, "  ", ""), strings.ReplaceAll(wantPins, "  ", "")) || strings.Contains(got, `"old"`) {
				t.Fatalf("written:\n%s", got)
			}
			if name == "keyed by agent" && (strings.Index(got, `"z"`) > strings.Index(got, `"coder"`) || !strings.Contains(got, `"x-html": "<&>"`) || strings.Index(got, `"name": "other"`) > strings.Index(got, `"name": "gh"`)) {
				t.Fatalf("order or spelling changed:\n%s", got)
			}
			if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want the file's own 0640", st.Mode().Perm())
			}
		})
	}
	yaml := filepath.Join(t.TempDir(), "data.yaml")
	if err := writePins(yaml, "coder", "gh", pins); err == nil || !strings.Contains(err.Error(), "only JSON files are written") {
		t.Fatalf("a YAML file: %v", err)
	}
}
