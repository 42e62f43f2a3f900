package envguard

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// xargsInput is the word xargs' input stands for (stdinNames), or anything
// when it reads a file of its own.
func (a *analyzer) xargsInput(ctx leafCtx, opts []opt) word {
	if has(opts, "-a", "--arg-file") {
		return word{text: "<xargs input>", kind: opaque}
	}
	return a.stdinNames(ctx)
}

// stdinNames is the word for names a program reads from its stdin: the
// names find prints when find's output is piped to it; nothing when stdin
// is the tool's own; else anything.
func (a *analyzer) stdinNames(ctx leafCtx) word {
	if !ctx.stdinPiped && !ctx.stdinFile {
		// the tool's own stdin, which holds no file names the command made
		return word{text: "<xargs input>", kind: pattern, pattern: "^.*$"}
	}
	if ctx.producer != nil {
		if w, ok := a.findOutput(ctx.producerSrc, ctx.producer); ok {
			return w
		}
		if glob, ok := a.listedNames(ctx.producerSrc, ctx.producer); ok {
			return word{text: "<names listed>", kind: pattern, pattern: "^.*$", names: glob}
		}
	}
	return word{text: "<xargs input>", kind: opaque}
}

// gitListsTracked are the options with which git ls-files and git diff
// --name-only print tracked names only.
var gitListsTracked = map[string]bool{"-z": true, "-c": true, "--cached": true, "--full-name": true, "--name-only": true,
	"--recurse-submodules": true, "--": true, "--staged": true, "--diff-filter=d": true, "--diff-filter=M": true}

// listedNames is the glob every name a find or git ls-files statement
// prints ends with, as one path segment: find's -name, or git ls-files'
// one pathspec. A glob of only * is none (find's * matches a leading dot,
// a shell's does not).
func (a *analyzer) listedNames(src string, s *syntax.Stmt) (string, bool) {
	glob := ""
	if w, ok := a.findOutput(src, s); ok {
		glob = w.names
	} else if call, ok := s.Cmd.(*syntax.CallExpr); ok && len(s.Redirs) == 0 && len(call.Assigns) == 0 && len(call.Args) >= 3 && (a.sc == nil || !a.sc.names["git"]) {
		// git ls-files [-z|--cached…] GLOB: tracked names matching it
		var specs []word
		lists := a.wordOf(src, call.Args[0]).text == "git" && a.wordOf(src, call.Args[1]).text == "ls-files"
		for _, arg := range call.Args[2:] {
			w := a.wordOf(src, arg)
			switch {
			case w.kind != literal:
				lists = false
			case strings.HasPrefix(w.text, "-"):
				lists = lists && gitListsTracked[w.text]
			default:
				specs = append(specs, w)
			}
		}
		if lists && len(specs) == 1 {
			glob = specs[0].text
			if i := strings.LastIndexByte(glob, '/'); i >= 0 {
				glob = glob[i+1:]
			}
		}
	}
	if strings.Trim(glob, "*") == "" {
		return a.lsNames(src, s)
	}
	return glob, true
}

// lsNames is the glob of names an ls prints: with no -a or -A, the names
// in the directories it lists, none starting with a dot (a glob of only *,
// as bash reads it), or the one glob it is given.
func (a *analyzer) lsNames(src string, s *syntax.Stmt) (string, bool) {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(s.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 || a.sc != nil && a.sc.names["ls"] {
		return "", false
	}
	if w := a.wordOf(src, call.Args[0]); w.kind != literal || w.text != "ls" {
		return "", false
	}
	glob := "*"
	globs := 0
	for _, arg := range call.Args[1:] {
		w := a.wordOf(src, arg)
		switch {
		case w.kind == literal && strings.HasPrefix(w.text, "-"):
			if strings.HasPrefix(w.text, "--") && (w.text == "--all" || w.text == "--almost-all") ||
				!strings.HasPrefix(w.text, "--") && strings.ContainsAny(w.text, "aAfd") {
				return "", false // dot names too, or the directories themselves
			}
		case w.kind == literal:
			for _, seg := range strings.Split(w.text, "/") {
				if strings.HasPrefix(seg, ".") && seg != "." && seg != ".." {
					return "", false
				}
			}
		case w.kind == pattern && w.glob != "":
			glob, globs = w.glob, globs+1
		default:
			return "", false
		}
	}
	if globs > 1 {
		return "", false
	}
	return glob, true
}

// findOutput is the word for what a find statement prints: its names
// (findFound), when it prints nothing else and is redirected nowhere.
func (a *analyzer) findOutput(src string, s *syntax.Stmt) (word, bool) {
	if len(s.Redirs) > 0 || s.Negated || s.Background {
		return word{}, false
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || len(call.Assigns) > 0 {
		return word{}, false
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = a.wordOf(src, w)
		if words[i].kind == opaque {
			return word{}, false
		}
	}
	if words[0].kind != literal || a.sc != nil && a.sc.names[words[0].text] {
		return word{}, false
	}
	switch prog := a.t.canonicalName(path.Base(words[0].text)); {
	case prog == "git" && len(words) >= 2 && words[1].text == "ls-files" || prog == "git" && len(words) >= 3 && words[1].text == "diff" && hasAnyLiteral(words[2:], "--name-only"):
		// tracked files: the index's names; only options known to print
		// them and nothing else
		for _, w := range words[2:] {
			switch {
			case w.kind != literal:
				return word{}, false
			case gitListsTracked[w.text]:
			case words[1].text == "diff" && !strings.HasPrefix(w.text, "-"):
				// revisions and paths of git diff
			default:
				return word{}, false
			}
		}
		return word{text: "<names git lists>", kind: pattern, pattern: "^.*$", found: []word{{text: ".", kind: literal}}, gitignore: true}, true
	case (prog == "grep" || prog == "egrep" || prog == "fgrep" || prog == "rg") && (hasShortLetter(words[1:], 'l') || hasAnyLiteral(words[1:], "--files-with-matches")):
		// grep -rl PATTERN DIR: names of files under DIR
		var roots []word
		wantPattern := true // the first operand is the pattern, unless -e or -f gives it
		for i, w := range words[1:] {
			if w.kind == opaque {
				return word{}, false
			}
			if w.kind == literal && strings.HasPrefix(w.text, "-") {
				if w.text == "-e" || w.text == "-f" || w.text == "--regexp" || w.text == "--file" {
					wantPattern = false
				}
				continue
			}
			if wantPattern {
				wantPattern = false
				continue
			}
			roots = append(roots, words[1+i])
		}
		if len(roots) == 0 {
			roots = []word{{text: ".", kind: literal}}
		}
		return word{text: "<names grep lists>", kind: pattern, pattern: "^.*$", found: roots}, true
	case prog != "find":
		return word{}, false
	}
	for _, w := range words[1:] {
		switch w.text {
		case "-printf", "-fprintf", "-ls", "-fls", "-exec", "-execdir", "-ok", "-okdir":
			return word{}, false // prints more than the names, or runs a command
		}
	}
	w := findFound(words[1:])
	w.text = "<names find prints>"
	return w, true
}
