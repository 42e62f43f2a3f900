package envguard

import "strings"

// optSpec is a program's option grammar, getopt style: short letters that
// are flags, short letters that take a value (attached or as the next
// word), long options (abbreviations accepted, as getopt_long does) and
// whether each takes a value.
type optSpec struct {
	flags  string
	values string
	long   map[string]longOpt
	// numeric accepts -N (nice -10).
	numeric bool
	// plus accepts +x forms as well (shells: +o, +e).
	plus bool
}

type longOpt uint8

const (
	longFlag     longOpt = iota
	longValue            // --opt VALUE or --opt=VALUE
	longOptional         // --opt or --opt=VALUE, never the next word
)

// opt is one option found with its value, by its canonical spelling
// ("-c", "--split-string").
type opt struct {
	name  string
	value word
	set   bool // a value was given
}

// scan reads options from args until the first operand or "--"; it returns
// the options, the index of the first operand, and the first option it did
// not know ("" when every option was known). A word computed at run time in
// an option's place makes the grammar unknowable: it is reported as unknown.
func (s *optSpec) scan(args []word) (opts []opt, rest int, unknown string) {
	i := 0
	for i < len(args) {
		a := args[i]
		if a.kind != literal {
			if a.kind == opaque && !a.home || strings.HasPrefix(a.text, "-") {
				return opts, i, a.text
			}
			return opts, i, "" // a path under ~, or a glob: an operand
		}
		t := a.text
		switch {
		case t == "--":
			return opts, i + 1, unknown
		case t == "-" || (!strings.HasPrefix(t, "-") && !(s.plus && strings.HasPrefix(t, "+") && len(t) > 1)):
			return opts, i, unknown
		case strings.HasPrefix(t, "--"):
			name, val, hasVal := strings.Cut(t[2:], "=")
			full, kind, ok := s.longName(name)
			if !ok {
				if unknown == "" {
					unknown = t
				}
				i++
				continue
			}
			o := opt{name: "--" + full}
			switch {
			case hasVal:
				o.value, o.set = word{text: val, kind: literal}, true
			case kind == longValue && i+1 < len(args):
				i++
				o.value, o.set = args[i], true
			}
			opts = append(opts, o)
			i++
		case s.numeric && isDigits(t[1:]):
			i++
		default:
			j, consumed := 1, false
			for j < len(t) {
				c := t[j]
				switch {
				case strings.IndexByte(s.values, c) >= 0:
					o := opt{name: "-" + string(c)}
					if j+1 < len(t) {
						o.value, o.set = word{text: t[j+1:], kind: literal}, true
					} else if i+1 < len(args) {
						i++
						o.value, o.set = args[i], true
					}
					opts = append(opts, o)
					consumed = true
				case strings.IndexByte(s.flags, c) >= 0:
					opts = append(opts, opt{name: "-" + string(c)})
				default:
					if unknown == "" {
						unknown = t
					}
				}
				if consumed {
					break
				}
				j++
			}
			i++
		}
	}
	return opts, i, unknown
}

// longName resolves a long option or an abbreviation of one.
func (s *optSpec) longName(name string) (string, longOpt, bool) {
	if k, ok := s.long[name]; ok {
		return name, k, true
	}
	if name == "" {
		return "", 0, false
	}
	found, kind, n := "", longFlag, 0
	for full, k := range s.long {
		if strings.HasPrefix(full, name) {
			found, kind, n = full, k, n+1
		}
	}
	return found, kind, n == 1
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func longs(kind longOpt, names ...string) map[string]longOpt {
	m := make(map[string]longOpt, len(names))
	for _, n := range names {
		m[n] = kind
	}
	return m
}

func merge(ms ...map[string]longOpt) map[string]longOpt {
	out := map[string]longOpt{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// has reports whether opts hold one of names.
func has(opts []opt, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

// values returns the values of the options named.
func values(opts []opt, names ...string) []word {
	var out []word
	for _, o := range opts {
		for _, n := range names {
			if o.name == n && o.set {
				out = append(out, o.value)
			}
		}
	}
	return out
}
