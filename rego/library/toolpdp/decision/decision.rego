# Package toolpdp.decision is the entrypoint: data.toolpdp.decision.result is
# the decision document {decision, message, reasons, execution} (SPEC §5).
#
# The answer is the most restrictive of the permission axis, the scope axis
# and the guardrails: deny > ask > allow.
package toolpdp.decision

import data.toolpdp.guardrails
import data.toolpdp.permission
import data.toolpdp.scope
import rego.v1

result := {
	"decision": decision,
	"message": message,
	"reasons": reasons,
	"execution": execution,
}

# reasons lists every contributing rule in precedence order: the permission
# axis, then scope, then guardrails. Custom tools and refusals of the agent
# itself (unknown agent, undeclared server, toolset off) stop there.
reasons := [permission.reason] if {
	stops_here
} else := array.concat([adjust(permission.reason)], [adjust(r) | some r in array.concat(sorted(scope.reasons), sorted(guardrails.reasons))])

default execution := {}

execution := scope.execution

stops_here if permission.reason.effect == "deny"

stops_here if startswith(permission.reason.rule, "custom[")

sorted(s) := [r | some r in s]

effects := {r.effect | some r in reasons}

decision := "deny" if {
	"deny" in effects
} else := "ask" if {
	"ask" in effects
} else := "allow"

message := concat("; ", [r.message | some r in reasons; r.effect == decision]) if {
	decision != "allow"
} else := ""

# With permission_callback false nobody can confirm (seed 000: "None → ASK
# tools run unchecked"): the permission axis's ask becomes allow, and an ask
# of the scope axis or a guardrail becomes deny.
adjust(r) := r if {
	r.effect != "ask"
} else := r if {
	input.agent.permission_callback != false
} else := object.union(r, {"effect": "allow", "message": sprintf("%s; permission_callback is false, so it runs unchecked", [r.message])}) if {
	r.axis == "permission"
} else := object.union(r, {"effect": "deny", "message": sprintf("%s; permission_callback is false and nobody can confirm, so it is denied", [r.message])})
