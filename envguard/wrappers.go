package envguard

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// wrapper is a program whose operands are another command to run, with its
// whole option grammar: an option it does not know makes what runs behind
// it uncertain.
type wrapper struct {
	opts optSpec
	// operands come before the command: timeout's DURATION, chroot's NEWROOT.
	operands int
	// assigns: NAME=VALUE words may precede the command (env, sudo).
	assigns bool
	// scripts are options whose value is a shell command (flock -c, su -c).
	scripts []string
	// none are options with which no command runs (command -v).
	none []string
	// shell: with no command, the wrapper starts a shell that reads stdin.
	shell bool
	// files: the operands are files, not a command (script's typescript).
	files bool
}

// runner records the commands a runner may run.
func (a *analyzer) runner(ctx leafCtx, name string, args []word, depth int) error {
	if c := a.t.tables(); c.shellRunners[name] || c.shellRunners[a.t.canonicalName(name)] {
		operands := false
		for _, w := range args {
			operands = operands || w.kind != literal || !strings.HasPrefix(w.text, "-")
		}
		if !operands || ctx.stdinPiped || ctx.stdinFile {
			// with no command it starts a shell, which reads stdin
			a.stdinScript(ctx, name+" starting a shell that reads its stdin")
		}
	}
	for i, w := range args {
		text := w.text
		if w.kind == literal && (strings.HasPrefix(text, "-") || strings.HasPrefix(text, "+")) {
			_, text, _ = strings.Cut(text, "=")
		} else if k, v, ok := strings.Cut(text, "="); w.kind == literal && ok && !strings.ContainsAny(k, " \t") {
			text = v // scripts.t='curl x' (npm pkg set), NAME=value
		} else if w.kind == opaque && i > 0 && optionTakingValue(args[i-1]) && strings.ContainsAny(w.text, ":=/") {
			// -v "$PWD":/app: an option's value, not a command
		} else {
			if err := a.leaf(ctx, Leaf{}, args[i:], depth); err != nil {
				return err
			}
		}
		if w.kind == literal && strings.ContainsAny(text, " \t\n;|&") {
			if err := a.script(text, depth+1); err != nil {
				a.unseen(name+" with a command toolpdp cannot parse ("+clip(text)+")", ctx.src)
			}
		}
	}
	return nil
}

// gitGlobal is git's own options, before the subcommand.
// optionTakingValue reports an option word that may take the next word
// as its value: -v, --volume (not --volume=x, which has it).
func optionTakingValue(w word) bool {
	return w.kind == literal && strings.HasPrefix(w.text, "-") && w.text != "--" && !strings.Contains(w.text, "=")
}

// git follows the git subcommands that run commands: bisect run,
// submodule foreach, and config of a key that runs one (an alias, a pager,
// an editor, a hook path …, the keys of exec_options' git -c); and the
// ext:: transport, whose URL is a command.
func (a *analyzer) git(ctx leafCtx, args []word, depth int) error {
	for _, w := range args {
		if w.kind == literal && strings.Contains(strings.ToLower(w.text), "ext::") {
			a.unseen("git's ext:: transport (its URL is a command)", ctx.src)
		}
	}
	sc := a.t.tables().subcommands["git"]
	if sc == nil {
		return nil
	}
	at, sub, told := sc.find(args)
	if !told {
		if at < len(args) && args[at].kind != literal {
			a.unseen("a git subcommand computed at run time ("+clip(args[at].text)+"), which may be an alias", ctx.src)
		}
		return nil
	}
	if sub == "" {
		return nil
	}
	tail := args[at+1:]
	switch sub {
	case "config":
		var keys []*regexp.Regexp
		for _, o := range a.t.tables().execOptions["git"] {
			if o.option == "-c" {
				keys = o.values
			}
		}
		// Reading a key (git config --get k, git config k) sets nothing;
		// setting one (k v, --add, set k v) of a key that runs commands is
		// unseen.
		operands := 0
		for _, w := range tail {
			if w.kind != literal || !strings.HasPrefix(w.text, "-") || isNumber(w.text) {
				operands++
			}
		}
		if hasAnyLiteral(tail, "--rename-section") {
			// renaming a section makes its keys another section's (user.x into core.x)
			a.unseen("git config --rename-section (keys that may become ones that run commands)", ctx.src)
			break
		}
		if operands < 2 && !hasAnyLiteral(tail, "--add", "--replace-all", "-e", "--edit") {
			break
		}
		for _, w := range tail {
			if w.kind != literal || (!strings.HasPrefix(w.text, "-") && valueMatches(w.text, keys)) {
				a.unseen("git config of "+clip(w.text)+", a key that runs commands", ctx.src)
				break
			}
		}
	case "bisect":
		if len(tail) > 0 && tail[0].text == "run" {
			return a.leaf(ctx, Leaf{}, tail[1:], depth)
		}
	case "submodule":
		for i, w := range tail {
			if w.text == "foreach" {
				var cmd []string
				for _, c := range tail[i+1:] {
					if c.kind != literal {
						a.unseen("git submodule foreach with a command computed at run time", ctx.src)
						return nil
					}
					if !strings.HasPrefix(c.text, "-") || len(cmd) > 0 {
						cmd = append(cmd, c.text)
					}
				}
				return a.scriptWord(ctx, "git submodule foreach", word{text: strings.Join(cmd, " "), kind: literal}, nil, depth)
			}
		}
	}
	return nil
}

// busybox and toybox run their first operand as an applet.
func (a *analyzer) busybox(ctx leafCtx, _ string, args []word, depth int) error {
	if len(args) > 0 && args[0].kind == literal && !strings.HasPrefix(args[0].text, "-") {
		return a.leaf(ctx, Leaf{}, args, depth)
	}
	if len(args) > 0 && args[0].kind != literal {
		a.unseen("busybox running an applet named at run time ("+clip(args[0].text)+")", ctx.src)
	}
	return nil
}

// capsh runs /bin/bash with the words after "--" (capsh -- -c 'cmd'), or
// the program --shell names; its other options change capabilities.
func (a *analyzer) capsh(ctx leafCtx, name string, args []word, depth int) error {
	shell := word{text: "bash", kind: literal}
	for i, w := range args {
		if w.kind != literal {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return nil
		}
		if v, ok := strings.CutPrefix(w.text, "--shell="); ok {
			shell = word{text: v, kind: literal}
		}
		if w.text == "--" || w.text == "==" {
			return a.leaf(ctx, Leaf{}, append([]word{shell}, args[i+1:]...), depth)
		}
	}
	return nil
}

// pee (moreutils) runs each of its operands as a shell command, all fed
// its stdin.
func (a *analyzer) pee(ctx leafCtx, name string, args []word, depth int) error {
	for _, w := range args {
		if w.kind == literal && strings.HasPrefix(w.text, "-") {
			continue
		}
		if err := a.scriptWord(ctx, name, w, nil, depth); err != nil {
			return err
		}
	}
	return nil
}

// handlers are the wrappers and runners whose grammar is not a plain
// option list and a command: each one is a small function.
type handler func(a *analyzer, ctx leafCtx, name string, args []word, depth int) error

// handlerFor returns the handler of a program whose grammar is not a
// plain option list and a command; nil for the others.
func handlerFor(name string) handler {
	switch name {
	case "find":
		return func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.findExec(ctx, args, depth)
		}
	case "busybox", "toybox":
		return (*analyzer).busybox
	case "watch":
		return func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.watch(ctx, args, depth)
		}
	case "su", "runuser":
		return (*analyzer).su
	case "parallel":
		return func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.parallel(ctx, args, depth)
		}
	case "git":
		return func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error { return a.git(ctx, args, depth) }
	case "capsh":
		return (*analyzer).capsh
	case "pee":
		return (*analyzer).pee
	case "start-stop-daemon":
		return (*analyzer).startStop
	case "tmux":
		return (*analyzer).tmux
	case "--":
		// `time -- cmd`: the keyword's end of options, which the parser
		// leaves as the first word.
		return func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.leaf(ctx, Leaf{}, args, depth)
		}
	}
	return nil
}

// runs follows what a literal program runs: a builtin's code, a
// wrapper's command, a shell's script, an interpreter's inline code.
func (a *analyzer) runs(ctx leafCtx, name string, words []word, depth int) error {
	args := words[1:]
	canon := a.t.canonicalName(name)
	if err := a.builtin(ctx, name, args, depth); err != nil {
		return err
	}
	a.programChecks(ctx, name, canon, args)
	if isShell(name) || isShell(canon) {
		return a.shell(ctx, name, args, depth)
	}
	if h := handlerFor(canon); h != nil {
		return h(a, ctx, name, args, depth)
	}
	c := a.t.tables()
	if c.runners[name] || c.runners[canon] {
		a.fedFiles(ctx, name, args)
		return a.runner(ctx, name, args, depth)
	}
	if rest, ok := a.subRunner(canon, args); ok {
		a.fedFiles(ctx, name, args)
		return a.runner(ctx, name, rest, depth)
	}
	w, ok := c.wrappers[name]
	if !ok {
		w, ok = c.wrappers[canon]
	}
	if !ok {
		a.madeFiles(ctx, name, canon, args)
		return nil
	}
	return a.wrap(ctx, name, w, args, depth)
}

// madeFiles judges the files a process substitution makes for a program
// that runs no command of its own: only a program of the data_readers
// table reads one as data; any other may run what it holds (make -f
// <(…), a build tool's config).
func (a *analyzer) madeFiles(ctx leafCtx, name, canon string, args []word) {
	c := a.t.tables()
	if c.dataReaders[name] || c.dataReaders[canon] {
		return
	}
	for _, w := range args {
		if w.procSubst {
			a.unseen(name+" given a file a process substitution makes ("+clip(w.text)+"), which it may run", ctx.src)
			return
		}
	}
	a.fedFiles(ctx, name, args)
}

// fedFiles judges a descriptor given to a program as a file (kubectl
// --kubeconfig=/dev/stdin <<EOF, npm --userconfig /dev/stdin): a
// configuration the command itself feeds in, which may name programs to
// run. Only the data_readers read one as data.
func (a *analyzer) fedFiles(ctx leafCtx, name string, args []word) {
	c := a.t.tables()
	if c.dataReaders[name] || c.dataReaders[a.t.canonicalName(name)] {
		return
	}
	for _, w := range args {
		if w.kind != literal {
			continue
		}
		text := w.text
		if _, v, ok := strings.Cut(text, "="); ok && strings.HasPrefix(text, "-") {
			text = v
		}
		if text != "-" && devPath(text) == devStdin {
			a.unseen(name+" reading a file the command feeds in ("+clip(w.text)+"), which it may run", ctx.src)
			return
		}
	}
}

// subRunner reports a runner of one subcommand ("npm exec", "docker
// run") and the words after it. For a program of the subcommands table a
// subcommand it cannot tell may be any of them: every word is a command.
func (a *analyzer) subRunner(canon string, args []word) ([]word, bool) {
	c := a.t.tables()
	if !c.subRunners[canon] {
		return nil, false
	}
	if sc := c.subcommands[canon]; sc != nil {
		at, sub, told := sc.find(args)
		if !told {
			return args, true
		}
		if sub != "" && c.runners[canon+" "+sub] {
			return args[at+1:], true
		}
		return nil, false
	}
	for i, w := range args {
		if w.kind != literal {
			return args[i:], true
		}
		if c.runners[canon+" "+w.text] {
			return args[i+1:], true
		}
		if !strings.HasPrefix(w.text, "-") {
			return nil, false
		}
	}
	return nil, false
}

// programChecks records what a program's arguments run or write that no
// leaf shows: inline code, command readers, options that run commands, a
// make variable naming a program, awk and sed programs, protected names.
func (a *analyzer) programChecks(ctx leafCtx, name, canon string, args []word) {
	c := a.t.tables()
	opts, ok := a.t.inline(name)
	if !ok {
		opts, ok = a.t.inline(canon)
	}
	if ok {
		if c.readers[name] || c.readers[canon] || c.readers[withoutVersion(name)] {
			a.commandReader(ctx, canon, opts, args)
		} else {
			a.interpreter(ctx, name, opts, args)
		}
	}
	if c.responseFiles[name] || c.responseFiles[canon] {
		for _, w := range args {
			if strings.HasPrefix(w.text, "@") && len(w.text) > 1 {
				a.unseen(name+" reading more options from "+clip(w.text)+" (a response file, which may hold an option that runs a command)", ctx.src)
				break
			}
		}
	}
	switch canon {
	case "run-parts":
		if !hasAnyLiteral(args, "--list", "--test", "--help", "--version") {
			a.unseen("run-parts (it runs every program of a directory)", ctx.src)
		}
	case "ln", "link":
		for _, w := range args {
			if w.kind == literal && devPath(w.text) != devNone {
				a.unseen(name+" linking to a descriptor ("+clip(w.text)+"), which a script may then be read from", ctx.src)
			}
		}
	case "vim", "ex":
		a.vim(ctx, canon, args)
	case "make":
		a.make(ctx, args)
	case "awk":
		a.awk(ctx, args)
	case "sed":
		a.sed(ctx, args)
	}
	a.execOptions(ctx, name, args)
	a.fileOperands(ctx, name, canon, args)
}

// wrap follows a wrapper of the wrappers table: its options by its
// grammar (one it does not know makes what runs uncertain), its operands,
// NAME=VALUE words, and the command after them.
func (a *analyzer) wrap(ctx leafCtx, name string, w wrapper, args []word, depth int) error {
	opts, rest, unknown := w.opts.scan(args)
	if unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	// env -C DIR, unshare --wd DIR: the command runs in DIR
	if dir, known, moved := a.chdir(ctx, name, a.t.canonicalName(name), args[:min(rest, len(args))]); moved {
		ctx.dir, ctx.dirUnknown = dir, ctx.dirUnknown || !known
	}
	for _, o := range opts {
		for _, s := range w.scripts {
			if o.name == s {
				if err := a.scriptWord(ctx, name+" "+s, o.value, nil, depth); err != nil {
					return err
				}
			}
		}
	}
	if name == "env" {
		if split := values(opts, "-S", "--split-string"); len(split) > 0 {
			// The split string's words are env's own arguments again —
			// options included (env -S '-i curl x') — before its operands.
			words := []word{{text: "env", kind: literal}}
			for _, s := range split {
				w, ok := envSplit(s)
				if !ok {
					a.unseen("env -S with a string it cannot split ("+clip(s.text)+")", ctx.src)
				}
				words = append(words, w...)
			}
			if depth >= MaxShellDepth {
				return fmt.Errorf("%w: env -S strings nested deeper than %d", ErrUncheckable, MaxShellDepth)
			}
			return a.runs(ctx, "env", append(words, args[rest:]...), depth+1)
		}
		if has(opts, "-P") {
			a.unseen("env -P (a search path for the program)", ctx.src)
		}
		if rest < len(args) && args[rest].text == "-" && args[rest].kind == literal {
			rest++
		}
	}
	if name == "strace" {
		for _, e := range values(opts, "-E", "--env") {
			a.envAssign(ctx, e)
		}
	}
	if has(opts, w.none...) {
		return nil
	}
	rest += w.operands
	if name == "flock" && rest+1 < len(args) && args[rest].kind == literal && (args[rest].text == "-c" || args[rest].text == "--command") {
		// flock FILE -c COMMAND: the string goes to a shell.
		return a.scriptWord(ctx, "flock -c", args[rest+1], nil, depth)
	}
	if w.assigns {
		for rest < len(args) && isAssignWord(args[rest]) {
			a.envAssign(ctx, args[rest])
			rest++
		}
	}
	if name == "xargs" && rest >= len(args) {
		return a.leaf(ctx, Leaf{}, xargsCommand(opts, []word{{text: "echo", kind: literal}}, a.xargsInput(ctx, opts)), depth)
	}
	if rest >= len(args) || w.files {
		if w.shell && len(values(opts, w.scripts...)) == 0 {
			a.stdinScript(ctx, name+" starting a shell")
		}
		return nil
	}
	inner := args[rest:]
	if name == "xargs" {
		inner = xargsCommand(opts, inner, a.xargsInput(ctx, opts))
	}
	return a.leaf(ctx, Leaf{}, inner, depth)
}

// isAssignWord reports a NAME=VALUE word, as env and sudo take them.
func isAssignWord(w word) bool {
	if w.kind != literal && w.kind != opaque {
		return false
	}
	name, _, ok := strings.Cut(w.text, "=")
	return ok && syntax.ValidName(name)
}

// envAssign checks a NAME=VALUE a wrapper passes to the command it runs.
func (a *analyzer) envAssign(ctx leafCtx, w word) {
	name, value, _ := strings.Cut(w.text, "=")
	if a.t.unsafeName(name) {
		a.unseen("setting "+name+", which changes what a program runs", ctx.src)
	}
	if a.t.unsafeValue(name, word{text: value, kind: w.kind}) {
		a.unseen("setting "+name+" to a value that runs a command", ctx.src)
	}
	if w.kind == literal && smuggles(value) {
		a.unseen("a value holding code for a later expansion ("+clip(w.text)+")", ctx.src)
	}
	if w.kind == literal && value != "" {
		a.use(ctx, pathUse{w: word{text: value, kind: literal}, write: true, named: true, what: "setting " + name})
	}
}

// xargsCommand is the command xargs runs: its words, with what it reads
// from stdin appended (or put in place of -I's replacement string), and
// echo when none is named.
func xargsCommand(opts []opt, inner []word, stdin word) []word {
	repl := ""
	for _, o := range opts {
		switch o.name {
		case "-I", "--replace":
			repl = o.value.text
			if !o.set {
				repl = "{}"
			}
		case "-i":
			repl = "{}"
			if o.set {
				repl = o.value.text
			}
		}
	}
	if repl == "" {
		out := append(append([]word(nil), inner...), stdin)
		return out
	}
	out := make([]word, len(inner))
	for i, w := range inner {
		out[i] = w
		if w.text == repl {
			out[i] = stdin
		} else if strings.Contains(w.text, repl) {
			out[i] = word{text: w.text, kind: opaque}
		}
	}
	return out
}

// xargsInput is the word xargs' input stands for (stdinNames), or anything
// when it reads a file of its own.
func (a *analyzer) xargsInput(ctx leafCtx, opts []opt) word {
	if has(opts, "-a", "--arg-file") {
		return word{text: "<xargs input>", kind: opaque}
	}
	return a.stdinNames(ctx)
}

// stdinNames is the word for names a program reads from its stdin: the
// names find prints when find's output is piped to it; nothing when stdin
// is the tool's own; else anything.
func (a *analyzer) stdinNames(ctx leafCtx) word {
	if !ctx.stdinPiped && !ctx.stdinFile {
		// the tool's own stdin, which holds no file names the command made
		return word{text: "<xargs input>", kind: pattern, pattern: "^.*$"}
	}
	if ctx.producer != nil {
		if w, ok := a.findOutput(ctx.producerSrc, ctx.producer); ok {
			return w
		}
		if glob, ok := a.listedNames(ctx.producerSrc, ctx.producer); ok {
			return word{text: "<names listed>", kind: pattern, pattern: "^.*$", names: glob}
		}
	}
	return word{text: "<xargs input>", kind: opaque}
}

// gitListsTracked are the options with which git ls-files and git diff
// --name-only print tracked names only.
var gitListsTracked = map[string]bool{"-z": true, "-c": true, "--cached": true, "--full-name": true, "--name-only": true,
	"--recurse-submodules": true, "--": true, "--staged": true, "--diff-filter=d": true, "--diff-filter=M": true}

// listedNames is the glob every name a find or git ls-files statement
// prints ends with, as one path segment: find's -name, or git ls-files'
// one pathspec. A glob of only * is none (find's * matches a leading dot,
// a shell's does not).
func (a *analyzer) listedNames(src string, s *syntax.Stmt) (string, bool) {
	glob := ""
	if w, ok := a.findOutput(src, s); ok {
		glob = w.names
	} else if call, ok := s.Cmd.(*syntax.CallExpr); ok && len(s.Redirs) == 0 && len(call.Assigns) == 0 && len(call.Args) >= 3 && (a.sc == nil || !a.sc.names["git"]) {
		// git ls-files [-z|--cached…] GLOB: tracked names matching it
		var specs []word
		lists := a.wordOf(src, call.Args[0]).text == "git" && a.wordOf(src, call.Args[1]).text == "ls-files"
		for _, arg := range call.Args[2:] {
			w := a.wordOf(src, arg)
			switch {
			case w.kind != literal:
				lists = false
			case strings.HasPrefix(w.text, "-"):
				lists = lists && gitListsTracked[w.text]
			default:
				specs = append(specs, w)
			}
		}
		if lists && len(specs) == 1 {
			glob = specs[0].text
			if i := strings.LastIndexByte(glob, '/'); i >= 0 {
				glob = glob[i+1:]
			}
		}
	}
	if strings.Trim(glob, "*") == "" {
		return a.lsNames(src, s)
	}
	return glob, true
}

// lsNames is the glob of names an ls prints: with no -a or -A, the names
// in the directories it lists, none starting with a dot (a glob of only *,
// as bash reads it), or the one glob it is given.
func (a *analyzer) lsNames(src string, s *syntax.Stmt) (string, bool) {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(s.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 || a.sc != nil && a.sc.names["ls"] {
		return "", false
	}
	if w := a.wordOf(src, call.Args[0]); w.kind != literal || w.text != "ls" {
		return "", false
	}
	glob := "*"
	globs := 0
	for _, arg := range call.Args[1:] {
		w := a.wordOf(src, arg)
		switch {
		case w.kind == literal && strings.HasPrefix(w.text, "-"):
			if strings.HasPrefix(w.text, "--") && (w.text == "--all" || w.text == "--almost-all") ||
				!strings.HasPrefix(w.text, "--") && strings.ContainsAny(w.text, "aAfd") {
				return "", false // dot names too, or the directories themselves
			}
		case w.kind == literal:
			for _, seg := range strings.Split(w.text, "/") {
				if strings.HasPrefix(seg, ".") && seg != "." && seg != ".." {
					return "", false
				}
			}
		case w.kind == pattern && w.glob != "":
			glob, globs = w.glob, globs+1
		default:
			return "", false
		}
	}
	if globs > 1 {
		return "", false
	}
	return glob, true
}

// findOutput is the word for what a find statement prints: its names
// (findFound), when it prints nothing else and is redirected nowhere.
func (a *analyzer) findOutput(src string, s *syntax.Stmt) (word, bool) {
	if len(s.Redirs) > 0 || s.Negated || s.Background {
		return word{}, false
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || len(call.Assigns) > 0 {
		return word{}, false
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = a.wordOf(src, w)
		if words[i].kind == opaque {
			return word{}, false
		}
	}
	if words[0].kind != literal || a.sc != nil && a.sc.names[words[0].text] {
		return word{}, false
	}
	switch prog := a.t.canonicalName(path.Base(words[0].text)); {
	case prog == "git" && len(words) >= 2 && words[1].text == "ls-files" || prog == "git" && len(words) >= 3 && words[1].text == "diff" && hasAnyLiteral(words[2:], "--name-only"):
		// tracked files: the index's names; only options known to print
		// them and nothing else
		for _, w := range words[2:] {
			switch {
			case w.kind != literal:
				return word{}, false
			case gitListsTracked[w.text]:
			case words[1].text == "diff" && !strings.HasPrefix(w.text, "-"):
				// revisions and paths of git diff
			default:
				return word{}, false
			}
		}
		return word{text: "<names git lists>", kind: pattern, pattern: "^.*$", found: []word{{text: ".", kind: literal}}, gitignore: true}, true
	case (prog == "grep" || prog == "egrep" || prog == "fgrep" || prog == "rg") && (hasShortLetter(words[1:], 'l') || hasAnyLiteral(words[1:], "--files-with-matches")):
		// grep -rl PATTERN DIR: names of files under DIR
		var roots []word
		wantPattern := true // the first operand is the pattern, unless -e or -f gives it
		for i, w := range words[1:] {
			if w.kind == opaque {
				return word{}, false
			}
			if w.kind == literal && strings.HasPrefix(w.text, "-") {
				if w.text == "-e" || w.text == "-f" || w.text == "--regexp" || w.text == "--file" {
					wantPattern = false
				}
				continue
			}
			if wantPattern {
				wantPattern = false
				continue
			}
			roots = append(roots, words[1+i])
		}
		if len(roots) == 0 {
			roots = []word{{text: ".", kind: literal}}
		}
		return word{text: "<names grep lists>", kind: pattern, pattern: "^.*$", found: roots}, true
	case prog != "find":
		return word{}, false
	}
	for _, w := range words[1:] {
		switch w.text {
		case "-printf", "-fprintf", "-ls", "-fls", "-exec", "-execdir", "-ok", "-okdir":
			return word{}, false // prints more than the names, or runs a command
		}
	}
	w := findFound(words[1:])
	w.text = "<names find prints>"
	return w, true
}

// positional finds a script's use of its positional parameters ($@, $*,
// $1, ${2}, "$@"), or anything that could reach them (shift, set --).
var positional = regexp.MustCompile(`\$\{?[@*0-9#!]|\$\{?[A-Za-z_]|\bshift\b|\bset\b|\beval\b|\bgetopts\b`)

// scriptWord analyses a shell command given as one word (sh -c, flock -c,
// env -S); extra words are appended to it as arguments.
func (a *analyzer) scriptWord(ctx leafCtx, what string, w word, extra []word, depth int) error {
	if w.kind != literal {
		a.unseen(what+" with a script computed at run time ("+clip(w.text)+")", ctx.src)
		return nil
	}
	script := w.text
	if !positional.MatchString(script) {
		extra = nil // the words are $0, $1 … of a script that reads none of them
	}
	// a shell a wrapper moved (env -C d sh -c …, find -execdir sh -c …)
	// runs its script there
	if ctx.dirUnknown {
		a.moved()
	}
	if ctx.dir != "" {
		outer := a.dir
		a.dir = joinDir(a.dir, ctx.dir)
		defer func() { a.dir = outer }()
	}
	for _, e := range extra {
		if e.kind == literal {
			script += " " + shellQuote(e.text)
		} else {
			script += ` "$TOOLPDP_RUNTIME_WORD"`
		}
	}
	return a.script(script, depth+1)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// findExec records the commands of find's -exec, -execdir, -ok and -okdir,
// each ended by ";" or "+"; {} is a file name found at run time. -delete
// writes (removes) every name found.
func (a *analyzer) findExec(ctx leafCtx, args []word, depth int) error {
	found := findFound(args)
	if hasAnyLiteral(args, "-delete") {
		a.use(ctx, pathUse{w: found, write: true, what: "find -delete removing"})
	}
	for i := 0; i < len(args); i++ {
		switch args[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
			end := i + 1
			for end < len(args) && args[end].text != ";" && args[end].text != "+" {
				end++
			}
			cmd := make([]word, 0, end-i-1)
			for _, w := range args[i+1 : end] {
				if w.text == "{}" {
					// A path found: it starts with its starting point, which
					// find never takes from a word starting with "-".
					w = found
				} else if strings.Contains(w.text, "{}") {
					w = word{text: w.text, kind: opaque}
				}
				cmd = append(cmd, w)
			}
			inner := ctx
			if strings.HasSuffix(args[i].text, "dir") {
				// -execdir runs in each found name's directory
				inner.dirUnknown = true
			}
			if err := a.leaf(inner, Leaf{}, cmd, depth); err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// findFound is the word {} stands for in find's -exec, and xargs' input
// from find: any name in the trees under the starting points — whose last
// segment matches the -name or -iname pattern the whole expression
// requires, when it requires one.
func findFound(args []word) word {
	w := word{text: "{}", kind: pattern, pattern: "^[^-].*$"}
	var roots []word
	i := 0
	for ; i < len(args); i++ {
		t := args[i]
		if t.kind == literal && (strings.HasPrefix(t.text, "-") || t.text == "(" || t.text == "!") {
			break
		}
		roots = append(roots, t)
	}
	if len(roots) == 0 {
		roots = []word{{text: ".", kind: literal}}
	}
	constraint, only := "", ""
	for j := i; j < len(args); j++ {
		t := args[j]
		if t.kind != literal {
			constraint = ""
			break
		}
		switch t.text {
		case "-o", "-or", ",", "(", ")":
			constraint, only = "", "" // an alternative: no pattern binds every name
			j = len(args)
		case "!", "-not":
			// a negated test only drops names; its own -name binds none
			if j+1 < len(args) && (args[j+1].text == "-name" || args[j+1].text == "-iname" || args[j+1].text == "-path") {
				j += 2
			}
		case "-name", "-iname":
			// (-path's * spans slashes: it binds no one segment)
			if j+1 < len(args) && args[j+1].kind == literal && constraint == "" {
				constraint = args[j+1].text
				only = constraint
				if t.text == "-iname" {
					only = strings.ToLower(only)
				}
			}
			j++
		case "-exec", "-execdir", "-ok", "-okdir":
			j = len(args) // the expression's tests come before
		}
	}
	w.names, w.only, w.found = constraint, only, roots
	return w
}

// startStop follows start-stop-daemon's program — -x/--exec or
// -a/--startas, separate, with = or attached — run with the words after
// "--".
func (a *analyzer) startStop(ctx leafCtx, name string, args []word, depth int) error {
	var prog []word
	rest := []word(nil)
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind != literal {
			a.unseen(name+" with an option computed at run time ("+clip(w.text)+")", ctx.src)
			return nil
		}
		if w.text == "--" {
			rest = args[i+1:]
			break
		}
		for _, o := range []string{"-x", "--exec", "-a", "--startas"} {
			switch {
			case w.text == o && i+1 < len(args):
				prog = append(prog, args[i+1])
				i++
			case strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o+"="):
				prog = append(prog, word{text: w.text[len(o)+1:], kind: literal})
			case !strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o) && len(w.text) > 2 && !strings.HasPrefix(w.text, "--"):
				prog = append(prog, word{text: w.text[2:], kind: literal})
			default:
				continue
			}
			break
		}
	}
	for _, p := range prog {
		if err := a.leaf(ctx, Leaf{}, append([]word{p}, rest...), depth); err != nil {
			return err
		}
	}
	return nil
}

// tmuxQuiet are tmux commands that run nothing: any other may run a shell
// command (run-shell, if-shell, set-hook, a new window's command, a format's
// #(…)).
var tmuxQuiet = map[string]bool{"ls": true, "list-sessions": true, "list-windows": true, "list-panes": true, "kill-server": true,
	"kill-session": true, "kill-window": true, "has-session": true, "has": true, "attach": true, "attach-session": true, "a": true,
	"detach": true, "detach-client": true, "info": true, "list-clients": true, "list-commands": true, "-V": true}

func (a *analyzer) tmux(ctx leafCtx, name string, args []word, depth int) error {
	// its words may be a command it runs (tmux new -d 'curl x')
	if err := a.runner(ctx, name, args, depth); err != nil {
		return err
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w.kind != literal:
			a.unseen(name+" with words computed at run time", ctx.src)
			return nil
		case w.text == "-L" || w.text == "-S" || w.text == "-f" || w.text == "-c" || w.text == "-T":
			if w.text == "-c" || w.text == "-f" {
				a.unseen(name+" "+w.text+" (a command or a configuration it runs)", ctx.src)
				return nil
			}
			i++
		case strings.HasPrefix(w.text, "-"):
		default:
			for _, cmd := range strings.Split(strings.Join(texts(args[i:]), " "), ";") {
				f := strings.Fields(cmd)
				if len(f) > 0 && !tmuxQuiet[strings.TrimSuffix(f[0], "\\")] {
					a.unseen(name+" "+clip(f[0])+" (a tmux command that may run a shell command)", ctx.src)
					return nil
				}
			}
			return nil
		}
	}
	a.stdinScript(ctx, name+" starting a shell")
	return nil
}

func texts(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// watch runs its operands joined by spaces through sh -c, or (with -x) as
// a command.
func (a *analyzer) watch(ctx leafCtx, args []word, depth int) error {
	spec := optSpec{flags: "bcCdeEgtxprwh", values: "nqs", long: merge(
		longs(longFlag, "beep", "color", "no-color", "errexit", "chgexit", "exec", "precise", "no-rerun", "no-title", "no-wrap", "help", "version"),
		longs(longValue, "interval", "equexit", "shotsdir"),
		longs(longOptional, "differences"))}
	opts, rest, unknown := spec.scan(args)
	if unknown != "" {
		a.unseen("watch given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	if rest >= len(args) {
		return nil
	}
	if has(opts, "-x", "--exec") {
		return a.leaf(ctx, Leaf{}, args[rest:], depth)
	}
	// watch joins its operands with spaces into one sh -c string
	parts := make([]string, 0, len(args)-rest)
	for _, w := range args[rest:] {
		if w.kind != literal {
			a.unseen("watch with a command computed at run time ("+clip(w.text)+")", ctx.src)
			return nil
		}
		parts = append(parts, w.text)
	}
	return a.scriptWord(ctx, "watch", word{text: strings.Join(parts, " "), kind: literal}, nil, depth)
}

// su and runuser run a shell: -c's string is its script, -s names another
// shell, words after the user are the shell's own arguments; runuser -u
// runs its operands as a command.
func (a *analyzer) su(ctx leafCtx, name string, args []word, depth int) error {
	spec := optSpec{flags: "flmpPhV", values: "cgGswu", long: merge(
		longs(longFlag, "fast", "login", "preserve-environment", "pty", "help", "version"),
		longs(longValue, "command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"))}
	// su permutes its options: read them anywhere before "--".
	var opts []opt
	var operands []word
	rest := args
	for len(rest) > 0 {
		o, n, unknown := spec.scan(rest)
		if unknown != "" {
			a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
		}
		opts = append(opts, o...)
		if n > 0 && rest[n-1].text == "--" && rest[n-1].kind == literal {
			operands = append(operands, rest[n:]...)
			break
		}
		if n >= len(rest) {
			break
		}
		operands = append(operands, rest[n])
		rest = rest[n+1:]
	}
	for _, s := range values(opts, "-s", "--shell") {
		if s.kind != literal || !isShell(baseName(s.text)) {
			a.unseen(name+" -s with a program that is not a known shell ("+clip(s.text)+")", ctx.src)
		}
	}
	if name == "runuser" && has(opts, "-u", "--user") {
		return a.leaf(ctx, Leaf{}, operands, depth)
	}
	scripts := values(opts, "-c", "--command", "--session-command")
	for _, s := range scripts {
		if err := a.scriptWord(ctx, name+" -c", s, nil, depth); err != nil {
			return err
		}
	}
	if len(operands) > 0 && operands[0].kind == literal && operands[0].text == "-" {
		operands = operands[1:]
	}
	if len(operands) > 1 {
		// Words after the user are the shell's arguments: sh -c 'curl x'.
		return a.shell(ctx, "sh", operands[1:], depth)
	}
	if len(scripts) == 0 {
		a.stdinScript(ctx, name+" starting a shell")
	}
	return nil
}

// parallel (GNU) joins its command words into a shell command, with the
// arguments after ::: or from stdin put in place of {} or appended.
func (a *analyzer) parallel(ctx leafCtx, args []word, depth int) error {
	spec := optSpec{flags: "kvqXm0u", values: "jNnLIdaSC", long: merge(
		longs(longFlag, "keep-order", "tag", "line-buffer", "null", "will-cite", "bar", "progress", "eta", "dry-run", "quote", "group",
			"ungroup", "verbose", "halt-on-error", "no-notice", "citation", "pipe", "xargs", "shuf", "lb"),
		longs(longValue, "jobs", "max-args", "max-lines", "halt", "arg-file", "colsep", "delimiter", "timeout", "retries", "joblog",
			"results", "sshlogin", "workdir", "tmpdir", "block", "replace", "max-replace-args", "load", "memfree", "delay"))}
	opts, rest, unknown := spec.scan(args)
	if unknown != "" {
		a.unseen("parallel given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	if has(opts, "-S", "--sshlogin") {
		a.unseen("parallel running commands on other hosts (--sshlogin)", ctx.src)
	}
	var cmd []string
	placeholder := false
	for _, w := range args[rest:] {
		if w.kind == literal && strings.HasPrefix(w.text, ":::") || w.kind == literal && w.text == "::::" {
			break
		}
		t := w.text
		if w.kind != literal {
			t = `"$TOOLPDP_RUNTIME_WORD"`
		}
		if strings.Contains(t, "{") && strings.Contains(t, "}") {
			placeholder = true
			t = parallelPlaceholder(t)
		}
		cmd = append(cmd, t)
	}
	if len(cmd) == 0 {
		a.unseen("parallel running its input lines as commands", ctx.src)
		return nil
	}
	script := strings.Join(cmd, " ")
	if !placeholder {
		script += ` $TOOLPDP_RUNTIME_WORDS`
	}
	return a.script(script, depth+1)
}

// parallelPlaceholder turns GNU parallel's replacement strings ({}, {.},
// {1}, {/} …) into a parameter expansion: text known only at run time.
func parallelPlaceholder(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString("$TOOLPDP_RUNTIME_WORD")
		s = s[i+j+1:]
	}
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// envSplit splits env -S's string as env does (not as a shell would): at
// blanks, with single and double quotes, backslash escapes (\_ is a blank,
// \c ends the string), a # starting a word ends it, and ${NAME} — the only
// expansion — is a word known at run time.
func envSplit(w word) ([]word, bool) {
	if w.kind != literal {
		return []word{{text: w.text, kind: opaque}}, true
	}
	s := w.text
	var out []word
	var cur strings.Builder
	inWord, dynamic := false, false
	flush := func() {
		if inWord {
			k := literal
			if dynamic {
				k = opaque
			}
			out = append(out, word{text: cur.String(), kind: k})
		}
		cur.Reset()
		inWord, dynamic = false, false
	}
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else if c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'') {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\\':
			if i+1 >= len(s) {
				return out, false
			}
			i++
			if s[i] == 'c' {
				flush()
				return out, quote == 0
			}
			if s[i] == '_' && quote == 0 {
				flush() // outside quotes \_ separates words
				continue
			}
			inWord = true
			switch s[i] {
			case '_':
				cur.WriteByte(' ')
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			case 'r':
				cur.WriteByte('\r')
			case 'f':
				cur.WriteByte('\f')
			case 'v':
				cur.WriteByte('\v')
			case '\\', '"', '\'', '$', '#', ' ':
				cur.WriteByte(s[i])
			default:
				return out, false // env refuses other escapes
			}
		case c == '$':
			inWord, dynamic = true, true
			if end := strings.IndexByte(s[i:], '}'); i+1 < len(s) && s[i+1] == '{' && end > 0 {
				i += end
			}
			cur.WriteString("${}")
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			flush()
		case c == '#' && !inWord:
			flush()
			return out, true
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	flush()
	return out, quote == 0
}
