package envguard

// program is what the analysis knows of one program beyond the tables, in
// Go because no table entry can say it (as mvdan.cc/sh's interp chains a
// handler per program): check judges its arguments — a script it runs, a
// file it links — and run follows the command it runs when its grammar is
// not a plain option list and a command. A program's behaviour is its one
// entry in knownPrograms and the functions the entry names; the tables
// (wrappers, runners, exec options, writing programs …) describe the rest.
type program struct {
	check func(a *analyzer, ctx leafCtx, name, canon string, args []word)
	run   handler
}

// handler follows the command a program runs; name is the program as the
// command spells it.
type handler func(a *analyzer, ctx leafCtx, name string, args []word, depth int) error

// knownPrograms are the programs with behaviour of their own, by canonical
// name. It is built with the compiled tables (a function, not a package
// variable: the handlers reach back into the analysis that looks them up).
func knownPrograms() map[string]program {
	programs := map[string]program{
		"find": {run: func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.findExec(ctx, args, depth)
		}},
		"busybox": {run: (*analyzer).busybox},
		"watch": {run: func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.watch(ctx, args, depth)
		}},
		"su": {run: (*analyzer).su},
		"parallel": {run: func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.parallel(ctx, args, depth)
		}},
		"git": {run: func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.git(ctx, args, depth)
		}},
		"capsh":             {run: (*analyzer).capsh},
		"pee":               {run: (*analyzer).pee},
		"start-stop-daemon": {run: (*analyzer).startStop},
		"tmux":              {run: (*analyzer).tmux},
		// `time -- cmd`: the keyword's end of options, which the parser
		// leaves as the first word; what follows is the command.
		"--": {run: func(a *analyzer, ctx leafCtx, _ string, args []word, depth int) error {
			return a.leaf(ctx, Leaf{}, args, depth)
		}},

		"run-parts": {check: func(a *analyzer, ctx leafCtx, _, _ string, args []word) {
			if !hasAnyLiteral(args, "--list", "--test", "--help", "--version") {
				a.unseen("run-parts (it runs every program of a directory)", ctx.src)
			}
		}},
		"ln": {check: linkToDescriptor},
		"vim": {check: func(a *analyzer, ctx leafCtx, _, canon string, args []word) {
			a.vim(ctx, canon, args)
		}},
		"make": {check: func(a *analyzer, ctx leafCtx, _, _ string, args []word) { a.make(ctx, args) }},
		"awk":  {check: func(a *analyzer, ctx leafCtx, _, _ string, args []word) { a.awk(ctx, args) }},
		"sed":  {check: func(a *analyzer, ctx leafCtx, _, _ string, args []word) { a.sed(ctx, args) }},
	}
	// Other names of the same program, which behave as it does.
	for other, same := range map[string]string{"toybox": "busybox", "runuser": "su", "link": "ln", "ex": "vim"} {
		programs[other] = programs[same]
	}
	return programs
}

// linkToDescriptor: ln (or link) to /dev/fd/N or /proc/self/fd/N makes a
// name a script may then be read from.
func linkToDescriptor(a *analyzer, ctx leafCtx, name, _ string, args []word) {
	for _, w := range args {
		if w.kind == literal && devPath(w.text) != devNone {
			a.unseen(name+" linking to a descriptor ("+clip(w.text)+"), which a script may then be read from", ctx.src)
		}
	}
}
