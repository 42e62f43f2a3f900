# Package toolpdp.scope is the scope axis: where may a file
# tool read and write, and what environment and cwd do Bash and Exec get.
#
# envguard (Go) has already resolved every path: input.paths holds each path
# argument of a file tool ({arg, access, raw, resolved, error, error_kind}),
# input.scope the resolved roots of the effective policy ({read, write}, each
# present only when that scope is set) and input.policy the effective policy
# as written.
package toolpdp.scope

import data.toolpdp.text
import rego.v1

tables := data.toolpdp.tables

default policy := {}

policy := input.policy

# An agent whose definition requires confinement runs no shell call that
# does not say it will run confined (through toolpdp exec).
reasons contains deny("confinement_required", sprintf("%s must run confined: this agent's execution_policy.confinement is \"required\", and the call was not sent as one that runs through toolpdp exec", [input.tool_name])) if {
	input.server == ""
	input.confinement.mode == "required"
	not input.confinement.confined
}

# A path that cannot be a path (NUL byte, not a string) is refused anywhere.
reasons contains deny(sprintf("paths.%s", [p.arg]), sprintf("%s is not a valid path: %s", [describe_invalid(p), text.clip(p.error)])) if {
	some p in input.paths
	p.error_kind == "invalid"
}

# A value that is not a string has no text to quote: name its argument.
describe_invalid(p) := sprintf("argument %s", [p.arg]) if p.raw == ""

else := describe(p)

# A path that could not be resolved (a relative path with no cwd, a symlink
# loop) cannot be checked, so it is refused where a scope applies.
reasons contains deny(sprintf("%s_paths", [p.access]), sprintf("%s cannot be checked against %s_paths: %s", [describe(p), p.access, text.clip(p.error)])) if {
	some p in input.paths
	p.error_kind == "unresolved"
	input.scope[p.access]
}

reasons contains deny(sprintf("%s_paths", [p.access]), msg) if {
	some p in input.paths
	p.error_kind == ""
	roots := input.scope[p.access]
	not inside_any(p.resolved, roots)
	msg := sprintf("%s %s is outside the allowed %s_paths %v: %s only inside them", [
		p.access, describe(p), p.access,
		text.clip(sprintf("%v", [object.get(policy, sprintf("%s_paths", [p.access]), roots)])), p.access,
	])
}

describe(p) := sprintf("path %q (resolved: %q)", [text.clip(p.raw), text.clip(p.resolved)]) if p.resolved != ""

describe(p) := sprintf("path %q", [text.clip(p.raw)]) if p.resolved == ""

inside_any(path, roots) if {
	some root in roots
	inside(path, root)
}

# inside is true when path equals root or lies below it by whole segments:
# /p/src2 is not inside /p/src.
inside(path, root) if path == root

inside(path, root) if startswith(path, concat("", [trim_suffix(root, "/"), "/"]))

# execution is what a shell tool (the library's shell_tools, built-in only)
# runs with: the constructed environment, whether it is enforced, and the
# pinned cwd; for a confined run also the resolved scopes, the network rule
# and the protected names in force. Empty when no execution policy applies
# and no guardrail forbids the network.
execution := object.union_n([
	{"env": env, "env_enforced": env_enforced, "cwd": object.get(policy, "cwd", "")},
	confined_scopes,
	network,
	protected_names,
]) if {
	input.server == ""
	tables.shell_tools[input.tool_name]
	executes_under_policy
}

executes_under_policy if input.policy

executes_under_policy if network_none

# confined_scopes: each scope the policy sets, its roots resolved (a root
# that does not resolve admits nothing); an absent scope is not enforced.
confined_scopes := {name: roots |
	some access, name in {"read": "read_paths", "write": "write_paths"}
	roots := input.scope[access]
}

network := {"network": "none"} if network_none

else := {"network": policy.network} if policy.network in {"any", "rules"}

else := {}

# The call site's policy or a guardrail (the bundle's or the agent's) may
# forbid the network; a guardrail only tightens.
network_none if policy.network == "none"

network_none if input.guardrails.network == "none"

# protected_names: the names a confined run keeps read-only inside
# write_paths (protected) and unreadable (protected_reads), when any.
protected_names := {name: names |
	some key, name in {"protected": "read_only_names", "protected_reads": "unreadable_names"}
	names := object.get(input.guardrails, key, [])
	count(names) > 0
}

# env_enforced: the tool gets exactly env (an allowlist that kept nothing is
# {} and enforced), never "whatever it would have had". toolpdp hands over
# an env policy only with a mode it knows (allowlist or denylist): a
# definition or request with any other is refused before this.
default env_enforced := false

env_enforced if input.policy.env

# env is built only from POSIX names ([A-Za-z_][A-Za-z0-9_]*): a name holding
# "=", "%", a NUL or a space would be split or misread by whoever builds the
# child's K=V strings.
default env := {}

# allowlist: only the names listed (exactly, case and all), plus the safe
# list when asked for.
env := {k: v |
	some k, v in posix_env
	allowed_name(k)
} if input.policy.env.mode == "allowlist"

# denylist: every name but those listed, compared without regard to case,
# and never a name of the library's unsafe_env_vars (variables that make a
# program load or run other code).
env := {k: v |
	some k, v in posix_env
	not lower(k) in denied_names
	not unsafe_env_var(k)
} if input.policy.env.mode == "denylist"

# Env not enforced: the tool gets the environment it would have had.
env := posix_env if not input.policy.env

posix_env := {k: v |
	some k, v in input.env
	regex.match(`^[A-Za-z_][A-Za-z0-9_]*$`, k)
}

# allowed_name: one membership test per variable, not a set built per call.
allowed_name(k) if k in input.policy.env.names

allowed_name(k) if {
	input.policy.env.include_safe_env_vars == true
	is_array(input.policy.env.names)
	k in tables.safe_env_vars
}

denied_names := {lower(n) | some n in input.policy.env.names}

# unsafe_env_var matches a name of the table, compared without regard to
# case; an entry ending in * matches every name it starts.
unsafe_env_var(name) if lower(name) in unsafe_exact

unsafe_env_var(name) if {
	some prefix in unsafe_prefixes
	startswith(lower(name), prefix)
}

# The table split once per decision: exact names as a set (one lookup per
# variable), the few "*" entries as prefixes.
unsafe_exact := {lower(u) | some u in tables.unsafe_env_vars; not endswith(u, "*")}

unsafe_prefixes := [lower(trim_suffix(u, "*")) | some u in tables.unsafe_env_vars; endswith(u, "*")]

deny(rule, msg) := {"axis": "scope", "rule": rule, "effect": "deny", "message": msg}
