package envguard

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Bounds on what ParseCommand accepts; past them the command cannot be
// checked, and the policy asks a person.
const (
	MaxCommandBytes = 64 << 10
	MaxLeaves       = 1024
	MaxShellDepth   = 8 // nested `bash -c` strings
)

// ErrUncheckable marks a command that cannot be turned into leaves: it does
// not parse, or it exceeds a bound.
var ErrUncheckable = errors.New("command cannot be checked")

// Leaf is one simple command a shell line would run.
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
}

// ParseCommand parses a shell command line into its leaf commands: every
// simple command in lists, pipelines, subshells, blocks, compound commands,
// command and process substitutions and the strings given to `sh -c`, with
// wrappers such as env, timeout and sudo unwrapped (the wrapper stays a leaf
// of its own too). Errors wrap ErrUncheckable.
func ParseCommand(cmd string) ([]Leaf, error) {
	p := &shellParser{}
	if err := p.parse(cmd, 0); err != nil {
		return nil, err
	}
	return p.leaves, nil
}

type shellParser struct {
	leaves []Leaf
}

func (p *shellParser) parse(cmd string, depth int) error {
	if len(cmd) > MaxCommandBytes {
		return fmt.Errorf("%w: longer than %d bytes", ErrUncheckable, MaxCommandBytes)
	}
	if depth > MaxShellDepth {
		return fmt.Errorf("%w: shell -c nested deeper than %d", ErrUncheckable, MaxShellDepth)
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUncheckable, err)
	}
	var walkErr error
	syntax.Walk(file, func(node syntax.Node) bool {
		if walkErr != nil {
			return false
		}
		if stmt, ok := node.(*syntax.Stmt); ok {
			if call, ok := stmt.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				walkErr = p.call(cmd, stmt, call, depth)
			}
		}
		return true
	})
	return walkErr
}

// call records the leaf of one simple command and what it wraps. src is the
// text the nodes were parsed from.
func (p *shellParser) call(src string, stmt *syntax.Stmt, call *syntax.CallExpr, depth int) error {
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = literal(src, w)
	}
	leaf := Leaf{Assigns: make([]string, 0, len(call.Assigns))}
	for _, a := range call.Assigns {
		leaf.Assigns = append(leaf.Assigns, source(src, a))
	}
	for _, r := range stmt.Redirs {
		leaf.Redirects = append(leaf.Redirects, source(src, r))
	}
	return p.add(leaf, words, depth)
}

// add records words as a leaf, then follows wrappers and `sh -c` strings.
func (p *shellParser) add(leaf Leaf, words []word, depth int) error {
	if len(words) == 0 {
		return nil
	}
	if len(p.leaves) >= MaxLeaves {
		return fmt.Errorf("%w: more than %d commands", ErrUncheckable, MaxLeaves)
	}
	leaf.Argv = make([]string, len(words))
	for i, w := range words {
		leaf.Argv[i] = w.text
	}
	prog := words[0]
	leaf.Dynamic = !prog.static || strings.ContainsAny(prog.text, "*?[{")
	if !leaf.Dynamic {
		leaf.Name = path.Base(prog.text)
	}
	p.leaves = append(p.leaves, leaf)
	if leaf.Dynamic {
		return nil
	}
	if shells[leaf.Name] {
		if script, ok := shellScript(words[1:]); ok {
			return p.parse(script, depth+1)
		}
		return nil
	}
	if leaf.Name == "find" {
		return p.findExec(words[1:], depth)
	}
	if w, ok := wrappers[leaf.Name]; ok {
		if inner := w.unwrap(words[1:]); len(inner) > 0 {
			return p.add(Leaf{}, inner, depth)
		}
	}
	return nil
}

// findExec records the commands of find's -exec, -execdir, -ok and -okdir,
// each ended by ";" or "+".
func (p *shellParser) findExec(args []word, depth int) error {
	for i := 0; i < len(args); i++ {
		switch args[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
			end := i + 1
			for end < len(args) && args[end].text != ";" && args[end].text != "+" {
				end++
			}
			if err := p.add(Leaf{}, args[i+1:end], depth); err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// word is one shell word: its text with quotes removed when it is static
// (no expansion), else as written.
type word struct {
	text   string
	static bool
}

func literal(src string, w *syntax.Word) word {
	static := expandable(w)
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			static = false
		}
		return static
	})
	if static {
		// Fields does bash's quote and backslash removal (c\url is curl).
		// A fresh, empty Config: it neither globs nor reads the environment.
		// Not nil: mvdan.cc/sh v3.14.1 gives every nil-config caller one
		// shared global Config and mutates it, a data race under load.
		if f, err := expand.Fields(&expand.Config{}, w); err == nil && len(f) == 1 {
			return word{text: f[0], static: true}
		}
	}
	return word{text: source(src, w)}
}

// expandable rules out the expansions that cost without bound or reach
// outside: brace expansion ({1..99999999} is a hundred million words) and
// tilde expansion (~user looks up a user). Such words keep their source text.
func expandable(w *syntax.Word) bool {
	for i, part := range w.Parts {
		lit, ok := part.(*syntax.Lit)
		if !ok {
			continue
		}
		if strings.Contains(lit.Value, "{") || (i == 0 && strings.HasPrefix(lit.Value, "~")) {
			return false
		}
	}
	return true
}

// source is a node's text as written.
func source(src string, n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true}

// shellScript finds the string of `sh [options] -c STRING`.
func shellScript(args []word) (string, bool) {
	for i, a := range args {
		if !a.static || !strings.HasPrefix(a.text, "-") || a.text == "-" || a.text == "--" {
			return "", false
		}
		// -c may be bundled with other single-letter options: -ec, -lc.
		if !strings.HasPrefix(a.text, "--") && strings.Contains(a.text, "c") && i+1 < len(args) {
			return args[i+1].text, args[i+1].static
		}
	}
	return "", false
}

// wrapper describes a program that runs another: its options that take a
// value, and how many operands come before the wrapped program.
type wrapper struct {
	valueOpts map[string]bool // options whose value is the next word
	operands  int             // words before the program (timeout's DURATION)
	assigns   bool            // NAME=VALUE words may precede the program (env)
}

func (w wrapper) unwrap(args []word) []word {
	skip := w.operands
	for i := 0; i < len(args); i++ {
		a := args[i].text
		switch {
		case a == "--":
			return nthOperand(args[i+1:], skip)
		case strings.HasPrefix(a, "-") && len(a) > 1 && skip == w.operands:
			if w.valueOpts[a] {
				i++
			}
		case w.assigns && strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
		default:
			if skip == 0 {
				return args[i:]
			}
			skip--
		}
	}
	return nil
}

func nthOperand(args []word, skip int) []word {
	if skip >= len(args) {
		return nil
	}
	return args[skip:]
}

func opts(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// wrappers are the programs whose argument is another program to run.
var wrappers = map[string]wrapper{
	"env":     {valueOpts: opts("-u", "--unset", "-C", "--chdir", "-S", "--split-string"), assigns: true},
	"timeout": {valueOpts: opts("-s", "--signal", "-k", "--kill-after"), operands: 1},
	"nice":    {valueOpts: opts("-n", "--adjustment")},
	"nohup":   {},
	"command": {},
	"exec":    {valueOpts: opts("-a")},
	"xargs":   {valueOpts: opts("-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--replace")},
	"sudo":    {valueOpts: opts("-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout")},
	"stdbuf":  {valueOpts: opts("-i", "-o", "-e")},
	"time":    {valueOpts: opts("-f", "--format", "-o", "--output")},
	"doas":    {valueOpts: opts("-u", "-C")},
	"setsid":  {},
	"chrt":    {operands: 1},
	"ionice":  {valueOpts: opts("-c", "--class", "-n", "--classdata", "-t")},
	"strace":  {valueOpts: opts("-e", "-o", "-p", "-s", "-u")},
	"watch":   {valueOpts: opts("-n", "--interval", "-d")},
	"flock":   {operands: 1, valueOpts: opts("-w", "--timeout", "-E", "-c")},
}
