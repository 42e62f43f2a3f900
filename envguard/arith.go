package envguard

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// arithmAssign records an arithmetic assignment ((( PS4 = 1 )), x++) to a
// variable that changes what runs.
func (a *analyzer) arithmAssign(src string, n syntax.Node) {
	switch n := n.(type) {
	case *syntax.BinaryArithm:
		if isArithmAssign(n.Op) {
			if name := arithmName(n.X); name != "" {
				a.assignName(source(src, n), name, "arithmetic setting")
			}
		}
	case *syntax.UnaryArithm:
		if n.Op == syntax.Inc || n.Op == syntax.Dec {
			if name := arithmName(n.X); name != "" {
				a.assignName(source(src, n), name, "arithmetic setting")
			}
		}
	}
}

// arithm checks an arithmetic expression: bash evaluates a variable's value
// as an expression, subscripts and substitutions included.
func (a *analyzer) arithm(src string, at syntax.Node, x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if !a.expansionInArithm(src, at, n) {
			return false
		}
		switch n := n.(type) {
		case *syntax.Lit:
			for _, name := range identifiers(n.Value) {
				if a.dirty(name) {
					a.unseen("arithmetic on "+name+", a value from elsewhere that bash evaluates as code", source(src, at))
					return false
				}
			}
		case *syntax.SglQuoted, *syntax.DblQuoted:
			// Quoted text in arithmetic is evaluated once unquoted; $'…'
			// decodes escapes first ($'\x24(' is "$(").
			w := wordOf("", &syntax.Word{Parts: []syntax.WordPart{n.(syntax.WordPart)}})
			if w.kind != literal || smuggles(w.text) || len(identifiers(w.text)) > 0 && a.anyDirty(w.text) {
				a.unseen("arithmetic on quoted text holding code or a value from elsewhere", source(src, at))
				return false
			}
		}
		return true
	})
}

// anyDirty reports whether text names a variable whose value may come from
// elsewhere.
func (a *analyzer) anyDirty(text string) bool {
	for _, name := range identifiers(text) {
		if a.dirty(name) {
			return true
		}
	}
	return false
}

// paramExp checks the expansions that evaluate: a subscript or a substring
// offset is arithmetic; ${!x} expands the variable x names.
func (a *analyzer) paramExp(src string, p *syntax.ParamExp) {
	if p.Flags != nil || p.NestedParam != nil || len(p.Modifiers) > 0 || p.Width || p.IsSet {
		a.unseen("a parameter expansion toolpdp does not model", source(src, p))
	}
	if p.Index != nil && !(p.Param != nil && a.sc.isAssoc(p.Param.Value, int(p.Pos().Offset()))) {
		if w, ok := p.Index.(*syntax.Word); !ok || !isAllIndex(w) {
			a.arithm(src, p, p.Index)
		}
	}
	if p.Exp != nil && (p.Exp.Op == syntax.AssignUnset || p.Exp.Op == syntax.AssignUnsetOrNull) {
		// ${V:=…} and ${V=…} assign V.
		if p.Excl || p.Param == nil {
			a.unseen("an assignment through an indirection ("+clip(source(src, p))+")", source(src, p))
		} else {
			a.assignName(source(src, p), p.Param.Value, "an expansion setting")
			if p.Exp.Word != nil {
				if v := a.wordOf(src, p.Exp.Word); v.kind == literal && smuggles(v.text) {
					a.unseen("a value holding code for a later expansion ("+clip(source(src, p))+")", source(src, p))
				}
			}
		}
	}
	if p.Slice != nil {
		a.arithm(src, p, p.Slice.Offset)
		a.arithm(src, p, p.Slice.Length)
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps && p.Exp.Word != nil && strings.Contains(source(src, p.Exp.Word), "P") {
		a.unseen("${x@P}, a prompt expansion that runs substitutions in a value", source(src, p))
	}
	if p.Excl && p.Names == 0 && p.Index == nil && p.Param != nil && a.dirty(p.Param.Value) {
		a.unseen("${!"+p.Param.Value+"}, an indirection through a value from elsewhere", source(src, p))
	}
}

func isAllIndex(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && (l.Value == "@" || l.Value == "*")
}

// testClause checks [[ ]]: -eq and its kin compare arithmetic expressions,
// -v evaluates a name's subscript.
func (a *analyzer) testClause(src string, t *syntax.TestClause) {
	syntax.Walk(t.X, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, side := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := side.(*syntax.Word); ok {
						a.arithmWord(src, t, w)
					}
				}
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				if w, ok := n.X.(*syntax.Word); ok {
					a.evaluated(leafCtx{src: source(src, t)}, "[[ -v ]]", a.wordOf(src, w))
				}
			}
		}
		return true
	})
}

// arithmWord checks a word used as an arithmetic expression: its text after
// expansion is evaluated.
func (a *analyzer) arithmWord(src string, at syntax.Node, w *syntax.Word) {
	v := a.wordOf(src, w)
	if v.kind == literal {
		a.evaluated(leafCtx{src: source(src, at)}, "arithmetic", v)
		return
	}
	syntax.Walk(w, func(n syntax.Node) bool { return a.expansionInArithm(src, at, n) })
}

// expansionInArithm records an expansion whose text arithmetic evaluates:
// a command's output, or a variable's value from elsewhere. It reports
// whether to look further inside n.
func (a *analyzer) expansionInArithm(src string, at, n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CmdSubst:
		if !a.numericSubst(src, n) {
			a.unseen("arithmetic on the output of a command", source(src, at))
		}
		return false
	case *syntax.ParamExp:
		if n.Param != nil && a.dirty(n.Param.Value) {
			a.unseen("arithmetic on $"+n.Param.Value+", a value from elsewhere that bash evaluates as code", source(src, at))
			return false
		}
	}
	return true
}

// declClause checks declare/local/export/readonly/typeset as bash parses
// them: -i and -n make values arithmetic or names; names and values are
// assignments.
