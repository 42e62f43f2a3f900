# Package toolpdp.decision is the entrypoint: data.toolpdp.decision.result is
# the decision document {decision, message, reasons, execution}.
#
# The answer is the most restrictive of the permission axis, the argument
# constraints, the scope axis and the guardrails: deny > ask > allow. Every
# contributing rule is listed in reasons, in precedence order: the
# permission axis, then the arguments, then scope, then guardrails.
package toolpdp.decision

import data.toolpdp.arguments
import data.toolpdp.guardrails
import data.toolpdp.permission
import data.toolpdp.scope
import rego.v1

# Three paths, cheapest first. A refusal of the agent itself (unknown agent,
# undeclared server, toolset off) and a custom tool stop at the permission
# axis (a custom tool's own argument constraints aside: the owners wrote
# them for it); so does a quiet call: one no guardrail rule can touch whose
# paths the scopes admit (no scope rule fires) and whose arguments keep to
# their constraints. Anything else combines every axis. A Network call is
# decided by its own rules.
result := network_result if {
	input.network
} else := single(permission.reason) if {
	stops(permission.reason)
} else := combine(array.concat([permission.reason], sorted(arguments.reasons))) if {
	startswith(permission.reason.rule, "custom[")
} else := single(adjust(permission.reason)) if {
	quiet
	count(scope.reasons) == 0
} else := combined

combined := combine(array.concat([adjust(permission.reason)], [adjust(r) | some r in array.concat(array.concat(sorted(arguments.reasons), sorted(scope.reasons)), sorted(guardrails.reasons))]))

combine(rs) := {"decision": d, "message": concat("; ", [r.message | some r in rs; r.effect == d; d != "allow"]), "reasons": rs, "execution": execution} if {
	d := most_restrictive(rs)
}

# A connection of a confined run (the reserved tool Network): toolpdp has
# decided the host by the network rules of the allow the run belongs to
# (input.network); the guardrails may tighten that. The permission chain
# never sees it: no toolset can enable or ask about a connection.
network_result := {"decision": d, "message": concat("; ", [r.message | some r in rs; r.effect == d; d != "allow"]), "reasons": rs, "execution": {}} if {
	rs := array.concat([adjust(network_reason)], [adjust(r) | some r in sorted(guardrails.reasons)])
	d := most_restrictive(rs)
}

network_reason := {"axis": "scope", "rule": input.network.rule, "effect": input.network.effect, "message": input.network.message}

single(r) := {"decision": r.effect, "message": message(r), "reasons": [r], "execution": execution}

message(r) := "" if r.effect == "allow"

message(r) := r.message if r.effect != "allow"

stops(r) if r.effect == "deny"

stops(r) if {
	startswith(r.rule, "custom[")
	count(arguments.reasons) == 0
}

# quiet holds when no guardrail rule can apply: no command, no path or
# search glob that names a protected name, and no guardrail package of the
# bundle's own (input.guardrails.packages, set by toolpdp from the compiled
# modules); and no argument constraint is broken. Most calls are quiet;
# they skip the guardrail rules and, when no scope rule fires either,
# combining the axes.
quiet if {
	not input.command
	input.guardrails.packages == false
	not protected_path
	count(arguments.reasons) == 0
}

# A path or search glob that names a protected name.
protected_path if {
	some p in input.paths
	p.protected != ""
}

protected_path if {
	some g in globs
	g.protected != ""
}

# globs are a file tool's search globs (toolpdp sends [] for other tools).
default globs := []

globs := input.globs

most_restrictive(rs) := "deny" if {
	some r in rs
	r.effect == "deny"
} else := "ask" if {
	some r in rs
	r.effect == "ask"
} else := "allow"

sorted(s) := [r | some r in s]

# execution is what a shell tool runs with; a decision that relied on the
# call running confined (a reason "confined", or an agent that requires
# it) says so, and the client must not run it otherwise.
default execution := {}

execution := object.union(scope_execution, {"confinement_required": true}) if {
	relies_on_confinement
} else := scope.execution

default scope_execution := {}

scope_execution := scope.execution

relies_on_confinement if {
	input.confinement.confined
	input.confinement.mode == "required"
}

relies_on_confinement if {
	input.confinement.confined
	some r in guardrails.reasons
	r.rule == "confined"
}

# With permission_callback false nobody can confirm (an agent
# without a callback runs its ask tools unchecked): the permission axis's ask becomes allow, and an ask
# of the scope axis or a guardrail becomes deny.
adjust(r) := r if {
	r.effect != "ask"
} else := r if {
	input.agent.permission_callback != false
} else := object.union(r, {"effect": "allow", "message": sprintf("%s; permission_callback is false, so it runs unchecked", [r.message])}) if {
	r.axis == "permission"
} else := object.union(r, {"effect": "deny", "message": sprintf("%s; permission_callback is false and nobody can confirm, so it is denied", [r.message])})
