package envguard

import (
	"fmt"
	"strings"
)

// Tables are the data the shell analysis reads: in toolpdp they come from the
// policy library's tables, which bundle owners may edit.
type Tables struct {
	// InlineCode maps an interpreter (matched like a rule's program, so
	// "python" covers python3.12) to the options or subcommands that take
	// program text: python -c, node -e, deno eval.
	InlineCode map[string][]string `json:"inline_code_options"`
	// ExecOptions maps a program to options that make it run a command:
	// git -c core.pager=…, tar --to-command, ssh -o ProxyCommand=….
	ExecOptions map[string][]ExecOption `json:"exec_options"`
	// OptionAliases maps a program's long options to the short option they
	// mean, so a rule `rm -rf` sees `rm --recursive --force`.
	OptionAliases map[string]map[string]string `json:"option_aliases"`
	// UnsafeEnv are the library's unsafe_env_vars, the one list of
	// variables that make a program load or run other code (the same list
	// a denylist env policy removes); "LD_*" is a prefix. Setting one
	// before a command is unseen execution.
	UnsafeEnv []string `json:"unsafe_env_vars"`
	// ExecEnv is the shell analysis' own table of what else changes what
	// runs when set before a command — PATH, variables that name a command
	// some program runs (GIT_SEQUENCE_EDITOR, GIT_SSH, MANPAGER), git's
	// GIT_CONFIG_* — which an env policy does not remove.
	ExecEnv []string `json:"exec_env_vars"`
	// ProtectedNames are version-control and agent-configuration names
	// (.git, .claude): a redirect or a writing program aimed into one is
	// asked, as the file tools are denied.
	ProtectedNames []string `json:"protected_names"`
	// ExecConfigFiles are names of files and directories whose contents
	// programs run (~/.gitconfig aliases, ~/.bashrc, ~/.ssh/config's
	// ProxyCommand, git hooks): writing into one is asked like a protected
	// name.
	ExecConfigFiles []string `json:"exec_config_files"`
}

// ExecOption is an option that runs a command. Values, when given, are
// glob patterns (compared without case) the option's value must match to
// run one — git -c runs a command only through some keys; none means any
// value does.
type ExecOption struct {
	Option string   `json:"option"`
	Values []string `json:"values,omitempty"`
}

// Validate names the first entry that cannot work.
func (t *Tables) Validate() error {
	for prog, list := range t.ExecOptions {
		for i, o := range list {
			if !strings.HasPrefix(o.Option, "-") && !strings.HasPrefix(o.Option, "+") {
				return fmt.Errorf("exec_options[%q][%d].option: %q is not an option (it starts with - or +)", prog, i, o.Option)
			}
		}
	}
	for prog, m := range t.OptionAliases {
		for long, short := range m {
			if !strings.HasPrefix(long, "--") || len(short) != 2 || short[0] != '-' {
				return fmt.Errorf("option_aliases[%q][%q]: want a long option mapped to a short one like \"-r\", got %q", prog, long, short)
			}
		}
	}
	return nil
}

// unsafeName reports whether assigning name changes what runs: an entry
// of UnsafeEnv or ExecEnv, compared without case, "*" ending a prefix.
func (t *Tables) unsafeName(name string) bool {
	for _, u := range append(t.UnsafeEnv[:len(t.UnsafeEnv):len(t.UnsafeEnv)], t.ExecEnv...) {
		if p, ok := strings.CutSuffix(u, "*"); ok {
			if strings.HasPrefix(strings.ToUpper(name), strings.ToUpper(p)) {
				return true
			}
		} else if strings.EqualFold(name, u) {
			return true
		}
	}
	return false
}

// inline returns the inline-code options of an interpreter.
func (t *Tables) inline(name string) ([]string, bool) {
	for prog, opts := range t.InlineCode {
		if sameProgram(name, prog) {
			return opts, true
		}
	}
	return nil, false
}
