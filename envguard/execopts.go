package envguard

import (
	"regexp"
	"slices"
	"strings"
)

// execOptions records options of the exec_options table: an option that
// makes a program run a command (git -c core.pager=…, tar --to-command).
// For a program of the subcommands table, the program's own entries bind
// its global options and "program subcommand" entries the words after
// that subcommand (git rebase -x, not git cherry-pick -x); when the
// subcommand cannot be told, every entry binds every word.
func (a *analyzer) execOptions(ctx leafCtx, name string, args []word) {
	c := a.t.tables()
	canon := a.t.canonicalName(name)
	global, after := args, []word(nil)
	var subLists [][]execOption
	if sc := c.subcommands[canon]; sc != nil {
		at, sub, told := sc.find(args)
		switch {
		case told && sub != "":
			global, after = args[:at], args[at+1:]
			subLists = append(subLists, c.execOptions[canon+" "+sub])
		case !told:
			for key, list := range c.execOptions {
				if p, _, ok := strings.Cut(key, " "); ok && p == canon {
					subLists = append(subLists, list)
				}
			}
			after = args
		}
	} else if len(args) > 0 && args[0].kind == literal {
		if list, ok := c.execOptions[canon+" "+args[0].text]; ok {
			subLists, after = append(subLists, list), args[1:]
		}
	}
	if c.optionsAnywhere[canon] {
		global = args // npm and cargo take their own options after the subcommand too
	}
	for _, key := range programKeys(name, canon) {
		if list, ok := c.execOptions[key]; ok && a.execOptionIn(ctx, name, list, global) {
			return
		}
	}
	if versioned(name) {
		for prog, list := range c.execOptions {
			if !strings.Contains(prog, " ") && sameProgram(name, prog) && a.execOptionIn(ctx, name, list, global) {
				return
			}
		}
	}
	for _, list := range subLists {
		if a.execOptionIn(ctx, name, list, after) {
			return
		}
	}
}

// programKeys are the table keys a program is looked up by: its name, its
// canonical name, and both without a version suffix (python3.12).
func programKeys(name, canon string) []string {
	keys := []string{name}
	for _, k := range []string{canon, withoutVersion(name), withoutVersion(canon), strings.ToLower(name)} {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func (a *analyzer) execOptionIn(ctx leafCtx, name string, list []execOption, args []word) bool {
	for i, w := range args {
		if w.kind != literal {
			continue
		}
		text := w.text
		if i == 0 && name == "tar" && text != "" && !strings.HasPrefix(text, "-") {
			text = "-" + text // tar's old style: tar xIf PROG a.tar
		}
		for _, o := range list {
			value, ok := optionValue(text, o.option, args, i)
			if !ok {
				continue
			}
			if value.kind == literal && anyMatch(o.safe, value.text) {
				continue
			}
			if value.kind != literal || o.any || valueMatches(value.text, o.values) {
				a.unseen(name+" "+o.option+" (an option that runs a command)", ctx.src)
				return true
			}
		}
	}
	return false
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// optionValue reports whether arg gives option o and returns its value:
// the next word, attached (-oX, --opt=X) or after grouped letters (-xI).
func optionValue(arg, o string, args []word, i int) (word, bool) {
	next := func() word {
		if i+1 < len(args) {
			return args[i+1]
		}
		return word{kind: literal}
	}
	switch {
	case arg == o:
		return next(), true
	case len(o) < 2:
		// "+" (vim +cmd): the value is attached.
		if v, ok := strings.CutPrefix(arg, o); ok && o != "" {
			return word{text: v, kind: literal}, true
		}
		return word{}, false
	case strings.HasPrefix(o, "--"):
		// --to-command, or an abbreviation getopt_long accepts (--to-comm).
		name, v, hasValue := strings.Cut(arg, "=")
		if len(name) < 3 || !strings.HasPrefix(name, "--") || !strings.HasPrefix(o, name) {
			return word{}, false
		}
		if hasValue {
			return word{text: v, kind: literal}, true
		}
		return next(), true
	case len(o) > 2:
		if v, ok := strings.CutPrefix(arg, o+"="); ok {
			return word{text: v, kind: literal}, true
		}
		if v, ok := strings.CutPrefix(arg, o); ok && v != "" && !strings.HasPrefix(o, "--") {
			return word{text: v, kind: literal}, true // zip -TTcmd: the value attached
		}
		return word{}, false
	case strings.HasPrefix(arg, o):
		return word{text: arg[len(o):], kind: literal}, true
	case strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--"):
		if j := strings.IndexByte(arg[1:], o[1]); j >= 0 {
			if rest := arg[j+2:]; rest != "" {
				return word{text: rest, kind: literal}, true
			}
			return next(), true
		}
	}
	return word{}, false
}

// valueMatches compares an option's value (or its key, before = or a
// blank) with glob patterns, without regard to case.
func valueMatches(v string, patterns []*regexp.Regexp) bool {
	// ssh reads -o=Key=V, "-o =Key=V" and "Key"=V as Key=V
	v = strings.ReplaceAll(strings.ToLower(strings.TrimLeft(v, "= \t")), `"`, "")
	key := v
	if i := strings.IndexAny(v, "= \t"); i >= 0 {
		key = v[:i]
	}
	for _, re := range patterns {
		if re.MatchString(key) || re.MatchString(v) {
			return true
		}
	}
	return false
}

// globRegexp compiles a simple glob (* and ? only; * spans anything).
func globRegexp(p string) (*regexp.Regexp, error) {
	q := regexp.QuoteMeta(p)
	q = strings.ReplaceAll(q, `\*`, ".*")
	q = strings.ReplaceAll(q, `\?`, ".")
	return regexp.Compile("^" + q + "$")
}

// smuggles reports text that bash would evaluate as code if it expanded it
// again: a command substitution, a backtick or a parameter expansion.
