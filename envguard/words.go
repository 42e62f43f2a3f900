package envguard

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// word is one shell word: its text with quotes removed when it is a plain
// literal, else as written, and what it could become at run time.
type word struct {
	text string
	kind wordKind
	// src is the word as written in the script it was read from ("" when
	// it was made, not read): what a person sees of it in the command.
	src string
	// pattern is, for a glob or brace word, a regular expression matching
	// every string it could expand to (compiled when a rule needs it);
	// glob is the word as a glob, its quoted parts escaped.
	pattern string
	glob    string
	// home: an opaque word only because it starts with ~ (a path under a
	// home directory), not a substitution.
	home bool
	// values are what an opaque word of literals and plain variables
	// expands to, when the script assigns those variables only literal
	// values (f=.env; cat $f); nil when it is not known.
	values []string
	// globValues: some of values are globs (a for loop's variable over
	// src/*), each standing for every name it matches.
	globValues bool
	// found are the starting points of a find whose names this word is
	// at run time ({} of -exec, or xargs reading find's output): any
	// name in the trees under them.
	found []word
	// names is the glob the last segment of every name a find prints
	// matches, for {} and xargs' input (find . -name '*.go' -exec … {} +).
	names string
	// only is the glob (lower case for -iname) every found name's last
	// segment matches, when find's expression requires one.
	only string
	// hdoc is the text of a here-document a program reads as its input.
	hdoc string
	// gitignore: of found names, only those .gitignore does not leave out.
	gitignore bool
	// procSubst: the word is <(…), a file a command's output fills.
	procSubst bool
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
	out.src = out.text
	dynamic := false
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob:
			dynamic = true
		case *syntax.SglQuoted:
			// Escapes of $'…' that bash 5.2 decodes and the parser keeps
			// as written ($'\x{63}url' is curl, $'\cA' a control
			// character): what the word is, only bash knows.
			dynamic = n.Dollar && (strings.Contains(n.Value, `\x{`) || strings.Contains(n.Value, `\c`))
		}
		return !dynamic
	})
	if dynamic || tilde(w) {
		out.kind, out.home = opaque, !dynamic
		return out
	}
	if re, ok := globPattern(w); ok && !bashLeavesAlone(w) {
		out.kind, out.pattern, out.glob = pattern, re, globText(w)
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

// word is wordOf with, for an opaque word, the values it takes when its
// variables are known.
func (a *analyzer) word(src string, w *syntax.Word) word {
	out := a.wordOf(src, w)
	if out.home {
		if out = tildeWord(out); !out.home && out.kind == opaque {
			return out // ~-, ~+N: the directory stack, known only at run time
		}
	}
	if out.kind == opaque && w != nil && len(w.Parts) == 1 {
		if p, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			out.values = []string{"/dev/fd/63"} // a pipe, named by its descriptor
			out.procSubst = p.Op == syntax.CmdIn
			return out
		}
	}
	if out.kind == opaque && w != nil && len(w.Parts) == 1 {
		// $(find … -name '*.go'): the names find prints
		if cs, ok := w.Parts[0].(*syntax.CmdSubst); ok && len(cs.Stmts) == 1 {
			if f, ok := a.findOutput(src, cs.Stmts[0]); ok {
				f.text = out.text
				return f
			}
			if glob, ok := a.listedNames(src, cs.Stmts[0]); ok {
				// $(git ls-files '*.go')
				return word{text: out.text, kind: pattern, pattern: "^.*$", names: glob}
			}
		}
	}
	if out.kind == opaque && !out.home && w != nil && a.sc != nil {
		out.values = a.sc.expand(w.Parts, 16)
		if out.values != nil {
			syntax.Walk(w, func(n syntax.Node) bool {
				if p, ok := n.(*syntax.ParamExp); ok && p.Param != nil && a.sc.globs[p.Param.Value] {
					out.globValues = true
				}
				return true
			})
		}
	}
	return out
}

// wordOf is the package's wordOf, remembered per parsed word: the
// analysis asks about a word from several places.
func (a *analyzer) wordOf(src string, w *syntax.Word) word {
	if w == nil {
		return wordOf(src, w)
	}
	if out, ok := a.words[w]; ok {
		return out
	}
	out := wordOf(src, w)
	if a.words == nil {
		a.words = map[*syntax.Word]word{}
	}
	a.words[w] = out
	return out
}

// expand lists what parts expand to when they are literals and plain
// parameters ($f, ${f}, "$f") of variables assigned only literal values;
// nil when one is anything else, or past max alternatives.
func (sc *scope) expand(parts []syntax.WordPart, max int) []string {
	out := []string{""}
	add := func(alts []string) bool {
		var next []string
		for _, o := range out {
			for _, s := range alts {
				next = append(next, o+s)
			}
		}
		out = next
		return len(out) <= max
	}
	for _, p := range parts {
		var alts []string
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[\\") {
				return nil
			}
			alts = []string{p.Value}
		case *syntax.SglQuoted:
			if p.Dollar {
				return nil
			}
			alts = []string{p.Value}
		case *syntax.ArithmExp:
			alts = []string{"0"} // digits, whatever the arithmetic (its own words are judged as such)
		case *syntax.DblQuoted:
			inner := sc.expand(p.Parts, max)
			if inner == nil {
				return nil
			}
			alts = inner
		case *syntax.CmdSubst:
			switch {
			case sc.numeric != nil && sc.numeric(p):
				alts = []string{"0"} // digits: make -j$(nproc)
			case !sc.movesDir && !sc.names["pwd"] && pwdCommand(p):
				alts = []string{"."} // the cwd, which the call's paths are resolved against
			case !sc.names["mktemp"] && sc.temps["TMPDIR"] == nil:
				t, ok := mktempSubst(sc.src, p)
				if _, tmpdir := sc.vars["TMPDIR"]; !ok || tmpdir {
					return nil
				}
				alts = []string{t} // a fresh file or directory under its template
			default:
				return nil
			}
		case *syntax.ParamExp:
			plain := p.Param != nil && p.Exp == nil && p.Index == nil && p.Slice == nil && p.Repl == nil && !p.Excl && !p.Length && p.Names == 0
			if plain && p.Param.Value == "PWD" && !sc.movesDir {
				if _, assigned := sc.vars["PWD"]; !assigned {
					alts = []string{"."}
					break
				}
			}
			if plain && p.Param.Value == "HOME" {
				if _, assigned := sc.vars["HOME"]; !assigned {
					alts = []string{"~"} // the home directory, as ~ is
					break
				}
			}
			var trim func(string) string
			if p.Exp != nil && p.Param != nil && !p.Excl && !p.Length && p.Index == nil && p.Slice == nil && p.Repl == nil && p.Names == 0 {
				// ${f%.go}, ${f#./}: a literal suffix or prefix taken off
				cut := ""
				if p.Exp.Word != nil {
					if w := wordOf("", p.Exp.Word); w.kind == literal && !strings.ContainsAny(w.text, "*?[\\") {
						cut = w.text
					}
				}
				switch op := p.Exp.Op; {
				case cut == "":
				case op == syntax.RemSmallSuffix || op == syntax.RemLargeSuffix:
					trim = func(v string) string { return strings.TrimSuffix(v, cut) }
				case op == syntax.RemSmallPrefix || op == syntax.RemLargePrefix:
					trim = func(v string) string { return strings.TrimPrefix(v, cut) }
				}
				if trim == nil {
					return nil
				}
			} else if p.Param == nil || p.Excl || p.Length || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Names != 0 {
				return nil
			}
			name := p.Param.Value
			if t := sc.temps[name]; len(t) > 0 && !sc.notTemp[name] && !sc.notTemp["TMPDIR"] && sc.temps["TMPDIR"] == nil {
				if _, tmpdir := sc.vars["TMPDIR"]; !tmpdir {
					alts = t
					break
				}
			}
			if _, ok := sc.vars[name]; !ok || len(sc.values[name]) == 0 || sc.opaqueValues[name] {
				return nil
			}
			alts = sc.values[name]
			if trim != nil {
				cut := make([]string, len(alts))
				for i, v := range alts {
					cut[i] = trim(v)
				}
				alts = cut
			}
		default:
			return nil
		}
		if !add(alts) {
			return nil
		}
	}
	return out
}

// pwdCommand reports $(pwd), $(pwd -P) and $(pwd -L): the working
// directory.
func pwdCommand(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 || len(cs.Stmts[0].Redirs) > 0 || cs.Stmts[0].Negated || cs.Stmts[0].Background {
		return false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 || len(call.Args) > 2 {
		return false
	}
	for i, w := range call.Args {
		lit := w.Lit()
		if i == 0 && lit != "pwd" || i == 1 && lit != "-P" && lit != "-L" {
			return false
		}
	}
	return true
}

// bashLeavesAlone reports a word with braces bash does not expand and no
// glob character: {} and {x} (find's and xargs' {}) are plain text.
func bashLeavesAlone(w *syntax.Word) bool {
	// the word with each quoted part as plain text (its braces and commas
	// are literal, but a brace around it still expands)
	var b strings.Builder
	for _, p := range w.Parts {
		if lit, ok := p.(*syntax.Lit); ok {
			b.WriteString(lit.Value)
		} else {
			b.WriteString("q")
		}
	}
	{
		v := b.String()
		if strings.ContainsAny(v, "*?[") {
			return false
		}
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' {
				i++
				continue
			}
			if v[i] != '{' {
				continue
			}
			end := strings.IndexByte(v[i:], '}')
			if end < 0 {
				continue
			}
			inner := v[i+1 : i+end]
			if strings.Contains(inner, ",") || strings.Contains(inner, "..") || strings.Contains(inner, "{") {
				return false
			}
		}
	}
	return true
}

// tildeWord is a ~ word as the directory it names: ~+ (and ~+0) is the
// working directory, so ~+/x is x; ~-, ~+N and ~-N are the directory stack,
// known only at run time; ~ and ~user stay home words.
func tildeWord(w word) word {
	prefix, rest, _ := strings.Cut(w.text, "/")
	switch {
	case prefix == "~+" || prefix == "~+0":
		if rest == "" {
			rest = "."
		}
		if strings.ContainsAny(rest, "\"'$`") {
			return word{text: w.text, kind: opaque}
		}
		if hasGlobChar(rest) || strings.Contains(rest, "{") {
			return word{text: rest, kind: pattern, pattern: "^.*$", glob: rest}
		}
		return word{text: rest, kind: literal}
	case strings.HasPrefix(prefix, "~+") || strings.HasPrefix(prefix, "~-"):
		return word{text: w.text, kind: opaque}
	}
	return w
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
