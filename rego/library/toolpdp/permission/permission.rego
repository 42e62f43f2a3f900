# Package toolpdp.permission is the permission axis: may this tool
# run at all?
#
# input.agent is the agent's entry of data.toolpdp.index.agents, where every
# tool the definition names already has its reason. What is left per call is
# one chain: each `else` below is one step of the precedence, and only the
# steps up to the first that applies are evaluated.
package toolpdp.permission

import rego.v1

# Custom tools may also arrive under the server the tables name for them
# (custom_tool_server): as mcp__<that server>__<name>, or with that server.
custom_server := data.toolpdp.tables.custom_tool_server

# reason is the permission axis's one contributing rule. The tool's name is
# made canonical first (tool, below): a request that contradicts itself or
# a malformed mcp__ name is refused before any step of the chain.
reason := deny("tool_name_server_mismatch", concat("", ["tool name '", input.tool_name, "' names MCP server '", tool.named_server, "' but the request's server is '", input.server, "': the request contradicts itself, so it is refused"])) if {
	tool.kind == "mismatch"
} else := deny("tool_name", concat("", ["tool name '", input.tool_name, "' starts with mcp__ but is not of the form mcp__<server>__<tool>"])) if {
	not tool
} else := deny("unknown_agent", concat("", ["unknown agent '", input.agent_id, "': no agent definition with that id is loaded"])) if {
	not input.agent
} else := r if {
	# Decided ahead, once per bundle, by this very chain (toolpdp.index).
	r := input.agent.decided[input.category][tool.server][tool.name]
} else := allow(concat("", ["custom[", tool.name, "]"]), concat("", [tool.name, " is a custom tool of agent '", input.agent_id, "': the application handles it"])) if {
	# Step 1: a declared custom tool, bare or under the custom-tool server.
	input.agent.custom[tool.name]
	tool.server in {"", custom_server}
} else := deny("mcp_servers", concat("", ["MCP server '", tool.server, "' is not declared for agent '", input.agent_id, "': its tools are refused (tool ", tool.full, ")"])) if {
	# Step 2: an undeclared MCP server is refused outright.
	tool.kind == "mcp"
	not input.agent.servers[tool.server]
} else := toolset_off if {
	# Step 3: the tool's toolset is off.
	not toolset
} else := r if {
	# Steps 3-5: the definition names this tool (configs or safety_overrides).
	r := toolset.named[tool.name]
} else := deny(concat("", [toolset_name(tool.server), ".default_config"]), concat("", [tool.name, " is not enabled for agent '", input.agent_id, "': its toolset is off by default and no configs entry enables it"])) if {
	toolset.default_enabled == false
	not toolset.configured[tool.name]
} else := {"axis": "permission", "rule": d.rule, "effect": d.effect, "message": concat("", [tool.name, d.suffix])} if {
	# Step 6: the toolset's default_config.
	d := toolset.default
	d != null
} else := by_category(concat("", ["builtin_categories[", tool.name, "]"]), tool.name, data.toolpdp.tables.builtin_categories[tool.name]) if {
	# Step 7: a built-in tool of the library's table has the table's category;
	# the caller cannot reclassify it (only safety_overrides can)...
	tool.kind == "builtin"
} else := by_category(concat("", ["category[", input.category, "]"]), tool.name, input.category) if {
	# ...any other tool the request's category.
	input.category != ""
} else := allow("agent_toolset.default", concat("", [tool.name, " runs: the built-in toolset allows by default"])) if {
	# Step 8: the toolset's defaults; unfamiliar MCP tools ask.
	tool.kind == "builtin"
} else := ask(concat("", [toolset_name(tool.server), ".default"]), concat("", [tool.full, " needs a person's confirmation: MCP toolsets ask by default"]))

# tool is the call's canonical name: kind "mcp" or "builtin", the server, the
# bare name the server reports and the full name (mcp__<server>__<tool> for
# MCP tools). mcp__S__X with server "" or "S" is tool X of server S; with any
# other server the request contradicts itself (kind "mismatch"). Undefined
# for a name that starts with mcp__ but does not split into a non-empty
# server and tool.
tool := mcp(input.server, input.tool_name) if {
	input.server != ""
	not startswith(input.tool_name, "mcp__")
} else := mcp(input.server, rest) if {
	# The full name of a server whose own name may hold "__".
	input.server != ""
	startswith(input.tool_name, server_prefix(input.server))
	rest := substring(input.tool_name, count(server_prefix(input.server)), -1)
	rest != ""
} else := {"kind": "builtin", "server": "", "name": input.tool_name, "full": input.tool_name} if {
	not startswith(input.tool_name, "mcp__")
} else := mcp(parts[0], parts[1]) if {
	parts := split_mcp_name(input.tool_name)
	input.server in {"", parts[0]}
} else := {"kind": "mismatch", "named_server": parts[0]} if {
	parts := split_mcp_name(input.tool_name)
}

mcp(server, name) := {"kind": "mcp", "server": server, "name": name, "full": concat("", [server_prefix(server), name])}

server_prefix(server) := concat("", ["mcp__", server, "__"])

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

# toolset is the agent's toolset that tool belongs to; undefined when off.
toolset := input.agent.builtin if {
	tool.kind == "builtin"
	input.agent.builtin != null
} else := input.agent.mcp[tool.server] if {
	tool.kind == "mcp"
}

# toolset_name names a toolset in reasons: the built-in one (server "") or a
# server's; toolpdp.index names its reasons with it too.
toolset_name("") := "agent_toolset"

toolset_name(server) := concat("", ["mcp_toolset[", server, "]"]) if server != ""

toolset_off := deny(toolset_name(tool.server), concat("", ["built-in tool ", tool.name, " is not enabled for agent '", input.agent_id, "': the agent has no agent_toolset"])) if {
	tool.kind == "builtin"
} else := deny(toolset_name(tool.server), concat("", ["tool ", tool.full, " is not enabled for agent '", input.agent_id, "': the agent has no mcp_toolset for server '", tool.server, "'"]))

# The helpers below build the axis's reasons; toolpdp.index uses them too.

by_category(rule, name, "SAFE") := allow(rule, concat("", [name, " runs: ", category_source(rule), " is SAFE"]))

by_category(rule, name, "ASK") := ask(rule, concat("", [name, " needs a person's confirmation (", category_source(rule), " is ASK)"]))

# category_source names what classified the tool: safety_overrides[T], the
# library's builtin_categories[T], or the request's category.
category_source(rule) := "the request's category" if startswith(rule, "category[")

else := rule

allow(rule, msg) := {"axis": "permission", "rule": rule, "effect": "allow", "message": msg}

ask(rule, msg) := {"axis": "permission", "rule": rule, "effect": "ask", "message": msg}

deny(rule, msg) := {"axis": "permission", "rule": rule, "effect": "deny", "message": msg}
