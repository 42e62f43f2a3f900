package envguard

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// Rules are command rules ("curl", "rm -rf", "git push"), compiled once.
type Rules struct {
	rules []rule
	// protect are the names writes through the shell may not reach, and
	// reads the names reads may not: see Protect.
	protect, reads *protectednames.Set
}

type rule struct {
	text    string
	list    string // "deny" or "ask"
	program string
	// sub is the subcommand the rule names, for a program of the
	// subcommands table ("push" of "git push"); "" when it names none.
	sub   string
	short []byte   // option letters, lower case
	long  []string // long options with no short alias
	words []string // other words
}

// Match is a rule that matches a leaf. Certain is false when the match needs
// a word known only at run time ($f, a glob), or the leaf's subcommand
// cannot be told: such a match asks, never denies.
type Match struct {
	List    string // "deny" or "ask"
	Rule    string
	Leaf    int // index into Analysis.Leaves
	Certain bool
}

// CompileRules compiles deny and ask rules; long options are mapped to short
// ones through the tables' option aliases. A rule naming a subcommand its
// program does not have (`git psuh`) is an error: a typo in a rule is no
// rule.
func (t *Tables) CompileRules(deny, ask []string) (*Rules, error) {
	if err := t.ready(); err != nil {
		return nil, err
	}
	r := &Rules{}
	for _, l := range []struct {
		list  string
		rules []string
	}{{"deny", deny}, {"ask", ask}} {
		for i, text := range l.rules {
			c, ok, err := t.compileRule(l.list, text)
			if err != nil {
				return nil, fmt.Errorf("%s_commands[%d]: %w", l.list, i, err)
			}
			if ok {
				r.rules = append(r.rules, c)
			}
		}
	}
	return r, nil
}

// Empty reports a rule set with no rule.
func (r *Rules) Empty() bool { return r == nil || len(r.rules) == 0 }

func (t *Tables) compileRule(list, text string) (rule, bool, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return rule{}, false, nil
	}
	c := rule{text: text, list: list, program: baseName(fields[0])}
	rest := fields[1:]
	if sc := t.tables().subcommands[c.program]; sc != nil {
		for i, f := range rest {
			if strings.HasPrefix(f, "-") {
				continue
			}
			sub, n := sc.canonical(rest[i:])
			if !sc.subs[sub] {
				return rule{}, false, fmt.Errorf("rule %q: %q is not a %s subcommand toolpdp knows", text, f, c.program)
			}
			c.sub = sub
			rest = append(append([]string(nil), rest[:i]...), rest[i+n:]...)
			break
		}
	}
	for _, f := range rest {
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
	return c, true, nil
}

// canonical is the subcommand words start with, through the aliases (a
// two-word alias first: docker container rm), and how many words it took.
func (sc *subcommands) canonical(words []string) (string, int) {
	if len(words) > 1 {
		if a, ok := sc.aliases[words[0]+" "+words[1]]; ok {
			return a, 2
		}
	}
	if a, ok := sc.aliases[words[0]]; ok {
		return a, 1
	}
	return words[0], 1
}

// find locates a leaf's subcommand among its arguments: the first word
// that is not a global option or a global option's value. ok is false when
// it cannot be told (an unknown global option, a word computed at run
// time, a subcommand the table does not list); sub is "" when there is
// none (git --version). at is the index of the subcommand's last word.
func (sc *subcommands) find(args []word) (at int, sub string, ok bool) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind != literal {
			return i, "", false
		}
		t := w.text
		if strings.HasPrefix(t, "-") && len(t) > 1 {
			name, _, hasValue := strings.Cut(t, "=")
			switch {
			case sc.flags[name]:
			case sc.values[name]:
				if !hasValue {
					i++
				}
			case len(name) > 2 && name[1] != '-' && sc.values[name[:2]]:
				// -Cdir: the value attached
			default:
				return i, "", false
			}
			continue
		}
		texts := []string{t}
		if i+1 < len(args) && args[i+1].kind == literal {
			texts = append(texts, args[i+1].text)
		}
		sub, n := sc.canonical(texts)
		if !sc.subs[sub] {
			return i, "", false
		}
		return i + n - 1, sub, true
	}
	return len(args), "", true
}

// alias maps a long option, or an abbreviation of one as getopt_long
// accepts (`--r` for `--recursive`), to its short letter.
//
// A key with a value ("--interactive=never": "-f") maps the option given
// that value, both abbreviated as GNU getopt_long and argmatch accept.
func (t *Tables) alias(program, long string) (byte, bool) {
	long, value, hasValue := strings.Cut(long, "=")
	for prog, m := range t.OptionAliases {
		if !sameProgram(program, prog) {
			continue
		}
		if hasValue && value != "" && len(long) >= 3 {
			for full, s := range m {
				name, v, ok := strings.Cut(full, "=")
				if ok && strings.HasPrefix(name, long) && strings.HasPrefix(v, value) {
					return lower(s[1]), true
				}
			}
		}
		if s, ok := m[long]; ok {
			return lower(s[1]), true
		}
		if len(long) < 3 {
			continue
		}
		for full, s := range m {
			if strings.HasPrefix(full, long) && !strings.Contains(full, "=") {
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
		canon := t.canonicalName(l.Name)
		for _, c := range r.rules {
			if copiers[canon] && copiesProgram(l.words[1:], c.program) {
				// cp /usr/bin/curl c; ./c x: the copy runs under another name.
				out = append(out, Match{List: c.list, Rule: c.text, Leaf: i, Certain: false})
				continue
			}
			if !sameProgram(l.Name, c.program) && !sameProgram(canon, c.program) {
				continue
			}
			if ok, certain := c.matchLeaf(t, l.words[1:]); ok {
				out = append(out, Match{List: c.list, Rule: c.text, Leaf: i, Certain: certain})
			}
		}
	}
	return out
}

// copiers are programs that copy or link a file under another name.
var copiers = map[string]bool{"cp": true, "ln": true, "link": true, "install": true, "mv": true, "rsync": true, "dd": true}

// copiesProgram reports an operand that names the rule's program by path
// (/usr/bin/curl, $(which curl) aside): its copy would run unchecked.
func copiesProgram(args []word, program string) bool {
	for _, w := range args {
		if w.kind != literal || !strings.Contains(w.text, "/") {
			continue
		}
		_, v, ok := strings.Cut(w.text, "=")
		if !ok {
			v = w.text
		}
		if sameProgram(baseName(v), program) {
			return true
		}
	}
	return false
}

// matchLeaf matches a rule against a leaf's arguments: for a program of
// the subcommands table, the rule's subcommand must be the leaf's and the
// rest matches among the words after it; a leaf whose subcommand cannot be
// told matches as it would anywhere, and asks at least.
func (c rule) matchLeaf(t *Tables, args []word) (ok, certain bool) {
	sc := t.tables().subcommands[c.program]
	if sc == nil {
		return c.matches(t, args)
	}
	at, sub, told := sc.find(args)
	if !told {
		ok, certain = c.matches(t, args)
		if !ok || c.sub != "" && !hasWordOf(args, c.sub) {
			return true, false // what runs depends on a subcommand toolpdp cannot tell
		}
		return true, certain
	}
	if c.sub == "" {
		return c.matches(t, args)
	}
	if sub != c.sub {
		return false, false
	}
	return c.matches(t, args[at+1:])
}

func hasWordOf(args []word, s string) bool {
	for _, a := range args {
		if a.kind == literal && a.text == s {
			return true
		}
	}
	return false
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
			if optionShaped(a.text) && (strings.HasPrefix(a.pattern, "^(?:[") || strings.HasPrefix(a.pattern, "^(?:-") || strings.HasPrefix(a.pattern, "^(?:(?:")) {
				possible = true // a glob that can start with "-" can hold any option letters
			}
		case opaque:
			possible = true // a parameter could become any option, whatever it was given
		}
	}
	return possible, false
}

// optionShaped reports a glob as written whose literal characters could
// all belong to an option cluster (letters, digits, "-"): `*.o` cannot
// expand to one, since a name holding "." is no cluster of letters.
func optionShaped(glob string) bool {
	inClass := false
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '*' || c == '?' || c == '{' || c == '}' || c == ',' || c == '-' || c == '"' || c == '\'':
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
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

// NetworkUses are the leaves of the analysis that use the network by the
// tables' network_programs (curl, git push, npm install), as argv lists.
func (t *Tables) NetworkUses(a *Analysis) [][]string {
	rules := t.tables().network
	if rules == nil || a == nil {
		return nil
	}
	var out [][]string
	seen := map[int]bool{}
	for _, m := range rules.Match(t, a) {
		if !seen[m.Leaf] {
			seen[m.Leaf] = true
			out = append(out, a.Leaves[m.Leaf].Argv)
		}
	}
	return out
}
