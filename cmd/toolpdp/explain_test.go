package main

import (
	"strings"
	"testing"
)

// decide --explain full prints OPA's trace of the evaluation (as opa eval
// --explain full does) to stderr, and the response still to stdout;
// --explain notes prints only print and trace() notes.
func TestDecideExplain(t *testing.T) {
	req := `{"agentId": "coder", "toolName": "Bash", "args": {"command": "ls && curl https://example.com"}}`
	out, errOut, err := runCmd(t, req, "decide", "--bundle", "../../examples/quickstart", "--explain", "full")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "DECISION_DENY") {
		t.Errorf("the response is not on stdout: %q", out)
	}
	for _, want := range []string{"Enter data.toolpdp.decision.result", "Eval ", "Exit ", "decision.rego:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("--explain full lacks %q:\n%.2000s", want, errOut)
		}
	}
	if _, errOut, err = runCmd(t, req, "decide", "--bundle", "../../examples/quickstart", "--explain", "notes"); err != nil || strings.Contains(errOut, "Enter data.toolpdp") {
		t.Errorf("--explain notes: err %v, it printed the full trace:\n%.500s", err, errOut)
	}
	if _, _, err = runCmd(t, req, "decide", "--explain", "most"); err == nil {
		t.Error("--explain most was accepted")
	}
}
