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
	// below: only the names under the path count, not the path itself
	// (a copied tree's source is read; what lands is what is in it).
	below bool
	// skip are the --exclude (files) and --exclude-dir (directories)
	// globs of a recursive grep: names it does not read.
	skip, skipD []string
	// includes are a recursive grep's --include globs: with any, only
	// files whose name matches one are read.
	includes []string
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
	u.text = ctx.src
	if u.w.found != nil {
		// {} of find, or xargs' input from find: names found under its
		// starting points at run time, any of the tree below them whose
		// last segment matches find's -name.
		if u.w.names != "" {
			named := u
			named.w.found = nil
			a.out.paths = append(a.out.paths, named)
		}
		for _, root := range u.w.found {
			a.use(ctx, pathUse{w: root, write: u.write, tree: true, what: u.what, only: u.w.only})
		}
		return
	}
	a.out.paths = append(a.out.paths, u)
}

// fileOperands records the files a program's arguments name: every
// operand of a writing program as a write (its destination only for cp
// and the like, and each source's name under it; only with -i for sed),
// an output option's value as a write, and every argument of any other
// program as a read — except programs that only print their arguments
// and the values of options that are patterns, not files. A program
// given a recursive option reads or writes the trees under its operands.
func (a *analyzer) fileOperands(ctx leafCtx, name, canon string, args []word) {
	c := a.t.tables()
	if c.printOnly[name] || c.printOnly[canon] {
		return
	}
	key := canon
	if sc := c.subcommands[canon]; sc != nil {
		if at, sub, told := sc.find(args); told && sub != "" {
			if c.printOnly[canon+" "+sub] {
				return // git check-ignore .env reads no file
			}
			key = canon + " " + sub
			args = args[at+1:] // the subcommand's own words
		}
	}
	a.outputOptions(ctx, name, key, args)
	if lists, ok := c.nameLists[key]; ok && optionGiven(lists, args) {
		// tar -T LIST: the files are the names the list holds
		_, writer := c.writers[canon]
		a.pathUse(ctx, name+" taking file names from a list", word{text: "<names in a list>", kind: opaque}, writer)
	}
	rec, ok := c.recursive[key]
	if !ok {
		rec = c.recursive[canon]
	}
	tree := recursive(rec, args)
	mode, writes := c.writers[key]
	if !writes {
		mode, writes = c.writers[canon]
	}
	if !writes {
		mode, writes = c.writers[name]
	}
	if mode == "archive" {
		mode = archiveMode(canon, args)
	}
	switch {
	case !writes:
	case mode == "extracts":
		// tar -x, unzip, patch, git apply: the names written come from the
		// input — an archive's members or a patch's file names are read
		// from it; any other input could hold any name.
		u := pathUse{write: true, what: name + " extracting"}
		switch {
		case canon == "tar" || canon == "unzip":
			u.w, u.archive = archiveWord(canon, args), true
			if canon == "tar" && renames(args) {
				u.w = word{text: "<names tar renames>", kind: opaque}
			}
		case canon == "patch" || key == "git apply" || key == "git am":
			u.w, u.patch = a.patchInput(ctx, canon, args), true
			if canon == "patch" {
				if orig, ok := patchOriginal(args); ok {
					a.pathUse(ctx, name+" writing", orig, true)
				}
			}
		default:
			u.w = word{text: "<names in " + name + "'s input>", kind: opaque}
		}
		a.use(ctx, u)
		writes = false
	case mode == "first":
		// logsave FILE COMMAND: the first operand is written
		for i, w := range args {
			if w.kind == literal && strings.HasPrefix(w.text, "-") {
				continue
			}
			a.pathUse(ctx, name+" writing", w, true)
			args = args[i+1:]
			break
		}
		writes = false
	case mode == "reads":
		writes = false
	case mode == "names_from_stdin":
		// cpio -o, pax -w: the files read are the names on stdin
		a.use(ctx, pathUse{w: a.stdinNames(ctx), what: name + " reading the names on its input"})
		writes = false
	case mode == "in_place":
		writes = inPlace(args)
	case mode == "last":
		dest := destinations(args)
		for _, w := range dest {
			a.pathUse(ctx, name+" writing", w, true)
			if w.kind != pattern {
				a.execConfig(ctx, name+" writing", w.text)
			}
		}
		// Each source lands under the destination by its own name (cp
		// x/.git . writes ./.git); a tree copied brings every name in it.
		sources := withoutWords(args, dest)
		for _, d := range dest {
			for _, src := range sources {
				if src.kind == literal && strings.HasPrefix(src.text, "-") {
					continue
				}
				if base, ok := lastSegment(src); ok && d.kind == literal {
					a.pathUse(ctx, name+" writing", word{text: d.text + "/" + base, kind: src.kind}, true)
				}
				if tree {
					a.use(ctx, pathUse{w: src, write: true, tree: true, below: true, what: name + " copying a tree"})
				}
			}
		}
		// its sources are reads
		writes = false
		args = sources
	}
	patterns := map[string]bool{}
	for _, o := range c.patternOpts["*"] {
		patterns[o] = true
	}
	for _, o := range c.patternOpts[canon] {
		patterns[o] = true
	}
	patternsLeft, ok := c.patternOps[key]
	if !ok {
		patternsLeft = c.patternOps[canon]
	}
	if patternsLeft > 0 && hasAnyLiteral(args, "-e", "--regexp", "-f", "--file") {
		patternsLeft = 0 // the pattern is an option's value: every operand is a file
	}
	var skipF, skipD, only []string
	if tree && !writes && strings.HasSuffix(canon, "grep") {
		skipF, skipD, only = grepExcludes(args)
	}
	skip := skipF
	files := 0
	record := func(w word) {
		files++
		if writes {
			a.use(ctx, pathUse{w: w, write: true, tree: tree, what: name + " writing"})
			if w.kind != pattern {
				a.execConfig(ctx, name+" writing", w.text)
			}
			if stem, ok := stemOf(w); ok {
				// gzip -d .git.gz writes .git
				a.pathUse(ctx, name+" writing", stem, true)
			}
			return
		}
		a.use(ctx, pathUse{w: w, tree: tree, what: name + " reading", skip: skip, skipD: skipD, includes: only})
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && strings.HasPrefix(w.text, "-") && w.text != "-" {
			opt, value, hasValue := strings.Cut(w.text, "=")
			if patterns[opt] {
				if !hasValue {
					i++ // the next word is the pattern
				}
				continue
			}
			switch {
			case hasValue:
				record(word{text: value, kind: literal})
			case writes:
				record(w)
			case !strings.HasPrefix(w.text, "--") && len(w.text) > 2:
				// -f.env: a short option's value may be attached
				a.pathUse(ctx, name+" reading", word{text: w.text[2:], kind: literal}, false)
			}
			continue // a flag, or an option whose value is the next word: judged as a word
		} else if patternsLeft > 0 {
			patternsLeft--
			continue
		}
		if w.kind == literal && canon == "dd" {
			if v, ok := strings.CutPrefix(w.text, "of="); ok {
				a.pathUse(ctx, name+" writing", word{text: v, kind: literal}, true)
				a.execConfig(ctx, name+" writing", v)
			} else if v, ok := strings.CutPrefix(w.text, "if="); ok {
				a.pathUse(ctx, name+" reading", word{text: v, kind: literal}, false)
			}
			continue
		}
		record(w)
		if w.kind == literal && !writes {
			// KEY=FILE and REV:FILE name a file too (git show HEAD:.env)
			for _, sep := range "=:" {
				if _, v, ok := strings.Cut(w.text, string(sep)); ok && v != "" {
					a.pathUse(ctx, name+" reading", word{text: v, kind: literal}, false)
				}
			}
		}
	}
	if tree && files == 0 && (c.defaultDir[key] || c.defaultDir[canon]) {
		// grep -r with no file searches the working directory
		a.use(ctx, pathUse{w: word{text: ".", kind: literal}, tree: true, what: name + " reading", skip: skip, skipD: skipD, includes: only})
	}
}

// grepExcludes are a grep's --exclude and --exclude-dir globs, literal
// ones only (any other excludes nothing the analysis can count on).
func grepExcludes(args []word) (files, dirs, includes []string) {
	for i, w := range args {
		if w.kind != literal {
			continue
		}
		for _, o := range []string{"--exclude", "--exclude-dir", "--include"} {
			v, ok := "", false
			if w.text == o && i+1 < len(args) && args[i+1].kind == literal {
				v, ok = args[i+1].text, true
			} else if rest, cut := strings.CutPrefix(w.text, o+"="); cut {
				v, ok = rest, true
			}
			if !ok {
				continue
			}
			switch o {
			case "--exclude":
				files = append(files, v)
			case "--include":
				includes = append(includes, v)
			default:
				dirs = append(dirs, v)
			}
		}
	}
	return files, dirs, includes
}

// stemOf is a literal file name without its last extension (x.gz is x):
// what a program that compresses or decompresses it writes.
func stemOf(w word) (word, bool) {
	if w.kind != literal || strings.HasPrefix(w.text, "-") {
		return word{}, false
	}
	ext := filepath.Ext(w.text)
	stem := strings.TrimSuffix(w.text, ext)
	if ext == "" || stem == "" || strings.HasSuffix(stem, "/") {
		return word{}, false
	}
	return word{text: stem, kind: literal}, true
}

// renames reports tar options that rename members as they are extracted.
func renames(args []word) bool {
	for _, w := range args {
		if w.kind != literal {
			return true
		}
		for _, o := range []string{"--transform", "--xform"} {
			if w.text == o || strings.HasPrefix(w.text, o+"=") {
				return true
			}
		}
	}
	return false
}

// destinations are the words a cp-like program writes into: -t's value, or
// its last operand.
func destinations(args []word) []word {
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
	return dest
}

// lastSegment is a source's own name, as it lands under a destination
// directory; "." and ".." bring no name of their own.
func lastSegment(w word) (string, bool) {
	if w.kind == opaque {
		return "", false
	}
	t := strings.TrimRight(w.text, "/")
	if i := strings.LastIndexByte(t, '/'); i >= 0 {
		t = t[i+1:]
	}
	if t == "" || t == "." || t == ".." {
		return "", false
	}
	return t, true
}

// recursive reports a program given one of its recursive options ("*":
// always), as written, grouped in a short cluster, or a long one's prefix.
func recursive(opts []string, args []word) bool {
	for _, o := range opts {
		if o == "*" {
			return true
		}
	}
	return optionGiven(opts, args)
}

// optionGiven reports one of opts among args: as written, with =VALUE,
// grouped in a short cluster, or a long one's unambiguous prefix.
func optionGiven(opts []string, args []word) bool {
	for _, w := range args {
		if w.kind != literal || !strings.HasPrefix(w.text, "-") || w.text == "-" || w.text == "--" {
			continue
		}
		for _, o := range opts {
			switch {
			case w.text == o || strings.HasPrefix(w.text, o+"="):
				return true
			case strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, "--"):
				long, _, _ := strings.Cut(w.text, "=")
				if len(long) > 3 && strings.HasPrefix(o, long) && !strings.Contains(o, "=") {
					return true
				}
			case len(o) == 2 && !strings.HasPrefix(w.text, "--") && strings.IndexByte(w.text[1:], o[1]) >= 0:
				return true
			}
		}
	}
	return false
}

// archiveMode is what an archiver does by its mode: extract (names from
// the archive), create or list (its operands are reads), or write its
// operands.
func archiveMode(canon string, args []word) string {
	switch canon {
	case "tar":
		for i, w := range args {
			if w.kind != literal {
				return "extracts" // a mode known only at run time
			}
			t := w.text
			if i == 0 && !strings.HasPrefix(t, "-") {
				t = "-" + t // tar xzf: the old grouped form
			}
			switch {
			case t == "--extract" || t == "--get" || strings.HasPrefix(t, "--ext") || strings.HasPrefix(t, "--to-"):
				return "extracts"
			case !strings.HasPrefix(t, "--") && strings.HasPrefix(t, "-") && strings.ContainsRune(t, 'x'):
				return "extracts"
			}
		}
		return "reads"
	case "cpio", "pax":
		extract, create := "i", "o"
		if canon == "pax" {
			extract, create = "r", "w"
		}
		for _, w := range args {
			switch {
			case w.kind != literal || w.text == "--extract" || w.text == "--pass-through":
				return "extracts"
			case w.text == "--create":
				return "names_from_stdin"
			case !strings.HasPrefix(w.text, "--") && strings.HasPrefix(w.text, "-") && strings.ContainsAny(w.text, extract+"p"):
				return "extracts"
			case !strings.HasPrefix(w.text, "--") && strings.HasPrefix(w.text, "-") && strings.ContainsAny(w.text, create):
				return "names_from_stdin"
			}
		}
		if canon == "pax" {
			return "reads" // pax with neither lists
		}
		return "extracts"
	case "ar":
		for i, w := range args {
			if w.kind != literal {
				return "extracts"
			}
			if strings.HasPrefix(w.text, "-") || i == 0 {
				if strings.ContainsRune(w.text, 'x') {
					return "extracts"
				}
				return "all"
			}
		}
		return "all"
	case "7z":
		for _, w := range args {
			if w.kind == literal && !strings.HasPrefix(w.text, "-") {
				if w.text == "x" || w.text == "e" {
					return "extracts"
				}
				return "reads"
			}
		}
		return "extracts"
	}
	return "all"
}

// outputOptions records the values of options that name a file the
// program writes (sort -o FILE, --output=FILE, -oFILE).
func (a *analyzer) outputOptions(ctx leafCtx, name, key string, args []word) {
	c := a.t.tables()
	opts := append(append([]string(nil), c.outputOpts["*"]...), c.outputOpts[key]...)
	if canon, _, _ := strings.Cut(key, " "); canon != key {
		opts = append(opts, c.outputOpts[canon]...)
	}
	if len(opts) == 0 {
		return
	}
	for i, w := range args {
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			continue
		}
		for _, o := range opts {
			var v word
			switch {
			case w.text == o && i+1 < len(args):
				v = args[i+1]
			case strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o+"="):
				v = word{text: w.text[len(o)+1:], kind: literal}
			case len(o) == 2 && strings.HasPrefix(w.text, o) && len(w.text) > 2 && !strings.HasPrefix(w.text, "--"):
				v = word{text: w.text[2:], kind: literal}
			default:
				continue
			}
			a.pathUse(ctx, name+" "+o+" writing", v, true)
			if v.kind != pattern {
				a.execConfig(ctx, name+" writing", v.text)
			}
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
		unknownDir := a.movedAt >= 0 && (i >= a.movedAt || a.loops) && (u.write || set.Directories())
		var name string
		var certain, ok bool
		switch {
		case u.archive:
			name, ok = archiveReaches(ctx, set.Match, u.w, cwd, archiveNames)
		case u.patch:
			name, ok = archiveReaches(ctx, set.Match, u.w, cwd, patchNames)
		case !u.below:
			name, certain, ok = r.reaches(ctx, set, a, u, cwd, unknownDir)
		}
		if !ok && u.tree {
			name, ok = treeReaches(ctx, set, u, cwd, unknownDir)
		}
		if !ok {
			continue
		}
		out = append(out, ProtectedUse{Access: access, Word: clip(u.w.text), Name: name, What: u.what, Text: u.text, Certain: certain})
	}
	return out
}

func (r *Rules) reaches(ctx context.Context, set *protectednames.Set, a *Analysis, u pathUse, cwd string, unknownDir bool) (name string, certain, ok bool) {
	w := u.w
	if unknownDir && relative(w) {
		return "", false, true // under a directory known only at run time
	}
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
		// A substitution's text may hold any name, slashes included:
		// written or read, it could be a protected one.
		return "", false, true
	}
	return "", false, false
}

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
func treeReaches(ctx context.Context, set *protectednames.Set, u pathUse, cwd string, unknownDir bool) (string, bool) {
	w, below := u.w, u.below
	var roots []string
	switch {
	case w.kind == literal:
		roots = []string{w.text}
	case w.kind == pattern && w.glob != "":
		for _, alt := range braceAlternatives(w.glob) {
			if !filepath.IsAbs(alt) {
				if cwd == "" {
					continue // no directory to look in: judged by its name alone
				}
				alt = filepath.Join(cwd, alt)
			}
			m, err := filepath.Glob(alt)
			if err != nil || len(m) > 256 {
				return "", true
			}
			roots = append(roots, m...)
		}
	case w.values != nil && !w.globValues:
		roots = w.values
	default:
		return "", true
	}
	seen := 0
	deadline := time.Now().Add(maxTreeTime)
	// With no filter and only single names listed, each entry's own name
	// is all there is to compare.
	fast := u.only == "" && len(u.includes) == 0 && !set.Directories()
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
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			continue
		}
		var found string
		reached := false
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
			if !isRoot && excluded(d, u.skip, u.skipD) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if u.only != "" && !foundName(u.only, d.Name()) {
				return nil
			}
			if len(u.includes) > 0 && !d.IsDir() && !matchesAny(u.includes, d.Name()) {
				return nil
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
			if d.Type()&fs.ModeSymlink != 0 {
				if target, err := filepath.EvalSymlinks(p); err == nil {
					if n, ok := set.Match(target); ok {
						found, reached = n, true
						return fs.SkipAll
					}
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

// foundName reports a name find's -name (or, in lower case, -iname)
// pattern matches; a pattern no matcher reads matches everything.
func foundName(only, name string) bool {
	if strings.ToLower(only) == only {
		name = strings.ToLower(name)
	}
	ok, err := path.Match(only, name)
	return ok || err != nil
}

// excluded reports a name a recursive grep skips by its globs.
func excluded(d fs.DirEntry, files, dirs []string) bool {
	list := files
	if d.IsDir() {
		list = dirs
	}
	return matchesAny(list, d.Name())
}

func matchesAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, err := path.Match(g, name); ok && err == nil {
			return true
		}
	}
	return false
}

// globReaches reports a glob (braces as written) that could match a
// protected name; with dotglob, a * or ? matches a leading dot too.
func globReaches(set *protectednames.Set, glob string, dotglob bool) (string, bool) {
	for _, alt := range braceAlternatives(glob) {
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
