package envguard

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

var shellNames = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true,
	"rbash": true, "yash": true, "posh": true, "ksh93": true, "pdksh": true, "oksh": true, "lksh": true, "fish": true, "csh": true,
	"tcsh": true, "elvish": true, "nu": true, "xonsh": true}

func isShell(name string) bool {
	return shellNames[name] || shellNames[strings.TrimRight(name, "0123456789.")]
}

// shellLongs are the long options of the shells: bash's, and those of
// others that take a value.
var shellLongs = merge(
	longs(longFlag, "login", "noprofile", "norc", "posix", "restricted", "verbose", "version", "help", "debugger", "dump-strings",
		"dump-po-strings", "noediting", "pretty-print", "wordexp", "interactive", "no-config", "no-execute", "private", "emulate", "no-rcs",
		"no-globalrcs"),
	longs(longValue, "rcfile", "init-file", "debug", "features", "profile", "init-command", "command"))

var fishSpec = optSpec{flags: "ilnNPvh", values: "cCdop", long: merge(
	longs(longFlag, "interactive", "login", "no-execute", "no-config", "private", "version", "help", "print-rusage-self", "print-debug-categories"),
	longs(longValue, "command", "init-command", "debug", "debug-output", "features", "profile", "profile-startup"))}

// shellArgs is a shell's command line as bash and dash read it.
type shellArgs struct {
	letters string         // every option letter given, - or + (c, s, x, k …)
	options []string       // values of -o/+o (set options) and -O/+O (shopt options)
	longs   map[string]int // long options given, with the index of their value (-1: none)
	rest    int            // index of the first operand
	unknown string         // a long option the shell does not have
}

// scanShell reads options as bash (parse_long_options, then
// parse_shell_options) and dash (options()) do: long options first; then
// words starting with - or + are clusters of letters, in which each o or O
// takes the next unused *word* as its value while the cluster goes on —
// `bash -oc errexit 'curl x'` is -o errexit -c. "-" or "--" ends the
// options.
func scanShell(args []word) (s shellArgs) {
	s.longs = map[string]int{}
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if w.kind != literal || !strings.HasPrefix(w.text, "--") || w.text == "--" {
			break
		}
		name, _, hasValue := strings.Cut(w.text[2:], "=")
		kind, ok := shellLongs[name]
		if !ok {
			s.unknown = w.text
			continue
		}
		s.longs[name] = -1
		if kind == longValue && !hasValue && i+1 < len(args) {
			i++
			s.longs[name] = i
		}
	}
	for i < len(args) {
		w := args[i]
		if w.kind != literal {
			if w.kind == opaque && !w.home {
				s.unknown = w.text
			}
			break
		}
		t := w.text
		if t == "-" || t == "--" {
			i++
			break
		}
		if len(t) < 2 || t[0] != '-' && t[0] != '+' {
			break
		}
		next := i + 1
		for j := 1; j < len(t); j++ {
			c := t[j]
			s.letters += string(c)
			if c == 'o' || c == 'O' {
				if next < len(args) {
					s.options = append(s.options, args[next].text)
					if args[next].kind != literal {
						s.unknown = args[next].text
					}
					next++
				}
			}
		}
		i = next
	}
	s.rest = i
	return s
}

// shell follows a shell's script: -c's string is parsed like the command
// itself; a script file is a program that runs a file (a documented limit);
// a script from stdin, a process substitution or a computed string cannot
// be seen.
func (a *analyzer) shell(ctx leafCtx, name string, args []word, depth int) error {
	if name == "fish" {
		return a.fish(ctx, name, args, depth)
	}
	s := scanShell(args)
	if s.unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(s.unknown)+")", ctx.src)
	}
	for _, l := range []string{"init-command", "command"} {
		if v, ok := s.longs[l]; ok && v >= 0 {
			if err := a.scriptWord(ctx, name+" --"+l, args[v], nil, depth); err != nil {
				return err
			}
		}
	}
	for _, l := range []string{"rcfile", "init-file"} {
		if _, ok := s.longs[l]; ok {
			a.unseen(name+" --"+l+" (a startup file it runs)", ctx.src)
		}
	}
	if strings.Contains(s.letters, "k") {
		a.unseen(name+" -k (assignments anywhere on a command line)", ctx.src)
	}
	for _, o := range s.options {
		if o == "dotglob" {
			a.out.dotglob = true
		}
		if a.t.tables().unseenOptions[o] {
			a.unseen(name+" -o/-O "+clip(o)+" (an option that makes the shell run or expand more text)", ctx.src)
		}
	}
	if strings.Contains(s.letters, "c") {
		if s.rest >= len(args) {
			return nil // "-c: option requires an argument": nothing runs
		}
		return a.scriptWord(ctx, name+" -c", args[s.rest], args[s.rest+1:], depth)
	}
	if strings.Contains(s.letters, "s") {
		a.stdinScript(ctx, name+" -s")
		return nil
	}
	a.scriptOperand(ctx, name, args[s.rest:])
	return nil
}

func (a *analyzer) fish(ctx leafCtx, name string, args []word, depth int) error {
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

// scriptOperand judges the script operand of a shell or interpreter: a
// named file is a documented limit; stdin, a descriptor, a connection or a
// substitution is code toolpdp cannot see.
func (a *analyzer) scriptOperand(ctx leafCtx, name string, operands []word) {
	if len(operands) == 0 {
		a.stdinScript(ctx, name+" reading its script from stdin")
		return
	}
	if why, ok := scriptPathUnseen(operands[0]); ok {
		a.unseen(name+" reading its script from "+why, ctx.src)
	}
}

// scriptPathUnseen reports a script path that could name a descriptor or
// a connection rather than a file: one of them by any spelling, a word
// known only at run time, a glob (/dev/std*), or a home path climbing out
// of it (~/../../dev/stdin).
func scriptPathUnseen(w word) (string, bool) {
	switch {
	case w.home:
		rest := w.text
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rest = rest[i+1:]
		} else {
			rest = ""
		}
		if strings.Contains("/"+rest+"/", "/../") || stdinAlias(rest) {
			return clip(w.text) + ", which may be a descriptor", true
		}
		return "", false
	case w.kind == opaque:
		return "a name known only at run time (" + clip(w.text) + ")", true
	case w.kind == pattern:
		return "a glob (" + clip(w.text) + "), which may match a descriptor", true
	case stdinAlias(w.text):
		return clip(w.text), true
	}
	return "", false
}

// stdinScript records a program reading code from its stdin, wherever
// stdin comes from: a redirect from a named file is stdin too, and the same
// command may have written that file (printf 'curl x' > s; bash < s).
func (a *analyzer) stdinScript(ctx leafCtx, what string) {
	a.unseen(what, ctx.src)
	if ctx.stmt == nil {
		return
	}
	for _, r := range ctx.stmt.Redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		var body word
		switch {
		case r.Op == syntax.WordHdoc && r.Word != nil:
			body = wordOf(ctx.src, r.Word)
		case (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil:
			body = wordOf(ctx.src, r.Hdoc)
		default:
			continue
		}
		if body.kind == literal && len(a.out.secretScripts) < maxUnseen {
			// Not analysed as a script (it stays unseen), but kept so that
			// the secrets it carries can be found and masked.
			a.out.secretScripts = append(a.out.secretScripts, body.text)
		}
	}
}
