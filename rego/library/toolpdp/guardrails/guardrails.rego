# Package toolpdp.guardrails holds the guardrails the library ships (SPEC
# §4.3) and collects the ones security teams write in their own bundles. A
# guardrail only adds deny or ask reasons: it can tighten a decision, never
# relax one.
#
# input.guardrails is the agent's entry of data.toolpdp.index.guardrails
# (data.guardrails and the agent's own "guardrails" key, merged once per
# bundle), always from the newest bundle, never from a session's pinned
# definition: a security fix reaches running sessions at once.
#
# Rego: any package data.guardrails.<name> may define the sets deny and ask
# of messages; each message becomes a reason. Nothing else there is read.
package toolpdp.guardrails

import data.toolpdp.text
import rego.v1

# Shell commands: input.command.leaves are the leaf commands envguard parsed
# out of a Bash/Exec command, each {argv, name}; name is argv[0] without its
# directory, after wrappers like env and timeout are unwrapped. Rules are
# looked up by the leaf's program, so a command costs what its programs do.
reasons contains reason("deny_commands", "deny", sprintf("command %q is denied by guardrail deny_commands[%q]; do not run it, nor wrap or chain it", [text.clip(concat(" ", leaf.argv)), r.rule])) if {
	some leaf in input.command.leaves
	some r in input.guardrails.deny[leaf.name]
	starts_with_words(leaf.argv, r.words)
}

reasons contains reason("ask_commands", "ask", sprintf("command %q needs a person's confirmation (guardrail ask_commands[%q])", [text.clip(concat(" ", leaf.argv)), r.rule])) if {
	some leaf in input.command.leaves
	some r in input.guardrails.ask[leaf.name]
	starts_with_words(leaf.argv, r.words)
}

# A command that does not parse, is not a string or names its program by an
# expansion cannot be checked: a person decides.
reasons contains reason("command", "ask", sprintf("the command cannot be checked (%s): a person must confirm it", [text.clip(input.command.error)])) if {
	input.command.error != ""
}

reasons contains reason("command", "ask", sprintf("the program of %q is computed at run time and cannot be checked: a person must confirm it", [text.clip(concat(" ", leaf.argv))])) if {
	some leaf in input.command.leaves
	leaf.dynamic
}

# A rule of several words matches a leaf whose argv starts with those words
# (the first, the program, is matched by the lookup).
starts_with_words(argv, words) if {
	n := count(words)
	count(argv) >= n
	array.slice(argv, 1, n) == array.slice(words, 1, n)
}

# Protected paths: a write into version-control metadata or agent
# configuration is denied even inside write_paths.
reasons contains reason("protected_paths", "deny", sprintf("writing %q is denied: %q is a protected path (version control or agent configuration)", [text.clip(p.raw), name])) if {
	some p in input.paths
	p.access == "write"
	some name in input.guardrails.protected
	some candidate in [p.raw, p.resolved]
	candidate != ""
	protected(candidate, name)
}

# protected matches a name as whole path segments anywhere in the path
# (".git", "config/secrets"), or an absolute name as a directory prefix.
protected(path, name) if {
	not startswith(name, "/")
	contains(concat("", ["/", trim(path, "/"), "/"]), concat("", ["/", trim(name, "/"), "/"]))
}

protected(path, name) if {
	startswith(name, "/")
	startswith(concat("", [path, "/"]), concat("", [trim_suffix(name, "/"), "/"]))
}

# Security teams' own guardrail packages: data.guardrails.<name>.deny / .ask.
reasons contains reason(sprintf("guardrails.%s.deny", [name]), "deny", message(name, msg)) if {
	some name, pkg in data.guardrails
	is_object(pkg)
	some msg in pkg.deny
}

reasons contains reason(sprintf("guardrails.%s.ask", [name]), "ask", message(name, msg)) if {
	some name, pkg in data.guardrails
	is_object(pkg)
	some msg in pkg.ask
}

message(_, msg) := msg if is_string(msg)

message(name, msg) := sprintf("guardrail %s: %v", [name, msg]) if not is_string(msg)

reason(rule, effect, msg) := {"axis": "guardrail", "rule": rule, "effect": effect, "message": msg}
