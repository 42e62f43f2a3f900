package askview

import (
	"encoding/json"
	"strings"
	"testing"
)

// What would not show as itself is an escape; what a caller typed as an
// escape stays apart from one.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é ü 日本":       "plain text, é ü 日本",
		"rm -rf /\x1b[2K\rls":      `rm -rf /\u001B[2K\u000Dls`,
		"safe\u202Etxt.exe":        `safe\u202Etxt.exe`,
		"a\u200Bb\uFEFFc":          `a\u200Bb\uFEFFc`,
		"no\u00A0break":            `no\u00A0break`,
		`typed \u202E`:             `typed \\u202E`,
		"tag\U000E0041":            `tag\U000E0041`,
		"line\nbreak\u2028":        `line\u000Abreak\u2028`,
		"filler\u3164\u2800\uFE0F": `filler\u3164\u2800\uFE0F`,
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %s, want %s", in, got, want)
		}
	}
}

// The rendering is JSON that reads back to the very args, with every
// hidden character escaped.
func TestJSONReadsBack(t *testing.T) {
	args := map[string]any{"body": "ok\u202Egnp.exe\x1b]0;x\x07", "n": 3.5, "list": []any{true, nil, "\u200B"}, "k\u2066": map[string]any{}}
	text := JSON(args)
	for _, r := range []string{"\u202E", "\x1b", "\x07", "\u200B", "\u2066"} {
		if strings.Contains(text, r) {
			t.Errorf("rendering holds %q raw:\n%s", r, text)
		}
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(text), &back); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, text)
	}
	if JSON(back) != text {
		t.Errorf("does not read back:\n%s\n%s", JSON(back), text)
	}
}
