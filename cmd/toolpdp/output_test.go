package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// check and test with --format json print one object (docs/CLI.md) and
// exit as without it: 3 for a bundle that does not validate, 4 for failing
// tests; --run that matches nothing fails; decide prints text on request.
func TestFormatJSONAndExitCodes(t *testing.T) {
	invalid := testkit.WriteBundle(t, map[string]string{"agents/coder/data.json": `{"execution_policy": {"read_path": ["/p"]}}`})
	out, _, err := runCmd(t, "", "check", "--format", "json", invalid)
	var report struct {
		OK       bool     `json:"ok"`
		ExitCode int      `json:"exit_code"`
		Errors   []string `json:"errors"`
	}
	if jerr := json.Unmarshal([]byte(out), &report); jerr != nil {
		t.Fatalf("check --format json printed no JSON object: %v\n%s", jerr, out)
	}
	if exitCodeOf(err) != 3 || report.OK || report.ExitCode != 3 || !strings.Contains(strings.Join(report.Errors, "\n"), `read_paths`) {
		t.Errorf("check of a misspelt scope: exit %d, report %+v; want 3 naming read_paths", exitCodeOf(err), report)
	}

	failing := testkit.WriteBundle(t, map[string]string{
		"agents/coder/data.json": `{"guardrails": {"deny_commands": ["curl"]}}`,
		"tests/coder.decisions.json": `{"name": "curl", "steps": [
			{"request": {"agentId": "coder", "toolName": "Bash", "args": {"command": "curl x"}}, "expect": {"decision": "DECISION_DENY"}},
			{"request": {"agentId": "coder", "toolName": "Bash", "args": {"command": "wget x"}}, "expect": {"decision": "DECISION_DENY"}}]}`,
	})
	out, _, err = runCmd(t, "", "test", "--format", "json", failing)
	var summary struct {
		OK       bool `json:"ok"`
		ExitCode int  `json:"exit_code"`
		Pass     int  `json:"pass"`
		Fail     int  `json:"fail"`
		Results  []struct {
			Kind    string   `json:"kind"`
			File    string   `json:"file"`
			Step    *int     `json:"step"`
			Request string   `json:"request"`
			Pass    bool     `json:"pass"`
			Rules   []string `json:"rules"`
		} `json:"results"`
	}
	if jerr := json.Unmarshal([]byte(out), &summary); jerr != nil {
		t.Fatalf("test --format json printed no JSON object: %v\n%s", jerr, out)
	}
	if exitCodeOf(err) != 4 || summary.ExitCode != 4 || summary.Pass != 1 || summary.Fail != 1 || len(summary.Results) != 2 {
		t.Fatalf("failing test: exit %d, %+v", exitCodeOf(err), summary)
	}
	bad := summary.Results[1]
	if bad.Pass || bad.Step == nil || *bad.Step != 1 || !strings.HasSuffix(bad.File, "coder.decisions.json") ||
		!strings.Contains(bad.Request, "wget x") || len(bad.Rules) == 0 {
		t.Errorf("the failing step's record lacks its file, index, request or rules: %+v", bad)
	}

	if _, _, err := runCmd(t, "", "test", "--run", "nomatch", failing); exitCodeOf(err) != 4 || !strings.Contains(err.Error(), "matched no test") {
		t.Errorf("test --run nomatch: %v (exit %d), want a failure", err, exitCodeOf(err))
	}
	if _, _, err := runCmd(t, "", "check", "--format", "yaml", failing); exitCodeOf(err) != 2 {
		t.Errorf("--format yaml: exit %d, want 2 (usage)", exitCodeOf(err))
	}

	out, _, err = runCmd(t, `{"agentId": "coder", "toolName": "Bash", "args": {"command": "curl x"}}`, "decide", "--bundle", failing, "--format", "text")
	if err != nil || !strings.HasPrefix(out, "DENY") || !strings.Contains(out, "guardrail deny_commands DENY") {
		t.Errorf("decide --format text: %v\n%s", err, out)
	}
}
