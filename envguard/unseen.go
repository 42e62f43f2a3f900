package envguard

import (
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true,
	"rbash": true, "yash": true, "posh": true, "ksh93": true, "pdksh": true, "oksh": true, "lksh": true, "fish": true, "csh": true,
	"tcsh": true, "elvish": true, "nu": true, "xonsh": true}

func isShell(name string) bool {
	return shellNames[name] || shellNames[strings.TrimRight(name, "0123456789.")]
}

// shellSpec is the option grammar shells share: any letter may be a flag
// (shells have dozens), -o and -O take a shell option, -c makes the first
// operand the script. fish takes the script as -c's own value.
var shellSpec = optSpec{flags: "abcefhiklmnprstuvxBCDEHPTGLMNRSXYZdgjqwyIJKUVWF", values: "oO", plus: true, long: merge(
	longs(longFlag, "login", "noprofile", "norc", "posix", "restricted", "verbose", "version", "help", "debugger", "dump-strings",
		"dump-po-strings", "noediting", "pretty-print", "wordexp", "interactive", "no-config", "no-execute", "private", "emulate", "no-rcs",
		"no-globalrcs"),
	longs(longValue, "rcfile", "init-file", "debug", "features", "profile", "init-command", "command"))}

var fishSpec = optSpec{flags: "ilnNPvh", values: "cCdop", long: merge(
	longs(longFlag, "interactive", "login", "no-execute", "no-config", "private", "version", "help", "print-rusage-self", "print-debug-categories"),
	longs(longValue, "command", "init-command", "debug", "debug-output", "features", "profile", "profile-startup"))}

// shell follows a shell's script: -c's string is parsed like the command
// itself; a script file is a program that runs a file (a documented limit);
// a script from stdin, a process substitution or a computed string cannot
// be seen.
func (a *analyzer) shell(ctx leafCtx, name string, args []word, depth int) error {
	if name == "fish" {
		opts, rest, unknown := fishSpec.scan(args)
		if unknown != "" {
			a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+")", ctx.src)
		}
		scripts := values(opts, "-c", "--command", "-C", "--init-command")
		for _, s := range scripts {
			if err := a.scriptWord(ctx, name+" -c", s, nil, depth); err != nil {
				return err
			}
		}
		if len(scripts) == 0 {
			a.scriptOperand(ctx, name, args[rest:])
		}
		return nil
	}
	opts, rest, unknown := shellSpec.scan(args)
	if unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+")", ctx.src)
	}
	for _, o := range opts {
		if o.name == "--init-command" || o.name == "--command" {
			if err := a.scriptWord(ctx, name+" "+o.name, o.value, nil, depth); err != nil {
				return err
			}
		}
		if o.name == "--rcfile" || o.name == "--init-file" {
			a.unseen(name+" "+o.name+" (a startup file it runs)", ctx.src)
		}
	}
	if has(opts, "-k") || slices.ContainsFunc(values(opts, "-o"), func(w word) bool { return w.text == "keyword" }) {
		a.unseen(name+" -k (assignments anywhere on a command line)", ctx.src)
	}
	if has(opts, "-c") {
		if rest >= len(args) {
			return nil // "-c: option requires an argument": nothing runs
		}
		return a.scriptWord(ctx, name+" -c", args[rest], args[rest+1:], depth)
	}
	if has(opts, "-s") {
		a.stdinScript(ctx, name+" -s")
		return nil
	}
	a.scriptOperand(ctx, name, args[rest:])
	return nil
}

// scriptOperand judges the script operand of a shell or interpreter: a
// named file is a documented limit; stdin, a descriptor or a substitution
// is code toolpdp cannot see.
func (a *analyzer) scriptOperand(ctx leafCtx, name string, operands []word) {
	if len(operands) == 0 {
		a.stdinScript(ctx, name+" reading its script from stdin")
		return
	}
	s := operands[0]
	switch {
	case s.home:
	case s.kind == opaque:
		a.unseen(name+" running a script named at run time ("+clip(s.text)+")", ctx.src)
	case s.kind == literal && stdinAlias(s.text):
		a.unseen(name+" reading its script from "+s.text, ctx.src)
	}
}

// stdinScript records a program reading code from its stdin, unless stdin
// is a named file (the same as running that file).
func (a *analyzer) stdinScript(ctx leafCtx, what string) {
	if ctx.stdinFile && !ctx.stdinPiped {
		return
	}
	a.unseen(what, ctx.src)
}

// checkProgram records what a program's arguments run that no leaf shows.
func (a *analyzer) checkProgram(ctx leafCtx, name string, args []word) {
	switch name {
	case "eval":
		a.unseen("eval", ctx.src)
	case "set":
		// set -k (keyword): NAME=value words anywhere on a later line are
		// environment settings, which no assignment check sees.
		for i, w := range args {
			if w.kind != literal {
				continue
			}
			if (strings.HasPrefix(w.text, "-") || strings.HasPrefix(w.text, "+")) && !strings.HasPrefix(w.text, "--") && strings.ContainsRune(w.text[1:], 'k') ||
				(w.text == "-o" || w.text == "+o") && i+1 < len(args) && args[i+1].text == "keyword" {
				a.unseen("set -k (assignments anywhere on a command line)", ctx.src)
				break
			}
		}
	case "cd", "pushd":
		for _, w := range args {
			if w.kind == literal || w.home {
				a.protectedPath(ctx, name+" moving", w.text)
			}
		}
	case "source", ".":
		a.scriptSource(ctx, name, args)
	case "trap":
		a.trap(ctx, args)
	case "alias":
		for _, w := range args {
			if w.kind != literal || strings.Contains(w.text, "=") {
				a.unseen("alias definition", ctx.src)
				break
			}
		}
	case "hash":
		if hasShortLetter(args, 'p') {
			a.unseen("hash -p (a program under another name)", ctx.src)
		}
	case "enable":
		if len(args) > 0 {
			a.unseen("enable (loading or switching shell builtins)", ctx.src)
		}
	case "fc":
		a.unseen("fc (re-running history)", ctx.src)
	case "compgen", "complete":
		if hasShortLetter(args, 'C') || hasShortLetter(args, 'F') {
			a.unseen(name+" -C/-F (a command it runs)", ctx.src)
		}
	case "mapfile", "readarray":
		if hasShortLetter(args, 'C') {
			a.unseen(name+" -C (a callback it evaluates)", ctx.src)
		}
		a.assignedNames(ctx, args, "dnOsuCc")
	case "jobs":
		if hasShortLetter(args, 'x') {
			a.unseen("jobs -x (a command it runs)", ctx.src)
		}
	case "read":
		a.assignedNames(ctx, args, "adinNptu")
	case "printf":
		if len(args) >= 2 && args[0].kind == literal && args[0].text == "-v" {
			a.assignedNames(ctx, args[1:2], "")
		}
	case "getopts":
		if len(args) >= 2 {
			a.assignedNames(ctx, args[1:2], "")
		}
	case "wait":
		for i, w := range args {
			if w.kind == literal && w.text == "-p" && i+1 < len(args) {
				a.assignTarget(ctx, args[i+1])
			}
		}
	case "unset":
		// unset 'a[$(cmd)0]' evaluates the subscript.
		for _, w := range args {
			if w.kind == literal && strings.HasPrefix(w.text, "-") {
				continue
			}
			if w.kind != literal {
				a.unseen("unset of a name computed at run time ("+clip(w.text)+")", ctx.src)
				continue
			}
			if _, sub, ok := strings.Cut(w.text, "["); ok {
				a.evaluated(ctx, "a subscript", word{text: strings.TrimSuffix(sub, "]"), kind: literal})
			}
		}
	case "let":
		for _, w := range args {
			a.evaluated(ctx, "let", w)
		}
	case "declare", "typeset", "local", "export", "readonly":
		for _, w := range args {
			if w.kind == literal && strings.HasPrefix(w.text, "-") {
				if strings.ContainsAny(w.text, "in") {
					a.unseen(name+" "+w.text+" (values evaluated as arithmetic or names)", ctx.src)
				}
				continue
			}
			a.declArg(ctx, name, w)
		}
	case "test", "[":
		for i, w := range args {
			if w.kind == literal && (w.text == "-v" || w.text == "-R") && i+1 < len(args) {
				a.evaluated(ctx, "test -v", args[i+1])
			}
		}
	}
	if opts, ok := a.t.inline(name); ok {
		if commandReaders[name] {
			a.commandReader(ctx, name, opts, args)
		} else {
			a.interpreter(ctx, name, opts, args)
		}
	}
	if name == "make" || name == "gmake" {
		a.make(ctx, args)
	}
	if writers[name] {
		for _, w := range args {
			if w.kind != pattern { // operands, option values (--target-directory=.git/hooks, of=.git/config), $HOME/.gitconfig as written
				a.protectedPath(ctx, name+" writing", w.text)
			}
		}
	}
	switch strings.TrimRight(name, "0123456789.") {
	case "awk", "gawk", "mawk", "nawk":
		a.awk(ctx, args)
	case "sed", "gsed":
		a.sed(ctx, args)
	}
	a.execOptions(ctx, name, args)
}

// make reads a makefile from stdin with -f - (code from stdin), and a
// variable given on its command line may call a function ($(shell …)).
func (a *analyzer) make(ctx leafCtx, args []word) {
	for i, w := range args {
		if w.kind != literal {
			continue
		}
		file, isFile := "", false
		switch {
		case w.text == "-f" || w.text == "--file" || w.text == "--makefile":
			if i+1 < len(args) {
				file, isFile = args[i+1].text, true
			}
		case strings.HasPrefix(w.text, "-f"):
			file, isFile = w.text[2:], true
		case strings.HasPrefix(w.text, "--file=") || strings.HasPrefix(w.text, "--makefile="):
			_, file, isFile = strings.Cut(w.text, "=")
		case !strings.HasPrefix(w.text, "-") && strings.Contains(w.text, "=") && smuggles(w.text):
			a.unseen("a make variable holding a function call ("+clip(w.text)+")", ctx.src)
		}
		if isFile && stdinAlias(file) {
			a.unseen("make reading its makefile from "+file, ctx.src)
		}
	}
}

// writers are programs whose operands are often files they write: aimed
// into version-control metadata or agent configuration, they are asked.
var writers = map[string]bool{"cp": true, "mv": true, "tee": true, "ln": true, "install": true, "rsync": true, "dd": true,
	"sed": true, "truncate": true, "touch": true, "chmod": true, "patch": true, "unzip": true, "tar": true, "curl": true,
	"wget": true}

func hasShortLetter(args []word, c byte) bool {
	for _, w := range args {
		if w.kind != literal {
			if w.kind == opaque {
				return true
			}
			continue
		}
		if strings.HasPrefix(w.text, "-") && !strings.HasPrefix(w.text, "--") && strings.IndexByte(w.text, c) > 0 {
			return true
		}
	}
	return false
}

func (a *analyzer) scriptSource(ctx leafCtx, name string, args []word) {
	if len(args) == 0 {
		return
	}
	s := args[0]
	if s.kind == literal && s.text == "--" && len(args) > 1 {
		s = args[1]
	}
	switch {
	case s.home:
		// ~/.bashrc: a file, like any other script file
	case s.kind != literal:
		a.unseen(name+" of a script named at run time ("+clip(s.text)+")", ctx.src)
	case stdinAlias(s.text):
		a.unseen(name+" reading a script from "+s.text, ctx.src)
	}
}

// trap with a command runs it later; trap - SIG, trap ” SIG, trap -l and
// trap -p do not.
func (a *analyzer) trap(ctx leafCtx, args []word) {
	for len(args) > 0 && args[0].kind == literal && (args[0].text == "-l" || args[0].text == "-p" || args[0].text == "-P" || args[0].text == "--") {
		args = args[1:]
	}
	if len(args) < 2 {
		return
	}
	if c := args[0]; c.kind == literal && (c.text == "" || c.text == "-") {
		return
	}
	a.unseen("trap with a command", ctx.src)
}

// interpreter records inline code (python -c), a program read from stdin,
// and options computed at run time before the script.
func (a *analyzer) interpreter(ctx leafCtx, name string, inline []string, args []word) {
	for _, w := range args {
		if w.kind == opaque {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		if w.kind != literal {
			return // a glob: taken as the script operand
		}
		t := w.text
		for _, o := range inline {
			if inlineOption(t, o) {
				a.unseen(name+" "+o+" (inline code)", ctx.src)
				return
			}
		}
		switch {
		case t == "--":
			continue
		case t == "-":
			a.unseen(name+" reading its program from stdin", ctx.src)
			return
		case t == "--version" || t == "-V" || t == "--help" || t == "-h" || (t == "-v" && strings.HasPrefix(name, "perl")):
			return
		case strings.Contains(t, "data:"):
			a.unseen(name+" loading code from a data: URL", ctx.src)
			return
		case strings.HasPrefix(t, "-"):
			continue
		}
		if stdinAlias(t) {
			a.unseen(name+" reading its program from "+t, ctx.src)
		}
		return // the script operand: a program that runs a file it is given
	}
	a.stdinScript(ctx, name+" reading its program from stdin")
}

// commandReaders read a command language from stdin (or options anywhere
// among their arguments) that can run shell commands: ed's !, dc's !,
// psql's \!, sqlite3's .shell. Their operands are data, not a script.
var commandReaders = map[string]bool{"ed": true, "ex": true, "dc": true, "sqlite3": true, "psql": true, "mysql": true,
	"mariadb": true, "ftp": true, "lftp": true, "at": true, "batch": true}

func (a *analyzer) commandReader(ctx leafCtx, name string, inline []string, args []word) {
	if name == "at" || name == "batch" {
		a.unseen(name+" (commands scheduled to run later)", ctx.src)
		return
	}
	for _, w := range args {
		if w.kind == opaque {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		for _, o := range inline {
			if w.kind == literal && inlineOption(w.text, o) {
				a.unseen(name+" "+o+" (commands in its own language)", ctx.src)
				return
			}
		}
		if name == "sqlite3" && w.kind == literal && sqliteShell.MatchString(w.text) {
			a.unseen("sqlite3 running a shell command", ctx.src)
			return
		}
	}
	operands := 0
	for _, w := range args {
		if w.kind == literal && (w.text == "-f" || strings.HasPrefix(w.text, "--file")) {
			return // commands from a named file: a documented limit
		}
		if !strings.HasPrefix(w.text, "-") {
			operands++
		}
	}
	if name == "sqlite3" && operands >= 2 {
		return // the SQL is the second operand: stdin is not read
	}
	if ctx.stdinPiped || !ctx.stdinFile {
		a.unseen(name+" reading its commands from stdin", ctx.src)
	}
}

var sqliteShell = regexp.MustCompile(`\.(shell|system|sh|once|output|import)\b|\||(?i)\bedit\s*\(`)

// inlineOption reports whether arg gives the inline-code option o: exactly,
// with its value attached (-cCODE, --eval=CODE), or among grouped letters
// (python -Sc, perl -ne, node -pe).
func inlineOption(arg, o string) bool {
	if arg == o {
		return true
	}
	if strings.HasPrefix(o, "--") {
		return strings.HasPrefix(arg, o+"=")
	}
	if !strings.HasPrefix(o, "-") {
		return false // a subcommand (deno eval): only as itself
	}
	if len(o) != 2 {
		return strings.HasPrefix(arg, o+"=")
	}
	if !strings.HasPrefix(arg, "-") || strings.HasPrefix(arg, "--") {
		return false
	}
	if strings.HasPrefix(arg, o) {
		return true
	}
	group := arg[1:]
	if len(group) > 6 {
		return false
	}
	for i := 0; i < len(group); i++ {
		c := group[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return strings.IndexByte(group, o[1]) >= 0
}

var awkSpec = optSpec{flags: "bcCDghLMnNOPrsStVyZ", values: "fvFeEilW", long: merge(
	longs(longFlag, "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "lint", "bignum", "use-lc-numeric",
		"non-decimal-data", "optimize", "posix", "re-interval", "no-optimize", "sandbox", "lint-old", "version", "csv"),
	longs(longValue, "file", "assign", "field-separator", "source", "exec", "include", "load"),
	longs(longOptional, "dump-variables", "debug", "pretty-print", "profile"))}

// awkCommand finds the awk features that run commands: system(), a pipe to
// or from a command (print | "cmd", "cmd" | getline), coprocesses and
// extensions.
var awkCommand = regexp.MustCompile(`system\s*\(|(^|[^|])\|($|[^|])|\|&|@load`)

func (a *analyzer) awk(ctx leafCtx, args []word) {
	opts := a.textProgram(ctx, "awk", args, textLanguage{spec: &awkSpec, text: []string{"-e", "--source"},
		files: []string{"-f", "--file", "-E", "--exec", "-i", "--include"}, runs: awkCommand.MatchString,
		what: "an awk program that runs commands (system, a pipe or getline from a command)"})
	if has(opts, "-l", "--load") {
		a.unseen("awk loading an extension", ctx.src)
	}
}

var sedSpec = optSpec{flags: "nErsuzi", values: "efl", long: merge(
	longs(longFlag, "quiet", "silent", "debug", "posix", "regexp-extended", "separate", "sandbox", "unbuffered", "null-data",
		"zero-terminated", "follow-symlinks", "help", "version", "binary"),
	longs(longValue, "expression", "file", "line-length"),
	longs(longOptional, "in-place"))}

func (a *analyzer) sed(ctx leafCtx, args []word) {
	a.textProgram(ctx, "sed", args, textLanguage{spec: &sedSpec, text: []string{"-e", "--expression"},
		files: []string{"-f", "--file"}, runs: sedRunsCommand, what: "a sed script with the e command or flag"})
}

// textLanguage is a program whose own language arrives as text (awk, sed):
// by option or else as the first operand; a program file is a documented
// limit unless it is stdin or named at run time.
type textLanguage struct {
	spec        *optSpec
	text, files []string
	runs        func(string) bool
	what        string
}

func (a *analyzer) textProgram(ctx leafCtx, name string, args []word, l textLanguage) []opt {
	opts, rest, unknown := l.spec.scan(args)
	if unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+")", ctx.src)
	}
	files := values(opts, l.files...)
	for _, f := range files {
		if f.kind != literal || stdinAlias(f.text) {
			a.unseen(name+" reading its program from "+clip(f.text), ctx.src)
		}
	}
	progs := values(opts, l.text...)
	if len(progs) == 0 && len(files) == 0 && rest < len(args) {
		progs = append(progs, args[rest])
	}
	for _, p := range progs {
		if p.kind != literal {
			a.unseen(name+"'s program computed at run time ("+clip(p.text)+")", ctx.src)
		} else if l.runs(p.text) {
			a.unseen(l.what, ctx.src)
		}
	}
	return opts
}

// execOptions records options of the exec_options table: an option that
// makes a program run a command (git -c core.pager=…, tar --to-command).
func (a *analyzer) execOptions(ctx leafCtx, name string, args []word) {
	for prog, list := range a.t.ExecOptions {
		if !sameProgram(name, prog) {
			continue
		}
		for i, w := range args {
			if w.kind != literal {
				continue
			}
			text := w.text
			if i == 0 && name == "tar" && text != "" && !strings.HasPrefix(text, "-") {
				text = "-" + text // tar's old style: tar xIf PROG a.tar
			}
			for _, o := range list {
				value, ok := optionValue(text, o.Option, args, i)
				if !ok {
					continue
				}
				if value.kind != literal || len(o.Values) == 0 || valueMatches(value.text, o.Values) {
					a.unseen(name+" "+o.Option+" (an option that runs a command)", ctx.src)
					return
				}
			}
		}
	}
}

// optionValue reports whether arg gives option o and returns its value:
// the next word, attached (-oX, --opt=X) or after grouped letters (-xI).
func optionValue(arg, o string, args []word, i int) (word, bool) {
	next := func() word {
		if i+1 < len(args) {
			return args[i+1]
		}
		return word{kind: literal}
	}
	switch {
	case arg == o:
		return next(), true
	case len(o) < 2:
		// "+" (vim +cmd): the value is attached.
		if v, ok := strings.CutPrefix(arg, o); ok && o != "" {
			return word{text: v, kind: literal}, true
		}
		return word{}, false
	case strings.HasPrefix(o, "--"):
		// --to-command, or an abbreviation getopt_long accepts (--to-comm).
		name, v, hasValue := strings.Cut(arg, "=")
		if len(name) < 3 || !strings.HasPrefix(name, "--") || !strings.HasPrefix(o, name) {
			return word{}, false
		}
		if hasValue {
			return word{text: v, kind: literal}, true
		}
		return next(), true
	case len(o) > 2:
		if v, ok := strings.CutPrefix(arg, o+"="); ok {
			return word{text: v, kind: literal}, true
		}
		return word{}, false
	case strings.HasPrefix(arg, o):
		return word{text: arg[len(o):], kind: literal}, true
	case strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--"):
		if j := strings.IndexByte(arg[1:], o[1]); j >= 0 {
			if rest := arg[j+2:]; rest != "" {
				return word{text: rest, kind: literal}, true
			}
			return next(), true
		}
	}
	return word{}, false
}

// valueMatches compares an option's value (or its key, before = or a
// blank) with glob patterns, without regard to case.
func valueMatches(v string, patterns []string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	key := v
	if i := strings.IndexAny(v, "= \t"); i >= 0 {
		key = v[:i]
	}
	for _, p := range patterns {
		re := globRegexp(strings.ToLower(p))
		if re.MatchString(key) || re.MatchString(v) {
			return true
		}
	}
	return false
}

// globRegexp compiles a simple glob (* and ? only; * spans anything).
func globRegexp(p string) *regexp.Regexp {
	q := regexp.QuoteMeta(p)
	q = strings.ReplaceAll(q, `\*`, ".*")
	q = strings.ReplaceAll(q, `\?`, ".")
	return regexp.MustCompile("^" + q + "$")
}

// smuggles reports text that bash would evaluate as code if it expanded it
// again: a command substitution, a backtick or a parameter expansion.
func smuggles(s string) bool {
	return strings.Contains(s, "$(") || strings.Contains(s, "`") || strings.Contains(s, "${") || strings.Contains(s, "$[")
}

// evaluated checks a word that bash evaluates again as a name or an
// arithmetic expression (let, test -v, a declare subscript): literal code
// in it runs, and so does a variable's value from elsewhere.
func (a *analyzer) evaluated(ctx leafCtx, what string, w word) {
	if w.kind != literal {
		a.unseen(what+" of a value computed at run time ("+clip(w.text)+")", ctx.src)
		return
	}
	if smuggles(w.text) {
		a.unseen(what+" of text holding code ("+clip(w.text)+")", ctx.src)
		return
	}
	for _, name := range identifiers(w.text) {
		if a.dirty(name) {
			a.unseen(what+" of $"+name+", a value from elsewhere that bash evaluates as code", ctx.src)
			return
		}
	}
}

// assignedNames handles builtins that assign to names (read, mapfile,
// printf -v, getopts): such a variable's value comes from elsewhere, a
// subscript in the name is evaluated, and some names change what runs.
func (a *analyzer) assignedNames(ctx leafCtx, args []word, valueLetters string) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && strings.HasPrefix(w.text, "-") {
			if len(w.text) == 2 && strings.IndexByte(valueLetters, w.text[1]) >= 0 {
				i++
			}
			continue
		}
		a.assignTarget(ctx, w)
	}
}

func (a *analyzer) assignTarget(ctx leafCtx, w word) {
	if w.kind != literal {
		a.unseen("an assignment to a name computed at run time ("+clip(w.text)+")", ctx.src)
		return
	}
	name, sub, hasSub := strings.Cut(w.text, "[")
	if a.t.unsafeName(name) {
		a.unseen("setting "+name+", which changes what a program runs", ctx.src)
	}
	if hasSub {
		a.evaluated(ctx, "a subscript", word{text: strings.TrimSuffix(sub, "]"), kind: literal})
	}
}

// declArg checks one argument of declare/export/local given as words.
func (a *analyzer) declArg(ctx leafCtx, what string, w word) {
	if w.kind != literal {
		a.unseen(what+" of words computed at run time ("+clip(w.text)+")", ctx.src)
		return
	}
	name, value, _ := strings.Cut(w.text, "=")
	a.assignTarget(ctx, word{text: name, kind: literal})
	if strings.HasPrefix(value, "(") && strings.ContainsAny(value, "$`") {
		// declare 'a=([$i]=1)': bash parses the compound assignment again,
		// subscripts and expansions included.
		a.unseen("a compound assignment in one word, parsed again ("+clip(w.text)+")", ctx.src)
	}
	if smuggles(value) {
		a.unseen("a value holding code for a later expansion ("+clip(w.text)+")", ctx.src)
	}
}

// identifiers are the variable names an arithmetic expression mentions.
func identifiers(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			for i < len(s) && (isIdent(s[i]) || s[i] == '#') {
				i++
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ---- the script's variables, and the places bash evaluates them as code

// numericVars are the shell's own variables, always numbers.
var numericVars = map[string]bool{"RANDOM": true, "LINENO": true, "SECONDS": true, "BASHPID": true, "PPID": true, "UID": true,
	"EUID": true, "EPOCHSECONDS": true, "SRANDOM": true, "SHLVL": true, "OPTIND": true, "HISTCMD": true, "#": true, "?": true,
	"$": true, "!": true}

// dirty reports a variable whose value may come from outside the command:
// assigned from a substitution, read from input, or never assigned here
// (the environment, or an earlier command of a persistent shell).
func (a *analyzer) dirty(name string) bool {
	if numericVars[name] {
		return false
	}
	d, ok := a.vars[name]
	return !ok || d
}

func (a *analyzer) assigned(name string, dirty bool) {
	if a.vars == nil {
		a.vars = map[string]bool{}
	}
	a.vars[name] = a.vars[name] || dirty
}

// collectVars records every variable the script assigns, and whether each
// value is a plain literal, before the walk that judges their uses.
func (a *analyzer) collectVars(src string, file *syntax.File) {
	a.vars = map[string]bool{}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil {
				a.assigned(n.Name.Value, !cleanAssign(src, n))
			}
		case *syntax.WordIter:
			// for i; iterates over "$@": values from elsewhere.
			a.assigned(n.Name.Value, !n.InPos.IsValid() || !allClean(src, n.Items))
		case *syntax.BinaryArithm:
			if isArithmAssign(n.Op) {
				if w, ok := n.X.(*syntax.Word); ok && len(w.Parts) == 1 {
					if l, ok := w.Parts[0].(*syntax.Lit); ok {
						a.assigned(l.Value, false)
					}
				}
			}
		case *syntax.UnaryArithm:
			if w, ok := n.X.(*syntax.Word); ok && len(w.Parts) == 1 {
				if l, ok := w.Parts[0].(*syntax.Lit); ok && (n.Op == syntax.Inc || n.Op == syntax.Dec) {
					a.assigned(l.Value, false)
				}
			}
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true
			}
			prog := wordOf(src, n.Args[0])
			switch prog.text {
			case "read", "mapfile", "readarray", "getopts", "printf", "wait":
				for _, w := range n.Args[1:] {
					if t := wordOf(src, w); t.kind == literal && syntax.ValidName(t.text) {
						a.assigned(t.text, true)
					}
				}
			}
		}
		return true
	})
}

func isArithmAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// cleanAssign reports an assignment of plain literals (or arithmetic
// results, which are numbers).
func cleanAssign(src string, as *syntax.Assign) bool {
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			if e.Value != nil && !cleanWord(src, e.Value) {
				return false
			}
		}
		return true
	}
	return as.Value == nil || cleanWord(src, as.Value)
}

func cleanWord(src string, w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted, *syntax.ArithmExp:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				switch q.(type) {
				case *syntax.Lit, *syntax.ArithmExp:
				default:
					return false
				}
			}
		default:
			return false
		}
	}
	switch v := wordOf(src, w); v.kind {
	case opaque:
		return true // arithmetic only: a number
	case literal:
		return !smuggles(v.text)
	}
	return false // a glob: file names are anybody's text
}

func allClean(src string, items []*syntax.Word) bool {
	for _, w := range items {
		if !cleanWord(src, w) {
			return false
		}
	}
	return true
}

// assign checks one NAME=VALUE of the script: some names change what runs;
// a literal value holding code is evaluated if bash expands it again; a
// subscript is arithmetic.
func (a *analyzer) assign(src string, as *syntax.Assign, standalone bool) {
	ctx := leafCtx{src: source(src, as)}
	if as.Name != nil && a.t.unsafeName(as.Name.Value) {
		a.unseen("setting "+as.Name.Value+", which changes what a program runs", ctx.src)
	}
	if as.Value != nil {
		if v := wordOf(src, as.Value); v.kind == literal && smuggles(v.text) {
			a.unseen("a value holding code for a later expansion ("+clip(source(src, as))+")", ctx.src)
		}
	}
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			if e.Value != nil {
				if v := wordOf(src, e.Value); v.kind == literal && smuggles(v.text) {
					a.unseen("a value holding code for a later expansion ("+clip(source(src, as))+")", ctx.src)
				}
			}
			if e.Index != nil { // a=([i]=1): an indexed array's subscript is arithmetic
				a.arithm(src, as, e.Index)
			}
		}
	}
	if as.Index != nil {
		a.arithm(src, as, as.Index)
	}
}

// arithm checks an arithmetic expression: bash evaluates a variable's value
// as an expression, subscripts and substitutions included.
func (a *analyzer) arithm(src string, at syntax.Node, x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if !a.expansionInArithm(src, at, n) {
			return false
		}
		switch n := n.(type) {
		case *syntax.Lit:
			for _, name := range identifiers(n.Value) {
				if a.dirty(name) {
					a.unseen("arithmetic on "+name+", a value from elsewhere that bash evaluates as code", source(src, at))
					return false
				}
			}
		case *syntax.SglQuoted, *syntax.DblQuoted:
			// Quoted text in arithmetic is evaluated once unquoted; $'…'
			// decodes escapes first ($'\x24(' is "$(").
			w := wordOf("", &syntax.Word{Parts: []syntax.WordPart{n.(syntax.WordPart)}})
			if w.kind != literal || smuggles(w.text) || len(identifiers(w.text)) > 0 && a.anyDirty(w.text) {
				a.unseen("arithmetic on quoted text holding code or a value from elsewhere", source(src, at))
				return false
			}
		}
		return true
	})
}

// anyDirty reports whether text names a variable whose value may come from
// elsewhere.
func (a *analyzer) anyDirty(text string) bool {
	for _, name := range identifiers(text) {
		if a.dirty(name) {
			return true
		}
	}
	return false
}

// paramExp checks the expansions that evaluate: a subscript or a substring
// offset is arithmetic; ${!x} expands the variable x names.
func (a *analyzer) paramExp(src string, p *syntax.ParamExp) {
	if p.Index != nil {
		if w, ok := p.Index.(*syntax.Word); !ok || !isAllIndex(w) {
			a.arithm(src, p, p.Index)
		}
	}
	if p.Slice != nil {
		a.arithm(src, p, p.Slice.Offset)
		a.arithm(src, p, p.Slice.Length)
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps && p.Exp.Word != nil && strings.Contains(source(src, p.Exp.Word), "P") {
		a.unseen("${x@P}, a prompt expansion that runs substitutions in a value", source(src, p))
	}
	if p.Excl && p.Names == 0 && p.Index == nil && p.Param != nil && a.dirty(p.Param.Value) {
		a.unseen("${!"+p.Param.Value+"}, an indirection through a value from elsewhere", source(src, p))
	}
}

func isAllIndex(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && (l.Value == "@" || l.Value == "*")
}

// testClause checks [[ ]]: -eq and its kin compare arithmetic expressions,
// -v evaluates a name's subscript.
func (a *analyzer) testClause(src string, t *syntax.TestClause) {
	syntax.Walk(t.X, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, side := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := side.(*syntax.Word); ok {
						a.arithmWord(src, t, w)
					}
				}
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				if w, ok := n.X.(*syntax.Word); ok {
					a.evaluated(leafCtx{src: source(src, t)}, "[[ -v ]]", wordOf(src, w))
				}
			}
		}
		return true
	})
}

// arithmWord checks a word used as an arithmetic expression: its text after
// expansion is evaluated.
func (a *analyzer) arithmWord(src string, at syntax.Node, w *syntax.Word) {
	v := wordOf(src, w)
	if v.kind == literal {
		a.evaluated(leafCtx{src: source(src, at)}, "arithmetic", v)
		return
	}
	syntax.Walk(w, func(n syntax.Node) bool { return a.expansionInArithm(src, at, n) })
}

// expansionInArithm records an expansion whose text arithmetic evaluates:
// a command's output, or a variable's value from elsewhere. It reports
// whether to look further inside n.
func (a *analyzer) expansionInArithm(src string, at, n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CmdSubst:
		a.unseen("arithmetic on the output of a command", source(src, at))
		return false
	case *syntax.ParamExp:
		if n.Param != nil && a.dirty(n.Param.Value) {
			a.unseen("arithmetic on $"+n.Param.Value+", a value from elsewhere that bash evaluates as code", source(src, at))
			return false
		}
	}
	return true
}

// declClause checks declare/local/export/readonly/typeset as bash parses
// them: -i and -n make values arithmetic or names; names and values are
// assignments.
func (a *analyzer) declClause(src string, d *syntax.DeclClause) {
	ctx := leafCtx{src: source(src, d)}
	for _, as := range d.Args {
		if as.Naked && as.Name == nil {
			v := wordOf(src, as.Value)
			if v.kind == literal && strings.HasPrefix(v.text, "-") {
				if strings.ContainsAny(v.text, "in") {
					a.unseen(d.Variant.Value+" "+v.text+" (values evaluated as arithmetic or names)", ctx.src)
				}
				continue
			}
			a.declArg(ctx, d.Variant.Value, v)
			continue
		}
		a.assign(src, as, true)
	}
}
