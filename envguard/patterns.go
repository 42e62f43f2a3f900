package envguard

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// globPattern translates a word holding an unquoted glob (*, ?, [...]) or a
// brace expansion into a regular expression matching every string it could
// become; ok is false for a word that is neither. Brace sequences
// ({1..9}) and anything unusual match anything: wider is safe, since a rule
// that might match asks.
func globPattern(w *syntax.Word) (string, bool) {
	cp := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
	braces := syntax.SplitBraces(cp)
	var b strings.Builder
	glob := translateParts(&b, cp.Parts)
	if !glob && !braces {
		return "", false
	}
	return "^(?:" + b.String() + ")$", true
}

// globText is a glob word as a glob: unquoted text as written, quoted text
// with its glob characters escaped (".e"* is \.e*, not ".e"*).
func globText(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		default:
			f, err := expand.Fields(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{p}})
			if err != nil || len(f) != 1 {
				b.WriteString("*")
				continue
			}
			for _, r := range f[0] {
				if strings.ContainsRune(`*?[]\{},`, r) {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// translateParts writes the expression for parts and reports whether an
// unquoted glob character was among them.
func translateParts(b *strings.Builder, parts []syntax.WordPart) bool {
	glob := false
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if translateLit(b, p.Value) {
				glob = true
			}
		case *syntax.SglQuoted, *syntax.DblQuoted:
			// Quoted text is literal: its glob characters are plain.
			f, err := expand.Fields(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{p}})
			if err != nil || len(f) != 1 {
				b.WriteString(".*")
				continue
			}
			b.WriteString(regexp.QuoteMeta(f[0]))
		case *syntax.BraceExp:
			if p.Sequence {
				b.WriteString(".*")
				continue
			}
			b.WriteString("(?:")
			for i, e := range p.Elems {
				if i > 0 {
					b.WriteByte('|')
				}
				if translateParts(b, e.Parts) {
					glob = true
				}
			}
			b.WriteByte(')')
		default:
			b.WriteString(".*")
		}
	}
	return glob
}

// translateLit writes an unquoted literal: backslash escapes are literal
// characters, *, ? and [...] are glob operators (a * never spans a /).
func translateLit(b *strings.Builder, s string) bool {
	glob := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteString(regexp.QuoteMeta(s[i : i+1]))
			}
		case '*':
			b.WriteString("[^/]*")
			glob = true
		case '?':
			b.WriteString("[^/]")
			glob = true
		case '[':
			end := bracketEnd(s[i+1:])
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := s[i+1 : i+1+end]
			if class == "" || class == "!" || class == "^" || strings.Contains(class, "[=") || strings.Contains(class, "[.") {
				// "[]" or "[!]" (the ] belongs to the class), and bash's
				// equivalence classes and collating symbols ([[=e=]],
				// [[.e.]]), which depend on the locale: any one character,
				// so that every name they could match is judged.
				b.WriteString("[^/]")
			} else {
				if class[0] == '!' {
					class = "^" + class[1:]
				}
				class = strings.ReplaceAll(class, `\`, `\\`)
				if _, err := regexp.Compile("[" + class + "]"); err != nil {
					b.WriteString(".")
				} else {
					b.WriteString("[" + class + "]")
				}
			}
			i += end + 1
			glob = true
		default:
			b.WriteString(regexp.QuoteMeta(s[i : i+1]))
		}
	}
	return glob
}

// bracketEnd is the index in s (what follows a "[") of the "]" that ends
// a bracket expression, as bash reads one: a "]" first (after any "!" or
// "^") is a member, and so is every character of a [:class:], [=equiv=]
// or [.collating.] inside it; -1 when none ends it.
func bracketEnd(s string) int {
	j := 0
	if j < len(s) && (s[j] == '!' || s[j] == '^') {
		j++
	}
	if j < len(s) && s[j] == ']' {
		j++
	}
	for j < len(s) {
		if s[j] == '[' && j+1 < len(s) && strings.IndexByte(":=.", s[j+1]) >= 0 {
			if k := strings.Index(s[j+2:], string(s[j+1])+"]"); k >= 0 {
				j += 2 + k + 2
				continue
			}
		}
		if s[j] == ']' {
			return j
		}
		j++
	}
	return -1
}

// could reports whether w could become s at run time, and whether it is
// sure to (a literal equal to s).
func (w word) could(s string) (possible, certain bool) {
	switch w.kind {
	case literal:
		return w.text == s, w.text == s
	case pattern:
		re, err := regexp.Compile(w.pattern)
		return err != nil || re.MatchString(s), false
	}
	return true, false
}
