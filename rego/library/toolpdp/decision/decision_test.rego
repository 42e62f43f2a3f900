package toolpdp.decision_test

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

ask_all := {"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_ask"}}}]}

nocb := object.union(ask_all, {"permission_callback": false})

leaves(argvs) := {"leaves": [{"argv": a, "name": a[0], "dynamic": false} | some a in argvs], "error": ""}

test_allow_has_no_message if {
	r := result({}, {"tool_name": "Read"})
	r.decision == "allow"
	r.message == ""
	count(r.reasons) == 1
}

test_ask_message_is_for_a_person if {
	r := result(ask_all, {"tool_name": "Read"})
	r.decision == "ask"
	r.message == "Read needs a person's confirmation (agent_toolset.default_config: always_ask)"
}

# permission_callback false: the permission axis's ask runs unchecked.
test_no_callback_turns_permission_ask_into_allow if {
	r := result(nocb, {"tool_name": "Bash"})
	r.decision == "allow"
	r.reasons[0].effect == "allow"
	contains(r.reasons[0].message, "permission_callback is false, so it runs unchecked")
}

# ...but a guardrail's ask becomes deny: nobody can confirm it.
test_no_callback_turns_guardrail_ask_into_deny if {
	r := result(nocb, {"tool_name": "Bash", "command": {"leaves": [], "matches": [], "unseen": [], "error": "unterminated quote", "missing": false, "guarded": true}})
	r.decision == "deny"
	r.reasons[1].axis == "guardrail"
	r.reasons[1].effect == "deny"
}

# Most restrictive wins, and every contributing rule is listed in order.
test_deny_beats_ask_and_all_reasons_listed if {
	def := {"guardrails": {"deny_commands": ["curl"], "ask_commands": ["git push"]}}
	matches := [
		{"list": "ask", "rule": "git push", "argv": ["git", "push"], "certain": true},
		{"list": "deny", "rule": "curl", "argv": ["curl", "x"], "certain": true},
	]
	r := result(def, {"agent_id": "a", "tool_name": "Bash", "command": object.union(leaves([["git", "push"], ["curl", "x"]]), {"matches": matches})})
	r.decision == "deny"
	[x.axis | some x in r.reasons] == ["permission", "guardrail", "guardrail"]
	r.message == "command \"curl x\" is denied by guardrail deny_commands[\"curl\"]; do not run it, nor wrap, chain or disguise it"
}

# A refusal of the agent itself stops there: no guardrail is consulted.
test_custom_tool_skips_guardrails if {
	def := {"tools": [{"type": "custom", "name": "run"}], "guardrails": {"deny_commands": ["curl"]}}
	r := result(def, {"tool_name": "run", "command": leaves([["curl"]])})
	r.decision == "allow"
	count(r.reasons) == 1
}

test_unknown_agent_decision if {
	r := decision.result with input as {"agent_id": "ghost", "tool_name": "Read", "server": "", "category": "", "paths": []}
	r.decision == "deny"
	contains(r.message, "ghost")
}

# A guardrail package that tries to allow cannot: only deny and ask are read.
test_guardrail_allow_is_ignored if {
	r := result(ask_all, {"tool_name": "Read"}) with data.guardrails.lenient as {"allow": true, "deny": set()}
		with data.toolpdp.owned_guardrails.rules as {{"rule": "guardrails.lenient.deny", "effect": "deny", "value": set()}}
	r.decision == "ask"
}

test_guardrail_package_deny if {
	r := result({}, {"tool_name": "Read"}) with data.guardrails.team as {"deny": {"reading is frozen today"}}
		with data.toolpdp.owned_guardrails.rules as {{"rule": "guardrails.team.deny", "effect": "deny", "value": {"reading is frozen today"}}}
	r.decision == "deny"
	r.message == "reading is frozen today"
	r.reasons[1].rule == "guardrails.team.deny"
}

test_execution_only_for_shell_tools if {
	r := result({}, {"tool_name": "Read", "policy": {"cwd": "/p"}})
	r.execution == {}
	s := result({}, {"tool_name": "Bash", "policy": {"cwd": "/p"}, "env": {"A": "1"}})
	s.execution == {"cwd": "/p", "env": {"A": "1"}, "env_enforced": false, "read_only_names": data.toolpdp.tables.protected_names}
}

quiet_input(extra) := object.union({"guardrails": {"deny": {}, "ask": {}, "protected": [".git"], "packages": false}, "scope": {}, "paths": []}, extra)

test_quiet_call if {
	decision.quiet with input as quiet_input({"paths": [{"access": "read", "error_kind": "", "resolved": "/x", "protected": ""}]})
}

test_quiet_with_a_write_or_a_scope if {
	decision.quiet with input as quiet_input({"paths": [{"access": "write", "error_kind": "", "resolved": "/x/y", "protected": ""}], "scope": {"write": ["/p"]}})
}

test_not_quiet_with_a_command if {
	not decision.quiet with input as quiet_input({"command": {"leaves": [], "error": ""}})
}

test_not_quiet_with_a_protected_path if {
	not decision.quiet with input as quiet_input({"paths": [{"access": "write", "error_kind": "", "resolved": "/x/.git/y", "protected": ".git"}]})
}

test_not_quiet_with_a_protected_glob if {
	not decision.quiet with input as quiet_input({"globs": [{"arg": "glob", "raw": "*.env", "protected": ".env"}]})
}

test_not_quiet_with_guardrail_packages if {
	not decision.quiet with input as quiet_input({"guardrails": {"packages": true}})
}

# The quiet path gives the same document the full path would.
test_quiet_path_equals_full_path if {
	def := {}
	inp := {"agent_id": "a", "tool_name": "Read", "server": "", "category": "", "agent": index.normalize("a", def), "paths": [], "scope": {}}
	quick := decision.result with input as object.union(inp, {"guardrails": object.union(guardrails.merged({}), {"packages": false})})
	full := decision.result with input as object.union(inp, {"guardrails": object.union(guardrails.merged({}), {"packages": true})})
	quick == full
}

path_of(access, resolved, kind, protected) := {"arg": "file_path", "access": access, "raw": resolved, "resolved": resolved, "error": "", "error_kind": kind, "protected": protected}

file_call(tool, paths, scope) := {
	"agent_id": "a", "tool_name": tool, "server": "", "category": "", "env": {},
	"agent": index.normalize("a", {}), "paths": paths, "globs": [], "scope": scope,
	"guardrails": object.union(guardrails.merged({}), {"packages": false}),
}

# The quiet path gives the same document as combining all three axes,
# for calls inside and outside their scopes, reads and writes, asks and
# allows; it is taken only where no guardrail rule and no scope rule fires.
test_quiet_path_equals_combined if {
	calls := [
		file_call("Read", [path_of("read", "/p/a", "", "")], {"read": ["/p"]}),
		file_call("Read", [path_of("read", "/q/a", "", "")], {"read": ["/p"]}),
		file_call("Write", [path_of("write", "/p/src/a", "", "")], {"write": ["/p/src"]}),
		file_call("Write", [path_of("write", "/p/a", "", "")], {"write": ["/p/src"]}),
		file_call("Write", [path_of("write", "/p/src/.git/x", "", ".git")], {"write": ["/p/src"]}),
		file_call("Read", [path_of("read", "", "invalid", "")], {"read": ["/p"]}),
		file_call("Read", [path_of("read", "", "unresolved", "")], {"read": ["/p"]}),
		file_call("Read", [path_of("read", "/p/.env", "", ".env")], {"read": ["/p"]}),
		object.union(file_call("Grep", [path_of("read", "/p", "", "")], {"read": ["/p"]}), {"globs": [{"arg": "glob", "raw": ".env", "protected": ".env"}]}),
	]
	taken := [i |
		some i, c in calls
		decision.quiet with input as c
		count(data.toolpdp.scope.reasons) == 0 with input as c
	]
	taken == [0, 2]
	every c in calls {
		r := decision.result with input as c
		r == decision.combined with input as c
	}
}

# Confinement: a required agent denies a shell call not sent confined;
# a decision that relied on confinement says so in its execution.
confining(mode) := {
	"tools": [{"type": "agent_toolset", "default_config": {"permission_policy": {"type": "always_allow"}}}],
	"execution_policy": {"cwd": "/w/p", "read_paths": ["/w/p"], "write_paths": ["/w/p"], "network": "none", "confinement": mode},
	"guardrails": {"deny_commands": ["curl"]},
}

confined_call(mode, confined, command) := {
	"tool_name": "Bash",
	"policy": {"cwd": "/w/p", "read_paths": ["/w/p"], "write_paths": ["/w/p"], "network": "none"},
	"scope": {"read": ["/w/p"], "write": ["/w/p"]},
	"confinement": {"mode": mode, "confined": confined, "homes": ["/home/u"]},
	"command": object.union({"leaves": [], "matches": [], "unseen": [], "protected": [], "network": [], "network_uses": [], "error": "", "missing": false, "guarded": true}, command),
}

test_required_confinement_denies_an_unconfined_shell_call if {
	r := result(confining("required"), confined_call("required", false, {}))
	r.decision == "deny"
	some x in r.reasons
	x.rule == "confinement_required"
	contains(r.message, "must run confined")
	ok := result(confining("required"), confined_call("required", true, {}))
	ok.decision == "allow"
	ok.execution.confinement_required == true
}

test_a_decision_relying_on_confinement_says_so if {
	unseen := {"unseen": [{"construct": "eval", "text": "eval x"}]}
	r := result(confining("trusted"), confined_call("trusted", true, unseen))
	r.decision == "allow"
	r.execution.confinement_required == true
	plain := result(confining("trusted"), confined_call("trusted", true, {}))
	plain.decision == "allow"
	not plain.execution.confinement_required
	off := result(confining("off"), confined_call("off", false, unseen))
	off.decision == "ask"
	not off.execution.confinement_required
}
