package envguard

import (
	"strings"
)

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
