package envguard

import (
	"context"
	"strings"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// pathUse is a file a command names: a redirect target, a writing
// program's operand, or any program's argument (a read).
type pathUse struct {
	w     word
	write bool
	what  string // "a redirect writing", "rm writing", "cat reading"
	text  string // the statement, as written
}

func (a *analyzer) pathUse(ctx leafCtx, what string, w word, write bool) {
	if len(a.out.paths) < MaxLeaves {
		a.out.paths = append(a.out.paths, pathUse{w: w, write: write, what: what, text: ctx.src})
	}
}

// fileOperands records the files a program's arguments name: every
// operand of a writing program as a write (its destination only for cp
// and the like; only with -i for sed), and every argument of any other
// program as a read — except programs that only print their arguments
// and the values of options that are patterns, not files.
func (a *analyzer) fileOperands(ctx leafCtx, name, canon string, args []word) {
	c := a.t.tables()
	if c.printOnly[name] || c.printOnly[canon] {
		return
	}
	if sc := c.subcommands[canon]; sc != nil {
		if _, sub, told := sc.find(args); told && c.printOnly[canon+" "+sub] {
			return // git check-ignore .env reads no file
		}
	}
	mode, writes := c.writers[canon]
	if !writes {
		mode, writes = c.writers[name]
	}
	if writes {
		switch mode {
		case "in_place":
			writes = inPlace(args)
		case "last":
			var dest []word
			for i, w := range args {
				if w.kind == literal && (w.text == "-t" || w.text == "--target-directory") && i+1 < len(args) {
					dest = append(dest, args[i+1])
				} else if v, ok := strings.CutPrefix(w.text, "--target-directory="); ok && w.kind == literal {
					dest = append(dest, word{text: v, kind: literal})
				}
			}
			if len(dest) == 0 {
				for i := len(args) - 1; i >= 0; i-- {
					if args[i].kind != literal || !strings.HasPrefix(args[i].text, "-") {
						dest = append(dest, args[i])
						break
					}
				}
			}
			for _, w := range dest {
				a.pathUse(ctx, name+" writing", w, true)
				if w.kind != pattern {
					a.execConfig(ctx, name+" writing", w.text)
				}
			}
			// its sources are reads
			writes = false
			args = withoutWords(args, dest)
		}
	}
	patterns := map[string]bool{}
	for _, o := range c.patternOpts["*"] {
		patterns[o] = true
	}
	for _, o := range c.patternOpts[canon] {
		patterns[o] = true
	}
	skip := c.patternOps[canon]
	if skip > 0 && hasAnyLiteral(args, "-e", "--regexp", "-f", "--file") {
		skip = 0 // the pattern is an option's value: every operand is a file
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && strings.HasPrefix(w.text, "-") {
			opt, value, hasValue := strings.Cut(w.text, "=")
			if patterns[opt] {
				if !hasValue {
					i++ // the next word is the pattern
				}
				continue
			}
			if hasValue {
				w = word{text: value, kind: literal}
			} else if !writes {
				continue // a flag, or an option whose value is the next word: judged as a word
			}
		} else if skip > 0 {
			skip--
			continue
		}
		if dd, ok := strings.CutPrefix(w.text, "of="); ok && w.kind == literal && canon == "dd" {
			w = word{text: dd, kind: literal}
		}
		if writes {
			a.pathUse(ctx, name+" writing", w, true)
			if w.kind != pattern {
				a.execConfig(ctx, name+" writing", w.text)
			}
		} else {
			a.pathUse(ctx, name+" reading", w, false)
		}
	}
}

// inPlace reports sed -i, perl -i and the like: they write their files.
func inPlace(args []word) bool {
	for _, w := range args {
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			continue
		}
		if strings.HasPrefix(w.text, "--in-place") || strings.HasPrefix(w.text, "-i") && w.text != "-include" ||
			!strings.HasPrefix(w.text, "--") && strings.Contains(w.text, "i") && !strings.ContainsAny(w.text, "=/.") {
			return true
		}
	}
	return false
}

func withoutWords(args, drop []word) []word {
	out := make([]word, 0, len(args))
	for _, w := range args {
		keep := true
		for _, d := range drop {
			if w.text == d.text && w.kind == d.kind {
				keep = false
			}
		}
		if keep {
			out = append(out, w)
		}
	}
	return out
}

// ProtectedUse is a file the command names that is, or could be, a
// protected path: written (a redirect, a writing program) or read (a
// protected_paths entry, which binds reads too).
type ProtectedUse struct {
	Access  string // "write" or "read"
	Word    string // the word as written
	Name    string // the protected name it reaches, "" when it could reach any
	What    string // "a redirect writing", "rm writing", "cat reading"
	Text    string // the statement
	Certain bool   // the word is a literal that names it
}

// Protect returns r with the protected names for writes (version control,
// agent configuration and the listed protected_paths) and for reads (the
// listed ones alone), compared as the file tools' paths are.
func (r *Rules) Protect(writes, reads *protectednames.Set) *Rules {
	if r == nil {
		r = &Rules{}
	}
	out := *r
	out.protect, out.reads = writes, reads
	return &out
}

// Guarded reports rules that protect any name.
func (r *Rules) Guarded() bool {
	return r != nil && (!r.protect.Empty() || !r.reads.Empty())
}

// Protected returns the files the analysis names that are or could be
// protected: a literal is compared as written and, with a working
// directory, as resolved (symlinks followed); a glob by what it could
// match; a word known only at run time by the values its variables are
// given in the command, and — for a write — as possibly anything.
func (r *Rules) Protected(ctx context.Context, a *Analysis, cwd string) []ProtectedUse {
	if !r.Guarded() || a == nil {
		return nil
	}
	var out []ProtectedUse
	for _, u := range a.paths {
		set := r.reads
		access := "read"
		if u.write {
			set, access = r.protect, "write"
		}
		if set.Empty() {
			continue
		}
		name, certain, ok := r.reaches(ctx, set, u, cwd)
		if !ok {
			continue
		}
		out = append(out, ProtectedUse{Access: access, Word: clip(u.w.text), Name: name, What: u.what, Text: u.text, Certain: certain})
	}
	return out
}

func (r *Rules) reaches(ctx context.Context, set *protectednames.Set, u pathUse, cwd string) (name string, certain, ok bool) {
	w := u.w
	switch {
	case w.kind == literal || w.home:
		text := w.text
		if w.home {
			text = strings.TrimPrefix(strings.TrimLeft(text, "~"), "/")
		}
		if n, ok := set.Match(text); ok {
			return n, w.kind == literal, true
		}
		if w.kind == literal && cwd != "" && text != "" && devPath(text) == devNone {
			if resolved, err := ResolveContext(ctx, cwd, text); err == nil {
				if n, ok := set.Match(resolved); ok {
					return n, true, true
				}
			}
		}
	case w.kind == pattern:
		if n, ok := set.Match(w.text); ok {
			return n, false, true
		}
		for _, alt := range braceAlternatives(w.text) {
			if n, ok := set.GlobCouldMatch(alt); ok {
				return n, false, true
			}
		}
	default:
		if w.values != nil {
			for _, v := range w.values {
				if n, ok := set.Match(v); ok {
					return n, false, true
				}
				if cwd != "" && v != "" {
					if resolved, err := ResolveContext(ctx, cwd, v); err == nil {
						if n, ok := set.Match(resolved); ok {
							return n, false, true
						}
					}
				}
			}
			return "", false, false
		}
		if n, ok := set.Match(w.text); ok {
			return n, false, true // named in its written literal parts ($HOME/.git)
		}
		if u.write {
			return "", false, true // could expand to anything
		}
	}
	return "", false, false
}

// braceAlternatives expands the braces of a glob as written ({a,b}/*),
// bounded; what it cannot expand is returned as is.
func braceAlternatives(s string) []string {
	out := []string{s}
	for range 8 {
		var next []string
		changed := false
		for _, x := range out {
			i := strings.IndexByte(x, '{')
			j := strings.IndexByte(x[max(i, 0):], '}')
			if i < 0 || j < 0 {
				next = append(next, x)
				continue
			}
			j += i
			changed = true
			for _, alt := range strings.Split(x[i+1:j], ",") {
				next = append(next, x[:i]+alt+x[j+1:])
			}
		}
		out = next
		if !changed || len(out) > 64 {
			break
		}
	}
	return out
}
