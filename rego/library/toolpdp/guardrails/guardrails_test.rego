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

write(raw, resolved) := {"arg": "file_path", "access": "write", "raw": raw, "resolved": resolved, "error": "", "error_kind": ""}

test_protected_paths_at_any_depth if {
	some r in reasons({"tool_name": "Write", "paths": [write("x", "/p/sub/.git/hooks/pre-commit")]})
	r.rule == "protected_paths"
	count(reasons({"tool_name": "Write", "paths": [write(".mcp.json", "/p/.mcp.json")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("a", "/p/.claude/settings.json")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("a", "/p/.gitignore")]})) == 0
	count(reasons({"tool_name": "Write", "paths": [write("a", "/p/my.git/x")]})) == 0
}

# The library's names bind writes only; protected_paths entries bind reads.
test_protected_paths_only_bind_writes if {
	p := object.union(write("a", "/p/.git/config"), {"access": "read"})
	count(reasons({"tool_name": "Read", "paths": [p]})) == 0
}

test_protection_switchable_per_agent if {
	off := guardrails.merged({"protect_vcs_and_agent_config": false, "protected_paths": [".env"]})
	rs := guardrails.reasons with input as {"agent_id": "a", "tool_name": "Write", "guardrails": off, "paths": [write("a", "/p/.git/x"), write(".env", "/p/.env")]}
	count(rs) == 1
	some r in rs
	contains(r.message, ".env")
}

test_absolute_protected_path if {
	g := guardrails.merged({}) with data.guardrails as {"protected_paths": ["/etc"]}
	rs := guardrails.reasons with input as {"agent_id": "a", "tool_name": "Write", "guardrails": g, "paths": [write("/etc/x", "/etc/x")]}
	count(rs) == 1
}

test_protected_names_compare_without_case if {
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/.GIT/config")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/src/.Git/hooks/pre-commit")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write(".MCP.json", "")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/.Claude/settings.json")]})) == 1
}

# A worktree's .git is a file: writing it is writing version-control metadata.
test_git_file_is_protected if {
	count(reasons({"tool_name": "Write", "paths": [write("/w/.git", "/w/.git")]})) == 1
}

listed := guardrails.merged({"protected_paths": [".env", "/etc/secrets/"]})

read(raw, resolved) := object.union(write(raw, resolved), {"access": "read"})

test_listed_protected_paths_bind_reads if {
	rs := reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("/p/.env", "/p/.env")]})
	some r in rs
	r.rule == "protected_paths"
	startswith(r.message, "reading")
	count(reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("x", "/p/.ENV")]})) == 1
	count(reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("x", "/etc/secrets/db")]})) == 1
	count(reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("x", "/p/.envrc")]})) == 0
}

glob_reasons(g) := reasons({"tool_name": "Grep", "guardrails": listed, "paths": [], "globs": [{"arg": "glob", "raw": g}]})

test_search_globs_may_not_match_listed_names if {
	count(glob_reasons(".env")) == 1
	count(glob_reasons("**/.env*")) == 1
	count(glob_reasons("sub/*.env")) == 1
	count(glob_reasons(".e[n]v")) == 1
	count(glob_reasons("*")) == 0
	count(glob_reasons("**/*.go")) == 0
}

# Both negation spellings are negation; a glob the matcher cannot read
# could match anything (and never stops evaluation).
test_search_globs_negation_and_malformed if {
	count(glob_reasons(".en[^x]")) == 1
	count(glob_reasons(".en[!x]")) == 1
	count(glob_reasons("[")) > 0
	count(glob_reasons("{a,b")) > 0
	count(glob_reasons("*.{ts,tsx}")) == 0
	count(glob_reasons("src/[ab]*.go")) == 0
}

# Spellings a forgiving file system reads as the protected name.
test_protected_names_as_windows_reads_them if {
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/src/.git./config")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/src/.git /config")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write(".mcp.json.", "")]})) == 1
	count(reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("x", "/p/.env::$DATA")]})) == 1
	count(reasons({"tool_name": "Read", "guardrails": listed, "paths": [read("x", "/p/.env.")]})) == 1
	count(reasons({"tool_name": "Write", "paths": [write("x", "/p/gitdir/config")]})) == 0
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
