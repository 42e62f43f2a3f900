package toolpdp.guardrails_test

import data.toolpdp.guardrails
import rego.v1

agent := {"guardrails": {"deny_commands": ["curl"], "ask_commands": ["git push"]}}

# cmd is envguard's analysis as Go hands it over: the matching is Go's, the
# reasons are these rules'.
cmd(fields) := object.union({"leaves": [], "matches": [], "unseen": [], "error": "", "missing": false, "guarded": true}, fields)

match(list, rule, argv, certain) := {"list": list, "rule": rule, "argv": argv, "certain": certain}

reasons(inp) := rs if {
	rs := guardrails.reasons with input as object.union({"agent_id": "a", "tool_name": "Bash", "paths": [], "guardrails": guardrails.merged(agent.guardrails)}, inp)
}

test_certain_deny_match_denies if {
	some r in reasons({"command": cmd({"matches": [match("deny", "curl", ["curl", "x"], true)]})})
	r.effect == "deny"
	r.rule == "deny_commands"
}

test_uncertain_deny_match_asks if {
	rs := reasons({"command": cmd({"matches": [match("deny", "rm -rf", ["rm", "$f"], false)]})})
	count(rs) == 1
	some r in rs
	r.effect == "ask"
	r.rule == "deny_commands"
}

test_ask_match_asks if {
	some r in reasons({"command": cmd({"matches": [match("ask", "git push", ["git", "push"], true)]})})
	r.effect == "ask"
	r.rule == "ask_commands"
	count(reasons({"command": cmd({})})) == 0
}

test_merged_rules_concatenate_global_and_agent if {
	g := guardrails.merged(agent.guardrails) with data.guardrails as {"deny_commands": ["wget"]}
	g.deny_commands == ["wget", "curl"]
	g.ask_commands == ["git push"]
}

test_unseen_execution_asks_when_guarded if {
	u := {"construct": "eval", "text": "eval x"}
	some r in reasons({"command": cmd({"unseen": [u]})})
	r.effect == "ask"
	r.rule == "unseen_execution"
	contains(r.message, "eval")
	count(reasons({"command": cmd({"unseen": [u], "guarded": false})})) == 0
}

test_uncheckable_command_asks_when_guarded if {
	some r in reasons({"command": cmd({"error": "command: unterminated quote"})})
	r.effect == "ask"
	r.rule == "unseen_execution"
	count(reasons({"command": cmd({"error": "x", "guarded": false})})) == 0
}

test_missing_command_asks_when_guarded if {
	some r in reasons({"tool_name": "exec_command", "command": cmd({"missing": true})})
	r.effect == "ask"
	contains(r.message, "exec_command")
	count(reasons({"command": cmd({"missing": true, "guarded": false})})) == 0
}

# toolpdp names the protected name a path names (p.protected), comparing
# names in Go as file systems do; here only what follows from it is tested.
write(raw, protected) := {"arg": "file_path", "access": "write", "raw": raw, "resolved": "", "error": "", "error_kind": "", "protected": protected}

read(raw, protected) := object.union(write(raw, protected), {"access": "read"})

test_protected_write_is_denied if {
	rs := reasons({"tool_name": "Write", "paths": [write("src/.gi\u200ct/config", ".git")]})
	count(rs) == 1
	some r in rs
	r.rule == "protected_paths"
	r.effect == "deny"
	startswith(r.message, "writing")
	contains(r.message, `".git"`)
	count(reasons({"tool_name": "Write", "paths": [write("src/main.c", "")]})) == 0
}

test_protected_read_is_denied if {
	some r in reasons({"tool_name": "Read", "paths": [read(".e\u200cnv", ".env")]})
	r.rule == "protected_paths"
	startswith(r.message, "reading")
	count(reasons({"tool_name": "Read", "paths": [read("README", "")]})) == 0
}

test_search_glob_that_could_match_is_denied if {
	some r in reasons({"tool_name": "Grep", "paths": [], "globs": [{"arg": "glob", "raw": ".e*", "protected": ".env"}]})
	startswith(r.message, "searching")
	count(reasons({"tool_name": "Grep", "paths": [], "globs": [{"arg": "glob", "raw": "*.go", "protected": ""}]})) == 0
}

# The names in force: the library's bind writes, protected_paths entries
# reads and writes, and the library's can be switched off.
test_protected_names_in_force if {
	g := guardrails.merged({"protected_paths": [".env"]})
	{".git", ".claude", ".codex", ".mcp.json", ".env"} == {n | some n in g.protected}
	g.protected_reads == [".env"]
	off := guardrails.merged({"protect_vcs_and_agent_config": false, "protected_paths": [".env"]})
	off.protected == [".env"]
	global := guardrails.merged({}) with data.guardrails as {"protected_paths": ["/etc"], "protect_vcs_and_agent_config": false}
	global.protected == ["/etc"]
	global.protected_reads == ["/etc"]
}

# The owners' guardrail rules, as toolpdp hands them over: each shape OPA
# users write becomes reasons; any other value is a deny.
owned(effect, value) := rs if {
	rs := guardrails.reasons with input as {"agent_id": "a", "tool_name": "Write", "paths": [], "guardrails": guardrails.merged({})}
		with data.toolpdp.owned_guardrails.rules as {{"rule": "guardrails.team.x", "effect": effect, "value": value}}
}

test_owned_set_of_strings if {
	owned("deny", {"no writes", "not today"}) == {
		{"axis": "guardrail", "rule": "guardrails.team.x", "effect": "deny", "message": "no writes"},
		{"axis": "guardrail", "rule": "guardrails.team.x", "effect": "deny", "message": "not today"},
	}
}

test_owned_object_keyed_by_message if {
	owned("ask", {"confirm this write": true}) == {{"axis": "guardrail", "rule": "guardrails.team.x", "effect": "ask", "message": "confirm this write"}}
}

test_owned_objects_with_msg if {
	rs := owned("deny", {{"msg": "gatekeeper says no", "details": {"k": 1}}})
	rs == {{"axis": "guardrail", "rule": "guardrails.team.x", "effect": "deny", "message": "gatekeeper says no"}}
}

test_owned_array_of_strings if {
	count(owned("deny", ["a", "b"])) == 2
}

test_owned_boolean_true_names_the_rule if {
	some r in owned("deny", true)
	r.effect == "deny"
	r.message == "denied by guardrail guardrails.team.x"
	some a in owned("ask", true)
	a.effect == "ask"
	contains(a.message, "guardrails.team.x")
}

test_owned_boolean_false_and_empty_set_say_nothing if {
	owned("deny", false) == set()
	owned("deny", set()) == set()
	owned("ask", {}) == set()
}

test_owned_string if {
	owned("deny", "frozen") == {{"axis": "guardrail", "rule": "guardrails.team.x", "effect": "deny", "message": "frozen"}}
	some r in owned("deny", "")
	r.message == "denied by guardrail guardrails.team.x"
}

test_owned_other_shapes_deny if {
	every v in [1, null, {1, 2}, {{"message": "no msg key"}}, [{"msg": 3}], {1: true}] {
		some r in owned("ask", v)
		r.rule == "guardrail_error"
		r.effect == "deny"
		contains(r.message, "guardrails.team.x")
	}
}

# A confined call: its agent trusts confined calls, the execution binds
# files (read and write roots, none holding a home) and the network.
boxed := {
	"confinement": {"mode": "trusted", "confined": true, "homes": ["/home/u"]},
	"scope": {"read": ["/w/p"], "write": ["/w/p"]},
	"policy": {"network": "none"},
}

deny_only := {"guardrails": guardrails.merged({"deny_commands": ["curl"], "protected_paths": [".env"]})}

unseen_gs := {"command": cmd({"unseen": [{"construct": "a script read from stdin", "text": "gs -q -"}]})}

test_confined_unseen_is_allowed_naming_the_construct if {
	rs := reasons(object.union_n([boxed, deny_only, unseen_gs]))
	count(rs) == 1
	some r in rs
	r.rule == "confined"
	r.effect == "allow"
	contains(r.message, "a script read from stdin")
}

test_unseen_stays_an_ask_unless_every_effect_is_bound if {
	every change in [
		{"confinement": {"mode": "trusted", "confined": false, "homes": []}},
		{"confinement": {"mode": "off", "confined": false, "homes": []}},
		{"scope": {"write": ["/w/p"]}},
		{"scope": {"read": ["/w/p"]}},
		{"scope": {"read": ["/"], "write": ["/"]}},
		{"scope": {"read": ["/w/p"], "write": ["/home"]}},
		{"scope": {"read": ["/w/p"], "write": ["/home/u"]}},
		{"policy": {}},
		{"guardrails": guardrails.merged({"deny_commands": ["curl"], "ask_commands": ["git push"]})},
	] {
		rs := reasons(replaced(object.union_n([boxed, deny_only, unseen_gs]), change))
		some r in rs
		r.rule == "unseen_execution"
		r.effect == "ask"
		not confined_reason(rs)
	}
}

# replaced is base with each key of change replaced whole, not merged.
replaced(base, change) := object.union(object.remove(base, object.keys(change)), change)

confined_reason(rs) if {
	some r in rs
	r.rule == "confined"
}

test_confined_write_root_below_home_is_bound if {
	rs := reasons(replaced(object.union_n([boxed, deny_only, unseen_gs]), {"scope": {"read": ["/home/u/p"], "write": ["/home/u/p"]}}))
	confined_reason(rs)
	not unseen_reason(rs)
}

unseen_reason(rs) if {
	some r in rs
	r.rule == "unseen_execution"
}

test_confined_network_rules_bind_the_network if {
	rs := reasons(object.union_n([boxed, deny_only, unseen_gs, {"policy": {"network": "rules"}}]))
	confined_reason(rs)
}

test_confined_keeps_deny_commands_as_spelt if {
	rs := reasons(object.union_n([boxed, deny_only, {"command": cmd({"matches": [match("deny", "curl", ["curl", "x"], true)]})}]))
	some r in rs
	r.rule == "deny_commands"
	r.effect == "deny"
}

tree_read := {"access": "read", "word": ".", "name": ".env", "what": "grep reading", "text": "grep -rn TODO .", "certain": false, "tree": true}

test_confined_recursive_read_reaching_a_protected_entry_is_allowed if {
	rs := reasons(object.union_n([boxed, deny_only, {"command": cmd({"protected": [tree_read]})}]))
	count(rs) == 1
	some r in rs
	r.rule == "confined"
	r.effect == "allow"
	contains(r.message, ".env")

	# ask_commands do not matter to a read the kernel masks
	with_ask := {"guardrails": guardrails.merged({"ask_commands": ["git push"], "protected_paths": [".env"]})}
	confined_reason(reasons(replaced(object.union_n([boxed, deny_only, {"command": cmd({"protected": [tree_read]})}]), with_ask)))
}

test_named_protected_read_and_unconfined_tree_read_still_ask if {
	named := object.union(tree_read, {"word": ".env", "tree": false, "certain": true})
	some r in reasons(object.union_n([boxed, deny_only, {"command": cmd({"protected": [named]})}]))
	r.rule == "protected_paths"
	r.effect == "ask"
	unconfined := {"confinement": {"mode": "trusted", "confined": false, "homes": []}}
	some a in reasons(replaced(object.union_n([boxed, deny_only, {"command": cmd({"protected": [tree_read]})}]), unconfined))
	a.rule == "protected_paths"
	a.effect == "ask"
	write := object.union(tree_read, {"access": "write", "name": ".git"})
	some w in reasons(object.union_n([boxed, deny_only, {"command": cmd({"protected": [write]})}]))
	w.rule == "protected_paths"
}
