package envguard

import (
	"regexp"
	"strings"
)

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
