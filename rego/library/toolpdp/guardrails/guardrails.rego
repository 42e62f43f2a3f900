# Package toolpdp.guardrails holds the guardrails the library ships and
# collects the ones security teams write in their own bundles. A
# guardrail only adds deny or ask reasons: it can tighten a decision, never
# relax one.
#
# input.guardrails is the agent's entry of data.toolpdp.index.guardrails
# (data.guardrails and the agent's own "guardrails" key, merged once per
# bundle), always from the newest bundle, never from a session's pinned
# definition: a security fix reaches running sessions at once.
#
# Rego: any package at or under data.guardrails may define deny (or
# violation) and ask, in any common shape; each message becomes a reason.
# toolpdp refuses at load a package defining none of them.
package toolpdp.guardrails

import data.toolpdp.text
import rego.v1

# Shell commands: input.command is envguard's analysis of a shell tool's
# command arguments. leaves are the programs it would run, each {argv, name}
# (name is argv[0] without its directory, behind every wrapper); matches are
# the agent's deny_commands and ask_commands rules that match a leaf,
# matched in Go beside the parser (program with any version suffix, options
# in any grouping and order, words anywhere); certain is false when a match
# needs a word known only at run time ($f, a glob), which asks, never denies.
reasons contains reason("deny_commands", "deny", sprintf("command %q is denied by guardrail deny_commands[%q]; do not run it, nor wrap, chain or disguise it", [text.clip(concat(" ", m.argv)), m.rule])) if {
	some m in input.command.matches
	m.list == "deny"
	m.certain
}

reasons contains reason("deny_commands", "ask", sprintf("command %q may be denied by guardrail deny_commands[%q] once its words are known at run time: a person must confirm it", [text.clip(concat(" ", m.argv)), m.rule])) if {
	some m in input.command.matches
	m.list == "deny"
	not m.certain
}

reasons contains reason("ask_commands", "ask", sprintf("command %q needs a person's confirmation (guardrail ask_commands[%q])", [text.clip(concat(" ", m.argv)), m.rule])) if {
	some m in input.command.matches
	m.list == "ask"
}

# What toolpdp cannot see is asked, never allowed, whenever a command rule
# applies (input.command.guarded): code run indirectly (eval, a script from
# stdin, inline interpreter code, an option that runs a command, a wrapper
# option it does not know, a program computed at run time), a command that
# cannot be parsed, and a shell-tool call with no command at all. With no
# command rule there is nothing to protect, and none of these is asked.
reasons contains reason("unseen_execution", "ask", sprintf("command %q runs code toolpdp cannot check (%s): a person must confirm it", [text.clip(u.text), u.construct])) if {
	input.command.guarded
	some u in input.command.unseen
	not held
}

# A call that will run confined (toolpdp exec, with the execution of this
# decision) is held by the kernel: what an unseen construct runs can reach
# only the files, network and processes the execution binds. So where the
# agent's definition trusts confined calls and the execution binds all of
# them, an unseen construct is allowed, and says so. A program asked about
# by name (ask_commands) is no effect the kernel can hold: with any, the
# construct stays an ask.
reasons contains reason("confined", "allow", sprintf("command %q runs code toolpdp cannot check (%s); it runs confined, so the kernel holds what it can reach", [text.clip(u.text), u.construct])) if {
	input.command.guarded
	some u in input.command.unseen
	held
}

# held: the call runs confined, trusted by its agent's definition, and
# its execution binds files, network and processes: read and write roots
# both set, no write root that is / or holds a home directory, no network
# (or network decided per connection), and no ask_commands in force.
held if {
	input.confinement.confined
	binds_files
	binds_network
	count(object.get(input.guardrails, "ask_commands", [])) == 0
}

binds_files if {
	is_array(input.scope.read)
	is_array(input.scope.write)
	every root in input.scope.write {
		not holds_home(root)
	}
}

# holds_home: the root is /, or a home directory is the root or below it.
holds_home(root) if trim_suffix(root, "/") == ""

holds_home(root) if {
	some home in input.confinement.homes
	below_or_at(home, root)
}

below_or_at(path, root) if path == root

below_or_at(path, root) if startswith(path, concat("", [trim_suffix(root, "/"), "/"]))

binds_network if network_forbidden

binds_network if input.policy.network == "rules"

reasons contains reason("unseen_execution", "ask", sprintf("the command cannot be checked (%s): a person must confirm it", [text.clip(input.command.error)])) if {
	input.command.guarded
	input.command.error != ""
}

reasons contains reason("unseen_execution", "ask", sprintf("%s was called with none of its command arguments, so what it runs cannot be checked: a person must confirm it", [input.tool_name])) if {
	input.command.guarded
	input.command.missing
}

# Protected paths: a write into version-control metadata or agent
# configuration (a .git directory or a worktree's .git file, .claude, ...) is
# denied even inside write_paths; the names listed in protected_paths (in
# data.guardrails or the agent's guardrails) bind reads as well (.env holds
# secrets). toolpdp compares the names in Go, as file systems compare them
# (Unicode case folding, the code points HFS+ ignores, Windows' trailing
# dots and streams), by the same code that judges a shell command's
# redirects and writing programs: p.protected is the name a path names,
# written or resolved, and g.protected the name a search glob could match
# (a segment with a literal character: ".env", "*.env", not "*").
reasons contains reason("protected_paths", "deny", sprintf("writing %q is denied: %q is a protected path (version control or agent configuration)", [text.clip(p.raw), p.protected])) if {
	some p in input.paths
	p.access == "write"
	p.protected != ""
}

reasons contains reason("protected_paths", "deny", sprintf("reading %q is denied: %q is a protected path", [text.clip(p.raw), p.protected])) if {
	some p in input.paths
	p.access == "read"
	p.protected != ""
}

reasons contains reason("protected_paths", "deny", sprintf("searching %q is denied: it can match %q, a protected path", [text.clip(g.raw), g.protected])) if {
	some g in input.globs
	g.protected != ""
}

# Protected names through the shell: a redirect target, a writing
# program's operand or a cd that names (or, for a write, could expand to)
# a protected path, and any argument naming a protected_paths entry, are
# judged by the same comparison as the file tools' paths (in Go).
reasons contains reason("protected_paths", "ask", sprintf("%s %q reaches %q, a protected path (version control, agent configuration or a protected_paths entry): a person must confirm it", [p.what, text.clip(p.word), p.name])) if {
	some p in input.command.protected
	p.name != ""
	not masked(p)
}

reasons contains reason("protected_paths", "ask", sprintf("%s %q, a name known only at run time, could reach a protected path (version control, agent configuration or a protected_paths entry): a person must confirm it", [p.what, text.clip(p.word)])) if {
	some p in input.command.protected
	p.name == ""
	not masked(p)
}

# A recursive read (grep -r .) whose only trouble is a protected_paths
# entry somewhere in its tree reads nothing of it when it runs confined:
# the kernel masks those names. A read that names the entry itself, and
# any write, is judged as before.
reasons contains reason("confined", "allow", sprintf("%s %q reaches %q only as part of the tree it reads; it runs confined, and the kernel masks it", [p.what, text.clip(p.word), name])) if {
	some p in input.command.protected
	masked(p)
	name := masked_name(p)
}

masked(p) if {
	p.access == "read"
	p.tree
	input.confinement.confined
	binds_files
}

masked_name(p) := p.name if p.name != ""

else := "a protected path"

# network_forbidden: the call site's or the agent's execution policy, or
# a guardrail (which only tightens), says shell tools may not use the
# network.
network_forbidden if input.policy.network == "none"

network_forbidden if input.guardrails.network == "none"

reasons contains reason("network", "deny", sprintf("the command opens a network connection (%s) and network use is forbidden here (network: none)", [text.clip(n)])) if {
	network_forbidden
	some n in input.command.network
}

reasons contains reason("network", "ask", sprintf("command %q uses the network, which is forbidden here (network: none): a person must confirm it", [text.clip(concat(" ", argv))])) if {
	network_forbidden
	some argv in input.command.network_uses
}

# Security teams' own guardrail packages, at any depth under
# data.guardrails: each rule deny, violation or ask they define, with its
# value (data.toolpdp.owned_guardrails.rules, which toolpdp generates from
# the compiled modules when the bundle loads). Every shape OPA users write
# is read: a set of messages, an object keyed by message, a set of objects
# with a string msg, a boolean, a string. A value of any other shape denies
# (guardrail_error): a guardrail the owners wrote is never nothing.
owned contains r if some r in data.toolpdp.owned_guardrails.rules

reasons contains reason(r.rule, r.effect, msg) if {
	some r in owned
	well_shaped(r.value)
	some msg in messages(r)
}

reasons contains reason("guardrail_error", "deny", sprintf("guardrail %s is %s, not a shape toolpdp reads (a set or object of messages, a set of objects with a string msg, a boolean or a string): denied until its owners fix it", [r.rule, shape_of(r.value)])) if {
	some r in owned
	not well_shaped(r.value)
}

well_shaped(v) if is_boolean(v)

well_shaped(v) if is_string(v)

well_shaped(v) if {
	is_object(v)
	every k, _ in v {
		is_string(k)
	}
}

well_shaped(v) if {
	collection(v)
	every e in v {
		element_message(e)
	}
}

collection(v) if is_set(v)

collection(v) if is_array(v)

element_message(e) := e if is_string(e)

element_message(e) := e.msg if {
	is_object(e)
	is_string(e.msg)
}

messages(r) := {boolean_message(r)} if r.value == true

messages(r) := set() if r.value == false

messages(r) := {text_or_rule(r, r.value)} if is_string(r.value)

messages(r) := {text_or_rule(r, k) | some k, _ in r.value} if is_object(r.value)

messages(r) := {text_or_rule(r, element_message(e)) | some e in r.value} if collection(r.value)

boolean_message(r) := sprintf("denied by guardrail %s", [r.rule]) if r.effect == "deny"

boolean_message(r) := sprintf("guardrail %s asks a person to confirm this call", [r.rule]) if r.effect == "ask"

text_or_rule(_, msg) := msg if msg != ""

text_or_rule(r, "") := boolean_message(r)

shape_of(v) := "null" if is_null(v)

shape_of(v) := sprintf("the number %v", [v]) if is_number(v)

shape_of(v) := "an object with a key that is not a string" if is_object(v)

shape_of(v) := "a collection holding an element that is neither a string nor an object with a string msg" if collection(v)

reason(rule, effect, msg) := {"axis": "guardrail", "rule": rule, "effect": effect, "message": msg}

# merged combines data.guardrails (every agent) with an agent's
# own guardrails key: the command rules (toolpdp matches them against the
# command's leaves in Go, where the shell analysis is) and the protected
# names in force: protected (writes) holds the library's version-control and
# agent-configuration names and the listed ones, protected_reads only the
# listed ones (protected_paths binds reads too).
merged(own) := {
	"deny_commands": array.concat(object.get(global, "deny_commands", []), object.get(own, "deny_commands", [])),
	"ask_commands": array.concat(object.get(global, "ask_commands", []), object.get(own, "ask_commands", [])),
	"protected": protected_names(own),
	"protected_reads": listed(own),
	"network": network(own),
}

# network: "none" when the bundle's guardrails or the agent's forbid shell
# tools the network; either one suffices.
network(own) := "none" if {
	"none" in {object.get(global, "network", ""), object.get(own, "network", "")}
} else := ""

# global is the data keys of data.guardrails the library reads, each
# looked up alone: reading data.guardrails whole would evaluate every rule
# of the owners' packages (and their tests) once per load.
global := {k: v |
	some k in {"deny_commands", "ask_commands", "protected_paths", "protect_vcs_and_agent_config", "network"}
	v := data.guardrails[k]
}

protected_names(own) := array.concat(listed(own), data.toolpdp.tables.protected_names) if {
	protect_vcs_and_agent_config(own)
} else := listed(own)

listed(own) := array.concat(object.get(global, "protected_paths", []), object.get(own, "protected_paths", []))

protect_vcs_and_agent_config(own) := own.protect_vcs_and_agent_config if {
	is_boolean(own.protect_vcs_and_agent_config)
} else := global.protect_vcs_and_agent_config if {
	is_boolean(global.protect_vcs_and_agent_config)
} else := true
