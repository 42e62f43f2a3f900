package toolpdp.permission_test

import data.toolpdp.index
import data.toolpdp.permission
import rego.v1

# reason is the permission axis's answer for agent definition def.
reason(def, req) := r if {
	r := permission.reason with input as object.union(
		{"agent_id": "a", "server": "", "category": "", "args": {}, "env": {}, "paths": [], "agent": index.normalize("a", def)},
		req,
	)
}

seed001 := {
	"tools": [
		{
			"type": "agent_toolset",
			"default_config": {"permission_policy": {"type": "always_allow"}},
			"configs": [
				{"name": "bash", "permission_policy": {"type": "always_ask"}},
				{"name": "web_search", "enabled": false},
			],
		},
		{
			"type": "mcp_toolset", "mcp_server_name": "tickets",
			"configs": [{"name": "mcp__tickets__close_ticket", "permission_policy": {"type": "always_allow"}}],
		},
		{"type": "custom", "name": "lookup_order"},
	],
	"mcp_servers": [{"name": "tickets", "type": "url", "url": "https://mcp.example.com/tickets"}, {"name": "wiki"}],
	"safety_overrides": {"mcp__tickets__create_ticket": "SAFE", "Read": "ASK"},
}

# Step 1: custom tools bypass every policy, also as mcp__orca__ and server orca.
test_custom_tool_allows if {
	r := reason(seed001, {"tool_name": "lookup_order"})
	r.effect == "allow"
	r.rule == "custom[lookup_order]"
}

test_custom_tool_as_mcp_orca_name if {
	reason(seed001, {"tool_name": "mcp__orca__lookup_order"}).rule == "custom[lookup_order]"
}

test_custom_tool_as_server_orca if {
	reason(seed001, {"tool_name": "lookup_order", "server": "orca"}).effect == "allow"
}

test_custom_name_from_another_server_is_that_servers_tool if {
	r := reason(seed001, {"tool_name": "lookup_order", "server": "tickets"})
	r.rule == "mcp_toolset[tickets].default"
	r.effect == "ask"
}

test_undeclared_custom_under_orca_is_undeclared_server if {
	r := reason(seed001, {"tool_name": "mcp__orca__refund"})
	r.effect == "deny"
	contains(r.message, "'orca'")
}

# Step 2: an undeclared MCP server is refused outright, by either form.
test_undeclared_server_by_field if {
	r := reason(seed001, {"tool_name": "delete_project", "server": "billing"})
	r.effect == "deny"
	r.rule == "mcp_servers"
	r.message == "MCP server 'billing' is not declared for agent 'a': its tools are refused (tool mcp__billing__delete_project)"
}

test_undeclared_server_by_name if {
	reason(seed001, {"tool_name": "mcp__billing__delete_project"}).rule == "mcp_servers"
}

# Step 3: a toolset left off, or a configs entry with enabled false.
test_declared_server_without_toolset_is_off if {
	r := reason(seed001, {"tool_name": "edit_page", "server": "wiki"})
	r.effect == "deny"
	r.rule == "mcp_toolset[wiki]"
	contains(r.message, "no mcp_toolset for server 'wiki'")
}

test_builtin_without_agent_toolset_is_off if {
	r := reason({"tools": [{"type": "custom", "name": "x"}]}, {"tool_name": "Read"})
	r.effect == "deny"
	r.rule == "agent_toolset"
}

test_enabled_false_is_off if {
	r := reason(seed001, {"tool_name": "web_search"})
	r.effect == "deny"
	r.rule == "agent_toolset.configs[web_search]"
	contains(r.message, "web_search is disabled")
}

test_default_config_enabled_false_turns_the_toolset_off_by_default if {
	def := {"tools": [{"type": "agent_toolset", "default_config": {"enabled": false}, "configs": [{"name": "Read", "enabled": true}]}]}
	reason(def, {"tool_name": "Bash"}).effect == "deny"
	reason(def, {"tool_name": "Read"}).effect == "allow"
}

# Step 4: a configs entry, by bare name or by full MCP name.
test_configs_entry_by_bare_name if {
	r := reason(seed001, {"tool_name": "bash"})
	r.effect == "ask"
	r.rule == "agent_toolset.configs[bash]"
	r.message == "bash needs a person's confirmation (agent_toolset.configs[bash]: always_ask)"
}

test_configs_entry_by_full_mcp_name if {
	r := reason(seed001, {"tool_name": "close_ticket", "server": "tickets"})
	r.effect == "allow"
	r.rule == "mcp_toolset[tickets].configs[mcp__tickets__close_ticket]"
}

test_configs_entry_without_policy_falls_through if {
	def := {"tools": [{"type": "agent_toolset", "configs": [{"name": "Bash", "enabled": true}]}]}
	reason(def, {"tool_name": "Bash"}).rule == "builtin_categories[Bash]"
}

# Step 5: safety_overrides by full name, before default_config.
test_safety_override_safe if {
	r := reason(seed001, {"tool_name": "create_ticket", "server": "tickets"})
	r.effect == "allow"
	r.rule == "safety_overrides[mcp__tickets__create_ticket]"
}

test_safety_override_ask_beats_default_config if {
	r := reason(seed001, {"tool_name": "Read"})
	r.effect == "ask"
	r.rule == "safety_overrides[Read]"
}

# Step 6: the toolset's default_config.
test_default_config if {
	r := reason(seed001, {"tool_name": "Bash"})
	r.effect == "allow"
	r.rule == "agent_toolset.default_config"
}

test_mcp_default_config if {
	def := {"mcp_servers": [{"name": "t"}], "tools": [{"type": "mcp_toolset", "mcp_server_name": "t", "default_config": {"permission_policy": {"type": "always_allow"}}}]}
	reason(def, {"tool_name": "x", "server": "t"}).rule == "mcp_toolset[t].default_config"
}

# Step 7: the request's category, else the built-in table.
# A caller cannot reclassify a built-in of the table (builtins are
# shared and never mutated); it still classifies every other tool.
test_request_category_cannot_reclassify_a_builtin if {
	every name in ["Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Exec", "bash", "shell", "local_shell"] {
		r := reason({}, {"tool_name": name, "category": "SAFE"})
		r.effect == "ask"
		r.rule == concat("", ["builtin_categories[", name, "]"])
	}
	reason({}, {"tool_name": "Read", "category": "ASK"}).effect == "allow"
	reason({}, {"tool_name": "lookup_weather", "category": "SAFE"}).rule == "category[SAFE]"
	reason({}, {"tool_name": "lookup_weather", "category": "ASK"}).effect == "ask"
}

# safety_overrides, step 5, still reclassify a built-in.
test_safety_override_reclassifies_a_builtin if {
	reason({"safety_overrides": {"Bash": "SAFE"}}, {"tool_name": "Bash"}).effect == "allow"
}

test_builtin_table if {
	reason({}, {"tool_name": "Read"}).effect == "allow"
	reason({}, {"tool_name": "TodoWrite"}).effect == "allow"
	reason({}, {"tool_name": "WebFetch"}).effect == "ask"
	reason({}, {"tool_name": "Exec"}).rule == "builtin_categories[Exec]"
}

test_builtin_table_is_complete if {
	every name in ["Read", "LS", "Grep", "Glob", "NotebookRead", "TodoRead", "TodoWrite", "read", "ls", "grep", "glob"] {
		reason({}, {"tool_name": name}).effect == "allow"
	}
	every name in [
		"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash", "Exec", "WebFetch", "WebSearch",
		"write", "edit", "bash", "exec", "web_fetch", "web_search",
		"shell", "exec_command", "local_shell", "run_shell_command",
	] {
		reason({}, {"tool_name": name}).effect == "ask"
	}
}

test_names_compare_exactly if {
	# "READ" is not "Read": not in the table, so the toolset default applies.
	reason({}, {"tool_name": "READ"}).rule == "agent_toolset.default"
}

test_category_applies_to_mcp_tools if {
	def := {"mcp_servers": [{"name": "gh"}]}
	reason(def, {"tool_name": "list", "server": "gh", "category": "SAFE"}).effect == "allow"
}

# Step 8: toolset defaults: agent_toolset allows, mcp_toolset asks.
test_toolset_defaults if {
	def := {"mcp_servers": [{"name": "gh"}]}
	reason(def, {"tool_name": "lookup"}).rule == "agent_toolset.default"
	reason(def, {"tool_name": "lookup"}).effect == "allow"
	r := reason(def, {"tool_name": "create_issue", "server": "gh"})
	r.rule == "mcp_toolset[gh].default"
	r.effect == "ask"
}

# tools absent: the built-in toolset plus one MCP toolset per declared server.
test_tools_absent_gives_seed000_shape if {
	n := index.normalize("a", {"mcp_servers": [{"name": "gh"}]})
	n.builtin.default == null
	n.mcp.gh.default == null
	n.permission_callback == true
}

# Unknown agents are refused.
test_unknown_agent if {
	r := permission.reason with input as {"agent_id": "ghost", "tool_name": "Read", "server": "", "category": ""}
	r.effect == "deny"
	r.message == "unknown agent 'ghost': no agent definition with that id is loaded"
}

# mcp__a__b__c splits at the first "__" after "mcp__": server a, tool b__c.
test_name_splitting if {
	permission.split_mcp_name("mcp__a__b__c") == ["a", "b__c"]
	permission.split_mcp_name("mcp__github__create_issue") == ["github", "create_issue"]
	not permission.split_mcp_name("mcp__nodelimiter")
	not permission.split_mcp_name("mcp____tool")
	not permission.split_mcp_name("mcp__server__")
}

test_split_name_reaches_its_server if {
	def := {"mcp_servers": [{"name": "a"}], "tools": [{"type": "mcp_toolset", "mcp_server_name": "a", "configs": [{"name": "b__c", "permission_policy": {"type": "always_allow"}}]}]}
	reason(def, {"tool_name": "mcp__a__b__c"}).rule == "mcp_toolset[a].configs[b__c]"
}

test_malformed_mcp_name_is_denied if {
	r := reason({}, {"tool_name": "mcp__oops"})
	r.effect == "deny"
	r.rule == "tool_name"
}

# Canonical names: mcp__S__X with server "" or "S" is tool X of server S, and
# every step sees (server, bare name), whichever form the request used.
canon := {
	"tools": [
		{"type": "agent_toolset"},
		{
			"type": "mcp_toolset", "mcp_server_name": "tickets",
			"default_config": {"permission_policy": {"type": "always_allow"}},
			"configs": [
				{"name": "delete_ticket", "enabled": false},
				{"name": "mcp__tickets__purge", "permission_policy": {"type": "always_ask"}},
			],
		},
	],
	"mcp_servers": [{"name": "tickets"}, {"name": "a__b"}],
	"safety_overrides": {"mcp__tickets__close_ticket": "ASK"},
}

test_full_name_with_its_own_server_is_canonical if {
	every req in [
		{"tool_name": "mcp__tickets__delete_ticket", "server": "tickets"},
		{"tool_name": "mcp__tickets__delete_ticket"},
		{"tool_name": "delete_ticket", "server": "tickets"},
	] {
		r := reason(canon, req)
		r.effect == "deny"
		r.rule == "mcp_toolset[tickets].configs[delete_ticket]"
	}
	every req in [
		{"tool_name": "mcp__tickets__close_ticket", "server": "tickets"},
		{"tool_name": "close_ticket", "server": "tickets"},
		{"tool_name": "mcp__tickets__purge", "server": "tickets"},
		{"tool_name": "purge", "server": "tickets"},
	] {
		reason(canon, req).effect == "ask"
	}
}

test_contradicting_server_is_denied_naming_both if {
	r := reason(canon, {"tool_name": "mcp__evil__exfil", "server": "tickets"})
	r.effect == "deny"
	r.rule == "tool_name_server_mismatch"
	contains(r.message, "'evil'")
	contains(r.message, "'tickets'")

	# Before any step: even for an unknown agent, and a custom tool's server.
	reason(canon, {"tool_name": "mcp__orca__x", "server": "tickets"}).rule == "tool_name_server_mismatch"
}

test_malformed_mcp_names_are_denied if {
	every name in ["mcp__x", "mcp____x", "mcp__s__", "mcp__", "mcp__tickets__"] {
		r := reason(canon, {"tool_name": name})
		r.effect == "deny"
		r.rule == "tool_name"
	}
	reason(canon, {"tool_name": "mcp__tickets__", "server": "tickets"}).rule == "tool_name"
}

test_server_with_double_underscore_by_server_field if {
	# a__b is declared but has no mcp_toolset: its toolset is off.
	reason(canon, {"tool_name": "x", "server": "a__b"}).rule == "mcp_toolset[a__b]"
	reason(canon, {"tool_name": "mcp__a__b__x", "server": "a__b"}).rule == "mcp_toolset[a__b]"

	# Without the server field, mcp__a__b__x is tool b__x of server a.
	reason(canon, {"tool_name": "mcp__a__b__x"}).rule == "mcp_servers"
}

# The embedded default agent: SAFE built-ins run, everything else asks
# (unknown names and a caller's SAFE included), MCP is refused.
test_default_agent_is_safe if {
	def := data.agents["default"]
	every name, c in data.toolpdp.tables.builtin_categories {
		r := reason(def, {"tool_name": name})
		r.effect == {"SAFE": "allow", "ASK": "ask"}[c]
	}
	reason(def, {"tool_name": "some_new_tool"}).effect == "ask"
	reason(def, {"tool_name": "some_new_tool", "category": "SAFE"}).effect == "ask"
	reason(def, {"tool_name": "Edit", "category": "SAFE"}).effect == "ask"
	reason(def, {"tool_name": "mcp__github__create_issue"}).effect == "deny"
	reason(def, {"tool_name": "x", "server": "github"}).effect == "deny"
}
