package envguard

import (
	"fmt"
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

// optionTakingValue reports an option word that may take the next word
// as its value: -v, --volume (not --volume=x, which has it).
func optionTakingValue(w word) bool {
	return w.kind == literal && strings.HasPrefix(w.text, "-") && w.text != "--" && !strings.Contains(w.text, "=")
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
	c := a.t.tables()
	if run := c.programs[canon].run; run != nil {
		return run(a, ctx, name, args, depth)
	}
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
	if check := c.programs[canon].check; check != nil {
		check(a, ctx, name, canon, args)
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
