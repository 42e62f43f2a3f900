package envguard

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// Tables are the data the shell analysis reads: in toolpdp they come from the
// policy library's tables, which bundle owners may edit. Compile them once
// (Validate does) before analysing with them.
type Tables struct {
	// InlineCode maps an interpreter (matched like a rule's program, so
	// "python" covers python3.12) to the options or subcommands that take
	// program text: python -c, node -e, deno eval.
	InlineCode map[string][]string `json:"inline_code_options"`
	// ExecOptions maps a program, or "program subcommand", to options that
	// make it run a command: git -c core.pager=…, git rebase -x, tar
	// --to-command, go build -toolexec.
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
	// ExecEnvValues are variables that run a command only with some
	// values (GOFLAGS=-toolexec=…): glob patterns of the values that do.
	ExecEnvValues map[string][]string `json:"exec_env_values"`
	// ExecConfigFiles are names of files and directories whose contents
	// programs run (~/.gitconfig aliases, ~/.bashrc, ~/.ssh/config's
	// ProxyCommand, git hooks): writing into one is asked like a protected
	// name.
	ExecConfigFiles []string `json:"exec_config_files"`

	// Wrappers are programs that run their operands as a command, with
	// each one's option grammar.
	Wrappers map[string]WrapperSpec `json:"wrappers"`
	// Runners run a command they are given in a way toolpdp does not model
	// option by option: every word that could start it is a command.
	Runners []string `json:"runners"`
	// CommandReaders read a command language (ed, gdb, sqlite3) from stdin
	// or from their options; their operands are data.
	CommandReaders []string `json:"command_readers"`
	// ShellVariables are the bash manual's Shell Variables (and the others
	// bash reads): assigning one, by any means, is unseen, except the
	// InertShellVariables, whose values bash uses only as numbers, locale
	// names, sizes or formats.
	ShellVariables      []string `json:"shell_variables"`
	InertShellVariables []string `json:"shell_variables_inert"`
	// UnseenShellOptions are set -o / shopt -s options that make bash run
	// or expand text it would not otherwise (expand_aliases, keyword).
	UnseenShellOptions []string `json:"shell_options_unseen"`
	// ProgramAliases map a program's other names (Debian alternatives,
	// vim.basic) to the name the tables and rules know it by.
	ProgramAliases map[string]string `json:"program_aliases"`
	// ProgramVariables are NAME=VALUE operands (and environment settings)
	// a program takes as the name of a program to run: make CC=….
	ProgramVariables map[string][]string `json:"program_variables"`
	// Subcommands are the programs whose first operand is a subcommand,
	// with their global options: rules and exec options bind to it.
	Subcommands map[string]SubcommandSpec `json:"subcommands"`
	// NumericOutput are argv shapes whose output is a number: arithmetic on
	// it is not smuggling.
	NumericOutput [][]string `json:"numeric_output"`
	// WritingPrograms are programs that write files named by their
	// operands: "all" of them, the "first" (logsave's log), the "last" (a
	// destination), "in_place"
	// (only with -i), names taken from their input ("extracts": unzip,
	// patch), or by their mode ("archive": tar, cpio, 7z).
	WritingPrograms map[string]string `json:"writing_programs"`
	// NetworkPrograms are command rules for programs that use the network.
	NetworkPrograms []string `json:"network_programs"`
	// PrintOnly are programs that only print their arguments (or test
	// them): a protected name among them is not a file read.
	PrintOnly []string `json:"print_only_programs"`
	// PatternOptions are options whose values are patterns, not files,
	// by program ("*" for every program).
	PatternOptions map[string][]string `json:"pattern_options"`
	// PatternOperands are how many leading operands of a program are a
	// pattern or a program text, not a file (grep's PATTERN).
	PatternOperands map[string]int `json:"pattern_operands"`
	// DataReaders are programs that read the files they are given as
	// data, never as code: only they take a file a process substitution
	// makes (diff <(sort a) <(sort b)); any other program may run it.
	DataReaders []string `json:"data_readers"`
	// OutputOptions are options whose value is a file the program writes
	// (sort -o), by program or "program subcommand" ("*" for every one).
	OutputOptions map[string][]string `json:"output_options"`
	// RecursiveOptions are the options with which a program reads or
	// writes whole directory trees (grep -r, cp -a, rm -r); "*" when it
	// always does. DefaultDirectory are those that, given no file,
	// search the working directory.
	RecursiveOptions map[string][]string `json:"recursive_options"`
	// NameListOptions are options whose value is a file of file names the
	// program then reads or writes (tar -T LIST): names known only at run
	// time.
	NameListOptions map[string][]string `json:"name_list_options"`
	// ChdirOptions are options that make a program, or the command it
	// runs, work in another directory (env -C, git -C, tar -C): relative
	// names after them are inside it.
	ChdirOptions map[string][]string `json:"chdir_options"`
	// ReaderValueOptions are, for the data_readers, the short options
	// whose value is the next word and not a file (head -n N): a word
	// known only at run time there is no file read.
	ReaderValueOptions map[string]string `json:"reader_value_options"`
	// ShellRunners are runners that start a shell reading stdin when
	// given no command (fakeroot, sg GROUP, setarch ARCH).
	ShellRunners []string `json:"shell_runners"`
	// ResponseFilePrograms read more options from an @FILE argument:
	// options that may run a command, from a file the analysis cannot see.
	ResponseFilePrograms []string `json:"response_file_programs"`
	// StdinNameOptions are options with which a program takes the names of
	// the files it reads from stdin (git hash-object --stdin-paths).
	StdinNameOptions map[string][]string `json:"stdin_name_options"`
	// OptionsAnywhere are programs that take their own options after a
	// subcommand too (npm run --script-shell X, cargo build --config X).
	OptionsAnywhere  []string `json:"options_anywhere"`
	DefaultDirectory []string `json:"default_directory"`
	// SecretArguments are, by program, the arguments that carry a secret
	// (mysql -pX, curl -u user:X, aws configure set …_secret_… X): what
	// shows a command to people masks their values.
	SecretArguments map[string][]SecretArg `json:"secret_arguments"`

	c   *compiled
	err error // why the tables do not compile, once tried
}

// ExecOption is an option that runs a command. Values, when given, are
// glob patterns (compared without case) the option's value must match to
// run one — git -c runs a command only through some keys; none means any
// value does.
type ExecOption struct {
	Option string   `json:"option"`
	Values []string `json:"values,omitempty"`
	// Safe are regular expressions of values that run nothing (vim -c
	// ':wq'): an option whose value matches one is not asked.
	Safe []string `json:"safe,omitempty"`
}

// WrapperSpec is a wrapper's option grammar and what follows its options.
type WrapperSpec struct {
	Flags        string   `json:"flags,omitempty"`         // short options that take no value
	Values       string   `json:"values,omitempty"`        // short options that take one
	LongFlags    []string `json:"long_flags,omitempty"`    // --name
	LongValues   []string `json:"long_values,omitempty"`   // --name VALUE or --name=VALUE
	LongOptional []string `json:"long_optional,omitempty"` // --name or --name=VALUE
	Numeric      bool     `json:"numeric,omitempty"`       // -N (nice -10)
	Operands     int      `json:"operands,omitempty"`      // words before the command (timeout's DURATION)
	Assigns      bool     `json:"assigns,omitempty"`       // NAME=VALUE words may precede the command
	Scripts      []string `json:"scripts,omitempty"`       // options whose value is a shell command
	None         []string `json:"none,omitempty"`          // options with which no command runs
	Shell        bool     `json:"shell,omitempty"`         // with no command it starts a shell reading stdin
	Files        bool     `json:"files,omitempty"`         // its operands are files, not a command
}

// SubcommandSpec is a program whose first operand is a subcommand.
type SubcommandSpec struct {
	GlobalFlags  []string          `json:"global_flags,omitempty"`
	GlobalValues []string          `json:"global_values,omitempty"`
	Subcommands  []string          `json:"subcommands"`
	Aliases      map[string]string `json:"aliases,omitempty"` // "i": "install", "container rm": "rm"
	Dashed       bool              `json:"dashed,omitempty"`  // git-<sub> is git <sub>
}

// compiled is what Validate builds from the tables, once per bundle.
type compiled struct {
	wrappers        map[string]wrapper
	runners         map[string]bool // "program" or "program subcommand"
	subRunners      map[string]bool // programs with a "program subcommand" runner
	readers         map[string]bool
	shellVars       map[string]bool
	unseenOptions   map[string]bool
	aliases         map[string]string
	subcommands     map[string]*subcommands
	execOptions     map[string][]execOption
	execEnvValues   map[string][]*regexp.Regexp
	progVars        map[string][]*regexp.Regexp
	numeric         [][]string
	writers         map[string]string
	network         *Rules
	printOnly       map[string]bool
	dataReaders     map[string]bool
	outputOpts      map[string][]string
	recursive       map[string][]string
	nameLists       map[string][]string
	chdirOpts       map[string][]string
	readerValues    map[string]string
	shellRunners    map[string]bool
	responseFiles   map[string]bool
	stdinNames      map[string][]string
	optionsAnywhere map[string]bool
	defaultDir      map[string]bool
	patternOpts     map[string][]string
	patternOps      map[string]int
	execConfig      *protectednames.Set // files whose contents programs run
	programs        map[string]program  // behaviour in Go, by program (programs.go)
}

type execOption struct {
	option string
	values []*regexp.Regexp
	safe   []*regexp.Regexp
	any    bool
}

type subcommands struct {
	flags, values map[string]bool
	subs          map[string]bool
	aliases       map[string]string
	dashed        bool
}

// Validate names the first entry that cannot work, and compiles the
// tables for the analysis.
func (t *Tables) Validate() error {
	if err := t.ValidateSecretArguments(); err != nil {
		return err
	}
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
	for name, w := range t.Wrappers {
		if w.Operands < 0 || w.Operands > 8 {
			return fmt.Errorf("wrappers[%q].operands: %d is not between 0 and 8", name, w.Operands)
		}
		for _, s := range append(append([]string(nil), w.Scripts...), w.None...) {
			if !strings.HasPrefix(s, "-") {
				return fmt.Errorf("wrappers[%q]: %q is not an option (it starts with -)", name, s)
			}
		}
	}
	for name, mode := range t.WritingPrograms {
		switch mode {
		case "all", "first", "last", "in_place", "extracts", "archive":
		default:
			return fmt.Errorf("writing_programs[%q]: %q is not all, first, last, in_place, extracts or archive", name, mode)
		}
	}
	for i, shape := range t.NumericOutput {
		if len(shape) == 0 {
			return fmt.Errorf("numeric_output[%d]: an empty shape", i)
		}
	}
	for name, s := range t.Subcommands {
		if len(s.Subcommands) == 0 {
			return fmt.Errorf("subcommands[%q].subcommands: empty", name)
		}
	}
	c, err := t.compile()
	if err != nil {
		return err
	}
	t.c, t.err = c, nil
	return nil
}

// ready compiles the tables on first use for a caller that did not
// Validate (tests, ParseCommand's empty tables). Tables that do not
// compile are an error for every analysis and rule made with them, never
// empty tables: an entry that cannot work must not silently become no
// entry, and no table at all would see less than the tables meant.
func (t *Tables) ready() error {
	if t.c == nil && t.err == nil {
		t.c, t.err = t.compile()
	}
	if t.err != nil {
		return fmt.Errorf("%w: the shell tables do not compile: %v", ErrUncheckable, t.err)
	}
	return nil
}

// tables returns the compiled tables. Every way in (Analyze, AnalyzeArgv,
// CompileRules) has checked ready; tables that do not compile reaching
// here are a caller's bug, and stop it rather than read as empty tables.
func (t *Tables) tables() *compiled {
	if err := t.ready(); err != nil {
		panic("envguard: " + err.Error())
	}
	return t.c
}

func (t *Tables) compile() (*compiled, error) {
	c := &compiled{
		wrappers:        make(map[string]wrapper, len(t.Wrappers)),
		runners:         set(t.Runners),
		subRunners:      map[string]bool{},
		readers:         set(t.CommandReaders),
		shellVars:       set(t.ShellVariables),
		unseenOptions:   set(t.UnseenShellOptions),
		aliases:         t.ProgramAliases,
		subcommands:     make(map[string]*subcommands, len(t.Subcommands)),
		execOptions:     make(map[string][]execOption, len(t.ExecOptions)),
		execEnvValues:   make(map[string][]*regexp.Regexp, len(t.ExecEnvValues)),
		progVars:        make(map[string][]*regexp.Regexp, len(t.ProgramVariables)),
		numeric:         t.NumericOutput,
		writers:         t.WritingPrograms,
		printOnly:       set(t.PrintOnly),
		dataReaders:     set(t.DataReaders),
		outputOpts:      t.OutputOptions,
		recursive:       t.RecursiveOptions,
		nameLists:       t.NameListOptions,
		chdirOpts:       t.ChdirOptions,
		readerValues:    t.ReaderValueOptions,
		shellRunners:    set(t.ShellRunners),
		responseFiles:   set(t.ResponseFilePrograms),
		programs:        knownPrograms(),
		stdinNames:      t.StdinNameOptions,
		optionsAnywhere: set(t.OptionsAnywhere),
		defaultDir:      set(t.DefaultDirectory),
		patternOpts:     t.PatternOptions,
		patternOps:      t.PatternOperands,
		execConfig:      protectednames.New(t.ExecConfigFiles),
	}
	for _, r := range t.Runners {
		if prog, _, ok := strings.Cut(r, " "); ok {
			c.subRunners[prog] = true
		}
	}
	for _, v := range t.InertShellVariables {
		delete(c.shellVars, v)
	}
	for name, w := range t.Wrappers {
		c.wrappers[name] = wrapper{opts: optSpec{flags: w.Flags, values: w.Values, numeric: w.Numeric, long: merge(
			longs(longFlag, w.LongFlags...), longs(longValue, w.LongValues...), longs(longOptional, w.LongOptional...))},
			operands: w.Operands, assigns: w.Assigns, scripts: w.Scripts, none: w.None, shell: w.Shell, files: w.Files}
	}
	for name, s := range t.Subcommands {
		sc := &subcommands{flags: set(s.GlobalFlags), values: set(s.GlobalValues), subs: set(s.Subcommands), aliases: s.Aliases, dashed: s.Dashed}
		c.subcommands[name] = sc
	}
	for prog, list := range t.ExecOptions {
		out := make([]execOption, len(list))
		for i, o := range list {
			out[i] = execOption{option: o.Option, any: len(o.Values) == 0}
			for _, v := range o.Values {
				re, err := globRegexp(strings.ToLower(v))
				if err != nil {
					return nil, fmt.Errorf("exec_options[%q][%d].values: %q: %v", prog, i, v, err)
				}
				out[i].values = append(out[i].values, re)
			}
			for _, v := range o.Safe {
				re, err := regexp.Compile(v)
				if err != nil {
					return nil, fmt.Errorf("exec_options[%q][%d].safe: %q: %v", prog, i, v, err)
				}
				out[i].safe = append(out[i].safe, re)
			}
		}
		c.execOptions[prog] = out
	}
	for name, vals := range t.ExecEnvValues {
		for _, v := range vals {
			re, err := globRegexp(strings.ToLower(v))
			if err != nil {
				return nil, fmt.Errorf("exec_env_values[%q]: %q: %v", name, v, err)
			}
			c.execEnvValues[strings.ToUpper(name)] = append(c.execEnvValues[strings.ToUpper(name)], re)
		}
	}
	for prog, vals := range t.ProgramVariables {
		for _, v := range vals {
			re, err := globRegexp(strings.ToLower(v))
			if err != nil {
				return nil, fmt.Errorf("program_variables[%q]: %q: %v", prog, v, err)
			}
			c.progVars[prog] = append(c.progVars[prog], re)
		}
	}
	if len(t.NetworkPrograms) > 0 {
		// Network rules use the same matcher as command rules, so that
		// `git push` is the subcommand and `curl` any curl.
		t.c = c
		rules, err := t.CompileRules(nil, t.NetworkPrograms)
		t.c = nil
		if err != nil {
			return nil, fmt.Errorf("network_programs: %w", err)
		}
		c.network = rules
	}
	return c, nil
}

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// unsafeName reports whether assigning name changes what runs: an entry
// of UnsafeEnv or ExecEnv, compared without case, "*" ending a prefix, or
// a variable the shell itself interprets.
func (t *Tables) unsafeName(name string) bool {
	if t.tables().shellVars[name] {
		return true
	}
	for _, list := range [][]string{t.UnsafeEnv, t.ExecEnv} {
		for _, u := range list {
			if p, ok := strings.CutSuffix(u, "*"); ok {
				if strings.HasPrefix(strings.ToUpper(name), strings.ToUpper(p)) {
					return true
				}
			} else if strings.EqualFold(name, u) {
				return true
			}
		}
	}
	return false
}

// unsafeValue reports whether a value of name runs a command
// (GOFLAGS=-toolexec=…); a value computed at run time might.
func (t *Tables) unsafeValue(name string, value word) bool {
	res, ok := t.tables().execEnvValues[strings.ToUpper(name)]
	if !ok {
		return false
	}
	if value.kind != literal {
		return true
	}
	v := strings.ToLower(value.text)
	for _, re := range res {
		if re.MatchString(v) {
			return true
		}
	}
	return false
}

// canonicalName is the name the tables know a program by: its aliases
// (vim.basic is vim), a Debian version suffix (gcc-12) and a target
// triplet (x86_64-linux-gnu-gcc) removed.
func (t *Tables) canonicalName(name string) string {
	c := t.tables()
	if a, ok := c.aliases[name]; ok {
		return a
	}
	if !strings.ContainsAny(name, "-.") {
		return name // no triplet, version or loader to take off
	}
	n := name
	if loader.MatchString(n) {
		return "ld.so" // ld-linux-x86-64.so.2 PROGRAM runs PROGRAM
	}
	if m := triplet.FindStringIndex(n); m != nil {
		n = n[m[1]:]
	}
	if m := tripletSuffix.FindStringIndex(n); m != nil && m[0] > 0 {
		n = n[:m[0]]
	}
	if m := dashVersion.FindStringIndex(n); m != nil && m[0] > 0 {
		n = n[:m[0]]
	}
	if a, ok := c.aliases[n]; ok {
		return a
	}
	if v := withoutVersion(n); v != n && v != "" {
		if a, ok := c.aliases[v]; ok {
			return a // pdb3.11 is pdb
		}
	}
	return n
}

var (
	triplet = regexp.MustCompile(`^[a-z0-9_]+-(?:[a-z0-9_]+-)?linux-[a-z0-9_]+-`)
	// perl5.36-x86_64-linux-gnu: Debian's name of a program by its target
	tripletSuffix = regexp.MustCompile(`-[a-z0-9_]+-(?:[a-z0-9_]+-)?linux-[a-z0-9_]+$`)
	dashVersion   = regexp.MustCompile(`-[0-9]+(?:\.[0-9]+)*$`)
	loader        = regexp.MustCompile(`^ld(?:-[A-Za-z0-9_.-]+)?\.so(?:\.[0-9]+)*$`)
)

// inline returns the inline-code options of an interpreter.
func (t *Tables) inline(name string) ([]string, bool) {
	if opts, ok := t.InlineCode[name]; ok {
		return opts, true
	}
	if !versioned(name) {
		return nil, false // no key differs from it by case or a version
	}
	for prog, opts := range t.InlineCode {
		if sameProgram(name, prog) {
			return opts, true
		}
	}
	return nil, false
}

// versioned reports a name that may be a table key with a version suffix
// or in another case (python3.12, Python, python3-dbg).
func versioned(name string) bool {
	return strings.ContainsAny(name, "0123456789-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// withoutVersion is name without a version suffix of digits and dots
// (python3.12 is python), for looking tables up by program.
func withoutVersion(name string) string {
	return strings.TrimRight(name, "0123456789.")
}
