package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

func runCmd(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// Each invalid agent definition is rejected naming the file, the agent, the
// field and the reason.
func TestCheckRejectsInvalidDefinitions(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/invalid-agents.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name       string          `json:"name"`
		Definition json.RawMessage `json:"definition"`
		Want       string          `json:"want"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, map[string]string{"agents/coder/data.json": string(c.Definition)})
			_, _, err := runCmd(t, "", "check", dir)
			want := "agents/coder/data.json: agent 'coder': " + c.Want
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("check: %v\nwant an error containing %q", err, want)
			}
		})
	}
}

func TestCheckAcceptsValidBundleAndRefusesUnknownKeys(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		".manifest":        `{"revision": "v7", "roots": ["agents"]}`,
		"agents/data.json": `{"coder": {"version": 3, "tools": [{"type": "agent_toolset"}], "x-colour": "blue"}}`,
	})
	out, _, err := runCmd(t, "", "check", dir)
	if err != nil || !strings.Contains(out, `revision "library-0.1.0,v7"`) {
		t.Fatalf("check: %v\n%s", err, out)
	}
	dir = testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"coder": {"version": 3, "colour": "blue"}}`})
	_, _, err = runCmd(t, "", "check", dir)
	var coded codedError
	if !errors.As(err, &coded) || coded.code != exitInvalid || !strings.Contains(err.Error(), dir+"/agents/data.json: agent 'coder': colour: unknown key") {
		t.Fatalf("an unknown key: %v", err)
	}
}

func TestCheckReportsEveryErrorAtOnce(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/data.json": `{
		"a": {"permission_callback": 1},
		"b": {"tools": [{"type": "custom", "name": "Read"}]}}`})
	_, _, err := runCmd(t, "", "check", dir)
	if err == nil || !strings.Contains(err.Error(), "agent 'a': permission_callback") || !strings.Contains(err.Error(), "agent 'b': tools[0].name") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckRejectsBrokenRegoWithFileAndLine(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"guardrails/team/team.rego": "package guardrails.team\n\ndeny contains msg if {\n  msg := \n}\n"})
	_, _, err := runCmd(t, "", "check", dir)
	if err == nil || !strings.Contains(err.Error(), "team.rego:5") {
		t.Fatalf("got %v", err)
	}
}

// A user bundle may not write into the library's packages unless it
// replaces the whole library.
func TestCheckRejectsWritesIntoTheLibrary(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		".manifest": `{"roots": ["toolpdp/permission", "agents"]}`,
		"evil.rego": "package toolpdp.permission\n\nimport rego.v1\n\nreason := {\"effect\": \"allow\"}\n",
	})
	_, _, err := runCmd(t, "", "check", dir)
	if err == nil || !strings.Contains(err.Error(), `reach into the library's "toolpdp"`) {
		t.Fatalf("got %v", err)
	}
	// Without a manifest the roots are inferred from the packages: same answer.
	dir = testkit.WriteBundle(t, map[string]string{"evil.rego": "package toolpdp.permission\n\nimport rego.v1\n\nx := 1\n"})
	if _, _, err := runCmd(t, "", "check", dir); err == nil || !strings.Contains(err.Error(), "library") {
		t.Fatalf("inferred roots: got %v", err)
	}
}

func TestDecidePrintsResponseWithReasons(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}]}}`})
	out, _, err := runCmd(t, `{"agentId": "coder", "toolName": "bash", "args": {"command": "ls"}}`, "decide", "--bundle", dir)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Decision string `json:"decision"`
		Reasons  []struct {
			Rule string `json:"rule"`
		} `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if resp.Decision != "DECISION_ASK" || len(resp.Reasons) != 1 || resp.Reasons[0].Rule != "agent_toolset.configs[bash]" {
		t.Fatalf("got %s", out)
	}
}

func TestDecideRejectsBadInput(t *testing.T) {
	if _, _, err := runCmd(t, `{"toolName": `, "decide"); err == nil || !strings.Contains(err.Error(), "stdin: not a DecideRequest") {
		t.Fatalf("got %v", err)
	}
	if _, _, err := runCmd(t, `{}`, "decide"); err == nil || !strings.Contains(err.Error(), "tool_name: required") {
		t.Fatalf("got %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"check"}, {"serve", "--no-such-flag"}} {
		if _, _, err := runCmd(t, "", args...); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestCheckRejectsOverlappingRoots(t *testing.T) {
	a := testkit.WriteBundle(t, map[string]string{".manifest": `{"roots": ["agents"]}`, "agents/data.json": `{"a": {}}`})
	b := testkit.WriteBundle(t, map[string]string{".manifest": `{"roots": ["agents/b"]}`, "agents/b/data.json": `{}`})
	_, _, err := runCmd(t, "", "check", a, b)
	if err == nil || !strings.Contains(err.Error(), "cannot be combined") || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("got %v", err)
	}
}

func TestTestCommandWithCoverage(t *testing.T) {
	out, _, err := runCmd(t, "", "test", "--coverage", "../../testdata/guardrail-examples")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "PASS: 2/2") || !strings.Contains(out, "coverage:") || !strings.Contains(out, "secrets.rego") {
		t.Fatalf("output:\n%s", out)
	}
	failing := testkit.WriteBundle(t, map[string]string{"guardrails/x/x_test.rego": "package guardrails.x_test\n\nimport rego.v1\n\ntest_no if { 1 == 2 }\n"})
	out, _, err = runCmd(t, "", "test", failing)
	if err == nil || !strings.Contains(out, "FAIL: 1/1") {
		t.Fatalf("a failing test: err %v\n%s", err, out)
	}
}
