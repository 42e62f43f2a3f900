package grpcapi_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
	"github.com/toolpdp/toolpdp/rego"
)

// The library's unsafe_env_vars is one list that crosses from Rego to Go:
// the Rego denylist removes each name, and the Go shell analysis asks about
// each one set before a command. The same table, read from the library,
// goes to both sides through a real server; the shell analysis' own table
// (exec_env_vars) is asked about and not removed; other names neither.
func TestUnsafeEnvVarsAreOneList(t *testing.T) {
	raw, err := fs.ReadFile(rego.Library(), "toolpdp/tables/data.json")
	if err != nil {
		t.Fatal(err)
	}
	var tables struct {
		Unsafe []string `json:"unsafe_env_vars"`
		Exec   []string `json:"exec_env_vars"`
	}
	if err := json.Unmarshal(raw, &tables); err != nil {
		t.Fatal(err)
	}
	spell := func(entry string) []string { // the names an entry covers
		if p, ok := strings.CutSuffix(entry, "*"); ok {
			return []string{p + "X", strings.ToLower(p) + "x"}
		}
		return []string{entry, strings.ToLower(entry)}
	}
	dir := testkit.WriteBundle(t, map[string]string{
		"agents/data.json": `{"coder": {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
		  "guardrails": {"deny_commands": ["curl"]}}}`,
	})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	check := func(name string, removed, asked bool) {
		t.Helper()
		r := ts.Decide(t, &pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Env: map[string]string{name: "x", "KEEP": "y"},
			Args:            testkit.Struct(t, map[string]any{"command": "true"}),
			ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: "denylist"}}})
		if _, kept := r.GetExecution().GetEnv()[name]; kept == removed || r.GetExecution().GetEnv()["KEEP"] != "y" {
			t.Errorf("denylist env with %s: execution env %v, want it removed: %v", name, r.GetExecution().GetEnv(), removed)
		}
		r = ts.Decide(t, &pb.DecideRequest{AgentId: "coder", ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": name + "=x true"})})
		if (r.Decision != pb.Decision_DECISION_ALLOW) != asked {
			t.Errorf("%s=x true: %v (%s), want asked: %v", name, r.Decision, r.Message, asked)
		}
	}
	if len(tables.Unsafe) < 20 || len(tables.Exec) == 0 {
		t.Fatalf("tables: %d unsafe, %d exec", len(tables.Unsafe), len(tables.Exec))
	}
	for _, entry := range tables.Unsafe {
		for _, name := range spell(entry) {
			check(name, true, true)
		}
	}
	unsafe := func(name string) bool {
		for _, u := range tables.Unsafe {
			if p, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(strings.ToUpper(name), p) || strings.EqualFold(u, name) {
				return true
			}
		}
		return false
	}
	for _, entry := range tables.Exec {
		for _, name := range spell(entry) {
			if !unsafe(name) {
				check(name, false, true)
			}
		}
	}
	for _, name := range []string{"FOO", "LDX", "MY_PATH", "GIT_AUTHOR_NAME"} {
		check(name, false, false)
	}
}

// The env modes are one list (policy.EnvModes): each is enforced by the
// library, any other is refused at the door.
func TestEnvModesAreOneList(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	for _, mode := range policy.EnvModes {
		r := ts.Decide(t, &pb.DecideRequest{ToolName: "Bash", Env: map[string]string{"A": "1"},
			ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: mode, Names: []string{"A"}}}})
		if !r.GetExecution().GetEnvEnforced() {
			t.Errorf("mode %s: execution %v, want the env enforced", mode, r.GetExecution())
		}
	}
	for _, mode := range []string{"", "ALLOWLIST", "allow", "denylist "} {
		_, err := ts.Client.Decide(t.Context(), &pb.DecideRequest{ToolName: "Bash",
			ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: mode}}})
		if err == nil || !strings.Contains(err.Error(), "execution_policy.env.mode") {
			t.Errorf("mode %q: %v, want INVALID_ARGUMENT naming the field", mode, err)
		}
	}
}
