package envguard

import (
	"strings"
)

// builtin judges the shell's own commands that run, define or evaluate
// code, or assign variables: eval, source, trap, alias, set, shopt, read,
// printf -v, declare and their kin.
func (a *analyzer) builtin(ctx leafCtx, name string, args []word, depth int) error {
	switch name {
	case "eval":
		a.unseen("eval", ctx.src)
		// Not analysed (it stays unseen), but searched for secrets.
		var text []string
		for _, w := range args {
			if w.kind != literal {
				text = nil
				break
			}
			text = append(text, w.text)
		}
		if len(text) > 0 && len(a.out.secretScripts) < maxUnseen {
			a.out.secretScripts = append(a.out.secretScripts, strings.Join(text, " "))
		}
	case "set":
		a.setOptions(ctx, args)
	case "shopt":
		a.shopt(ctx, args)
	case "cd", "pushd":
		// Relative names after cd are inside its directory: moving into a
		// protected one is like writing there.
		// A directory known only at run time ($(…), "$d", cd - to
		// $OLDPWD, pushd +N) leaves every relative name unknown.
		for _, w := range args {
			switch {
			case w.kind == literal && (w.text == "-" || name == "pushd" && strings.TrimLeft(w.text, "+-0123456789") == "" && len(w.text) > 1):
				a.moved()
				continue
			case w.kind == literal && strings.HasPrefix(w.text, "-"):
				continue
			case w.kind == opaque && !w.home && w.values == nil:
				a.moved()
				continue
			}
			a.pathUse(ctx, name+" moving into", w, true)
			if w.kind == literal || w.home {
				a.execConfig(ctx, name+" moving", w.text)
			}
			switch {
			case w.kind == literal:
				a.dir = joinDir(a.dir, w.text)
			case !w.home:
				// a glob or one of several values, none protected (its use
				// above says so): names after it are judged by name, but a
				// tree under a relative name cannot be found
				a.dirVague = true
			}
		}
	case "source", ".":
		a.scriptSource(ctx, name, args)
	case "trap":
		return a.trap(ctx, args, depth)
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
	case "history":
		if hasShortLetter(args, 's') || hasShortLetter(args, 'r') || hasShortLetter(args, 'w') || hasShortLetter(args, 'a') || hasShortLetter(args, 'n') {
			a.unseen("history (history that a later expansion or file may run)", ctx.src)
		}
	case "compgen", "complete":
		if hasShortLetter(args, 'C') || hasShortLetter(args, 'F') {
			a.unseen(name+" -C/-F (a command it runs)", ctx.src)
		}
		// -W's word list is expanded: substitutions in it run.
		for i, w := range args {
			if w.kind == literal && strings.HasPrefix(w.text, "-") && strings.ContainsRune(w.text, 'W') {
				v := word{text: w.text[strings.IndexByte(w.text, 'W')+1:], kind: literal}
				if v.text == "" && i+1 < len(args) {
					v = args[i+1]
				}
				if v.kind != literal || smuggles(v.text) {
					a.unseen(name+" -W with a word list that runs code when expanded ("+clip(v.text)+")", ctx.src)
				}
			}
		}
	case "mapfile", "readarray":
		if hasShortLetter(args, 'C') {
			a.unseen(name+" -C (a callback it evaluates)", ctx.src)
		}
		a.assignedNames(ctx, args, "dnOsuCc", "", "MAPFILE")
	case "jobs":
		if hasShortLetter(args, 'x') {
			a.unseen("jobs -x (a command it runs)", ctx.src)
		}
	case "read":
		a.assignedNames(ctx, args, "adinNptu", "a", "")
	case "printf":
		a.printfV(ctx, args)
	case "getopts":
		if len(args) >= 2 {
			a.assignTarget(ctx, args[1])
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
			if name, sub, ok := strings.Cut(w.text, "["); ok && !a.sc.isAssoc(name, -1) {
				a.evaluated(ctx, "a subscript", word{text: strings.TrimSuffix(sub, "]"), kind: literal})
			}
		}
	case "let":
		for _, w := range args {
			a.evaluated(ctx, "let", w)
			if w.kind == literal {
				if target, _, ok := strings.Cut(w.text, "="); ok {
					a.assignName(ctx.src, strings.TrimRight(strings.TrimSpace(target), "+-*/%<>&|^"), "let setting")
				}
			}
		}
	case "declare", "typeset", "local", "export", "readonly":
		for _, w := range args {
			if w.kind == literal && (strings.HasPrefix(w.text, "-") || strings.HasPrefix(w.text, "+")) {
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
	return nil
}

// setOptions judges set: -k (keyword) makes NAME=value words anywhere on
// a later line environment settings, which no assignment check sees; -o
// names the same options long.
func (a *analyzer) setOptions(ctx leafCtx, args []word) {
	for i, w := range args {
		if w.kind != literal {
			a.unseen("set with options computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		t := w.text
		if t == "--" || t == "-" {
			return
		}
		if !strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "+") {
			return
		}
		if t[0] == '-' && strings.ContainsRune(t[1:], 'k') {
			a.unseen("set -k (assignments anywhere on a command line)", ctx.src)
			return
		}
		if strings.ContainsRune(t[1:], 'o') && i+1 < len(args) && t[0] == '-' && a.t.tables().unseenOptions[args[i+1].text] {
			a.unseen("set -o "+clip(args[i+1].text)+" (an option that makes the shell run or expand more text)", ctx.src)
			return
		}
	}
}

// shopt -s of an option that makes bash run or expand text it would not
// (expand_aliases, extdebug).
func (a *analyzer) shopt(ctx leafCtx, args []word) {
	on := false
	for _, w := range args {
		if w.kind != literal {
			a.unseen("shopt with options computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		switch {
		case strings.HasPrefix(w.text, "-"):
			if strings.Contains(w.text, "s") {
				on = true
			}
			if strings.Contains(w.text, "u") {
				on = false
			}
		case on && w.text == "dotglob":
			a.out.dotglob = true
		case on && a.t.tables().unseenOptions[w.text]:
			a.unseen("shopt -s "+w.text+" (an option that makes the shell run or expand more text)", ctx.src)
			return
		}
	}
}

// moved records a move into a directory known only at run time.
func (a *analyzer) moved() {
	if a.out.movedAt < 0 {
		a.out.movedAt = len(a.out.paths)
	}
}

// printfV: printf -v NAME (or -vNAME) assigns NAME.
func (a *analyzer) printfV(ctx leafCtx, args []word) {
	// printf has one option, so only its first word can assign.
	if len(args) == 0 {
		return
	}
	w := args[0]
	switch {
	case w.kind == opaque:
		a.unseen("printf with options computed at run time ("+clip(w.text)+")", ctx.src)
	case w.kind != literal:
	case w.text == "-v":
		if len(args) > 1 {
			a.assignTarget(ctx, args[1])
		}
	case strings.HasPrefix(w.text, "-v"):
		a.assignTarget(ctx, word{text: w.text[2:], kind: literal})
	}
}

// make reads a makefile from stdin with -f - (code from stdin), and a
// variable given on its command line may call a function ($(shell …)) or
// name a program it runs (CC=…).
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
		case !strings.HasPrefix(w.text, "-") && strings.Contains(w.text, "="):
			name, _, _ := strings.Cut(w.text, "=")
			name = strings.TrimRight(name, "+:?!")
			if smuggles(w.text) {
				a.unseen("a make variable holding a function call ("+clip(w.text)+")", ctx.src)
			} else if a.programVariable("make", name) {
				a.unseen("a make variable naming a program it runs ("+clip(w.text)+")", ctx.src)
			}
		}
		if isFile && stdinAlias(file) {
			a.unseen("make reading its makefile from "+file, ctx.src)
		}
	}
}

// programVariable reports a variable of prog that names a program it runs.
func (a *analyzer) programVariable(prog, name string) bool {
	n := strings.ToLower(name)
	for _, re := range a.t.tables().progVars[prog] {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}

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
	if why, ok := scriptPathUnseen(s); ok { // ~/.bashrc is a file, like any other script file
		a.unseen(name+" reading a script from "+why, ctx.src)
	}
}

// trap with a command runs it later: a literal action is parsed and
// analysed like a -c script; one computed at run time is unseen. trap -
// SIG, trap ” SIG, trap -l and trap -p run nothing.
func (a *analyzer) trap(ctx leafCtx, args []word, depth int) error {
	for len(args) > 0 && args[0].kind == literal && (args[0].text == "-l" || args[0].text == "-p" || args[0].text == "-P" || args[0].text == "--") {
		args = args[1:]
	}
	if len(args) < 2 {
		return nil
	}
	c := args[0]
	if c.kind == literal && (c.text == "" || c.text == "-") {
		return nil
	}
	if c.kind != literal {
		a.unseen("trap with a command computed at run time ("+clip(c.text)+")", ctx.src)
		return nil
	}
	if err := a.script(c.text, depth+1); err != nil {
		a.unseen("trap with a command toolpdp cannot parse ("+clip(c.text)+")", ctx.src)
	}
	return nil
}
