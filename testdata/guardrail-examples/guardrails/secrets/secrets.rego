package guardrails.secrets

import rego.v1

deny contains sprintf("%s may not touch key material (%s)", [input.tool_name, p.resolved]) if {
	some p in input.paths
	some suffix in {".pem", ".key", "id_rsa", "id_ed25519"}
	endswith(p.resolved, suffix)
}
