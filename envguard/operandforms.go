package envguard

import (
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
