package envguard

import (
	"regexp"
	"strings"
)

// Rules are command rules ("curl", "rm -rf", "git push"), compiled once.
type Rules struct {
	rules []rule
}

type rule struct {
	text    string
	list    string // "deny" or "ask"
	program string
	short   []byte   // option letters, lower case
	long    []string // long options with no short alias
	words   []string // other words
}

// Match is a rule that matches a leaf. Certain is false when the match needs
// a word known only at run time ($f, a glob): such a match asks, never
// denies.
type Match struct {
	List    string // "deny" or "ask"
	Rule    string
	Leaf    int // index into Analysis.Leaves
	Certain bool
}

// CompileRules compiles deny and ask rules; long options are mapped to short
// ones through the tables' option aliases.
func (t *Tables) CompileRules(deny, ask []string) *Rules {
	r := &Rules{}
	for _, l := range []struct {
		list  string
		rules []string
	}{{"deny", deny}, {"ask", ask}} {
		for _, text := range l.rules {
			if c, ok := t.compileRule(l.list, text); ok {
				r.rules = append(r.rules, c)
			}
		}
	}
	return r
}

// Empty reports a rule set with no rule.
func (r *Rules) Empty() bool { return r == nil || len(r.rules) == 0 }

func (t *Tables) compileRule(list, text string) (rule, bool) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return rule{}, false
	}
	c := rule{text: text, list: list, program: baseName(fields[0])}
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "--") && len(f) > 2:
			if s, ok := t.alias(c.program, f); ok {
				c.short = append(c.short, s)
			} else {
				c.long = append(c.long, f)
			}
		case strings.HasPrefix(f, "-") && len(f) > 1:
			for i := 1; i < len(f); i++ {
				c.short = append(c.short, lower(f[i]))
			}
		default:
			c.words = append(c.words, f)
		}
	}
	return c, true
}

// alias maps a long option, or an abbreviation of one as getopt_long
// accepts (`--r` for `--recursive`), to its short letter.
func (t *Tables) alias(program, long string) (byte, bool) {
	long, _, _ = strings.Cut(long, "=")
	for prog, m := range t.OptionAliases {
		if !sameProgram(program, prog) {
			continue
		}
		if s, ok := m[long]; ok {
			return lower(s[1]), true
		}
		if len(long) < 3 {
			continue
		}
		for full, s := range m {
			if strings.HasPrefix(full, long) {
				return lower(s[1]), true
			}
		}
	}
	return 0, false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// sameProgram reports whether a program name is the rule's program: by
// name, without regard to case, or followed by a version suffix of digits
// and dots (python matches python3 and python3.12; pip matches pip3), with
// the build flags interpreters add (python3.7m, python3.13t) and a debug
// build's -dbg.
func sameProgram(name, program string) bool {
	if len(name) < len(program) || !strings.EqualFold(name[:len(program)], program) {
		return false
	}
	return versionSuffix.MatchString(strings.ToLower(name[len(program):]))
}

var versionSuffix = regexp.MustCompile(`^([0-9][0-9.]*[a-z]{0,2})?(-dbg|-debug)?$`)

// Match returns every rule that matches a leaf of the analysis.
func (r *Rules) Match(t *Tables, a *Analysis) []Match {
	if r.Empty() || a == nil {
		return nil
	}
	var out []Match
	for i := range a.Leaves {
		l := &a.Leaves[i]
		if l.Dynamic {
			continue
		}
		for _, c := range r.rules {
			if !sameProgram(l.Name, c.program) {
				continue
			}
			if ok, certain := c.matches(t, l.words[1:]); ok {
				out = append(out, Match{List: c.list, Rule: c.text, Leaf: i, Certain: certain})
			}
		}
	}
	return out
}

// matches checks a rule's options and words against a leaf's arguments,
// each in any position: options grouped or not, short letters without
// regard to case, long options through their aliases.
func (c rule) matches(t *Tables, args []word) (ok, certain bool) {
	certain = true
	need := func(possible, sure bool) bool {
		if !possible {
			return false
		}
		if !sure {
			certain = false
		}
		return true
	}
	for _, s := range c.short {
		if !need(hasShort(t, c.program, args, s)) {
			return false, false
		}
	}
	for _, l := range c.long {
		if !need(hasLong(args, l)) {
			return false, false
		}
	}
	for _, w := range c.words {
		if !need(hasWord(args, w)) {
			return false, false
		}
	}
	return true, certain
}

func hasShort(t *Tables, program string, args []word, s byte) (possible, certain bool) {
	for _, a := range args {
		switch a.kind {
		case literal:
			switch {
			case strings.HasPrefix(a.text, "--") && len(a.text) > 2:
				if x, ok := t.alias(program, a.text); ok && x == s {
					return true, true
				}
			case strings.HasPrefix(a.text, "-") && len(a.text) > 1:
				for i := 1; i < len(a.text); i++ {
					if lower(a.text[i]) == s {
						return true, true
					}
				}
			}
		case pattern:
			if p, _ := a.could("-" + string(s)); p {
				possible = true
			} else if p, _ := a.could("-" + string(s) + string(s)); p {
				possible = true
			}
			if strings.HasPrefix(a.pattern, "^(?:[") || strings.HasPrefix(a.pattern, "^(?:-") || strings.HasPrefix(a.pattern, "^(?:(?:") {
				possible = true // a glob that can start with "-" can hold any option letters
			}
		case opaque:
			possible = true
		}
	}
	return possible, false
}

func hasLong(args []word, long string) (possible, certain bool) {
	for _, a := range args {
		switch a.kind {
		case literal:
			name, _, _ := strings.Cut(a.text, "=")
			if len(name) > 2 && strings.HasPrefix(name, "--") && strings.HasPrefix(long, name) {
				return true, true
			}
		default:
			if p, _ := a.could(long); p {
				possible = true
			}
		}
	}
	return possible, false
}

func hasWord(args []word, w string) (possible, certain bool) {
	for _, a := range args {
		p, c := a.could(w)
		if c {
			return true, true
		}
		possible = possible || p
	}
	return possible, false
}
