package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// runBinary runs the built toolpdp with args and stdin, returning its
// output and exit code.
func runBinary(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// guardrailModule is a guardrail package of a bundle's own.
func guardrailModule(pkg, body string) string {
	return "package " + pkg + "\n\nimport rego.v1\n\n" + body + "\n"
}

// Every shape OPA users write deny, violation and ask in, in packages at
// any depth under guardrails, denies (or asks) a Write through decide.
func TestGuardrailShapesDecide(t *testing.T) {
	write := `{"tool_name": "Write", "args": {"file_path": "/tmp/x", "content": "y"}}`
	for _, c := range []struct {
		name, rego string
		want       string // decision
		message    string // a part of the message
	}{
		{"set of strings", `deny contains "no writes" if input.tool_name == "Write"`, "DECISION_DENY", "no writes"},
		{"object keyed by message", `deny["no writes, keyed"] if input.tool_name == "Write"`, "DECISION_DENY", "no writes, keyed"},
		{"set of objects with msg", `violation contains {"msg": "gatekeeper: no writes", "details": {}} if input.tool_name == "Write"`, "DECISION_DENY", "gatekeeper: no writes"},
		{"boolean", `deny if input.tool_name == "Write"`, "DECISION_DENY", "guardrails.team.files.deny"},
		{"string", `deny := "writes are frozen" if input.tool_name == "Write"`, "DECISION_DENY", "writes are frozen"},
		{"ask boolean", `ask if input.tool_name == "Write"`, "DECISION_ASK", "guardrails.team.files.ask"},
		{"ask set", `ask contains "confirm the write" if input.tool_name == "Write"`, "DECISION_ASK", "confirm the write"},
		{"deny if not allow", "default allow := false\n\nallow if input.tool_name == \"Read\"\n\ndeny if not allow", "DECISION_DENY", "guardrails.team.files.deny"},
		{"another type", `deny := 42 if input.tool_name == "Write"`, "DECISION_DENY", "guardrail_error"},
		{"ask of another type", `ask := 3.5 if input.tool_name == "Write"` + "\n\nask := null if input.tool_name == \"Nope\"", "DECISION_DENY", "guardrails.team.files.ask is the number 3.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, map[string]string{"team/files.rego": guardrailModule("guardrails.team.files", c.rego),
				"agents/data.json": `{"default": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}]}}`})
			out, errOut, code := runBinary(t, write, "decide", "--bundle", dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var resp struct {
				Decision string                  `json:"decision"`
				Message  string                  `json:"message"`
				Reasons  []struct{ Rule string } `json:"reasons"`
			}
			if err := json.Unmarshal([]byte(out), &resp); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if resp.Decision != c.want || !strings.Contains(out, c.message) {
				t.Errorf("%s, want %s with %q:\n%s", resp.Decision, c.want, c.message, out)
			}
			if c.name == "object keyed by message" || c.name == "ask set" {
				return
			}
			// A Read is left alone by every one but the allow helper's.
			out, _, _ = runBinary(t, `{"tool_name": "Read", "args": {"file_path": "/tmp/x"}}`, "decide", "--bundle", dir)
			if strings.Contains(out, "DECISION_DENY") {
				t.Errorf("a Read is denied:\n%s", out)
			}
		})
	}
}

// A guardrail toolpdp would not read, and an unknown key of a definition,
// are refused by check (exit 3) naming what was meant; failing tests exit 4.
func TestCheckExitCodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		code  int
		want  []string
	}{
		{"misspelt scope key", map[string]string{"agents/data.json": `{"coder": {"execution_policy": {"read_path": ["/srv"]}}}`},
			3, []string{"agents/data.json", "agent 'coder'", "execution_policy.read_path", `did you mean "read_paths"?`}},
		{"only warn rules", map[string]string{"g.rego": guardrailModule("guardrails.team", `warn contains "careful" if input.tool_name == "Write"`)},
			3, []string{"g.rego", "guardrails.team", `rule "warn"`, `did you mean "ask"?`, "defines none of deny, violation and ask"}},
		{"denies", map[string]string{"g.rego": guardrailModule("guardrails.team", "deny contains \"x\" if false\n\ndenies contains \"y\" if true")},
			3, []string{`rule "denies"`, `did you mean "deny"?`}},
		{"helpers only", map[string]string{"g.rego": guardrailModule("guardrails.lib", "is_write if input.tool_name == \"Write\"")},
			3, []string{"package guardrails.lib defines none of deny, violation and ask"}},
		{"deny as a function", map[string]string{"g.rego": guardrailModule("guardrails.team", `deny(x) := x`)},
			3, []string{"deny is a function"}},
		{"Deny in capitals", map[string]string{"g.rego": guardrailModule("guardrails.team", "Deny contains \"x\" if true")},
			3, []string{`rule "Deny"`, `did you mean "deny"?`}},
		{"test packages are exempt", map[string]string{
			"g.rego":      guardrailModule("guardrails.team", `deny contains "x" if input.tool_name == "Nope"`),
			"g_test.rego": guardrailModule("guardrails.team_test", "test_quiet if count(data.guardrails.team.deny) == 0 with input as {\"tool_name\": \"Read\"}"),
		}, 0, []string{"ok:"}},
		{"failing tests", map[string]string{
			"g.rego":      guardrailModule("guardrails.team", `deny contains "x" if input.tool_name == "Nope"`),
			"g_test.rego": guardrailModule("guardrails.team_test", "test_wrong if count(data.guardrails.team.deny) == 1 with input as {\"tool_name\": \"Read\"}"),
		}, 4, []string{"test_wrong"}},
		{"a guardrail outside guardrails", map[string]string{"g.rego": guardrailModule("guardrail.team", `deny contains "x" if input.tool_name == "Write"`)},
			3, []string{"package guardrail.team defines deny", `did you mean package guardrails.team?`}},
		{"a misspelt guardrail data key", map[string]string{"guardrails/data.json": `{"deny_command": ["curl"]}`},
			3, []string{"guardrails/data.json", "guardrails.deny_command: unknown key", `did you mean "deny_commands"?`}},
		{"a package's own data", map[string]string{
			"guardrails/team/data.json": `{"hosts": ["a"]}`,
			"g.rego":                    guardrailModule("guardrails.team", `deny contains "x" if input.tool_name in data.guardrails.team.hosts`),
		}, 0, []string{"ok:"}},
		{"does not compile", map[string]string{"g.rego": "package guardrails.team\n\ndeny contains if {"}, 3, []string{"g.rego"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testkit.WriteBundle(t, c.files)
			out, errOut, code := runBinary(t, "", "check", dir)
			if code != c.code {
				t.Errorf("exit %d, want %d:\n%s%s", code, c.code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q:\n%s%s", w, out, errOut)
				}
			}
		})
	}
	if _, _, code := runBinary(t, "", "check"); code != 2 {
		t.Errorf("check with no path: exit %d, want 2", code)
	}
	failing := testkit.WriteBundle(t, map[string]string{"g_test.rego": guardrailModule("guardrails.team_test", "test_no if false")})
	if out, errOut, code := runBinary(t, "", "test", failing); code != 4 {
		t.Errorf("test with a failing test: exit %d, want 4\n%s%s", code, out, errOut)
	}
	if _, _, code := runBinary(t, "", "test", testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"c": {"colour": 1}}`})); code != 3 {
		t.Errorf("test of an invalid bundle: exit %d, want 3", code)
	}
}
