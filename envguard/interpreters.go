package envguard

import (
	"regexp"
	"strings"
)

// interpreter records inline code (python -c), a program read from stdin,
// and options computed at run time before the script.
func (a *analyzer) interpreter(ctx leafCtx, name string, inline []string, args []word) {
	for _, w := range args {
		if w.kind == opaque {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		if w.kind != literal {
			if why, ok := scriptPathUnseen(w); ok {
				a.unseen(name+" reading its program from "+why, ctx.src)
			}
			return // the script operand
		}
		t := w.text
		for _, o := range inline {
			if inlineOption(t, o) {
				a.unseen(name+" "+o+" (inline code)", ctx.src)
				return
			}
		}
		switch {
		case t == "--":
			continue
		case t == "-":
			a.unseen(name+" reading its program from stdin", ctx.src)
			return
		case t == "--version" || t == "-V" || t == "--help" || t == "-h" || (t == "-v" && (strings.HasPrefix(name, "perl") || strings.HasPrefix(name, "ruby"))):
			return
		case strings.Contains(t, "data:"):
			a.unseen(name+" loading code from a data: URL", ctx.src)
			return
		case strings.HasPrefix(t, "-"):
			continue
		}
		if stdinAlias(t) {
			a.unseen(name+" reading its program from "+clip(t), ctx.src)
		}
		return // the script operand: a program that runs a file it is given
	}
	a.stdinScript(ctx, name+" reading its program from stdin")
}

// commandReader records a program that reads a command language able to
// run shell commands (ed's !, gdb's shell, sqlite3's .shell, psql's \!):
// by its options, by its operands (sqlite3's SQL), or from stdin.
func (a *analyzer) commandReader(ctx leafCtx, name string, inline []string, args []word) {
	switch name {
	case "at", "batch", "crontab":
		if name != "crontab" || !hasAnyLiteral(args, "-l", "-r") {
			a.unseen(name+" (commands scheduled to run later)", ctx.src)
		}
		return
	}
	for _, w := range args {
		if w.kind == opaque {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		if w.kind != literal {
			continue
		}
		for _, o := range inline {
			if inlineOption(w.text, o) || name == "gdb" && gdbOption(w.text, o) {
				a.unseen(name+" "+o+" (commands in its own language)", ctx.src)
				return
			}
		}
		if name == "sqlite3" && sqliteRuns(w.text) {
			a.unseen("sqlite3 running a shell command or loading code ("+clip(w.text)+")", ctx.src)
			return
		}
	}
	operands := 0
	for _, w := range args {
		if w.kind == literal && (w.text == "-f" || strings.HasPrefix(w.text, "--file") || name == "gdb" && (w.text == "-batch" || w.text == "--batch")) {
			return // commands from a named file, or none: a documented limit
		}
		if !strings.HasPrefix(w.text, "-") {
			operands++
		}
	}
	if name == "sqlite3" && operands >= 2 {
		return // the SQL is the second operand: stdin is not read
	}
	// From a pipe, a redirect from a file or a terminal alike: the commands
	// are not in the command line.
	a.unseen(name+" reading its commands from stdin", ctx.src)
}

func hasAnyLiteral(args []word, texts ...string) bool {
	for _, w := range args {
		for _, t := range texts {
			if w.kind == literal && w.text == t {
				return true
			}
		}
	}
	return false
}

// gdbOption reports gdb's long options as getopt_long_only reads them: one
// dash or two, a value attached with =, and any unambiguous prefix of a
// long name (-eval for -eval-command).
func gdbOption(arg, o string) bool {
	if !strings.HasPrefix(arg, "-") || !strings.HasPrefix(o, "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	full := strings.TrimLeft(o, "-")
	return name == full || len(name) >= 2 && len(full) > 3 && strings.HasPrefix(full, name)
}

// sqliteDanger are sqlite3's dot-commands that run a program, read or write
// through a pipe, or load code; sqlite3 takes any prefix of a dot-command.
var sqliteDanger = []string{"shell", "system", "once", "output", "import", "read", "load", "excel", "www", "log", "trace",
	"open", "save", "backup", "clone", "restore", "archive", "ar"}

var (
	sqliteDot  = regexp.MustCompile(`(?m)(?:^|;)[ \t]*\.[ \t]*["']?([A-Za-z_]+)`) // ". shell", ."shell": sqlite3 takes both
	sqliteEdit = regexp.MustCompile(`(?i)\b(edit|load_extension|fts3_tokenizer|writefile|readfile|fsdir|sqlar_\w+|zipfile|attach|vacuum\s+into)\b`)
)

// sqliteRuns reports SQL or dot-commands that can run a shell command or
// load code: a dangerous dot-command by any prefix, a pipe, edit() however
// spelt (its second argument is an editor), load_extension().
func sqliteRuns(text string) bool {
	if sqliteEdit.MatchString(text) {
		return true
	}
	for _, m := range sqliteDot.FindAllStringSubmatch(text, -1) {
		cmd := strings.ToLower(m[1])
		for _, d := range sqliteDanger {
			if strings.HasPrefix(d, cmd) {
				return true
			}
		}
	}
	return strings.HasPrefix(strings.TrimSpace(text), ".") && strings.Contains(text, "|")
}

// vim judges vim by what it reads: in Ex mode (-e, -E, -es, ex) it reads
// Ex commands from stdin; -s, -S and -u name scripts it runs.
func (a *analyzer) vim(ctx leafCtx, name string, args []word) {
	exMode := name == "ex" || name == "exim"
	for _, w := range args {
		if w.kind == opaque {
			a.unseen(name+" given arguments computed at run time ("+clip(w.text)+")", ctx.src)
			return
		}
		if w.kind != literal || !strings.HasPrefix(w.text, "-") || strings.HasPrefix(w.text, "--") {
			continue
		}
		if strings.ContainsAny(w.text[1:], "eE") {
			exMode = true
		}
	}
	for i, w := range args {
		if w.kind == literal && (w.text == "-s" || w.text == "-u" || w.text == "-S") && i+1 < len(args) && stdinAlias(args[i+1].text) {
			a.unseen(name+" "+w.text+" reading a script from "+clip(args[i+1].text), ctx.src)
			return
		}
	}
	if exMode {
		a.unseen(name+" in Ex mode reading its commands from stdin", ctx.src)
	}
}

// inlineOption reports whether arg gives the inline-code option o: exactly,
// with its value attached (-cCODE, --eval=CODE), or among grouped letters
// of any length (python -Sc, perl -ne, perl -wwwwwwe).
func inlineOption(arg, o string) bool {
	if arg == o {
		return true
	}
	if strings.HasPrefix(o, "--") {
		return strings.HasPrefix(arg, o+"=")
	}
	if !strings.HasPrefix(o, "-") {
		return false // a subcommand (deno eval): only as itself
	}
	if len(o) != 2 {
		return strings.HasPrefix(arg, o+"=")
	}
	if !strings.HasPrefix(arg, "-") || strings.HasPrefix(arg, "--") {
		return false
	}
	if strings.HasPrefix(arg, o) {
		return true
	}
	group := arg[1:]
	for i := 0; i < len(group); i++ {
		c := group[i]
		if c == o[1] {
			return true
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false // the rest is a value (-I/usr/lib, -i.bak)
		}
	}
	return false
}

var awkSpec = optSpec{flags: "bcCDghLMnNOPrsStVyZ", values: "fvFeEilW", long: merge(
	longs(longFlag, "characters-as-bytes", "traditional", "copyright", "gen-pot", "help", "lint", "bignum", "use-lc-numeric",
		"non-decimal-data", "optimize", "posix", "re-interval", "no-optimize", "sandbox", "lint-old", "version", "csv"),
	longs(longValue, "file", "assign", "field-separator", "source", "exec", "include", "load"),
	longs(longOptional, "dump-variables", "debug", "pretty-print", "profile"))}

// awkCommand finds the awk features that run commands: system (as a word:
// awk continues a line after a backslash-newline, so `system\` then `(` on
// the next line is a call), a pipe to or from a command (print | "cmd",
// "cmd" | getline), coprocesses and extensions.
var awkCommand = regexp.MustCompile(`\bsystem\b|(^|[^|])\|($|[^|])|\|&|@load|@include`)

func (a *analyzer) awk(ctx leafCtx, args []word) {
	// mawk's -W exec FILE (-Wexec, -W e, -We): the program is FILE
	for i, w := range args {
		if w.kind != literal || !strings.HasPrefix(w.text, "-W") {
			continue
		}
		v := strings.TrimPrefix(w.text, "-W")
		if v == "" && i+1 < len(args) {
			v = args[i+1].text
		}
		if strings.HasPrefix(v, "e") && !strings.HasPrefix(v, "v") {
			a.unseen("awk -W exec (a program read from a file)", ctx.src)
			break
		}
	}
	opts := a.textProgram(ctx, "awk", args, textLanguage{spec: &awkSpec, text: []string{"-e", "--source"},
		files: []string{"-f", "--file", "-E", "--exec", "-i", "--include"}, runs: awkCommand.MatchString,
		what: "an awk program that runs commands (system, a pipe or getline from a command)", opens: awkFiles})
	if has(opts, "-l", "--load") {
		a.unseen("awk loading an extension", ctx.src)
	}
}

var sedSpec = optSpec{flags: "nErsuzi", values: "efl", long: merge(
	longs(longFlag, "quiet", "silent", "debug", "posix", "regexp-extended", "separate", "sandbox", "unbuffered", "null-data",
		"zero-terminated", "follow-symlinks", "help", "version", "binary"),
	longs(longValue, "expression", "file", "line-length"),
	longs(longOptional, "in-place"))}

func (a *analyzer) sed(ctx leafCtx, args []word) {
	// -i[SUFFIX]: the option's value is the rest of its cluster (-i.bak)
	norm := make([]word, len(args))
	for i, w := range args {
		norm[i] = w
		if w.kind == literal && strings.HasPrefix(w.text, "-") && !strings.HasPrefix(w.text, "--") {
			if j := strings.IndexByte(w.text, 'i'); j > 0 {
				norm[i].text = w.text[:j+1]
			}
		}
	}
	args = norm
	a.textProgram(ctx, "sed", args, textLanguage{spec: &sedSpec, text: []string{"-e", "--expression"},
		files: []string{"-f", "--file"}, runs: sedRunsCommand, what: "a sed script with the e command or flag",
		opens: func(s string) []langFile { _, f := sedScript(s); return f }})
}

// textLanguage is a program whose own language arrives as text (awk, sed):
// by option or else as the first operand; a program file is a documented
// limit unless it is stdin or named at run time.
type textLanguage struct {
	spec        *optSpec
	text, files []string
	runs        func(string) bool
	what        string
	// opens are the files the program text names in its own language.
	opens func(string) []langFile
}

func (a *analyzer) textProgram(ctx leafCtx, name string, args []word, l textLanguage) []opt {
	opts, rest, unknown := l.spec.scan(args)
	if unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+")", ctx.src)
	}
	files := values(opts, l.files...)
	for _, f := range files {
		if f.kind != literal || stdinAlias(f.text) {
			a.unseen(name+" reading its program from "+clip(f.text), ctx.src)
		}
	}
	progs := values(opts, l.text...)
	if len(progs) == 0 && len(files) == 0 && rest < len(args) {
		progs = append(progs, args[rest])
	}
	for _, p := range progs {
		if p.kind != literal {
			a.unseen(name+"'s program computed at run time ("+clip(p.text)+")", ctx.src)
		} else if l.runs(p.text) {
			a.unseen(l.what, ctx.src)
		} else if l.opens != nil {
			for _, f := range l.opens(p.text) {
				w := word{text: f.name, kind: literal}
				if f.name == "" {
					w = word{text: "<a file named at run time>", kind: opaque}
				}
				verb := " reading"
				if f.write {
					verb = " writing"
				}
				a.pathUse(ctx, name+"'s program"+verb, w, f.write)
				if f.write && w.kind == literal {
					a.execConfig(ctx, name+" writing", w.text)
				}
			}
		}
	}
	return opts
}
