package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// --help, -h and help print the usage and succeed, for the root and every
// command (main exits 0 on flag.ErrHelp and on nil).
func TestHelpSucceeds(t *testing.T) {
	ok := func(err error) bool { return err == nil || errors.Is(err, flag.ErrHelp) }
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "serve"}, {"help", "test"}} {
		out, _, err := runCmd(t, "", args...)
		if !ok(err) || !strings.Contains(out, "usage") {
			t.Errorf("%v: err %v, stdout %q", args, err, out)
		}
	}
	for _, cmd := range []string{"serve", "check", "test", "decide", "status", "pending", "replay", "hook", "version", "fmt"} {
		for _, h := range []string{"-h", "--help"} {
			args := []string{cmd, h}
			if cmd == "hook" && h == "-h" {
				args = []string{cmd, "claude-code", h}
			}
			out, errOut, err := runCmd(t, "", args...)
			if !ok(err) || !strings.Contains(out+errOut, "usage") {
				t.Errorf("%v: err %v, output %q", args, err, out+errOut)
			}
		}
	}
	_, errOut, _ := runCmd(t, "", "serve", "-h")
	for _, want := range []string{"http(s)://", "-bundle value", "TOOLPDP_METRICS_LISTEN", "-bundle-token-file", "-bundle-client-cert"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("serve -h lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "-bundle opa build") {
		t.Errorf("serve -h takes a backticked phrase as the argument name:\n%s", errOut)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runCmd(t, "", "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"toolpdp ", "go go1.", "opa 1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q: %q", want, out)
		}
	}
}

// Every serve flag is also read from TOOLPDP_<FLAG>; the flag wins.
func TestServeFlagsFromEnv(t *testing.T) {
	t.Setenv("TOOLPDP_METRICS_LISTEN", "")
	t.Setenv("TOOLPDP_EVAL_TIMEOUT", "250ms")
	t.Setenv("TOOLPDP_BUNDLE", "/a,/b")
	t.Setenv("TOOLPDP_WAIT_FOR_BUNDLE", "true")
	t.Setenv("TOOLPDP_LOG_LEVEL", "debug")
	t.Setenv("TOOLPDP_BUNDLE_TOKEN_FILE", "/var/run/secrets/token")
	c, parse := serveFlags(&strings.Builder{})
	if err := parse([]string{"--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	if c.Engine.EvalTimeout != 250*time.Millisecond || !c.WaitForBundle || strings.Join(c.Engine.Bundles, " ") != "/a /b" || c.Engine.Remote.TokenFile != "/var/run/secrets/token" {
		t.Errorf("from env: timeout %v, wait %v, bundles %v, token %q", c.Engine.EvalTimeout, c.WaitForBundle, c.Engine.Bundles, c.Engine.Remote.TokenFile)
	}
	if c.logLevel != "warn" {
		t.Errorf("the flag must win over TOOLPDP_LOG_LEVEL: %q", c.logLevel)
	}
	if c.MetricsListen != "127.0.0.1:8788" {
		t.Errorf("an empty variable is unset: metrics-listen %q", c.MetricsListen)
	}
	t.Setenv("TOOLPDP_EVAL_TIMEOUT", "soon")
	_, parse = serveFlags(&strings.Builder{})
	if err := parse(nil); err == nil || !strings.Contains(err.Error(), "TOOLPDP_EVAL_TIMEOUT") {
		t.Errorf("a bad variable is a usage error naming it: %v", err)
	}
	// Every serve flag has its variable: the names are derived, not listed.
	for _, name := range []string{"metrics-listen", "confirm-listen", "decision-log-queue-bytes"} {
		if got := EnvName(name); got != "TOOLPDP_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")) {
			t.Errorf("EnvName(%q) = %q", name, got)
		}
	}
}

// check --strict turns warnings into errors.
func TestCheckStrict(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/coder/data.json": `{"mcp_servers": [{"name": "a__b"}]}`})
	out, _, err := runCmd(t, "", "check", dir)
	if err != nil || !strings.Contains(out, `warning: `+dir+`/agents/coder/data.json: agent 'coder': mcp_servers[0].name: "a__b" contains "__"`) {
		t.Fatalf("check: %v\n%s", err, out)
	}
	out, _, err = runCmd(t, "", "check", "--strict", dir)
	if err == nil || !strings.Contains(out, `error: `) || !strings.Contains(out, `contains "__"`) {
		t.Fatalf("check --strict: %v\n%s", err, out)
	}
}

// test -v lists passing tests, --run selects, --coverage counts only the
// bundle's own files.
func TestTestVerboseRunCoverage(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/coder/data.json":      `{}`,
		"guardrails/extra/extra.rego": "package guardrails.extra\n\nimport rego.v1\n\ndeny contains \"no\" if input.tool_name == \"Nope\"\n",
		"guardrails/extra/extra_test.rego": "package guardrails.extra_test\n\nimport rego.v1\n\n" +
			"test_nope if data.guardrails.extra.deny with input as {\"tool_name\": \"Nope\"}\n\n" +
			"test_other if count(data.guardrails.extra.deny) == 0 with input as {\"tool_name\": \"Read\"}\n",
	})
	out, _, err := runCmd(t, "", "test", "-v", "--coverage", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"data.guardrails.extra_test.test_nope: PASS", "data.guardrails.extra_test.test_other: PASS", "PASS: 2/2", "coverage: 100.0% of the bundles' own Rego"} {
		if !strings.Contains(out, want) {
			t.Errorf("test -v --coverage lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "library") {
		t.Errorf("coverage counts the embedded library:\n%s", out)
	}
	out, _, err = runCmd(t, "", "test", "--run", "nope$", dir)
	if err != nil || !strings.Contains(out, "PASS: 1/1") {
		t.Errorf("--run: %v\n%s", err, out)
	}
}

// toolpdp test runs the bundle's decision tests, reporting each failing
// step like a failing test; the shipped example passes.
func TestDecisionTests(t *testing.T) {
	out, _, err := runCmd(t, "", "test", "-v", "../../examples/quickstart")
	if err != nil || !strings.Contains(out, "7 of 7 steps PASS") {
		t.Fatalf("examples/quickstart: %v\n%s", err, out)
	}
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/coder/data.json": `{"guardrails": {"deny_commands": ["curl"]}}`,
		"tests/coder.decisions.json": `{"name": "curl", "steps": [
			{"request": {"agentId": "coder", "toolName": "Bash", "args": {"command": "curl x"}}, "expect": {"decision": "DECISION_DENY"}},
			{"request": {"agentId": "coder", "toolName": "Bash", "args": {"command": "wget x"}}, "expect": {"decision": "DECISION_DENY"}}]}`,
	})
	out, _, err = runCmd(t, "", "test", dir)
	// The failing step names its file, its index, the request and every
	// rule that fired.
	if err == nil || !strings.Contains(out, "FAIL: 1/2") || !strings.Contains(out, `coder.decisions.json: steps[1] Decide Bash {"agentId":"coder","toolName":"Bash","args":{"command":"wget x"}}`) ||
		!strings.Contains(out, "decision DECISION_ASK, want DECISION_DENY") || !strings.Contains(out, "rules that fired: permission/builtin_categories[Bash]=ASK") {
		t.Fatalf("a failing step: %v\n%s", err, out)
	}
	if strings.Contains(out, `"curl x"`) {
		t.Errorf("a passing step is reported without -v:\n%s", out)
	}
}
