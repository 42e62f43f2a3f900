package guardrails.deploys

import rego.v1

ask contains "kubectl against prod needs a person's confirmation" if {
	some leaf in input.command.leaves
	leaf.name == "kubectl"
	some arg in leaf.argv
	arg in {"prod", "--context=prod"}
}
