# Package toolpdp.arguments turns the argument constraints a call breaks
# into denies (rule argument_constraint).
#
# A tool's entry in an agent definition may constrain its arguments
# ("args": {NAME: SCHEMA}); toolpdp checks the call's arguments against
# them in Go and hands what they break to the library as input.arguments:
# {"custom": [...], "toolset": [...]}, one list for each set of constraints
# the call may meet (a declared custom tool's own, its toolset's configs
# entry), each item {arg, keyword, message}. Which set is the call's is the
# permission axis's to say: a call the axis takes for a custom tool meets
# the custom tool's constraints, any other call its toolset's.
package toolpdp.arguments

import data.toolpdp.permission
import rego.v1

# reasons are the denies of the constraints the call breaks, one per argument.
reasons contains deny(v) if {
	some v in broken
}

default broken := []

# Most calls meet no constraint: input.arguments is looked at first.
broken := v if {
	v := input.arguments.custom
	startswith(permission.reason.rule, "custom[")
} else := v if {
	v := input.arguments.toolset
	not startswith(permission.reason.rule, "custom[")
}

deny(v) := {
	"axis": "arguments",
	"rule": "argument_constraint",
	"effect": "deny",
	"message": v.message,
}
