package envguard

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// maxTreeEntries and maxTreeTime bound the names examined under the trees
// one command reads or writes whole (a node_modules is tens of thousands);
// past either the tree could hold a protected name.
const (
	maxTreeEntries = 100000
	maxTreeTime    = 300 * time.Millisecond
)

// treeReaches walks the trees a word names (grep -r DIR, rm -r DIR, cp -a
// SRC) for a protected name among the names under them — the path itself
// too, unless below. Symlinks inside are judged by where they lead. A tree
// known only at run time, or past the bound, could hold one.
func treeReaches(ctx context.Context, set *protectednames.Set, u pathUse, cwd string, unknownDir, dotglob bool) (string, bool) {
	w, below := u.w, u.below
	var roots []string
	switch {
	case w.kind == literal:
		roots = []string{w.text}
	case w.kind == pattern && w.glob != "":
		alts, err := expandBraces(w.glob, 0)
		if err != nil {
			return "", true
		}
		for _, alt := range alts {
			if !filepath.IsAbs(alt) {
				if cwd == "" {
					continue // no directory to look in: judged by its name alone
				}
				alt = filepath.Join(cwd, alt)
			}
			// as bash globs: tar czf a.tgz * leaves .env and .git out
			m, ok := bashGlob(alt, dotglob, 256)
			if !ok {
				return "", true
			}
			roots = append(roots, m...)
		}
	case w.values != nil && !w.globValues:
		roots = w.values
	default:
		return "", true
	}
	if u.tracked && cwd != "" && !unknownDir {
		// names git lists: the index's, when it can be read
		if names, err := trackedNames(cwd); err == nil {
			for _, n := range names {
				if name, ok := set.Match(n); ok {
					return name, true
				}
			}
			return "", false
		}
	}
	seen := 0
	deadline := time.Now().Add(maxTreeTime)
	// With no filter and only single names listed, each entry's own name
	// is all there is to compare.
	fast := u.only == "" && u.grep == nil && !set.Directories()
	for _, root := range roots {
		if !filepath.IsAbs(root) {
			if unknownDir {
				return "", true
			}
			if cwd == "" {
				continue // no directory to look in: judged by its name alone
			}
			root = filepath.Join(cwd, root)
		}
		if n, ok := linkReaches(ctx, set, word{text: root, kind: literal}, ""); ok {
			return n, true
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			if n, ok := set.Match(root); ok && !below {
				return n, true // a found name that is the starting point itself
			}
			continue
		}
		var found string
		reached := false
		var inside []string // found directories a recursive program takes whole
		var ignores *gitIgnores
		if u.gitignore {
			ignores = newGitIgnores(root)
		}
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: the program cannot read it either
			}
			if seen++; seen > maxTreeEntries || seen%256 == 0 && (ctx.Err() != nil || time.Now().After(deadline)) {
				reached = true
				return fs.SkipAll
			}
			isRoot := p == root
			if isRoot && below {
				return nil
			}
			if ignores != nil {
				rel, _ := filepath.Rel(root, p)
				if ignores.ignored(filepath.ToSlash(rel), d.IsDir()) {
					if d.IsDir() {
						return fs.SkipDir
					}
					return nil
				}
				if d.IsDir() {
					ignores.enter(filepath.ToSlash(rel))
				}
			}
			if !isRoot && !u.grep.reads(d) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if u.only != "" && !foundName(u.only, d.Name()) && !under(p, inside) {
				return nil
			}
			if u.only != "" && u.deep && d.IsDir() && foundName(u.only, d.Name()) {
				inside = append(inside, p+"/")
			}
			if fast {
				// every name of every path below is some entry's own name
				if !isRoot {
					if n, ok := set.Match(d.Name()); ok {
						found, reached = n, true
						return fs.SkipAll
					}
				}
			} else if rel, _ := filepath.Rel(root, p); !isRoot {
				if n, ok := set.Match(rel); ok {
					found, reached = n, true
					return fs.SkipAll
				}
			}
			if !below && (isRoot || !fast) {
				if n, ok := set.Match(p); ok {
					found, reached = n, true
					return fs.SkipAll
				}
			}
			if d.Type()&fs.ModeSymlink != 0 && !isRoot {
				if n, ok := linkReaches(ctx, set, word{text: p, kind: literal}, ""); ok {
					found, reached = n, true
					return fs.SkipAll
				}
			}
			return nil
		})
		if reached {
			return found, true
		}
	}
	return "", false
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}

// foundName reports a name find's -name (or, in lower case, -iname)
// pattern matches; a pattern no matcher reads matches everything.
func foundName(only, name string) bool {
	if strings.ToLower(only) == only {
		name = strings.ToLower(name)
	}
	ok, err := path.Match(only, name)
	return ok || err != nil
}

func matchesAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, err := path.Match(g, name); ok && err == nil {
			return true
		}
	}
	return false
}

// writes reports whether the command may write the file a word names
// before it is read: a write of the same word, or one known only at run
// time.
func (a *Analysis) writes(w word) bool {
	for _, u := range a.paths {
		if !u.write || u.archive || u.patch {
			continue
		}
		if u.w.kind != literal || filepath.Base(u.w.text) == filepath.Base(w.text) {
			return true // the same name, however its directory is spelt
		}
	}
	return false
}

// linkReaches reports a symlink leading to a protected name: by its target
// as written (a copy keeps it, and a relative one then leads from where
// the copy lands) and as resolved here.
func linkReaches(ctx context.Context, set *protectednames.Set, w word, cwd string) (string, bool) {
	if w.kind != literal {
		return "", false
	}
	p, ok := fromDir(cwd, w.text)
	if !ok {
		return "", false
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return "", false
	}
	if raw, err := os.Readlink(p); err == nil {
		if n, ok := set.Match(raw); ok {
			return n, true
		}
	}
	if target, err := filepath.EvalSymlinks(p); err == nil {
		if n, ok := set.Match(target); ok {
			return n, true
		}
	}
	return "", false
}

// globMatchReaches expands a glob in dir as bash does (a * or ? does not
// match a leading dot unless dotglob, or the pattern's segment starts with
// one) and reports a match that is a symlink to a protected name.
func globMatchReaches(ctx context.Context, set *protectednames.Set, glob, cwd string, dotglob bool) (string, bool) {
	if cwd == "" || strings.HasPrefix(glob, "~") {
		return "", false
	}
	alts, err := ExpandBraces(glob)
	if err != nil {
		return "", true
	}
	for _, alt := range alts {
		full := alt
		if !filepath.IsAbs(full) {
			full = filepath.Join(cwd, full)
		}
		matches, ok := bashGlob(full, dotglob, 1024)
		if !ok {
			return "", true
		}
		for _, m := range matches {
			if n, ok := linkReaches(ctx, set, word{text: m, kind: literal}, ""); ok {
				return n, true
			}
		}
	}
	return "", false
}

// bashGlob is what bash's pathname expansion makes of the pattern p: its
// matches, names bash's globbing hides left out unless dotglob; false when
// p cannot be expanded or matches more than limit names.
func bashGlob(p string, dotglob bool, limit int) ([]string, bool) {
	matches, err := filepath.Glob(p)
	if err != nil || len(matches) > limit {
		return nil, false
	}
	if dotglob {
		return matches, true
	}
	pat := strings.Split(filepath.Clean(p), "/")
	shown := matches[:0]
	for _, m := range matches {
		if !hiddenByBash(pat, strings.Split(m, "/")) {
			shown = append(shown, m)
		}
	}
	return shown, true
}

// fromDir is the path p names from the directory dir; false when p is
// relative and there is no dir.
func fromDir(dir, p string) (string, bool) {
	if filepath.IsAbs(p) {
		return p, true
	}
	if dir == "" {
		return "", false
	}
	return filepath.Join(dir, p), true
}

// hiddenByBash reports a match bash's globbing would not make: a segment
// starting with a dot matched by a pattern segment that does not.
func hiddenByBash(pat, match []string) bool {
	if len(pat) != len(match) {
		return false
	}
	for i := range pat {
		if strings.HasPrefix(match[i], ".") && !strings.HasPrefix(pat[i], ".") && hasGlobChar(pat[i]) {
			return true
		}
	}
	return false
}

// globReaches reports a glob (braces as written) that could match a
// protected name; with dotglob, a * or ? matches a leading dot too.
func globReaches(set *protectednames.Set, glob string, dotglob bool) (string, bool) {
	alts, err := expandBraces(glob, 0)
	if err != nil {
		return "", true // more alternatives than are examined
	}
	for _, alt := range alts {
		if n, ok := set.GlobCouldMatch(alt, dotglob); ok {
			return n, true
		}
	}
	return "", false
}

// relative reports a word naming a path relative to the working
// directory: not absolute, not under ~, not a descriptor.
func relative(w word) bool {
	if w.home || w.kind == opaque && w.values == nil {
		return false // judged as anything already
	}
	texts := []string{w.text}
	if w.kind == opaque {
		texts = w.values
	}
	for _, t := range texts {
		if t != "-" && !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "~") {
			return true
		}
	}
	return false
}
