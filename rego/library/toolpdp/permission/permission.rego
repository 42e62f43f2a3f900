# Package toolpdp.permission is the permission axis (SPEC §3): may this tool
# run at all? Each step of the precedence chain is one named rule, defined only
# where it applies; reason takes the first that is.
#
# input.agent is the agent's entry from data.toolpdp.index.agents.
package toolpdp.permission

import rego.v1

tables := data.toolpdp.tables

# The custom tools of seed 001 arrive as mcp__orca__<name> or server "orca".
custom_server := "orca"

# reason is the permission axis's one contributing rule.
reason := r if {
	r := unknown_agent
} else := r if {
	r := malformed_name
} else := r if {
	r := custom_tool
} else := r if {
	r := undeclared_server
} else := r if {
	r := toolset_off
} else := r if {
	r := configs_entry
} else := r if {
	r := safety_override
} else := r if {
	r := default_config
} else := r if {
	r := category
} else := r if {
	r := toolset_default
}

# tool classifies the call: kind "mcp" or "builtin", the bare name the server
# reports, and the full name (mcp__<server>__<tool> for MCP tools).
tool := {"kind": "mcp", "server": input.server, "name": input.tool_name, "full": sprintf("mcp__%s__%s", [input.server, input.tool_name])} if {
	input.server != ""
}

tool := {"kind": "mcp", "server": parts[0], "name": parts[1], "full": input.tool_name} if {
	input.server == ""
	parts := split_mcp_name(input.tool_name)
}

tool := {"kind": "builtin", "server": "", "name": input.tool_name, "full": input.tool_name} if {
	input.server == ""
	not startswith(input.tool_name, "mcp__")
}

# split_mcp_name splits mcp__<server>__<tool> at the first "__" after "mcp__":
# mcp__a__b__c is tool "b__c" of server "a".
split_mcp_name(name) := [server, rest] if {
	startswith(name, "mcp__")
	tail := substring(name, 5, -1)
	i := indexof(tail, "__")
	i > 0
	server := substring(tail, 0, i)
	rest := substring(tail, i + 2, -1)
	rest != ""
}

agent_name := input.agent_id

unknown_agent := deny("unknown_agent", sprintf("unknown agent '%s': no agent definition with that id is loaded", [agent_name])) if {
	not input.agent
}

malformed_name := deny("tool_name", sprintf("tool name '%s' starts with mcp__ but is not of the form mcp__<server>__<tool>", [input.tool_name])) if {
	not tool
}

custom_tool := allow(sprintf("custom[%s]", [tool.name]), sprintf("%s is a custom tool of agent '%s': the application handles it", [tool.name, agent_name])) if {
	tool.kind == "builtin"
	input.agent.custom[tool.name]
}

custom_tool := allow(sprintf("custom[%s]", [tool.name]), sprintf("%s is a custom tool of agent '%s': the application handles it", [tool.name, agent_name])) if {
	tool.kind == "mcp"
	tool.server == custom_server
	input.agent.custom[tool.name]
}

undeclared_server := deny("mcp_servers", sprintf("MCP server '%s' is not declared for agent '%s': its tools are refused (tool %s)", [tool.server, agent_name, tool.full])) if {
	tool.kind == "mcp"
	not input.agent.servers[tool.server]
}

# toolset is the agent's toolset that tool belongs to; undefined when off.
toolset := input.agent.agent_toolset if {
	tool.kind == "builtin"
	input.agent.agent_toolset != null
}

toolset := input.agent.mcp_toolsets[tool.server] if tool.kind == "mcp"

toolset_name := "agent_toolset" if tool.kind == "builtin"

toolset_name := sprintf("mcp_toolset[%s]", [tool.server]) if tool.kind == "mcp"

# config is the configs entry naming the tool: by bare name first, then for
# MCP tools by the full name.
config := c if {
	c := toolset.configs[tool.name]
} else := c if {
	tool.kind == "mcp"
	c := toolset.configs[tool.full]
}

config_name := n if {
	toolset.configs[tool.name]
	n := tool.name
} else := tool.full

toolset_off := deny(toolset_name, sprintf("built-in tool %s is not enabled for agent '%s': the agent has no agent_toolset", [tool.name, agent_name])) if {
	tool.kind == "builtin"
	not toolset
}

toolset_off := deny(toolset_name, sprintf("tool %s is not enabled for agent '%s': the agent has no mcp_toolset for server '%s'", [tool.full, agent_name, tool.server])) if {
	tool.kind == "mcp"
	not toolset
}

toolset_off := deny(sprintf("%s.configs[%s]", [toolset_name, config_name]), sprintf("%s is disabled for agent '%s' (enabled: false): do not call it", [tool.name, agent_name])) if {
	config.enabled == false
}

toolset_off := deny(sprintf("%s.default_config", [toolset_name]), sprintf("%s is not enabled for agent '%s': its toolset is off by default and no configs entry enables it", [tool.name, agent_name])) if {
	toolset.default_enabled == false
	not config
}

configs_entry := policy(sprintf("%s.configs[%s]", [toolset_name, config_name]), config.policy) if {
	config.enabled != false
	config.policy != ""
}

safety_override := category_effect(sprintf("safety_overrides[%s]", [tool.full]), input.agent.safety_overrides[tool.full])

default_config := policy(sprintf("%s.default_config", [toolset_name]), toolset.default) if {
	toolset.default != ""
}

category := category_effect(sprintf("category[%s]", [input.category]), input.category) if {
	input.category != ""
} else := category_effect(sprintf("builtin_categories[%s]", [tool.full]), tables.builtin_categories[tool.full])

# The toolset defaults of seed 001: unfamiliar MCP tools are not surprising.
toolset_default := allow("agent_toolset.default", sprintf("%s runs: the built-in toolset allows by default", [tool.name])) if {
	tool.kind == "builtin"
}

toolset_default := ask(sprintf("mcp_toolset[%s].default", [tool.server]), sprintf("%s needs a person's confirmation: MCP toolsets ask by default", [tool.full])) if {
	tool.kind == "mcp"
}

policy(rule, "always_allow") := allow(rule, sprintf("%s runs: %s is always_allow", [tool.name, rule]))

policy(rule, "always_ask") := ask(rule, sprintf("%s needs a person's confirmation (%s: always_ask)", [tool.name, rule]))

category_effect(rule, "SAFE") := allow(rule, sprintf("%s runs: category SAFE", [tool.name]))

category_effect(rule, "ASK") := ask(rule, sprintf("%s needs a person's confirmation (category ASK)", [tool.name]))

allow(rule, msg) := {"axis": "permission", "rule": rule, "effect": "allow", "message": msg}

ask(rule, msg) := {"axis": "permission", "rule": rule, "effect": "ask", "message": msg}

deny(rule, msg) := {"axis": "permission", "rule": rule, "effect": "deny", "message": msg}
