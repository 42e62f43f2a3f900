package toolpdp.arguments_test

import data.toolpdp.arguments
import data.toolpdp.decision
import data.toolpdp.guardrails
import data.toolpdp.index
import rego.v1

result(def, req) := r if {
	r := decision.result with input as object.union(
		{"agent_id": "a", "server": "", "category": "", "args": {}, "env": {}, "paths": [], "agent": index.normalize("a", def), "guardrails": guardrails.merged(object.get(def, "guardrails", {}))},
		req,
	)
}

allow_all := {
	"tools": [
		{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}},
		{"type": "mcp_toolset", "mcp_server_name": "ev", "default_config": {"permission_policy": {"type": "always_allow"}}},
		{"type": "custom", "name": "lookup"},
	],
	"mcp_servers": [{"name": "ev"}],
}

too_long := {"arg": "message", "keyword": "maxLength", "message": "argument \"message\": maxLength 10 exceeded (25 characters)"}

test_a_broken_constraint_denies if {
	r := result(allow_all, {"tool_name": "echo", "server": "ev", "arguments": {"toolset": [too_long]}})
	r.decision == "deny"
	[x.rule | some x in r.reasons] == ["mcp_toolset[ev].default_config", "argument_constraint"]
	r.reasons[1].axis == "arguments"
	contains(r.message, "argument \"message\": maxLength 10 exceeded")
}

test_a_kept_constraint_decides_as_before if {
	r := result(allow_all, {"tool_name": "echo", "server": "ev", "arguments": {"toolset": []}})
	r == result(allow_all, {"tool_name": "echo", "server": "ev"})
	r.decision == "allow"
}

# A constraint never loosens: an asked tool whose arguments keep to its
# constraints is still asked, and one that breaks them is denied.
test_constraints_only_tighten if {
	ask_all := {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}
	result(ask_all, {"tool_name": "WebFetch", "arguments": {"toolset": []}}).decision == "ask"
	result(ask_all, {"tool_name": "WebFetch", "arguments": {"toolset": [too_long]}}).decision == "deny"
}

# A custom tool bypasses every policy but its own declaration's constraints;
# its toolset's constraints are not its.
test_a_custom_tool_meets_its_own_constraints if {
	r := result(allow_all, {"tool_name": "lookup", "arguments": {"custom": [too_long], "toolset": []}})
	r.decision == "deny"
	[x.rule | some x in r.reasons] == ["custom[lookup]", "argument_constraint"]
	result(allow_all, {"tool_name": "lookup", "arguments": {"toolset": [too_long]}}).decision == "allow"
}

test_a_toolset_tool_does_not_meet_a_custom_tools_constraints if {
	result(allow_all, {"tool_name": "Read", "arguments": {"custom": [too_long]}}).decision == "allow"
}

# With nobody to ask, a broken constraint is still a deny.
test_no_callback_still_denies if {
	nocb := object.union(allow_all, {"permission_callback": false})
	result(nocb, {"tool_name": "echo", "server": "ev", "arguments": {"toolset": [too_long]}}).decision == "deny"
}

# A refusal of the permission axis stays the only reason.
test_a_permission_deny_stops_first if {
	r := result(allow_all, {"tool_name": "echo", "server": "other", "arguments": {"toolset": [too_long]}})
	[x.rule | some x in r.reasons] == ["mcp_servers"]
}

test_one_reason_per_broken_argument if {
	bad_url := {"arg": "url", "keyword": "pattern", "message": "argument \"url\": does not match pattern \"^https://docs\\\\.\""}
	rs := arguments.reasons with input as {"agent_id": "a", "tool_name": "WebFetch", "server": "", "category": "", "agent": index.normalize("a", allow_all), "arguments": {"toolset": [too_long, bad_url]}}
	count(rs) == 2
}
