package envguard

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// scope is what one script assigns: for each variable, whether any value
// may come from elsewhere (dirty) and the literal values it is given; the
// associative arrays it declares; its function bodies.
type scope struct {
	vars   map[string]bool     // name -> dirty
	values map[string][]string // name -> the literal values assigned
	assoc  map[string]assocDecl
	funcs  [][2]int // function bodies, by offset
	// names are the functions the script defines: a program of the
	// numeric_output table so named is the function.
	names map[string]bool
	// temps are the paths of variables assigned only from mktemp (a
	// fresh file under its template or $TMPDIR); notTemp those assigned
	// otherwise too.
	temps   map[string][]string
	notTemp map[string]bool
	// globs are the variables some of whose values are globs (for f in
	// src/*): each value is the glob, matched as one; opaqueValues those
	// given a value the analysis cannot write down (for f in "$@"x*).
	globs        map[string]bool
	opaqueValues map[string]bool
	src          string // the script's text
	// movesDir: the script changes its directory, so $PWD and $(pwd) are
	// not the cwd the call names.
	movesDir bool
	// numeric reports a command substitution whose output is a number.
	numeric func(*syntax.CmdSubst) bool
	// listed are the variables some of whose values are names a find or
	// git ls-files prints, globs in find's sense (a * matching a dot).
	listed map[string]bool
	// top are the declarations that run whenever their script or
	// function body does: direct statements of it, not inside a
	// conditional, a list or a subshell.
	top map[*syntax.DeclClause]bool
}

// assocDecl is where `declare -A NAME` is: its offset and the function
// body holding it (-1 at the top level).
type assocDecl struct {
	at, fn int
	bad    bool // also declared otherwise, or unset: not always associative
}

func newScope(a *analyzer, src string, file *syntax.File) *scope {
	sc := &scope{vars: map[string]bool{}, values: map[string][]string{}, assoc: map[string]assocDecl{}, names: map[string]bool{},
		top: map[*syntax.DeclClause]bool{}, temps: map[string][]string{}, notTemp: map[string]bool{},
		globs: map[string]bool{}, opaqueValues: map[string]bool{}, listed: map[string]bool{}}
	sc.numeric = func(cs *syntax.CmdSubst) bool { return a.numericSubst(src, cs) }
	sc.src = src
	sc.topLevel(file.Stmts)
	syntax.Walk(file, func(n syntax.Node) bool {
		if f, ok := n.(*syntax.FuncDecl); ok && f.Body != nil {
			sc.funcs = append(sc.funcs, [2]int{int(f.Body.Pos().Offset()), int(f.Body.End().Offset())})
			if f.Name != nil {
				sc.names[f.Name.Value] = true
			}
			if b, ok := f.Body.Cmd.(*syntax.Block); ok {
				sc.topLevel(b.Stmts)
			}
		}
		return true
	})
	return sc
}

func (sc *scope) topLevel(stmts []*syntax.Stmt) {
	for _, st := range stmts {
		if d, ok := st.Cmd.(*syntax.DeclClause); ok && !st.Background && !st.Coprocess && !st.Negated {
			sc.top[d] = true
		}
	}
}

// fn is the innermost function body holding offset, -1 for none.
func (sc *scope) fn(offset int) int {
	best := -1
	for i, f := range sc.funcs {
		if offset >= f[0] && offset < f[1] && (best < 0 || f[0] >= sc.funcs[best][0]) {
			best = i
		}
	}
	return best
}

// isAssoc reports whether name is an associative array at offset (-1: at
// every use): declared with -A before it, in the same function body or at
// the top level, never declared otherwise nor unset.
func (sc *scope) isAssoc(name string, offset int) bool {
	if sc == nil {
		return false
	}
	d, ok := sc.assoc[name]
	if !ok || d.bad {
		return false
	}
	if offset < 0 {
		return true
	}
	return d.at < offset && (d.fn < 0 || d.fn == sc.fn(offset))
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
	text := w.text
	if name, sub, ok := strings.Cut(text, "["); ok && a.sc.isAssoc(name, -1) {
		text = name // an associative array's subscript is a string
		_ = sub
	}
	for _, name := range identifiers(text) {
		if a.dirty(name) {
			a.unseen(what+" of $"+name+", a value from elsewhere that bash evaluates as code", ctx.src)
			return
		}
	}
}

// assignedNames handles builtins that assign to names (read, mapfile):
// the operands are names, and so are the values of the targets options
// (read -a NAME); a subscript in a name is evaluated, and some names
// change what runs. def is the name assigned when none is given.
func (a *analyzer) assignedNames(ctx leafCtx, args []word, valueLetters, targets, def string) {
	named := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && w.text == "--" {
			for _, n := range args[i+1:] {
				a.assignTarget(ctx, n)
				named = true
			}
			break
		}
		if w.kind == literal && strings.HasPrefix(w.text, "-") && len(w.text) > 1 {
			for j := 1; j < len(w.text); j++ {
				c := w.text[j]
				if strings.IndexByte(valueLetters, c) < 0 {
					continue
				}
				value := word{text: w.text[j+1:], kind: literal}
				if j+1 == len(w.text) {
					if i+1 < len(args) {
						i++
						value = args[i]
					} else {
						value = word{kind: literal}
					}
				}
				if strings.IndexByte(targets, c) >= 0 {
					a.assignTarget(ctx, value)
					named = true
				}
				break
			}
			continue
		}
		a.assignTarget(ctx, w)
		named = true
	}
	if !named && def != "" {
		a.assignName(ctx.src, def, "setting")
	}
}

func (a *analyzer) assignTarget(ctx leafCtx, w word) {
	if w.kind != literal {
		a.unseen("an assignment to a name computed at run time ("+clip(w.text)+")", ctx.src)
		return
	}
	name, sub, hasSub := strings.Cut(w.text, "[")
	a.assignName(ctx.src, name, "setting")
	if hasSub && !a.sc.isAssoc(name, -1) {
		a.evaluated(ctx, "a subscript", word{text: strings.TrimSuffix(sub, "]"), kind: literal})
	}
}

// assignName records an assignment to a variable that changes what runs
// or what bash expands: the shell's own variables, PATH, LD_*….
func (a *analyzer) assignName(text, name, what string) {
	if a.t.unsafeName(name) {
		a.unseen(what+" "+name+", which changes what the shell or a program runs", text)
	}
}

// declArg checks one argument of declare/export/local given as words.
func (a *analyzer) declArg(ctx leafCtx, what string, w word) {
	if w.kind != literal {
		a.unseen(what+" of words computed at run time ("+clip(w.text)+")", ctx.src)
		return
	}
	name, value, _ := strings.Cut(w.text, "=")
	a.assignTarget(ctx, word{text: strings.TrimSuffix(name, "+"), kind: literal})
	if strings.HasPrefix(value, "(") && strings.ContainsAny(value, "$`") {
		// declare 'a=([$i]=1)': bash parses the compound assignment again,
		// subscripts and expansions included.
		a.unseen("a compound assignment in one word, parsed again ("+clip(w.text)+")", ctx.src)
	}
	if smuggles(value) {
		a.unseen("a value holding code for a later expansion ("+clip(w.text)+")", ctx.src)
	}
	if a.t.unsafeValue(name, word{text: value, kind: literal}) {
		a.unseen("setting "+name+" to a value that runs a command ("+clip(w.text)+")", ctx.src)
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
	if a.sc == nil {
		return true
	}
	d, ok := a.sc.vars[name]
	return !ok || d
}

func (sc *scope) assigned(name string, dirty bool, value *string) {
	sc.vars[name] = sc.vars[name] || dirty
	if value == nil {
		sc.opaqueValues[name] = true // a value the analysis cannot write down
	} else {
		if len(sc.values[name]) < 16 {
			sc.values[name] = append(sc.values[name], *value)
		} else {
			sc.opaqueValues[name] = true // more values than are kept: not known
		}
	}
}

// iterated records the values a for loop's variable takes: its words, a
// glob as the glob itself (a value that is a number is no file name).
func (sc *scope) iterated(a *analyzer, src string, n *syntax.WordIter) {
	name := n.Name.Value
	sc.vars[name] = sc.vars[name] || len(n.Items) == 0
	for _, item := range n.Items {
		w := a.wordOf(src, item)
		dirty := !a.cleanWord(src, item)
		switch {
		case w.kind == literal:
			sc.assigned(name, dirty, &w.text)
		case w.kind == pattern && w.glob != "":
			sc.globs[name] = true
			sc.assigned(name, dirty, &w.glob)
		case len(item.Parts) == 1:
			// for f in $(find . -name '*.go'): names matching the glob
			cs, ok := item.Parts[0].(*syntax.CmdSubst)
			if glob, named := "", false; ok && len(cs.Stmts) == 1 {
				if glob, named = a.listedNames(src, cs.Stmts[0]); named {
					sc.globs[name] = true
					sc.assigned(name, dirty, &glob)
					break
				}
			}
			sc.assigned(name, dirty, nil)
		default:
			sc.assigned(name, dirty, nil)
		}
	}
}

// collect records every variable the script assigns, and whether each
// value is a plain literal or a number, before the walk that judges their
// uses; and the associative arrays it declares.
func (sc *scope) collect(a *analyzer, src string, file *syntax.File) {
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil {
				clean := a.cleanAssign(src, n)
				var value *string
				if clean && n.Value != nil && n.Array == nil {
					if w := a.wordOf(src, n.Value); w.kind == literal {
						value = &w.text
					}
				}
				sc.assigned(n.Name.Value, !clean, value)
				if t, ok := mktempPath(src, n); ok {
					sc.temps[n.Name.Value] = append(sc.temps[n.Name.Value], t)
				} else {
					sc.notTemp[n.Name.Value] = true
				}
			}
		case *syntax.DeclClause:
			sc.declared(src, n)
		case *syntax.WordIter:
			// for i; iterates over "$@": values from elsewhere.
			if !n.InPos.IsValid() {
				sc.assigned(n.Name.Value, true, nil)
			} else {
				sc.iterated(a, src, n)
			}
		case *syntax.BinaryArithm:
			if isArithmAssign(n.Op) {
				if name := arithmName(n.X); name != "" {
					sc.assigned(name, false, nil)
				}
			}
		case *syntax.UnaryArithm:
			if name := arithmName(n.X); name != "" && (n.Op == syntax.Inc || n.Op == syntax.Dec) {
				sc.assigned(name, false, nil)
			}
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true
			}
			prog := a.wordOf(src, n.Args[0])
			switch prog.text {
			case "cd", "pushd", "popd":
				sc.movesDir = true
			case "read", "mapfile", "readarray", "getopts", "printf", "wait":
				for _, w := range n.Args[1:] {
					if t := a.wordOf(src, w); t.kind == literal {
						name := strings.TrimPrefix(t.text, "-v")
						if syntax.ValidName(name) {
							sc.assigned(name, true, nil)
						}
					}
				}
			case "unset":
				for _, w := range n.Args[1:] {
					if d, ok := sc.assoc[a.wordOf(src, w).text]; ok {
						d.bad = true
						sc.assoc[a.wordOf(src, w).text] = d
					}
				}
			}
		}
		return true
	})
}

// mktempPath is the path an assignment from $(mktemp …) names: its
// template, the directory of -p/--tmpdir, or $TMPDIR's default.
func mktempPath(src string, as *syntax.Assign) (string, bool) {
	if as.Value == nil || as.Array != nil || as.Index != nil || len(as.Value.Parts) != 1 {
		return "", false
	}
	part := as.Value.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	cs, ok := part.(*syntax.CmdSubst)
	if !ok {
		return "", false
	}
	return mktempSubst(src, cs)
}

// mktempSubst is the path $(mktemp …) prints.
func mktempSubst(src string, cs *syntax.CmdSubst) (string, bool) {
	if len(cs.Stmts) != 1 || len(cs.Stmts[0].Redirs) > 0 {
		return "", false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 || wordOf(src, call.Args[0]).text != "mktemp" {
		return "", false
	}
	dir, template := "/tmp", "tmp.XXXXXXXXXX"
	args := call.Args[1:]
	for i := 0; i < len(args); i++ {
		w := wordOf(src, args[i])
		if w.kind != literal || smuggles(w.text) {
			return "", false
		}
		switch {
		case w.text == "-p" && i+1 < len(args):
			i++
			d := wordOf(src, args[i])
			if d.kind != literal {
				return "", false
			}
			dir = d.text
		case strings.HasPrefix(w.text, "--tmpdir="):
			dir = strings.TrimPrefix(w.text, "--tmpdir=")
		case strings.HasPrefix(w.text, "-"):
		default:
			template = w.text
		}
	}
	if strings.HasPrefix(template, "/") {
		return template, true
	}
	if strings.Contains(template, "/") {
		return template, true // relative to the cwd, as mktemp takes it
	}
	return dir + "/" + template, true
}

// declared records the associative arrays of a declare/typeset/local -A.
func (sc *scope) declared(src string, d *syntax.DeclClause) {
	assoc := false
	for _, as := range d.Args {
		if as.Naked && as.Name == nil {
			if v := wordOf(src, as.Value); v.kind == literal && strings.HasPrefix(v.text, "-") && strings.Contains(v.text, "A") {
				assoc = true
			}
		}
	}
	for _, as := range d.Args {
		if as.Name == nil {
			continue
		}
		name := as.Name.Value
		prev, seen := sc.assoc[name]
		_, assigned := sc.vars[name]
		switch {
		case assoc && !seen && sc.top[d] && !assigned:
			off := int(d.Pos().Offset())
			sc.assoc[name] = assocDecl{at: off, fn: sc.fn(off)}
		case assoc && !seen:
			// declared where it may not run, or over an array bash
			// cannot convert: not always associative
			sc.assoc[name] = assocDecl{bad: true}
		case assoc:
		case seen || d.Variant.Value == "local" || d.Variant.Value == "declare" || d.Variant.Value == "typeset":
			// declared again without -A: not always associative
			prev.bad = true
			sc.assoc[name] = prev
		}
	}
}

func arithmName(x syntax.ArithmExpr) string {
	w, ok := x.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return ""
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(l.Value, "[")
	return name
}

func isArithmAssign(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn, syntax.RemAssgn,
		syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn, syntax.ShrAssgn:
		return true
	}
	return false
}

// cleanAssign reports an assignment of plain literals (or numbers:
// arithmetic results, and the output of a numeric_output command).
func (a *analyzer) cleanAssign(src string, as *syntax.Assign) bool {
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			if e.Value != nil && !a.cleanWord(src, e.Value) {
				return false
			}
		}
		return true
	}
	return as.Value == nil || a.cleanWord(src, as.Value)
}

func (a *analyzer) cleanWord(src string, w *syntax.Word) bool {
	numeric := false
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.ArithmExp:
			numeric = true
		case *syntax.CmdSubst:
			if !a.numericSubst(src, p) {
				return false
			}
			numeric = true
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit, *syntax.ArithmExp:
				case *syntax.CmdSubst:
					if !a.numericSubst(src, q) {
						return false
					}
					numeric = true
				default:
					return false
				}
			}
		default:
			return false
		}
	}
	switch v := a.wordOf(src, w); v.kind {
	case opaque:
		return numeric // arithmetic or a number's output only
	case literal:
		return !smuggles(v.text)
	case pattern:
		return numericBraces.MatchString(v.text) // {1..5}, {1,2,3}
	}
	return false // a glob: file names are anybody's text
}

var numericBraces = regexp.MustCompile(`^\{(?:-?[0-9]+\.\.-?[0-9]+(?:\.\.-?[0-9]+)?|-?[0-9]+(?:,-?[0-9]+)+)\}$`)

// numericSubst reports a command substitution whose output is a number: a
// single command of the numeric_output table, by its exact argv shape,
// with no redirect but stdin from a named file and stderr discarded.
func (a *analyzer) numericSubst(src string, cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 {
		return false
	}
	s := cs.Stmts[0]
	for {
		// a pipeline's output is its last command's: ls | wc -l
		b, ok := s.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.Pipe || s.Negated || s.Background || s.Coprocess || len(s.Redirs) > 0 {
			break
		}
		s = b.Y
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || s.Negated || s.Background || s.Coprocess || len(call.Args) == 0 {
		return false
	}
	for _, r := range s.Redirs {
		w := a.wordOf(src, r.Word)
		switch {
		case r.Op == syntax.RdrIn && (r.N == nil || r.N.Value == "0") && w.kind == literal && !stdinAlias(w.text):
		case (r.Op == syntax.RdrOut || r.Op == syntax.AppOut) && r.N != nil && r.N.Value == "2" && w.kind == literal && w.text == "/dev/null":
		default:
			return false
		}
	}
	if name := a.wordOf(src, call.Args[0]); a.sc != nil && a.sc.names[name.text] {
		return false // a function of the script, not the program
	}
	argv := make([]string, len(call.Args))
	for i, w := range call.Args {
		v := a.wordOf(src, w)
		if v.kind != literal || smuggles(v.text) || strings.ContainsAny(v.text, "[]`$\n") {
			return false
		}
		argv[i] = v.text
	}
	for _, shape := range a.t.tables().numeric {
		if numericShape(shape, argv) {
			return true
		}
	}
	return false
}

// numericShape matches argv against a shape: literal words, and the
// placeholders <file> (one operand), <files> (any number), <pattern> (one
// word), <number> and <numbers> (numeric literals), <words> (any words).
func numericShape(shape, argv []string) bool {
	if len(shape) == 0 {
		return len(argv) == 0
	}
	switch shape[0] {
	case "<words>":
		return len(shape) == 1 // any operands or options: the output is still a count
	case "<files>":
		for _, w := range argv {
			if strings.HasPrefix(w, "-") {
				return false
			}
		}
		return len(shape) == 1
	case "<numbers>":
		if len(argv) == 0 {
			return false
		}
		for _, w := range argv {
			if !isNumber(w) {
				return false
			}
		}
		return len(shape) == 1
	}
	if len(argv) == 0 {
		return false
	}
	switch shape[0] {
	case "<file>":
		if strings.HasPrefix(argv[0], "-") {
			return false
		}
	case "<pattern>":
	case "<number>":
		if !isNumber(argv[0]) {
			return false
		}
	default:
		if shape[0] != argv[0] {
			return false
		}
	}
	return numericShape(shape[1:], argv[1:])
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
		case s[i] == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return true
}

// assign checks one NAME=VALUE of the script: some names change what runs;
// a literal value holding code is evaluated if bash expands it again; a
// subscript is arithmetic (a string for an associative array). prog is
// the program the assignment is a prefix of ("" for none): IFS= before
// read is how read is told to keep blanks.
func (a *analyzer) assign(src string, as *syntax.Assign, prog string) {
	ctx := leafCtx{src: source(src, as)}
	if as.Name != nil && !(as.Name.Value == "IFS" && (prog == "read" || prog == "mapfile" || prog == "readarray")) {
		a.assignName(ctx.src, as.Name.Value, "setting")
	}
	if as.Name != nil && as.Value != nil && a.t.unsafeValue(as.Name.Value, a.wordOf(src, as.Value)) {
		a.unseen("setting "+as.Name.Value+" to a value that runs a command", ctx.src)
	}
	if as.Value != nil {
		if v := a.wordOf(src, as.Value); v.kind == literal && smuggles(v.text) {
			a.unseen("a value holding code for a later expansion ("+clip(source(src, as))+")", ctx.src)
		}
	}
	assoc := as.Name != nil && a.sc.isAssoc(as.Name.Value, int(as.Pos().Offset())+1)
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			if e.Value != nil {
				if v := a.wordOf(src, e.Value); v.kind == literal && smuggles(v.text) {
					a.unseen("a value holding code for a later expansion ("+clip(source(src, as))+")", ctx.src)
				}
			}
			if e.Index != nil && !assoc { // a=([i]=1): an indexed array's subscript is arithmetic
				a.arithm(src, as, e.Index)
			}
		}
	}
	if as.Index != nil && !assoc {
		a.arithm(src, as, as.Index)
	}
}

// prefixAssigns checks the assignments before a program that it reads as
// the name of a program to run (CC=… make).
func (a *analyzer) prefixAssigns(ctx leafCtx, src string, call *syntax.CallExpr, prog string) {
	for _, as := range call.Assigns {
		if as.Name != nil && a.programVariable(prog, as.Name.Value) {
			a.unseen("setting "+as.Name.Value+", a program "+prog+" runs", ctx.src)
		}
		if as.Name != nil && as.Value != nil {
			// GOBIN=.git/hooks go install, TMPDIR=.git mktemp: a directory
			// the program may write in
			if v := a.word(src, as.Value); v.kind == literal && v.text != "" || v.values != nil {
				a.use(ctx, pathUse{w: v, write: true, named: true, what: "setting " + as.Name.Value + " for " + prog})
			}
		}
	}
}

// numberValues reports a declaration whose every value is a literal
// number (declare -i n=5) and whose variables the script assigns nowhere
// else: arithmetic on them evaluates nothing else.
func (a *analyzer) numberValues(src string, d *syntax.DeclClause) bool {
	for _, as := range d.Args {
		if as.Naked || as.Value == nil && as.Array == nil {
			continue
		}
		if as.Array != nil || as.Index != nil {
			return false
		}
		if v := a.wordOf(src, as.Value); v.kind != literal || !isNumber(v.text) {
			return false
		}
		// every later assignment is arithmetic: none may come from elsewhere
		if as.Name == nil || a.sc == nil || a.sc.vars[as.Name.Value] || len(a.sc.values[as.Name.Value]) != 1 {
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
			v := a.wordOf(src, as.Value)
			if v.kind == literal && (strings.HasPrefix(v.text, "-") || strings.HasPrefix(v.text, "+")) {
				if strings.ContainsRune(v.text, 'n') || strings.ContainsRune(v.text, 'i') && !a.numberValues(src, d) {
					a.unseen(d.Variant.Value+" "+v.text+" (values evaluated as arithmetic or names)", ctx.src)
				}
				continue
			}
			a.declArg(ctx, d.Variant.Value, v)
			continue
		}
		a.assign(src, as, "")
	}
}
