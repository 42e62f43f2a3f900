package envguard

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bounds on what the shell analysis accepts; past them the command cannot be
// checked, and the policy asks a person.
const (
	MaxCommandBytes = 64 << 10
	MaxLeaves       = 1024
	MaxShellDepth   = 8  // nested `bash -c` strings, env -S strings, watch commands
	maxUnseen       = 64 // constructs reported per command; one is enough to ask
)

// ErrUncheckable marks a command that cannot be turned into leaves: it does
// not parse, or it exceeds a bound.
var ErrUncheckable = errors.New("command cannot be checked")

// Leaf is one program a shell line would run.
type Leaf struct {
	// Argv is the command's words; a word with expansions is kept as written.
	Argv []string
	// Source is each word of Argv as written in the script it was read
	// from (its quotes and escapes kept; the script is a shell string's
	// own text for the commands inside bash -c).
	Source []string
	// Known is each word of Argv with a variable the script gives only
	// literal values replaced by its value, when it has just one
	// (pw=x; mysql -p"$pw"): what a secret's value is.
	Known []string
	// Name is argv[0] without its directory: what command rules match.
	// git-<sub> is named git (its words are git <sub> …).
	Name string
	// Dynamic is set when the program itself is computed at run time
	// ($(echo curl), "$CMD", a glob or brace pattern): no rule can see it.
	Dynamic bool
	// Assigns are the NAME=VALUE words before the program, as written.
	Assigns []string
	// Redirects are the redirections of the statement, e.g. "> /etc/passwd".
	Redirects []string
	// Network is set when a redirect of the statement opens bash's
	// /dev/tcp or /dev/udp.
	Network bool

	words []word // Argv with what each word could become, for rule matching
}

// Unseen is a construct that runs code the analysis cannot see: eval, a
// script read from stdin, inline interpreter code, an option that runs a
// command, a wrapper option it does not know. Where command rules apply,
// each one is asked about.
type Unseen struct {
	Construct string // what it is, for a person: "eval", "python -c (inline code)"
	Text      string // the command it was found in, as written (bounded)
}

// Analysis is what a shell tool's command would run.
type Analysis struct {
	Leaves []Leaf
	Unseen []Unseen
	// Network are the redirects that open /dev/tcp or /dev/udp, as written.
	Network []string

	// secretScripts are the literal scripts shells read from a here-string
	// or here-document, and eval's: unseen, but searched for secrets.
	secretScripts []string

	paths []pathUse // files the command names, for the protected names
	// dotglob: the script may turn on bash's dotglob, so a glob's * and ?
	// match names starting with a dot.
	dotglob bool
	// movedAt is the number of paths recorded before the script first
	// moved into a directory known only at run time (-1: it does not):
	// a relative name after it, or anywhere in a script with a loop, may
	// be anywhere.
	movedAt int
	loops   bool
}

// Analyze parses a shell command line into its leaf programs — every simple
// command of lists, pipelines, subshells, blocks, compound commands, command
// and process substitutions, patterns, function bodies, trap actions and
// the scripts given to shells it can see — with wrappers unwrapped by their
// whole option syntax (the wrapper stays a leaf of its own too), and lists
// what it cannot see. Every node kind the walk does not model is unseen.
// Errors wrap ErrUncheckable.
func (t *Tables) Analyze(ctx context.Context, cmd string) (*Analysis, error) {
	if err := t.ready(); err != nil {
		return nil, err
	}
	a := &analyzer{ctx: ctx, t: t, out: Analysis{movedAt: -1}}
	if err := a.script(cmd, 0); err != nil {
		return nil, err
	}
	return &a.out, nil
}

// AnalyzeArgv is Analyze for a command given as an argv list (some agents'
// shell tools send one): the list is one leaf, unwrapped the same way.
func (t *Tables) AnalyzeArgv(ctx context.Context, argv []string) (*Analysis, error) {
	if err := t.ready(); err != nil {
		return nil, err
	}
	for _, s := range argv {
		if strings.IndexByte(s, 0) >= 0 {
			// execve ends a string at its NUL: "curl\x00" would run curl.
			return nil, fmt.Errorf("%w: an argument holds a NUL byte", ErrUncheckable)
		}
	}
	a := &analyzer{ctx: ctx, t: t, out: Analysis{movedAt: -1}}
	words := make([]word, len(argv))
	for i, s := range argv {
		words[i] = word{text: s, kind: literal}
	}
	if err := a.leaf(leafCtx{src: strings.Join(argv, " ")}, Leaf{}, words, 0); err != nil {
		return nil, err
	}
	return &a.out, nil
}

// ParseCommand is Analyze with empty tables (no interpreter, option or
// variable data), leaves only.
func ParseCommand(cmd string) ([]Leaf, error) {
	a, err := (&Tables{}).Analyze(context.Background(), cmd)
	if err != nil {
		return nil, err
	}
	return a.Leaves, nil
}

type analyzer struct {
	ctx context.Context
	t   *Tables
	out Analysis
	sc  *scope // the variables of the script being walked
	// words are the parsed words already read, by node.
	words map[*syntax.Word]word
	// producers are, for each statement a pipe feeds, the statement
	// writing into the pipe.
	producers map[*syntax.Stmt]*syntax.Stmt
	// dir is the directory a literal cd moved the script into (relative
	// to the cwd or absolute): relative names after it are judged in it
	// as well as in the cwd; dirVague once it moved into one of several.
	dir      string
	dirVague bool
}

// leafCtx is what a leaf's statement says about it beyond its words.
type leafCtx struct {
	src  string // the text the statement was parsed from
	stmt *syntax.Stmt
	// producer is the statement whose output is piped into this one (its
	// last command), parsed from producerSrc.
	producer    *syntax.Stmt
	producerSrc string
	stdinPiped  bool // stdin is a pipe, a here-document or here-string, or a substitution
	stdinFile   bool // stdin is redirected from a named file
	// dir is the directory the command works in, relative to the
	// script's ("" for it) or absolute, when a wrapper moved it (env -C
	// DIR); dirUnknown when it is known only at run time (find -execdir).
	dir        string
	dirUnknown bool
}

func (a *analyzer) unseen(construct, text string) {
	if len(a.out.Unseen) < maxUnseen {
		a.out.Unseen = append(a.out.Unseen, Unseen{Construct: construct, Text: clip(text)})
	}
}

// clip bounds text quoted back to the caller.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// script parses one shell script (the command, or a string a shell is given)
// and records its leaves.
func (a *analyzer) script(cmd string, depth int) error {
	if err := a.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUncheckable, err)
	}
	if len(cmd) > MaxCommandBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrUncheckable, MaxCommandBytes)
	}
	if strings.IndexByte(cmd, 0) >= 0 {
		return fmt.Errorf("%w: the command holds a NUL byte", ErrUncheckable)
	}
	if depth > MaxShellDepth {
		return fmt.Errorf("%w: shell strings nested deeper than %d", ErrUncheckable, MaxShellDepth)
	}
	if err := CheckNesting(cmd); err != nil {
		return err
	}
	file, err := parseBash(cmd)
	if err != nil {
		return err
	}
	outer := a.sc
	a.sc = newScope(a, cmd, file)
	if outer != nil {
		// A nested shell sees the functions exported to it.
		for n := range outer.names {
			a.sc.names[n] = true
		}
	}
	defer func() { a.sc = outer }()
	a.sc.collect(a, cmd, file)
	a.heredocEnds(cmd, file)
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ForClause, *syntax.WhileClause:
			a.out.loops = true
		}
		return !a.out.loops
	})
	piped := pipeReceivers(file)
	outerProducers := a.producers
	a.producers = producers(file)
	defer func() { a.producers = outerProducers }()
	var walkErr error
	syntax.Walk(file, func(node syntax.Node) bool {
		if walkErr != nil {
			return false
		}
		walkErr = a.node(cmd, node, piped, depth)
		return walkErr == nil
	})
	return walkErr
}

// node judges one node of the parse: each kind the analysis models is
// checked for what it runs or evaluates; any other kind is unseen.
func (a *analyzer) node(cmd string, node syntax.Node, piped map[*syntax.Stmt]bool, depth int) error {
	switch n := node.(type) {
	case nil, *syntax.File, *syntax.Comment, *syntax.Word, *syntax.Lit, *syntax.SglQuoted, *syntax.DblQuoted, *syntax.CmdSubst,
		*syntax.ProcSubst, *syntax.Subshell, *syntax.Block, *syntax.IfClause, *syntax.WhileClause, *syntax.BinaryCmd,
		*syntax.FuncDecl, *syntax.CaseClause, *syntax.CaseItem, *syntax.BinaryTest, *syntax.UnaryTest, *syntax.ParenTest,
		*syntax.ArrayExpr, *syntax.ArrayElem, *syntax.TimeClause, *syntax.BraceExp, *syntax.ParenArithm, *syntax.Redirect,
		*syntax.Assign, *syntax.CallExpr:
		// Modelled through their parents or their children.
	case *syntax.Stmt:
		return a.stmt(cmd, n, piped[n], depth)
	case *syntax.ArithmExp:
		a.arithm(cmd, n, n.X)
	case *syntax.ArithmCmd:
		a.arithm(cmd, n, n.X)
	case *syntax.BinaryArithm, *syntax.UnaryArithm:
		a.arithmAssign(cmd, n)
	case *syntax.CStyleLoop:
		a.arithm(cmd, n, n.Init)
		a.arithm(cmd, n, n.Cond)
		a.arithm(cmd, n, n.Post)
	case *syntax.LetClause:
		for _, x := range n.Exprs {
			a.arithm(cmd, n, x)
		}
	case *syntax.ParamExp:
		a.paramExp(cmd, n)
	case *syntax.TestClause:
		a.testClause(cmd, n)
	case *syntax.DeclClause:
		a.declClause(cmd, n)
	case *syntax.ForClause:
		if it, ok := n.Loop.(*syntax.WordIter); ok && it.Name != nil {
			a.assignName(source(cmd, n), it.Name.Value, "a loop setting")
		}
	case *syntax.WordIter:
	case *syntax.CoprocClause:
		if n.Name != nil {
			if w := wordOf(cmd, n.Name); w.kind == literal {
				a.assignName(source(cmd, n), w.text, "coproc setting")
			}
		}
	case *syntax.ExtGlob:
		return a.extGlob(cmd, n, depth)
	default:
		a.unseen(fmt.Sprintf("a shell construct toolpdp does not model (%T)", node), source(cmd, node))
	}
	return nil
}

// extGlob analyses an extended glob's pattern, which the parser keeps as
// text: its alternatives are patterns of a case item, with every
// substitution in them a leaf like any other.
func (a *analyzer) extGlob(src string, g *syntax.ExtGlob, depth int) error {
	if g.Pattern == nil || !strings.ContainsAny(g.Pattern.Value, "$`<>(") {
		return nil
	}
	if err := a.script("case _ in "+g.Pattern.Value+") ;; esac", depth+1); err != nil {
		a.unseen("an extended glob toolpdp cannot parse ("+clip(source(src, g))+")", source(src, g))
	}
	return nil
}

// parseBash parses a script as bash reads it. The parser continues a
// comment past a backslash-newline, where bash ends it at the newline
// (`ls # \` then `curl x` on the next line runs curl): such comments are
// blanked up to the newline and the script parsed again.
func parseBash(cmd string) (*syntax.File, error) {
	for range 16 {
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(cmd), "")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUncheckable, err)
		}
		fixed := []byte(nil)
		syntax.Walk(file, func(n syntax.Node) bool {
			c, ok := n.(*syntax.Comment)
			if !ok {
				return true
			}
			i := strings.Index(c.Text, "\\\n")
			start := int(c.Hash.Offset())
			if i < 0 || start < 0 || start+1+i >= len(cmd) {
				return true
			}
			if fixed == nil {
				fixed = []byte(cmd)
			}
			for j := start; j <= start+1+i; j++ { // the # through the backslash
				fixed[j] = ' '
			}
			return true
		})
		if fixed == nil {
			return file, nil
		}
		cmd = string(fixed)
	}
	return nil, fmt.Errorf("%w: comments continued by backslashes past any bound", ErrUncheckable)
}

// pipeReceivers marks every statement whose stdin comes from a pipe, a
// here-document or here-string, or a process substitution — the whole right
// side of `|`, and everything inside a compound command so redirected.
func pipeReceivers(file *syntax.File) map[*syntax.Stmt]bool {
	out := map[*syntax.Stmt]bool{}
	markAll := func(n syntax.Node) {
		syntax.Walk(n, func(m syntax.Node) bool {
			if s, ok := m.(*syntax.Stmt); ok {
				out[s] = true
			}
			return true
		})
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryCmd:
			if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
				markAll(n.Y)
			}
		case *syntax.Stmt:
			if stdinKind(n) == stdinPipe {
				markAll(n)
			}
		}
		return true
	})
	return out
}

// heredocEnds finds here-documents with a line that starts with their
// delimiter but is not it (EOF) inside $(…)): bash ends the document there
// where the parser read on, so what runs after it is not what was parsed.
func (a *analyzer) heredocEnds(src string, file *syntax.File) {
	syntax.Walk(file, func(n syntax.Node) bool {
		r, ok := n.(*syntax.Redirect)
		if !ok || r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc || r.Word == nil {
			return true
		}
		delim := wordOf(src, r.Word)
		if delim.kind != literal || delim.text == "" {
			return true
		}
		body := ""
		if r.Hdoc != nil {
			body = source(src, r.Hdoc)
		}
		for _, line := range strings.Split(body, "\n") {
			if r.Op == syntax.DashHdoc {
				line = strings.TrimLeft(line, "\t")
			}
			if strings.HasPrefix(line, delim.text) && line != delim.text {
				a.unseen("a here-document line bash may read as its end ("+clip(line)+")", src)
				return false
			}
		}
		return true
	})
}

// producers maps each statement on the right of a pipe to the last
// statement on its left: the one whose output it reads.
func producers(file *syntax.File) map[*syntax.Stmt]*syntax.Stmt {
	out := map[*syntax.Stmt]*syntax.Stmt{}
	syntax.Walk(file, func(n syntax.Node) bool {
		if b, ok := n.(*syntax.BinaryCmd); ok && b.Op == syntax.Pipe {
			x := b.X
			for {
				inner, ok := x.Cmd.(*syntax.BinaryCmd)
				if !ok || inner.Op != syntax.Pipe && inner.Op != syntax.PipeAll {
					break
				}
				x = inner.Y
			}
			out[b.Y] = x
		}
		return true
	})
	return out
}

type stdin int

const (
	stdinInherited stdin = iota
	stdinPipe
	stdinNamedFile
)

// stdinKind is where a statement's own redirections send its stdin.
func stdinKind(s *syntax.Stmt) stdin {
	kind := stdinInherited
	for _, r := range s.Redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			kind = stdinPipe
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn:
			w := wordOf("", r.Word)
			switch {
			case w.kind != literal || stdinAlias(w.text):
				kind = stdinPipe // a descriptor, a connection, or named at run time
			case r.Op == syntax.DplIn:
				// <&N duplicates another descriptor: whatever that holds.
				kind = stdinPipe
			default:
				kind = stdinNamedFile
			}
		}
	}
	return kind
}

// stmt records the leaf of one simple command, and what its redirections
// and assignments do.
func (a *analyzer) stmt(src string, s *syntax.Stmt, piped bool, depth int) error {
	kind := stdinKind(s)
	ctx := leafCtx{src: source(src, s), stmt: s, stdinPiped: piped || kind == stdinPipe, stdinFile: kind == stdinNamedFile,
		producer: a.producers[s], producerSrc: src}
	a.redirects(ctx, src, s)
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		return nil
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = a.word(src, w)
	}
	prog := ""
	if len(words) > 0 && words[0].kind == literal {
		prog = path.Base(words[0].text)
	}
	for _, as := range call.Assigns {
		a.assign(src, as, prog)
	}
	if len(call.Args) == 0 {
		return nil
	}
	leaf := Leaf{Assigns: make([]string, 0, len(call.Assigns))}
	for _, as := range call.Assigns {
		leaf.Assigns = append(leaf.Assigns, source(src, as))
	}
	for _, r := range s.Redirs {
		leaf.Redirects = append(leaf.Redirects, source(src, r))
		if r.Word != nil {
			if w := a.wordOf(src, r.Word); w.kind == literal && devPath(w.text) == devNetwork {
				leaf.Network = true
			}
		}
	}
	if prog != "" {
		a.prefixAssigns(ctx, src, call, a.t.canonicalName(prog))
	}
	return a.leaf(ctx, leaf, words, depth)
}

// redirects records what a statement's redirections open: files it writes
// or reads (for the protected names), bash's network connections, and a
// {NAME}> that assigns a variable.
func (a *analyzer) redirects(ctx leafCtx, src string, s *syntax.Stmt) {
	for _, r := range s.Redirs {
		if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
			a.assignName(ctx.src, strings.Trim(r.N.Value, "{}"), "a redirect setting")
		}
		if r.Word == nil {
			continue
		}
		w := a.word(src, r.Word)
		if w.kind == literal && devPath(w.text) == devNetwork {
			a.out.Network = append(a.out.Network, clip(source(src, r)))
			continue
		}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.AppClob, syntax.RdrInOut:
			a.pathUse(ctx, "a redirect writing", w, true)
			if w.kind != pattern { // $HOME/.gitconfig too, by its written segments
				a.execConfig(ctx, "a redirect writing", w.text)
			}
		case syntax.DplOut:
			if w.kind != literal || w.text != "-" && !isDigits(w.text) {
				a.pathUse(ctx, "a redirect writing", w, true) // >&file is >file 2>&1
			}
		case syntax.RdrIn:
			a.pathUse(ctx, "a redirect reading", w, false)
		}
	}
}

// execConfig records a write into a file whose contents programs run
// (~/.gitconfig, ~/.bashrc, git hooks): it runs at the next such program.
func (a *analyzer) execConfig(ctx leafCtx, what, p string) {
	if name, ok := a.t.tables().execConfig.Match(strings.ReplaceAll(p, "=", "/")); ok { // dd of=~/.bashrc
		a.unseen(what+" into "+clip(p)+" ("+name+": program configuration, whose files run commands)", ctx.src)
	}
}

// leaf records words as a leaf, then what it runs: a wrapper's command, a
// shell's script.
func (a *analyzer) leaf(ctx leafCtx, leaf Leaf, words []word, depth int) error {
	if len(words) == 0 {
		return nil
	}
	if err := a.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUncheckable, err)
	}
	if len(a.out.Leaves) >= MaxLeaves {
		return fmt.Errorf("%w: more than %d commands", ErrUncheckable, MaxLeaves)
	}
	leaf.Argv = make([]string, len(words))
	leaf.Source = make([]string, len(words))
	leaf.Known = make([]string, len(words))
	for i, w := range words {
		leaf.Argv[i], leaf.Source[i], leaf.Known[i] = w.text, w.src, w.text
		if w.src == "" {
			leaf.Source[i] = w.text
		}
		if w.kind == opaque && len(w.values) == 1 && !w.globValues {
			leaf.Known[i] = w.values[0]
		}
	}
	prog := words[0]
	leaf.Dynamic = prog.kind != literal
	if !leaf.Dynamic {
		leaf.Name = path.Base(prog.text)
		switch {
		case devPath(prog.text) != devNone:
			// /dev/fd/3 after exec 3</usr/bin/curl: a program run through
			// a descriptor is whatever that descriptor holds.
			leaf.Dynamic = true
		case procExe(prog.text):
			// /proc/self/exe is the shell running the command.
			leaf.Name = "bash"
			words = append([]word{{text: "bash", kind: literal}}, words[1:]...)
		}
		if sub, ok := a.dashed(leaf.Name); ok {
			// /usr/lib/git-core/git-push is git push.
			leaf.Name = sub[0]
			words = append([]word{{text: sub[0], kind: literal}, {text: sub[1], kind: literal}}, words[1:]...)
		}
	}
	leaf.words = words
	a.out.Leaves = append(a.out.Leaves, leaf)
	if leaf.Dynamic {
		a.unseen("a program computed at run time ("+clip(prog.text)+")", ctx.src)
		return nil
	}
	return a.runs(ctx, leaf.Name, words, depth)
}

// procExe reports /proc/PID/exe (or a task's): the running program's own
// binary.
func procExe(p string) bool {
	segs := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	n := len(segs)
	return n >= 3 && segs[0] == "proc" && segs[n-1] == "exe" && (n == 3 || n == 5 && segs[2] == "task")
}

// dashed splits git-push into git and push, for a program of the
// subcommands table whose subcommands are also programs of their own.
func (a *analyzer) dashed(name string) ([2]string, bool) {
	prog, sub, ok := strings.Cut(name, "-")
	if !ok || sub == "" {
		return [2]string{}, false
	}
	sc := a.t.tables().subcommands[a.t.canonicalName(prog)]
	if sc == nil || !sc.dashed {
		return [2]string{}, false
	}
	return [2]string{a.t.canonicalName(prog), sub}, true
}
