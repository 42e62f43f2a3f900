package envguard

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
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
	// Name is argv[0] without its directory: what command rules match.
	Name string
	// Dynamic is set when the program itself is computed at run time
	// ($(echo curl), "$CMD", a glob or brace pattern): no rule can see it.
	Dynamic bool
	// Assigns are the NAME=VALUE words before the program, as written.
	Assigns []string
	// Redirects are the redirections of the statement, e.g. "> /etc/passwd".
	Redirects []string

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
}

// Analyze parses a shell command line into its leaf programs — every simple
// command of lists, pipelines, subshells, blocks, compound commands, command
// and process substitutions, function bodies and the scripts given to shells
// it can see — with wrappers unwrapped by their whole option syntax (the
// wrapper stays a leaf of its own too), and lists what it cannot see.
// Errors wrap ErrUncheckable.
func (t *Tables) Analyze(ctx context.Context, cmd string) (*Analysis, error) {
	a := &analyzer{ctx: ctx, t: t}
	if err := a.script(cmd, 0, nil); err != nil {
		return nil, err
	}
	return &a.out, nil
}

// AnalyzeArgv is Analyze for a command given as an argv list (some agents'
// shell tools send one): the list is one leaf, unwrapped the same way.
func (t *Tables) AnalyzeArgv(ctx context.Context, argv []string) (*Analysis, error) {
	for _, s := range argv {
		if strings.IndexByte(s, 0) >= 0 {
			// execve ends a string at its NUL: "curl\x00" would run curl.
			return nil, fmt.Errorf("%w: an argument holds a NUL byte", ErrUncheckable)
		}
	}
	a := &analyzer{ctx: ctx, t: t}
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
	// vars are the script's variables with what was assigned to them:
	// clean when every value was a plain literal. A variable used in
	// arithmetic is evaluated as an expression, subscripts included, so a
	// value from elsewhere can run code ($((x)) with x='a[$(id)]').
	vars map[string]bool // name -> dirty
}

// leafCtx is what a leaf's statement says about it beyond its words.
type leafCtx struct {
	src        string // the text the statement was parsed from
	stmt       *syntax.Stmt
	stdinPiped bool // stdin is a pipe, a here-document or here-string, or a substitution
	stdinFile  bool // stdin is redirected from a named file
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
// and records its leaves. pipedIn marks a script whose own stdin is a pipe.
func (a *analyzer) script(cmd string, depth int, _ *syntax.Stmt) error {
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
	piped := pipeReceivers(file)
	a.collectVars(cmd, file)
	var walkErr error
	syntax.Walk(file, func(node syntax.Node) bool {
		if walkErr != nil {
			return false
		}
		switch n := node.(type) {
		case *syntax.Stmt:
			walkErr = a.stmt(cmd, n, piped[n], depth)
		case *syntax.ArithmExp:
			a.arithm(cmd, n, n.X)
		case *syntax.ArithmCmd:
			a.arithm(cmd, n, n.X)
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
			if it, ok := n.Loop.(*syntax.WordIter); ok && it.Name != nil && a.t.unsafeName(it.Name.Value) {
				a.unseen("a loop setting "+it.Name.Value+", which changes what a program runs", source(cmd, n))
			}
		}
		return true
	})
	return walkErr
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
				kind = stdinPipe
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

// stdinAlias reports a path that names the process's own stdin (or another
// open descriptor): a script read from it comes from stdin.
func stdinAlias(p string) bool {
	return p == "-" || p == "/dev/stdin" || strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/proc/self/fd/") ||
		(strings.HasPrefix(p, "/proc/") && strings.Contains(p, "/fd/"))
}

// stmt records the leaf of one simple command.
func (a *analyzer) stmt(src string, s *syntax.Stmt, piped bool, depth int) error {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		return nil
	}
	for _, as := range call.Assigns {
		a.assign(src, as, len(call.Args) == 0)
	}
	if len(call.Args) == 0 {
		return nil
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = wordOf(src, w)
	}
	leaf := Leaf{Assigns: make([]string, 0, len(call.Assigns))}
	for _, as := range call.Assigns {
		leaf.Assigns = append(leaf.Assigns, source(src, as))
	}
	for _, r := range s.Redirs {
		leaf.Redirects = append(leaf.Redirects, source(src, r))
	}
	kind := stdinKind(s)
	ctx := leafCtx{src: source(src, s), stmt: s, stdinPiped: piped || kind == stdinPipe, stdinFile: kind == stdinNamedFile}
	a.redirects(ctx, src, s)
	return a.leaf(ctx, leaf, words, depth)
}

// redirects records a redirection that writes into version-control metadata
// or agent configuration (> .git/hooks/pre-commit, >> .claude/settings.json):
// the next git or agent run executes what it wrote.
func (a *analyzer) redirects(ctx leafCtx, src string, s *syntax.Stmt) {
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.AppClob, syntax.RdrInOut:
			if w := wordOf(src, r.Word); w.kind != pattern { // $HOME/.gitconfig too, by its written segments
				a.protectedPath(ctx, "a redirect writing", w.text)
			}
		}
	}
}

// protectedPath records a path with a protected name, or the name of a
// file whose contents programs run, as one of its segments.
func (a *analyzer) protectedPath(ctx leafCtx, what, p string) {
	if strings.Contains(strings.ToLower(p), ".config/git/") {
		a.unseen(what+" into "+clip(p)+" (git's configuration, whose aliases run commands)", ctx.src)
		return
	}
	names := protectednames.New(append(a.t.ProtectedNames[:len(a.t.ProtectedNames):len(a.t.ProtectedNames)], a.t.ExecConfigFiles...))
	if name, ok := names.Match(strings.ReplaceAll(p, "=", "/")); ok { // dd of=.git/x
		a.unseen(what+" into "+clip(p)+" ("+name+": version control, agent or program configuration, whose files run commands)", ctx.src)
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
	leaf.words = words
	leaf.Argv = make([]string, len(words))
	for i, w := range words {
		leaf.Argv[i] = w.text
	}
	prog := words[0]
	leaf.Dynamic = prog.kind != literal
	if !leaf.Dynamic {
		leaf.Name = path.Base(prog.text)
	}
	a.out.Leaves = append(a.out.Leaves, leaf)
	if leaf.Dynamic {
		a.unseen("a program computed at run time ("+clip(prog.text)+")", ctx.src)
		return nil
	}
	return a.runs(ctx, leaf.Name, words, depth)
}

// word is one shell word: its text with quotes removed when it is a plain
// literal, else as written, and what it could become at run time.
type word struct {
	text string
	kind wordKind
	// pattern is, for a glob or brace word, a regular expression matching
	// every string it could expand to (compiled when a rule needs it).
	pattern string
	// home: an opaque word only because it starts with ~ (a path under a
	// home directory), not a substitution.
	home bool
}

type wordKind uint8

const (
	literal wordKind = iota // exactly this text
	pattern                 // a glob or brace expansion: one or more strings matching pattern
	opaque                  // a parameter, command or arithmetic substitution, ~: anything, any number of words
)

func wordOf(src string, w *syntax.Word) word {
	if w == nil {
		return word{kind: opaque}
	}
	out := word{text: source(src, w)}
	dynamic := false
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			dynamic = true
		}
		return !dynamic
	})
	if dynamic || tilde(w) {
		out.kind, out.home = opaque, !dynamic
		return out
	}
	if re, ok := globPattern(w); ok {
		out.kind, out.pattern = pattern, re
		return out
	}
	// Fields does bash's quote and backslash removal (c\url is curl).
	// A fresh, empty Config: it neither globs nor reads the environment.
	// Not nil: mvdan.cc/sh v3.14.1 gives every nil-config caller one
	// shared global Config and mutates it, a data race under load.
	if f, err := expand.Fields(&expand.Config{}, w); err == nil && len(f) == 1 {
		out.text, out.kind = f[0], literal
		return out
	}
	out.kind = opaque
	return out
}

// tilde reports a word starting with an unquoted ~ (a home directory).
func tilde(w *syntax.Word) bool {
	if len(w.Parts) == 0 {
		return false
	}
	lit, ok := w.Parts[0].(*syntax.Lit)
	return ok && strings.HasPrefix(lit.Value, "~")
}

// source is a node's text as written.
func source(src string, n syntax.Node) string {
	if src == "" || n == nil {
		return ""
	}
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
}
