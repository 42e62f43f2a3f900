package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// agentsBundle is a bundle holding data.agents, decoded as OPA decodes it.
func agentsBundle(t *testing.T, agents string) *bundles.Bundle {
	t.Helper()
	var data map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"agents": ` + agents + `}`))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		t.Fatal(err)
	}
	return &bundles.Bundle{Name: "b", Bundle: &bundle.Bundle{Data: data}}
}

// Every error names the file, the agent and the field by its path.
func TestValidateNamesTheField(t *testing.T) {
	builtins := map[string]bool{"Read": true}
	for agents, want := range map[string]string{
		`[]`:                                    `b: agents: must be an object keyed by agent id, got an array`,
		`{"c": {"max_consecutive_denials": 0}}`: `b: agent 'c': max_consecutive_denials: must be a whole number of at least 1, got 0`,
		`{"c": {"tools": [{"type": "custom", "name": "Read"}]}}`:                                         `b: agent 'c': tools[0].name: custom tool "Read" takes the name of a built-in tool`,
		`{"c": {"tools": [{"type": "mcp_toolset", "mcp_server_name": "gh"}]}}`:                           `b: agent 'c': tools[0].mcp_server_name: server "gh" is not declared in mcp_servers`,
		`{"c": {"execution_policy": {"read_paths": ["/a", "rel"]}}}`:                                     `b: agent 'c': execution_policy.read_paths[1]: "rel" is not an absolute path`,
		`{"c": {"execution_policy": {"env": {"mode": "all", "names": []}}}}`:                             `b: agent 'c': execution_policy.env.mode: "all" is not allowlist or denylist`,
		`{"c": {"execution_policy": {"network": "off"}}}`:                                                `b: agent 'c': execution_policy.network: "off" is not "none", "any" or a rules object {"allow", "ask", "deny", "otherwise"}`,
		`{"c": {"execution_policy": {"network": {"allow": ["a.example", "10.0.0.1/8"]}}}}`:               `b: agent 'c': execution_policy.network: allow[1]: "10.0.0.1/8": the CIDR has bits set below its mask (did you mean 10.0.0.0/8?)`,
		`{"c": {"execution_policy": {"network": {"deny": ["x.example:99999"]}}}}`:                        `b: agent 'c': execution_policy.network: deny[0]: "x.example:99999": port "99999" is not a number from 1 to 65535`,
		`{"c": {"execution_policy": {"network": {"allow": [], "otherwise": "allow"}}}}`:                  `b: agent 'c': execution_policy.network: otherwise: "allow" is not "deny" or "ask"`,
		`{"c": {"execution_policy": {"network": {"alow": []}}}}`:                                         `b: agent 'c': execution_policy.network.alow: unknown key (did you mean "allow"?)`,
		`{"c": {"execution_policy": {"network": {"ask": "github.com"}}}}`:                                `b: agent 'c': execution_policy.network.ask: must be an array, got a string`,
		`{"c": {"execution_policy": {"network": {"allow": [{"host": "10.0.0.1", "private": true}]}}}}`:   `b: agent 'c': execution_policy.network: private[0]: "10.0.0.1": private goes with a name; an address or CIDR entry names its addresses already`,
		`{"c": {"execution_policy": {"network": {"allow": [{"host": "db.internal", "privat": true}]}}}}`: `b: agent 'c': execution_policy.network.allow[0].privat: unknown key (did you mean "private"?)`,
		`{"c": {"execution_policy": {"network": {"deny": [{"host": "db.internal"}]}}}}`:                  `b: agent 'c': execution_policy.network.deny[0]: must be a string, got an object`,
		`{"c": {"tools": [{"type": "custom", "name": "Network"}]}}`:                                      `b: agent 'c': tools[0].name: custom tool "Network" takes the reserved name of the tool a confined run's connections are decided by`,
		`{"c": {"guardrails": {"network": true}}}`:                                                       `b: agent 'c': guardrails.network: must be a string, got a boolean`,
		`{"c": {"tools": [{"type": "agent_toolset", "configs": [{"name": "x", "enabled": "no"}]}]}}`:     `b: agent 'c': tools[0].configs[0].enabled: must be true or false, got a string`,
		`{"c": {"execution_policy": {"confinement": "on"}}}`:                                             `b: agent 'c': execution_policy.confinement: "on" is not "off", "trusted" or "required"`,
		`{"c": {"execution_policy": {"confinement": true}}}`:                                             `b: agent 'c': execution_policy.confinement: must be a string, got a boolean`,
	} {
		_, err := validateAgents(agentsBundle(t, agents), builtins, map[string]Definition{}, false)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", agents, err, want)
		}
	}
}

// A valid definition is decoded once, with one default per setting; with
// --unknown-keys=warn an unknown key is a warning, not an error.
func TestValidateDecodesDefinitions(t *testing.T) {
	defs := map[string]Definition{}
	warnings, err := validateAgents(agentsBundle(t, `{
		"plain": {"colour": "blue"},
		"bound": {"workspace": "acme", "max_consecutive_denials": 2,
		          "execution_policy": {"cwd": "/w", "write_paths": [], "env": {"mode": "allowlist", "names": ["PATH"]}}}}`),
		nil, defs, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "agent 'plain': colour: unknown key, ignored") {
		t.Errorf("warnings: %q", warnings)
	}
	if d := defs["plain"]; d.MaxDenials != 0 || (&Agent{Definition: d}).Denials() != DefaultMaxDenials || d.Workspace != "" || d.Policy != nil {
		t.Errorf("plain: %+v", d)
	}
	d := defs["bound"]
	if d.MaxDenials != 2 || d.Workspace != "acme" || d.Policy == nil || d.Policy.Cwd != "/w" ||
		d.Policy.WritePaths == nil || len(*d.Policy.WritePaths) != 0 || d.Policy.ReadPaths != nil ||
		d.Policy.Env.Mode != "allowlist" || d.Policy.Env.Names[0] != "PATH" {
		t.Errorf("bound: %+v, policy %+v", d, d.Policy)
	}
	var nilAgent *Agent
	if nilAgent.Denials() != DefaultMaxDenials {
		t.Error("an unknown agent's cap is not the default")
	}
}

// The shape is closed: an unknown key anywhere rejects the definition,
// naming the key meant; x- keys and an agent resource's descriptive keys
// are ignored.
func TestValidateRefusesUnknownKeys(t *testing.T) {
	for agents, want := range map[string]string{
		`{"c": {"execution_policy": {"read_path": ["/etc"]}}}`:                                                                     `b: agent 'c': execution_policy.read_path: unknown key (did you mean "read_paths"?)`,
		`{"c": {"execution_policy": {"write_path": ["/srv"]}}}`:                                                                    `b: agent 'c': execution_policy.write_path: unknown key (did you mean "write_paths"?)`,
		`{"c": {"guardrails": {"deny_command": ["curl"]}}}`:                                                                        `b: agent 'c': guardrails.deny_command: unknown key (did you mean "deny_commands"?)`,
		`{"c": {"max_consecutive_denial": 3}}`:                                                                                     `b: agent 'c': max_consecutive_denial: unknown key (did you mean "max_consecutive_denials"?)`,
		`{"c": {"execution_policy": {"env": {"mode": "allowlist", "names": [], "include_safe_env_var": true}}}}`:                   `b: agent 'c': execution_policy.env.include_safe_env_var: unknown key (did you mean "include_safe_env_vars"?)`,
		`{"c": {"tools": [{"type": "agent_toolset", "configs": [{"name": "bash", "permision_policy": {"type": "always_ask"}}]}]}}`: `b: agent 'c': tools[0].configs[0].permision_policy: unknown key (did you mean "permission_policy"?)`,
		`{"c": {"mcp_servers": [{"name": "s", "uri": "https://x"}]}}`:                                                              `b: agent 'c': mcp_servers[0].uri: unknown key (did you mean "url"?)`,
		`{"c": {"colour": "blue"}}`:                                                                                                `b: agent 'c': colour: unknown key; the keys known here are`,
		`{"c": {"execution_policy": {"network": "off"}}}`:                                                                          `b: agent 'c': execution_policy.network: "off" is not "none"`,
	} {
		_, err := validateAgents(agentsBundle(t, agents), nil, map[string]Definition{}, false)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", agents, err, want)
		}
	}
	defs := map[string]Definition{}
	warnings, err := validateAgents(agentsBundle(t, `{"c": {
		"x-owner": "team-a", "name": "Coder", "model": "claude", "description": "d", "system": "be kind", "metadata": {"k": "v"},
		"asks_via_client": true, "allow_sampling": false,
		"execution_policy": {"x-note": 1, "network": "none", "read_paths": ["/srv"], "confinement": "trusted"},
		"guardrails": {"network": "none", "x-ticket": "SEC-1"}}}`), nil, defs, false)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("x- and descriptive keys: %v %q", err, warnings)
	}
	if defs["c"].Policy == nil || len(*defs["c"].Policy.ReadPaths) != 1 || defs["c"].Policy.Confinement != "trusted" {
		t.Errorf("decoded: %+v", defs["c"].Policy)
	}
}
