package guardrails.redirects

import rego.v1

deny contains sprintf("writing %s from a shell is not allowed", [r]) if {
	some leaf in input.command.leaves
	some r in leaf.redirects
	regex.match(`^[0-9]*>>?\s*/(etc|usr|boot)/`, r)
}
