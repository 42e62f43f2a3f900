package envguard

import (
	"strings"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// pathUse is a file a command names: a redirect target, a writing
// program's operand, or any program's argument (a read).
type pathUse struct {
	w     word
	write bool
	// tree: the program reads or writes the whole tree under the path
	// (grep -r, rm -r, cp -a's source): every name below it counts.
	tree bool
	// archive: the word is an archive extracted; its members are written.
	// patch: the word is a patch applied; the files it names are written.
	archive, patch bool
	// dirUnknown: the word is relative to a directory known only at run
	// time (find -execdir); moved: already judged in the cd's directory.
	dirUnknown, moved bool
	// ownGit: a repository git is pointed at; a .git is its own to write.
	ownGit bool
	// deep: a recursive program is given each name found (rm -r {}): all
	// of the tree under a name that matches only counts.
	deep bool
	// named: only a protected name the word itself spells counts (a
	// program's argument it may write: what it names, not where)
	named bool
	// tracked: names git lists (git ls-files): the index's entries, or
	// else the tree less what .gitignore leaves out.
	tracked bool
	// link: only where the word leads counts — a symlink a copy keeps
	// (cp -a, cp -P) is written through later.
	link bool
	// gitignore: only the names git would take count (git add -A, git
	// stash -u): those its .gitignore files leave out do not.
	gitignore bool
	// perhapsNoFile: an argument of a program that is not known to read
	// its arguments as files (git commit -m "$(…)", kill $pids): known
	// only at run time, it is no read of a protected name.
	perhapsNoFile bool
	// below: only the names under the path count, not the path itself
	// (a copied tree's source is read; what lands is what is in it).
	below bool
	// grep are a recursive grep's --include and --exclude globs, in
	// order, and its --exclude-dir globs: the names it does not read.
	grep *grepFilter
	// only: of a tree, only names whose last segment matches this glob
	// (find -name's) count; lower case compares without case.
	only string
	what string // "a redirect writing", "rm writing", "cat reading"
	text string // the statement, as written
}

func (a *analyzer) pathUse(ctx leafCtx, what string, w word, write bool) {
	a.use(ctx, pathUse{w: w, write: write, what: what})
}

func (a *analyzer) use(ctx leafCtx, u pathUse) {
	if len(a.out.paths) >= MaxLeaves {
		a.unseen("more file names than the analysis examines", ctx.src)
		return
	}
	if ctx.dirUnknown || a.dirVague && u.tree && relative(u.w) {
		u.dirUnknown = true
	}
	if ctx.dir != "" {
		u.w = inDir(u.w, ctx.dir)
	}
	if a.dir != "" && relative(u.w) && !u.moved {
		// after a literal cd: in that directory (and, as the walk cannot
		// tell a subshell's cd from the script's, in the cwd too)
		moved := u
		moved.w, moved.moved = inDir(u.w, a.dir), true
		a.use(leafCtx{src: ctx.src, dirUnknown: ctx.dirUnknown}, moved)
	}
	u.text = ctx.src
	if u.w.found != nil {
		// {} of find, or xargs' input from find: names found under its
		// starting points at run time, any of the tree below them whose
		// last segment matches find's -name.
		if u.w.names != "" {
			named := u
			named.w.found, named.tree = nil, false
			a.out.paths = append(a.out.paths, named)
		}
		for _, root := range u.w.found {
			a.use(ctx, pathUse{w: root, write: u.write, tree: true, what: u.what, only: u.w.only, gitignore: u.w.gitignore, tracked: u.w.gitignore, deep: u.tree})
		}
		return
	}
	a.out.paths = append(a.out.paths, u)
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
	// Tree: the name was found only by walking the tree a recursive
	// program takes (grep -r .), not named by the word itself.
	Tree bool
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
// res resolves the names of this one decision and bounds the work with
// its context.
func (r *Rules) Protected(res *Resolver, a *Analysis, cwd string) []ProtectedUse {
	if !r.Guarded() || a == nil {
		return nil
	}
	ctx := res.ctx
	var out []ProtectedUse
	for i, u := range a.paths {
		set := r.reads
		access := "read"
		if u.write {
			set, access = r.protect, "write"
		}
		if set.Empty() {
			continue
		}
		// Under a directory known only at run time a relative name may be
		// inside .git — or inside a protected_paths entry, when one is a
		// directory (a name like .env is a file: reached only when named).
		vague := !u.named && (u.dirUnknown || a.movedAt >= 0 && (i >= a.movedAt || a.loops))
		unknownDir := vague && (u.write || set.Directories())
		var name string
		var certain, ok bool
		switch {
		case u.link:
			name, ok = linkReaches(ctx, set, u.w, cwd)
		case u.archive:
			name, ok = archiveReaches(ctx, set.Match, u.w, cwd, archiveNames, a.writes)
		case u.patch:
			name, ok = archiveReaches(ctx, set.Match, u.w, cwd, patchNames, a.writes)
		case !u.below:
			name, certain, ok = r.reaches(res, set, a, u, cwd, unknownDir)
		}
		tree := false
		if !ok && u.tree {
			name, ok = treeReaches(ctx, set, u, cwd, vague, a.dotglob)
			tree = ok
		}
		if !ok || u.ownGit && name != "" && protectednames.Key(name) == protectednames.Key(".git") {
			continue
		}
		out = append(out, ProtectedUse{Access: access, Word: clip(u.w.text), Name: name, What: u.what, Text: u.text, Certain: certain, Tree: tree})
	}
	return out
}

func (r *Rules) reaches(res *Resolver, set *protectednames.Set, a *Analysis, u pathUse, cwd string, unknownDir bool) (name string, certain, ok bool) {
	ctx, w := res.ctx, u.w
	if unknownDir && relative(w) {
		return "", false, true // under a directory known only at run time
	}
	switch {
	case w.home:
		// ~ and ~user: a home directory, judged by the names under it
		_, rest, _ := strings.Cut(w.text, "/")
		if n, ok := set.Match(rest); ok {
			return n, false, true
		}
		if strings.ContainsAny(rest, "\"'$`") {
			return "", false, true // quoted or expanded: not judged as written
		}
		if n, ok := globReaches(set, rest, a.dotglob); ok {
			return n, false, true
		}
	case w.kind == literal:
		text := w.text
		if n, ok := set.Match(text); ok {
			return n, w.kind == literal, true
		}
		if w.kind == literal && cwd != "" && text != "" && devPath(text) == devNone {
			if resolved, err := res.Resolve(cwd, text); err == nil {
				if n, ok := set.Match(resolved); ok {
					return n, true, true
				}
			}
		}
	case w.kind == pattern:
		g := w.glob
		if g == "" {
			g = w.text
		}
		if w.names != "" {
			g = w.names
		} else if w.text == "{}" || w.text == "<xargs input>" || w.text == "<names find prints>" {
			break
		}
		if n, ok := set.Match(g); ok {
			return n, false, true
		}
		// find's patterns match a leading dot, as dotglob does
		if n, ok := globReaches(set, g, a.dotglob || w.names != ""); ok {
			return n, false, true
		}
		if w.names == "" && !unknownDir {
			if n, ok := globMatchReaches(ctx, set, g, cwd, a.dotglob); ok {
				return n, false, true // cat * through a symlink to .env
			}
		}
	default:
		if w.values != nil {
			for _, v := range w.values {
				if n, ok := set.Match(v); ok {
					return n, false, true
				}
				if w.globValues {
					if n, ok := globReaches(set, v, a.dotglob); ok {
						return n, false, true
					}
					continue
				}
				if cwd != "" && v != "" && !strings.HasPrefix(v, "~") {
					if resolved, err := res.Resolve(cwd, v); err == nil {
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
		// A substitution's text may hold any name, slashes included:
		// written, or read by a program that reads files, it could be a
		// protected one.
		return "", false, !u.perhapsNoFile || u.write
	}
	return "", false, false
}
