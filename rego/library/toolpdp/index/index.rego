# Package toolpdp.index turns agent definitions and guardrail data
# into lookup objects.
#
# toolpdp evaluates data.toolpdp.index once per bundle load, never per
# request. A decision gets its agent's entry as input.agent (a session pins
# that entry) and the agent's guardrails, from the newest bundle, as
# input.guardrails. Everything that depends only on a definition — each
# configured tool's reason and message included — is worked out here.
package toolpdp.index

import data.toolpdp.guardrails as guardrail
import data.toolpdp.permission
import rego.v1

agents[id] := object.union(entry, {"decided": decided(id, entry, def)}) if {
	some id, def in data.agents
	entry := normalize(id, def)
}

guardrails[id] := guardrail.merged(object.get(def, "guardrails", {})) if some id, def in data.agents

# own_guardrails[id] is the agent's own guardrails key alone, in the same
# form: a session pinned to this definition keeps these beside the newest
# bundle's guardrails, so a reload never loosens a running session.
own_guardrails[id] := g if {
	some id, def in data.agents
	g := guardrail.merged(object.get(def, "guardrails", {})) with data.guardrails as {}
}

# global_guardrails are the guardrails of a request naming no known agent.
global_guardrails := guardrail.merged({})

# normalize is the lookup form of one agent definition.
normalize(id, def) := {
	"version": object.get(def, "version", 0),
	"permission_callback": object.get(def, "permission_callback", true),
	"custom": {t.name: true | some t in tools(def); t.type == "custom"},
	"servers": {s.name: true | some s in object.get(def, "mcp_servers", [])},
	"builtin": builtin_toolset(id, def),
	"mcp": {t.mcp_server_name: toolset(id, def, t, t.mcp_server_name) | some t in tools(def); t.type == "mcp_toolset"},
}

# decided[category][server][tool] is the permission axis's reason for every
# tool this agent's definition or the built-in table names, for each request
# category ("", "SAFE", "ASK"), worked out by the real precedence chain here,
# once per bundle: a request for such a tool is one lookup. Other names take
# the chain (server "" is the built-in toolset).
decided(id, entry, def) := {category: {server: {name: r |
	some name in candidates(def, server)
	r := permission.reason with input as {"agent_id": id, "tool_name": name, "server": server, "category": category, "agent": entry}
} |
	some server in servers(def)
} |
	some category in {"", "SAFE", "ASK"}
}

servers(def) := {""} | {s.name | some s in object.get(def, "mcp_servers", [])}

# candidates are the tool names worth deciding ahead: custom tools, configs
# entries and overrides, and (built-in) the library's category table.
candidates(def, "") := (({t.name | some t in tools(def); t.type == "custom"} | object.keys(data.toolpdp.tables.builtin_categories)) | {c.name |
	some t in tools(def)
	t.type == "agent_toolset"
	some c in object.get(t, "configs", [])
}) | {k | some k, _ in object.get(def, "safety_overrides", {}); owned("", k)}

candidates(def, server) := {bare(server, c.name) |
	some t in tools(def)
	t.type == "mcp_toolset"
	t.mcp_server_name == server
	some c in object.get(t, "configs", [])
} | {bare(server, k) | some k, _ in object.get(def, "safety_overrides", {}); owned(server, k)} if server != ""

# tools is the definition's tools array; absent, it is the default shape: the
# built-in toolset plus an MCP toolset for each declared server, unconfigured.
tools(def) := def.tools

tools(def) := array.concat(
	[{"type": "agent_toolset"}],
	[{"type": "mcp_toolset", "mcp_server_name": s.name} | some s in object.get(def, "mcp_servers", [])],
) if not "tools" in object.keys(def)

builtin_toolset(id, def) := toolset(id, def, t, "") if {
	some t in tools(def)
	t.type == "agent_toolset"
} else := null

# toolset indexes one toolset (server "" for the built-in one):
#   named[tool]: the reason for a tool the definition names (the
#     permission axis's steps 3-5: a configs entry with enabled false or a policy, else a safety
#     override), keyed by the name a call arrives with (for MCP, the bare name);
#   configured[tool]: tools a configs entry enables;
#   default: step 6, the default_config policy ({rule, effect, suffix}), or null;
#   default_enabled: false when default_config turns the toolset off.
toolset(id, def, t, server) := {
	"named": named(id, def, t, server),
	"configured": {bare(server, c.name): true | some c in object.get(t, "configs", []); object.get(c, "enabled", true) != false},
	"default": default_policy(t, server),
	"default_enabled": object.get(t, ["default_config", "enabled"], true),
}

named(id, def, t, server) := {name: r |
	some name in names(def, t, server)
	r := named_reason(id, def, t, server, name)
}

# names are the tools a toolset's configs or the agent's overrides name.
names(def, t, server) := {bare(server, c.name) | some c in object.get(t, "configs", [])} | {bare(server, k) |
	some k, _ in object.get(def, "safety_overrides", {})
	owned(server, k)
}

# bare is the name a tool arrives with: for MCP, without mcp__<server>__.
bare(server, name) := substring(name, count(permission.server_prefix(server)), -1) if {
	server != ""
	startswith(name, permission.server_prefix(server))
} else := name

full(server, name) := name if server == ""

full(server, name) := concat("", [permission.server_prefix(server), name]) if server != ""

owned("", k) if not startswith(k, "mcp__")

owned(server, k) if {
	server != ""
	startswith(k, permission.server_prefix(server))
}

# configs_entry is the configs entry for a tool: by bare name, then by full name.
configs_entry(t, server, name) := c if {
	some c in object.get(t, "configs", [])
	c.name == name
} else := c if {
	some c in object.get(t, "configs", [])
	c.name == full(server, name)
}

named_reason(id, def, t, server, name) := permission.deny(
	sprintf("%s.configs[%s]", [permission.toolset_name(server), c.name]),
	sprintf("%s is disabled for agent '%s' (enabled: false): do not call it", [name, id]),
) if {
	c := configs_entry(t, server, name)
	c.enabled == false
} else := policy(sprintf("%s.configs[%s]", [permission.toolset_name(server), c.name]), name, c.permission_policy.type) if {
	c := configs_entry(t, server, name)
	c.permission_policy.type
} else := permission.by_category(sprintf("safety_overrides[%s]", [full(server, name)]), name, def.safety_overrides[full(server, name)])

default_policy(t, server) := {
	"rule": sprintf("%s.default_config", [permission.toolset_name(server)]),
	"effect": effects[t.default_config.permission_policy.type],
	"suffix": suffix(t.default_config.permission_policy.type, sprintf("%s.default_config", [permission.toolset_name(server)])),
} if {
	t.default_config.permission_policy.type
} else := null

effects := {"always_allow": "allow", "always_ask": "ask"}

suffix("always_allow", rule) := allow_suffix(rule)

suffix("always_ask", rule) := ask_suffix(rule)

allow_suffix(rule) := sprintf(" runs: %s is always_allow", [rule])

ask_suffix(rule) := sprintf(" needs a person's confirmation (%s: always_ask)", [rule])

policy(rule, name, "always_allow") := permission.allow(rule, concat("", [name, allow_suffix(rule)]))

policy(rule, name, "always_ask") := permission.ask(rule, concat("", [name, ask_suffix(rule)]))
