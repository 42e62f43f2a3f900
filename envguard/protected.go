package envguard

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

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
	args = braceWords(args)
	if canon != "tar" {
		// git -C DIR, make -C DIR: the program works in DIR
		if dir, known, moved := a.chdir(ctx, name, canon, args); moved {
			ctx.dir, ctx.dirUnknown = dir, ctx.dirUnknown || !known
		}
	}
	if canon == "git" {
		a.gitPaths(ctx, args)
	}
	key := canon
	if sc := c.subcommands[canon]; sc != nil {
		if at, sub, told := sc.find(args); told && sub != "" {
			if c.printOnly[canon+" "+sub] {
				return // git check-ignore .env reads no file
			}
			key = canon + " " + sub
			args = args[at+1:] // the subcommand's own words
			if key == "git stash" && len(args) > 0 && (args[0].text == "push" || args[0].text == "save") {
				args = args[1:]
			}
		}
	}
	a.outputOptions(ctx, name, key, args)
	if lists, ok := c.nameLists[key]; ok && optionGiven(lists, args) {
		// tar -T LIST: the files are the names the list holds
		_, writer := c.writers[canon]
		a.pathUse(ctx, name+" taking file names from a list", word{text: "<names in a list>", kind: opaque}, writer)
	}
	if opts, ok := c.stdinNames[key]; ok && optionGiven(opts, args) {
		a.use(ctx, pathUse{w: a.stdinNames(ctx), what: name + " reading the names on its input"})
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
	// a program of no table: what it does with a file it is given is not
	// known, so a version-control or agent-configuration name among its
	// arguments may be written (gcc -MF .git/x, ssh -E .git/log)
	unknownUse := !writes
	if mode == "archive" {
		mode = archiveMode(canon, args)
	}
	if key == "git init" && optionGiven([]string{"--separate-git-dir"}, args) {
		// the repository's .git is moved and replaced by a file
		a.pathUse(ctx, "git init --separate-git-dir replacing", word{text: ".git", kind: literal}, true)
	}
	if key == "git apply" || key == "git am" {
		// --directory=DIR: the patch's files are written under DIR
		for i, w := range args {
			if v, ok := strings.CutPrefix(w.text, "--directory="); ok && w.kind == literal {
				a.pathUse(ctx, name+" writing under", word{text: v, kind: literal}, true)
			} else if w.text == "--directory" && i+1 < len(args) {
				a.pathUse(ctx, name+" writing under", args[i+1], true)
			}
		}
	}
	a.suffixedNames(ctx, name, canon, args)
	if key == "git rm" && optionGiven([]string{"--cached", "-n", "--dry-run"}, args) {
		writes = false // the index only, or a dry run
	}
	if key == "git rm" && writes && optionGiven([]string{"-r"}, args) {
		tree = true
	}
	if key == "git clean" && optionGiven([]string{"-n", "--dry-run"}, args) {
		writes = false // it only lists
	}
	switch {
	case !writes:
	case mode == "extracts":
		piped := false
		// tar -x, unzip, patch, git apply: the names written come from the
		// input — an archive's members or a patch's file names are read
		// from it; any other input could hold any name.
		u := pathUse{write: true, what: name + " extracting"}
		switch {
		case canon == "tar" || canon == "unzip":
			u.w, u.archive = archiveWord(canon, args), true
			if canon == "tar" && renames(args) {
				u.w = word{text: "<names tar renames>", kind: opaque}
			} else if canon == "tar" && u.w.kind == opaque && a.tarPiped(ctx) {
				piped = true // tar -cf - src | tar -xf -: the names are those of the trees piped
			}
		case canon == "patch" || canon == "apply_patch" || key == "git apply" || key == "git am":
			u.w, u.patch = a.patchInput(ctx, canon, args), true
			if canon == "patch" {
				if orig, ok := patchOriginal(args); ok {
					a.pathUse(ctx, name+" writing", orig, true)
				}
			}
		default:
			u.w = word{text: "<names in " + name + "'s input>", kind: opaque}
		}
		if u.w.kind != opaque || !piped {
			a.use(ctx, u)
		}
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
	case mode == "reads" && canon == "tar" && optionGiven([]string{"--remove-files"}, args):
		writes = true // tar --remove-files deletes what it archives
		tree = true
	case mode == "reads":
		if canon == "tar" {
			// tar -c, -r, -u: the archive named by -f is written
			if out := archiveWord(canon, args); out.kind == literal {
				a.pathUse(ctx, name+" writing its archive", out, true)
			}
		}
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
		linking := canon == "cp" && optionGiven([]string{"-l", "-s", "--link", "--symbolic-link"}, args)
		for _, src := range sources {
			if src.kind == literal && strings.HasPrefix(src.text, "-") {
				continue
			}
			if linking {
				// cp -l .git/config x: x is the same file, written later
				a.pathUse(ctx, name+" linking", src, true)
			} else {
				a.use(ctx, pathUse{w: src, write: true, link: true, what: name + " copying a link"})
			}
		}
		for _, d := range dest {
			for _, src := range sources {
				if src.kind == literal && strings.HasPrefix(src.text, "-") {
					continue
				}
				if base, ok := lastSegment(src); ok {
					for _, dt := range destTexts(d) {
						a.pathUse(ctx, name+" writing", word{text: dt + "/" + base, kind: src.kind, glob: globOf(src, dt+"/"+base)}, true)
					}
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
	if !c.responseFiles[canon] {
		// (gcc --include FILE is a file, not a pattern)
		for _, o := range c.patternOpts["*"] {
			patterns[o] = true
		}
	}
	own, ok := c.patternOpts[key]
	if !ok {
		own = c.patternOpts[canon]
	}
	for _, o := range own {
		patterns[o] = true
	}
	patternsLeft, ok := c.patternOps[key]
	if !ok {
		patternsLeft = c.patternOps[canon]
	}
	if patternsLeft > 0 && hasAnyLiteral(args, "-e", "--regexp", "-f", "--file") {
		patternsLeft = 0 // the pattern is an option's value: every operand is a file
	}
	var filter *grepFilter
	switch {
	case tree && !writes && strings.HasSuffix(canon, "grep") && key != "git grep":
		filter = grepFilters(args)
	case tree && canon == "tar":
		filter = tarFilters(args)
	}
	reader := c.dataReaders[name] || c.dataReaders[canon] || c.dataReaders[key]
	// git names its own repository's paths (--git-dir=.git) and find its
	// tests' (-path ./.git -prune): their pieces are no files they write
	noPieces := canon == "git" || canon == "find"
	_, isWriter := c.writers[canon]
	// git add and git stash -u take what .gitignore does not leave out;
	// git add -f and git stash -a take everything
	gitTakes := key == "git add" || key == "git stash"
	forced := gitTakes && (optionGiven([]string{"-f", "--force"}, args) && key == "git add" || optionGiven([]string{"-a", "--all"}, args) && key == "git stash")
	valueLetters, hasValues := c.readerValues[canon]
	files := 0
	record := func(w word) {
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			files++
		}
		if writes {
			a.use(ctx, pathUse{w: w, write: true, tree: tree, ownGit: key == "git clean" || key == "git rm", what: name + " writing"})
			if w.kind != pattern {
				a.execConfig(ctx, name+" writing", w.text)
			}
			if stem, ok := stemOf(w); ok {
				// gzip -d .git.gz writes .git
				a.pathUse(ctx, name+" writing", stem, true)
			}
			return
		}
		if gitTakes && w.kind == literal && strings.HasPrefix(w.text, ":") {
			w = word{text: ".", kind: literal} // a magic pathspec (:!x, :/): the whole tree, as far as is known
		}
		a.use(ctx, pathUse{w: w, tree: tree, what: name + " reading", grep: filter, perhapsNoFile: !reader, gitignore: gitTakes && !forced})
		if unknownUse && !reader && !noPieces && w.kind != opaque {
			a.use(ctx, pathUse{w: w, write: true, named: true, what: name + " given"})
		}
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == pattern && strings.HasPrefix(w.glob, "-") {
			// --include=.?nv: an option, as bash leaves a glob no file matches
			w = word{text: unescape(w.glob), kind: literal}
		}
		if canon == "tar" && w.kind == literal {
			// tar -C DIR: the operands after it are in DIR
			if dir, n, ok := tarDir(args, i); ok {
				if dir.kind == literal {
					ctx.dir = joinDir(ctx.dir, dir.text)
				} else {
					ctx.dirUnknown = true
				}
				a.pathUse(ctx, name+" moving into", dir, true)
				i += n
				continue
			}
		}
		if w.kind == literal && strings.HasPrefix(w.text, "-") && w.text != "-" {
			opt, value, hasValue := strings.Cut(w.text, "=")
			if patterns[opt] {
				if !hasValue {
					i++ // the next word is the pattern
				}
				continue
			}
			a.pieces(ctx, name, w.text, (!reader || isWriter) && !noPieces)
			switch {
			case hasValue:
				record(word{text: value, kind: literal})
			case writes:
				record(w)
			case hasValues && !strings.HasPrefix(w.text, "--") && strings.IndexByte(valueLetters, w.text[len(w.text)-1]) >= 0 &&
				i+1 < len(args) && args[i+1].kind == opaque:
				i++ // head -n "$N": the option's value, no file
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
		if w.kind == literal {
			a.pieces(ctx, name, w.text, !reader && !noPieces && !writes)
		}
		if w.kind == literal && !writes {
			// KEY=FILE and REV:FILE name a file too (git show HEAD:.env)
			for _, sep := range "=:" {
				if _, v, ok := strings.Cut(w.text, string(sep)); ok && v != "" {
					a.pathUse(ctx, name+" reading", word{text: v, kind: literal}, false)
				}
			}
		}
	}
	if tree && files == 0 && writes && (c.defaultDir[key] || c.defaultDir[canon]) {
		// git clean with no path cleans the working tree (a .git is git's)
		a.use(ctx, pathUse{w: word{text: ".", kind: literal}, write: true, tree: true, below: true, ownGit: true, what: name + " writing"})
	}
	if tree && files == 0 && !writes && key != "git clean" && (c.defaultDir[key] || c.defaultDir[canon]) {
		// grep -r with no file searches the working directory
		a.use(ctx, pathUse{w: word{text: ".", kind: literal}, tree: true, what: name + " reading", grep: filter, gitignore: gitTakes && !forced})
	}
}

// tarDir reads tar's -C DIR, -CDIR or --directory=DIR at args[i]: the
// directory and how many more words it took.
func tarDir(args []word, i int) (word, int, bool) {
	t := args[i].text
	switch {
	case (t == "-C" || t == "--directory") && i+1 < len(args):
		return args[i+1], 1, true
	case strings.HasPrefix(t, "--directory="):
		return word{text: strings.TrimPrefix(t, "--directory="), kind: literal}, 0, true
	case strings.HasPrefix(t, "-C") && len(t) > 2:
		return word{text: t[2:], kind: literal}, 0, true
	}
	return word{}, 0, false
}

// gitPaths records the directories git's global options name: its work
// tree (written by checkout, reset, stash, clean) and its repository (a
// .git of its own is git's business; anything else protected is not).
func (a *analyzer) gitPaths(ctx leafCtx, args []word) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			break // the subcommand
		}
		for _, o := range []string{"--work-tree", "--git-dir"} {
			v, n, ok := optionWord(args, i, o)
			if !ok {
				continue
			}
			i += n
			a.use(ctx, pathUse{w: v, write: true, ownGit: o == "--git-dir", what: "git " + o})
		}
		if w.text == "-c" || w.text == "-C" || w.text == "--exec-path" || w.text == "--namespace" || w.text == "--config-env" {
			i++ // a global option's value
		}
	}
}

// joinDir is dir then p, as cd moves: an absolute p replaces it.
func joinDir(dir, p string) string {
	if dir == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return p
	}
	return dir + "/" + p
}

// inDir is w as seen from dir: a relative name (or each relative value)
// under it. A word known only at run time stays as it is: anything.
func inDir(w word, dir string) word {
	rel := func(s string) bool { return s != "-" && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") }
	switch {
	case w.home || w.found != nil:
	case w.kind == literal && rel(w.text):
		w.text = dir + "/" + w.text
	case w.kind == pattern && w.glob != "" && rel(w.glob):
		w.text, w.glob = dir+"/"+w.text, dir+"/"+w.glob
	case w.kind == opaque && w.values != nil:
		vals := make([]string, len(w.values))
		for i, v := range w.values {
			vals[i] = v
			if rel(v) {
				vals[i] = dir + "/" + v
			}
		}
		w.values = vals
	}
	return w
}

// chdir finds the directory options of a program or wrapper (data:
// chdir_options) among args: the directory its command works in, each
// one recorded as a move into it; known is false when one is known only
// at run time.
func (a *analyzer) chdir(ctx leafCtx, name, canon string, args []word) (dir string, known, moved bool) {
	c := a.t.tables()
	list, ok := c.chdirOpts[canon]
	if !ok {
		list, ok = c.chdirOpts[name]
	}
	dir, known = ctx.dir, true
	if !ok {
		return dir, known, false
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.kind == literal && w.text == "--" {
			break
		}
		if w.kind != literal || !strings.HasPrefix(w.text, "-") {
			continue
		}
		for _, o := range list {
			v, n, ok := optionWord(args, i, o)
			if !ok {
				continue
			}
			i += n
			moved = true
			a.pathUse(ctx, name+" moving into", v, true)
			if v.kind != literal {
				known = false
			} else {
				dir = joinDir(dir, v.text)
			}
			break
		}
	}
	return dir, known, moved
}

// grepFilter is what GNU grep reads of a tree: files by its --include and
// --exclude globs — the last one matching a name wins, and a name none
// matches is read unless the first of them is an --include — and
// directories but those an --exclude-dir matches.
type grepFilter struct {
	files []grepGlob
	dirs  []string
}

type grepGlob struct {
	include bool
	glob    string
}

// grepFilters reads a grep's literal --include, --exclude and
// --exclude-dir globs.
func grepFilters(args []word) *grepFilter {
	f := &grepFilter{}
	// an unquoted glob bash leaves as it is when nothing matches it
	text := func(w word) (string, bool) {
		switch {
		case w.kind == literal:
			return w.text, true
		case w.kind == pattern && w.glob != "":
			return w.glob, true
		}
		return "", false
	}
	for i, w := range args {
		t, ok := text(w)
		if !ok {
			if strings.HasPrefix(w.text, "--include") || strings.HasPrefix(w.text, "--exclude") {
				return nil // a glob known only at run time: what grep skips is not known
			}
			continue
		}
		for _, o := range []string{"--exclude", "--exclude-dir", "--include"} {
			v, ok := "", false
			matched := false
			if t == o && i+1 < len(args) {
				matched = true
				v, ok = text(args[i+1])
			} else if rest, cut := strings.CutPrefix(t, o+"="); cut {
				matched, v, ok = true, rest, true
			}
			if matched && !ok {
				return nil // a glob known only at run time: what grep skips is not known
			}
			if !ok {
				continue
			}
			if o == "--exclude-dir" {
				f.dirs = append(f.dirs, v)
			} else {
				f.files = append(f.files, grepGlob{include: o == "--include", glob: v})
			}
		}
	}
	return f
}

// tarFilters are tar's literal --exclude globs, which leave out files and
// directories alike; any other exclusion (from a file, by VCS) leaves
// nothing out that the analysis can count on.
func tarFilters(args []word) *grepFilter {
	f := &grepFilter{}
	for i, w := range args {
		v, ok := "", false
		switch {
		case w.kind == literal && w.text == "--exclude" && i+1 < len(args) && args[i+1].kind == literal:
			v, ok = args[i+1].text, true
		case w.kind == literal && strings.HasPrefix(w.text, "--exclude="):
			v, ok = strings.TrimPrefix(w.text, "--exclude="), true
		case w.kind == pattern && strings.HasPrefix(w.glob, "--exclude="):
			v, ok = strings.TrimPrefix(w.glob, "--exclude="), true
		case strings.HasPrefix(w.text, "--exclude") && w.kind != literal:
			return nil
		}
		if ok {
			f.files = append(f.files, grepGlob{glob: v})
			f.dirs = append(f.dirs, v)
		}
	}
	if len(f.files) == 0 {
		return nil
	}
	return f
}

// reads reports whether grep reads an entry of the tree by its filters.
func (f *grepFilter) reads(d fs.DirEntry) bool {
	if f == nil {
		return true
	}
	if d.IsDir() {
		return !matchesAny(f.dirs, d.Name())
	}
	for i := len(f.files) - 1; i >= 0; i-- {
		if ok, err := path.Match(f.files[i].glob, d.Name()); ok || err != nil {
			return f.files[i].include
		}
	}
	return len(f.files) == 0 || !f.files[0].include
}

// braceWords is args with each brace word replaced by the words bash
// makes of it (dd if=.e{x,nv} is dd if=.ex if=.env): a literal where an
// alternative holds no glob character, else a glob.
func braceWords(args []word) []word {
	var out []word
	for i, w := range args {
		if w.kind != pattern || w.glob == "" || !strings.Contains(w.glob, "{") {
			if out != nil {
				out = append(out, w)
			}
			continue
		}
		if out == nil {
			out = append(make([]word, 0, len(args)+4), args[:i]...)
		}
		alts, err := expandBraces(w.glob, 0)
		if err != nil {
			out = append(out, w)
			continue
		}
		for _, alt := range alts {
			if hasGlobChar(alt) {
				out = append(out, word{text: alt, kind: pattern, pattern: w.pattern, glob: alt})
			} else {
				out = append(out, word{text: unescape(alt), kind: literal})
			}
		}
	}
	if out == nil {
		return args
	}
	return out
}

// hasGlobChar reports an unescaped *, ? or [ in a glob.
func hasGlobChar(g string) bool {
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// tarPiped records, for a tar extracting from a pipe fed by a tar that
// creates an archive of literal paths, those paths' trees as the names it
// writes, and reports whether it did.
func (a *analyzer) tarPiped(ctx leafCtx) bool {
	p := ctx.producer
	if p == nil || len(p.Redirs) > 0 {
		return false
	}
	call, ok := p.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 2 || len(call.Assigns) > 0 {
		return false
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = a.wordOf(ctx.producerSrc, w)
		if words[i].kind == opaque {
			return false
		}
	}
	if words[0].text != "tar" || archiveMode("tar", words[1:]) != "reads" || renames(words[1:]) {
		return false
	}
	if out := archiveWord("tar", words[1:]); out.kind != opaque || out.text != "<archive>" {
		return false // an archive written elsewhere, not the pipe
	}
	dir := ""
	var roots []word
	args := words[1:]
	for i := 0; i < len(args); i++ {
		w := args[i]
		if d, n, ok := tarDir(args, i); ok {
			if d.kind != literal {
				return false
			}
			dir = joinDir(dir, d.text)
			i += n
			continue
		}
		if i == 0 && !strings.HasPrefix(w.text, "-") {
			continue // the old grouped form: cf
		}
		if strings.HasPrefix(w.text, "-") {
			if w.text == "-f" || w.text == "--file" || w.text == "-T" || w.text == "--files-from" {
				if w.text == "-T" || w.text == "--files-from" {
					return false
				}
				i++
			}
			continue
		}
		r := w
		if dir != "" {
			r = inDir(w, dir)
		}
		roots = append(roots, r)
	}
	if len(roots) == 0 {
		return false
	}
	for _, r := range roots {
		a.use(ctx, pathUse{w: r, write: true, tree: true, what: "tar extracting"})
	}
	return true
}

// suffixedNames records the files a program names by joining a prefix and
// a suffix (csplit -f PREFIX -b SUFFIX, split, gzip -S SUFFIX FILE): the
// joined name is written.
func (a *analyzer) suffixedNames(ctx leafCtx, name, canon string, args []word) {
	value := func(opts ...string) (string, bool) {
		for i, w := range args {
			for _, o := range opts {
				switch {
				case w.text == o && i+1 < len(args):
					return args[i+1].text, args[i+1].kind == literal
				case strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o+"="):
					return strings.TrimPrefix(w.text, o+"="), w.kind == literal
				case !strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o) && len(w.text) > len(o):
					return w.text[len(o):], w.kind == literal
				}
			}
		}
		return "", true
	}
	record := func(text string, known bool) {
		w := word{text: text, kind: literal}
		if !known {
			w = word{text: text, kind: opaque}
		}
		a.pathUse(ctx, name+" writing", w, true)
	}
	switch canon {
	case "csplit", "split":
		prefix, pk := value("-f", "--prefix")
		suffix, sk := value("-b", "--suffix-format", "--additional-suffix")
		if suffix != "" || !sk {
			if prefix == "" && canon == "split" {
				prefix = "x"
			}
			record(prefix+strings.ReplaceAll(strings.ReplaceAll(suffix, "%02d", "00"), "%d", "0"), pk && sk)
		}
	case "gzip", "bzip2", "xz", "zstd", "lz4", "lzma", "pigz":
		suffix, known := value("-S", "--suffix")
		if suffix == "" && known {
			return
		}
		for _, w := range args {
			if w.kind == literal && !strings.HasPrefix(w.text, "-") && w.text != suffix {
				record(w.text+suffix, known)
			}
		}
	}
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

// pieces records the file names inside one literal argument — after =,
// , : or @ (--directory=.claude, -Wl,-o,FILE, HEAD:.env, @FILE), and in an
// option word from each . or / on (-include.env, -MF.git/x, -t.git/hooks,
// -rt.git): read, and, for a program not known to only read them, possibly
// written (an option value a program writes is an option toolpdp need not
// know).
func (a *analyzer) pieces(ctx leafCtx, name, text string, write bool) {
	var out []string
	add := func(p string) {
		p = strings.TrimPrefix(p, "@")
		if p != "" && p != text && (strings.HasPrefix(p, ".") || strings.Contains(p, "/")) {
			out = append(out, p)
		}
	}
	for _, part := range strings.FieldsFunc(text, func(r rune) bool { return r == '=' || r == ',' || r == ':' }) {
		add(part)
	}
	add(text)
	if strings.HasPrefix(text, "-") {
		for i := 2; i < len(text); i++ {
			if text[i] == '.' || text[i] == '/' {
				add(text[i:])
				break
			}
		}
	}
	for _, p := range out {
		w := word{text: p, kind: literal}
		a.pathUse(ctx, name+" reading", w, false)
		if write {
			a.use(ctx, pathUse{w: w, write: true, named: true, what: name + " given"})
		}
	}
}

// optionWord is the value option o gives at args[i] — the next word
// (n is then 1), after --o=, or attached to a short option (-CDIR) — and
// whether args[i] is that option at all.
func optionWord(args []word, i int, o string) (v word, n int, ok bool) {
	w := args[i]
	switch {
	case w.text == o && i+1 < len(args):
		return args[i+1], 1, true
	case strings.HasPrefix(o, "--") && strings.HasPrefix(w.text, o+"="):
		return word{text: w.text[len(o)+1:], kind: literal}, 0, true
	case len(o) == 2 && strings.HasPrefix(w.text, o) && len(w.text) > 2 && !strings.HasPrefix(w.text, "--"):
		return word{text: w.text[2:], kind: literal}, 0, true
	}
	return word{}, 0, false
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

// destTexts are the directories a destination word can be: itself, its
// known values, ~'s rest under a home.
func destTexts(d word) []string {
	switch {
	case d.kind == literal:
		return []string{d.text}
	case d.home:
		return []string{d.text}
	case d.kind == opaque && d.values != nil && !d.globValues:
		return d.values
	}
	return nil
}

// globOf is the glob of a source's name put under a destination, for a
// source that is a glob.
func globOf(src word, text string) string {
	if src.kind == pattern {
		return text
	}
	return ""
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
	for i, w := range args {
		for _, o := range opts {
			// "-d recurse": an option with that value as the next word
			if name, value, ok := strings.Cut(o, " "); ok && w.kind == literal && w.text == name && i+1 < len(args) && args[i+1].text == value {
				return true
			}
		}
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
			v, _, ok := optionWord(args, i, o)
			if !ok {
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
