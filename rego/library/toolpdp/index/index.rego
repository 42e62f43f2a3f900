# Package toolpdp.index turns agent definitions (SPEC §2) into lookup objects.
#
# toolpdp evaluates data.toolpdp.index.agents once per bundle load and hands
# each decision its agent's entry as input.agent, so no request scans a
# definition's arrays; a session pins that entry (SPEC §6).
package toolpdp.index

import rego.v1

agents[id] := normalize(def) if some id, def in data.agents

# normalize is the lookup form of one agent definition.
normalize(def) := {
	"version": object.get(def, "version", 0),
	"permission_callback": object.get(def, "permission_callback", true),
	"max_consecutive_denials": object.get(def, "max_consecutive_denials", 5),
	"custom": {t.name: true | some t in tools(def); t.type == "custom"},
	"servers": {s.name: true | some s in object.get(def, "mcp_servers", [])},
	"agent_toolset": agent_toolset(def),
	"mcp_toolsets": {t.mcp_server_name: toolset(t) | some t in tools(def); t.type == "mcp_toolset"},
	"safety_overrides": object.get(def, "safety_overrides", {}),
}

# tools is the definition's tools array; absent, it is seed 000's shape: the
# built-in toolset plus an MCP toolset for each declared server, unconfigured.
tools(def) := def.tools

tools(def) := array.concat(
	[{"type": "agent_toolset"}],
	[{"type": "mcp_toolset", "mcp_server_name": s.name} | some s in object.get(def, "mcp_servers", [])],
) if not "tools" in object.keys(def)

agent_toolset(def) := toolset(t) if {
	some t in tools(def)
	t.type == "agent_toolset"
} else := null

# toolset is one toolset's policies: "" where a policy is not set.
toolset(t) := {
	"default": object.get(t, ["default_config", "permission_policy", "type"], ""),
	"default_enabled": object.get(t, ["default_config", "enabled"], true),
	"configs": {c.name: config(c) | some c in object.get(t, "configs", [])},
}

config(c) := {
	"enabled": object.get(c, "enabled", true),
	"policy": object.get(c, ["permission_policy", "type"], ""),
}
