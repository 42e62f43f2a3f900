package toolpdp.scope_test

import data.toolpdp.scope
import rego.v1

path(access, raw, resolved) := {"arg": "file_path", "access": access, "raw": raw, "resolved": resolved, "error": "", "error_kind": ""}

reasons(inp) := rs if {
	rs := scope.reasons with input as object.union({"tool_name": "Read", "paths": []}, inp)
}

test_inside_by_whole_segments if {
	scope.inside("/p/src", "/p/src")
	scope.inside("/p/src/a.go", "/p/src")
	not scope.inside("/p/src2/a.go", "/p/src")
	not scope.inside("/p", "/p/src")
	scope.inside("/anything", "/")
	scope.inside("/p/src/a", "/p/src/")
}

test_read_inside_allowed if {
	count(reasons({"paths": [path("read", "a", "/p/a")], "scope": {"read": ["/p"]}})) == 0
}

test_read_outside_denied_names_raw_resolved_and_roots if {
	rs := reasons({"paths": [path("read", "../s/k", "/s/k")], "scope": {"read": ["/p"]}, "policy": {"read_paths": ["/p"]}})
	some r in rs
	r.effect == "deny"
	r.rule == "read_paths"
	r.message == "read path \"../s/k\" (resolved: \"/s/k\") is outside the allowed read_paths [\"/p\"]: read only inside them"
}

test_unset_scope_is_unrestricted if {
	count(reasons({"paths": [path("write", "/x", "/x")], "scope": {"read": ["/p"]}})) == 0
}

test_empty_scope_allows_nothing if {
	count(reasons({"paths": [path("read", "/p", "/p")], "scope": {"read": []}})) == 1
}

test_unresolved_denied_only_where_scope_applies if {
	p := object.union(path("read", "rel", ""), {"error": "relative path and no policy cwd", "error_kind": "unresolved"})
	count(reasons({"paths": [p], "scope": {"read": ["/p"]}})) == 1
	count(reasons({"paths": [p], "scope": {}})) == 0
}

test_invalid_path_denied_anywhere if {
	p := object.union(path("read", "a\u0000b", ""), {"error": "contains a NUL byte", "error_kind": "invalid"})
	some r in reasons({"paths": [p], "scope": {}})
	r.rule == "paths.file_path"
}

test_env_allowlist if {
	e := scope.env with input as {"env": {"PATH": "/bin", "SECRET": "s", "HOME": "/h"}, "policy": {"env": {"mode": "allowlist", "names": ["PATH"]}}}
	e == {"PATH": "/bin"}
}

test_env_allowlist_with_safe_vars if {
	e := scope.env with input as {"env": {"PATH": "/bin", "SECRET": "s", "HOME": "/h", "GOFLAGS": "x"}, "policy": {"env": {"mode": "allowlist", "names": ["GOFLAGS"], "include_safe_env_vars": true}}}
	e == {"PATH": "/bin", "HOME": "/h", "GOFLAGS": "x"}
}

test_env_denylist if {
	e := scope.env with input as {"env": {"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "s"}, "policy": {"env": {"mode": "denylist", "names": ["AWS_SECRET_ACCESS_KEY"]}}}
	e == {"PATH": "/bin"}
}

test_env_not_enforced_passes_through if {
	e := scope.env with input as {"env": {"A": "1"}, "policy": {"cwd": "/p"}}
	e == {"A": "1"}
}

test_safe_env_vars_hold_no_loader_or_credential_names if {
	every name in data.toolpdp.tables.safe_env_vars {
		not startswith(name, "LD_")
		not contains(name, "TOKEN")
		not contains(name, "KEY")
		not contains(name, "SECRET")
		not contains(name, "PASSWORD")
	}
}
