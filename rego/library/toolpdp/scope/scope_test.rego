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

test_env_denylist_compares_without_case_and_drops_unsafe if {
	e := scope.env with input as {
		"env": {
			"PATH": "/bin", "aws_secret_access_key": "s", "LD_PRELOAD": "/e.so", "ld_audit": "x",
			"DYLD_INSERT_LIBRARIES": "x", "BASH_FUNC_ls%%": "() { id; }", "BASH_ENV": "/rc", "NODE_OPTIONS": "-r x",
			"GIT_SSH_COMMAND": "x", "PAGER": "x", "Editor": "x", "HOME": "/h",
		},
		"policy": {"env": {"mode": "denylist", "names": ["AWS_SECRET_ACCESS_KEY"]}},
	}
	e == {"PATH": "/bin", "HOME": "/h"}
}

test_env_non_posix_names_never_reach_execution if {
	env := {"PATH": "/bin", "LD_PRELOAD=/tmp/a": "b.so", "A B": "x", "1X": "y", "A%": "z", "_OK1": "1"}
	e1 := scope.env with input as {"env": env, "policy": {"env": {"mode": "denylist", "names": []}}}
	e1 == {"PATH": "/bin", "_OK1": "1"}
	e2 := scope.env with input as {"env": env, "policy": {"cwd": "/p"}}
	e2 == {"PATH": "/bin", "_OK1": "1"}
	e3 := scope.env with input as {"env": env, "policy": {"env": {"mode": "allowlist", "names": ["LD_PRELOAD=/tmp/a", "PATH"]}}}
	e3 == {"PATH": "/bin"}
}

test_env_enforced if {
	x := scope.execution with input as {"tool_name": "Bash", "server": "", "env": {"A": "1"}, "policy": {"env": {"mode": "allowlist", "names": []}}}
	x == {"env": {}, "env_enforced": true, "cwd": ""}
	y := scope.execution with input as {"tool_name": "exec_command", "server": "", "env": {"A": "1"}, "policy": {"cwd": "/p"}}
	y == {"env": {"A": "1"}, "env_enforced": false, "cwd": "/p"}
	not scope.execution with input as {"tool_name": "Bash", "server": "", "env": {}}
}

test_unsafe_env_vars_table_is_the_default_list if {
	every name in ["LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "BASH_FUNC_x%%", "IFS", "PS4", "GCONV_PATH", "PYTHONPATH", "PERL5OPT", "RUBYOPT", "GIT_ASKPASS", "SSH_ASKPASS", "VISUAL", "GIT_EDITOR", "LESSOPEN"] {
		scope.unsafe_env_var(name)
	}
	not scope.unsafe_env_var("PATH")
	not scope.unsafe_env_var("HOME")
}

test_home_and_url_paths_are_denied_where_a_scope_applies if {
	p := object.union(path("read", "~/.ssh/id_rsa", ""), {"error": "cannot resolve: a path starting with ~ is not a plain path", "error_kind": "unresolved"})
	some r in reasons({"paths": [p], "scope": {"read": ["/p"]}})
	contains(r.message, "not a plain path")
}

test_execution_carries_the_confined_scopes if {
	x := scope.execution with input as {
		"tool_name": "Bash", "server": "", "env": {},
		"policy": {"cwd": "/p", "read_paths": ["/p", "link"], "write_paths": [], "network": "none"},
		"scope": {"read": ["/p", "/real"], "write": []},
		"guardrails": {"protected": [".env", ".git"], "protected_reads": [".env"]},
	}
	x == {
		"env": {}, "env_enforced": false, "cwd": "/p",
		"read_paths": ["/p", "/real"], "write_paths": [], "network": "none",
		"read_only_names": [".env", ".git"], "unreadable_names": [".env"],
	}
}

test_execution_scopes_absent_are_not_enforced if {
	x := scope.execution with input as {"tool_name": "Bash", "server": "", "env": {}, "policy": {"cwd": "/p"}, "scope": {}}
	x == {"env": {}, "env_enforced": false, "cwd": "/p"}
}

test_a_guardrail_forbids_the_network_without_an_execution_policy if {
	x := scope.execution with input as {"tool_name": "Bash", "server": "", "env": {"A": "1"}, "guardrails": {"network": "none"}}
	x == {"env": {"A": "1"}, "env_enforced": false, "cwd": "", "network": "none"}
	not scope.execution with input as {"tool_name": "Bash", "server": "", "env": {}, "guardrails": {"network": ""}}
}
