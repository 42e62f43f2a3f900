package guardrails.secrets_test

import data.guardrails.secrets
import rego.v1

test_pem_denied if {
	count(secrets.deny) == 1 with input as {"tool_name": "Read", "paths": [{"resolved": "/etc/ssl/a.pem"}]}
}

test_other_files_pass if {
	count(secrets.deny) == 0 with input as {"tool_name": "Read", "paths": [{"resolved": "/etc/hostname"}]}
}
