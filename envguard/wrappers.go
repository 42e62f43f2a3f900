package envguard

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// wrapper is a program whose operands are another command to run, with its
// whole option grammar: an option it does not know makes what runs behind
// it uncertain.
type wrapper struct {
	opts optSpec
	// operands come before the command: timeout's DURATION, chroot's NEWROOT.
	operands int
	// assigns: NAME=VALUE words may precede the command (env, sudo).
	assigns bool
	// scripts are options whose value is a shell command (flock -c, su -c).
	scripts []string
	// none are options with which no command runs (command -v).
	none []string
	// shell: with no command, the wrapper starts a shell that reads stdin.
	shell bool
	// files: the operands are files, not a command (script's typescript).
	files bool
}

var wrappers = map[string]wrapper{
	"env": {opts: optSpec{flags: "i0v", values: "uCSP", long: merge(
		longs(longFlag, "ignore-environment", "null", "debug", "list-signal-handling", "help", "version"),
		longs(longValue, "unset", "chdir", "split-string"),
		longs(longOptional, "block-signal", "default-signal", "ignore-signal"))}, assigns: true},
	"timeout": {opts: optSpec{flags: "fpv", values: "sk", long: merge(
		longs(longFlag, "foreground", "preserve-status", "verbose", "help", "version"),
		longs(longValue, "signal", "kill-after"))}, operands: 1},
	"nice":   {opts: optSpec{values: "n", numeric: true, long: merge(longs(longValue, "adjustment"), longs(longFlag, "help", "version"))}},
	"nohup":  {opts: optSpec{long: longs(longFlag, "help", "version")}},
	"setsid": {opts: optSpec{flags: "cfw", long: longs(longFlag, "ctty", "fork", "wait", "help", "version")}},
	"stdbuf": {opts: optSpec{values: "ioe", long: merge(longs(longValue, "input", "output", "error"), longs(longFlag, "help", "version"))}},
	"time": {opts: optSpec{flags: "apqvV", values: "fo", long: merge(
		longs(longFlag, "append", "portability", "quiet", "verbose", "help", "version"),
		longs(longValue, "format", "output"))}},
	"ionice": {opts: optSpec{flags: "tPpu", values: "cn", long: merge(
		longs(longFlag, "ignore", "pid", "pgid", "uid", "help", "version"),
		longs(longValue, "class", "classdata"))}},
	"chrt": {opts: optSpec{flags: "abdefiorRmpv", values: "TPD", long: merge(
		longs(longFlag, "all-tasks", "batch", "deadline", "ext", "fifo", "idle", "other", "rr", "reset-on-fork", "max", "pid", "verbose", "help", "version"),
		longs(longValue, "sched-runtime", "sched-period", "sched-deadline"))}, operands: 1},
	"taskset": {opts: optSpec{flags: "acp", long: longs(longFlag, "all-tasks", "cpu-list", "pid", "help", "version")}, operands: 1},
	"flock": {opts: optSpec{flags: "sxeunoFv", values: "wEc", long: merge(
		longs(longFlag, "shared", "exclusive", "unlock", "nonblock", "nb", "close", "no-fork", "verbose", "help", "version"),
		longs(longValue, "timeout", "wait", "conflict-exit-code", "command"))}, operands: 1, scripts: []string{"-c", "--command"}},
	"script": {opts: optSpec{flags: "aefqkh", values: "cEBIOTmo", long: merge(
		longs(longFlag, "append", "return", "flush", "force", "quiet", "help", "version"),
		longs(longValue, "command", "echo", "log-io", "log-in", "log-out", "log-timing", "logging-format", "output-limit"),
		longs(longOptional, "timing"))}, scripts: []string{"-c", "--command"}, shell: true, files: true},
	"strace": {opts: optSpec{flags: "cCdDfFhiknqrtTvVwxyYzZ", values: "abeEIoOpPsSuUX", long: merge(
		longs(longFlag, "summary-only", "summary", "summary-wall-clock", "follow-forks", "output-separately", "daemonize", "quiet", "instruction-pointer",
			"stack-trace", "no-abbrev", "verbose", "raw", "successful-only", "failed-only", "seccomp-bpf", "help", "version", "relative-timestamps"),
		longs(longValue, "trace", "signal", "status", "trace-path", "output", "attach", "user", "env", "string-limit", "columns", "summary-sort",
			"const-print-style", "inject", "fault", "detach-on", "interruptible"),
		longs(longOptional, "absolute-timestamps", "timestamps", "syscall-times", "decode-fds", "decode-pids", "tips"))}},
	"ltrace": {opts: optSpec{flags: "bcCfhiLrStTV", values: "aAeDFlnopsuwx", long: merge(
		longs(longFlag, "demangle", "help", "version", "no-signals"),
		longs(longValue, "align", "library", "output", "indent", "config"))}},
	"xargs": {opts: optSpec{flags: "0oprtxeil", values: "adEILnPs", long: merge(
		longs(longFlag, "null", "open-tty", "interactive", "no-run-if-empty", "verbose", "exit", "show-limits", "help", "version"),
		longs(longValue, "arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"),
		longs(longOptional, "eof", "replace", "max-lines"))}},
	"sudo": {opts: optSpec{flags: "AbBEeHiKklnNPSsVv", values: "CDghpRrTtUu", long: merge(
		longs(longFlag, "askpass", "background", "bell", "edit", "set-home", "help", "login", "remove-timestamp", "reset-timestamp", "list",
			"non-interactive", "preserve-groups", "stdin", "shell", "version", "validate"),
		longs(longValue, "close-from", "chdir", "group", "host", "prompt", "chroot", "role", "type", "command-timeout", "other-user", "user"),
		longs(longOptional, "preserve-env"))}, assigns: true, none: []string{"-e", "--edit", "-l", "--list", "-V", "--version", "-v", "--validate", "-k", "-K"}, shell: true},
	"doas": {opts: optSpec{flags: "Lns", values: "auC"}, shell: true, none: []string{"-C", "-L"}},
	"setpriv": {opts: optSpec{flags: "dh", long: merge(
		longs(longFlag, "clear-groups", "keep-groups", "init-groups", "reset-env", "nnp", "no-new-privs", "dump", "help", "version"),
		longs(longValue, "reuid", "regid", "ruid", "rgid", "euid", "egid", "groups", "inh-caps", "ambient-caps", "bounding-set", "securebits",
			"pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule", "ptracer"))}},
	"chroot": {opts: optSpec{long: merge(longs(longValue, "userspec", "groups"), longs(longFlag, "skip-chdir", "help", "version"))}, operands: 1, shell: true},
	"unshare": {opts: optSpec{flags: "muinpUCTfrcl", values: "RwSG", long: merge(
		longs(longFlag, "fork", "map-root-user", "map-current-user", "map-auto", "keep-caps", "help", "version"),
		longs(longValue, "map-user", "map-group", "map-users", "map-groups", "propagation", "setgroups", "setuid", "setgid", "root", "wd",
			"monotonic", "boottime", "load-interp"),
		longs(longOptional, "mount", "uts", "ipc", "net", "pid", "user", "cgroup", "time", "kill-child", "mount-proc"))}, shell: true},
	"nsenter": {opts: optSpec{flags: "amuinpUCTFZeW", values: "tSGrw", long: merge(
		longs(longFlag, "all", "preserve-credentials", "no-fork", "follow-context", "env", "help", "version"),
		longs(longValue, "target", "setuid", "setgid", "wdns", "join-cgroup"),
		longs(longOptional, "mount", "uts", "ipc", "net", "pid", "user", "cgroup", "time", "root", "wd"))}, shell: true},
	"command":    {opts: optSpec{flags: "pvV"}, none: []string{"-v", "-V"}},
	"builtin":    {},
	"exec":       {opts: optSpec{flags: "cl", values: "a"}},
	"caffeinate": {opts: optSpec{flags: "dimsu", values: "tw"}},
}

// runners are programs known to run a command they are given — as words,
// as a shell string, or after a subcommand — whose options toolpdp does not
// model (wider is safe): every literal word that could start the command is
// taken as a command of its own, and every word holding a blank (or an
// option's value holding one) is parsed as a shell command.
var runners = map[string]bool{
	"valgrind": true, "proxychains": true, "proxychains4": true, "torsocks": true, "tsocks": true, "firejail": true, "faketime": true,
	"catchsegv": true, "unbuffer": true, "rlwrap": true, "xvfb-run": true, "dbus-run-session": true, "dbus-launch": true, "numactl": true,
	"cgexec": true, "runcon": true, "ssh-agent": true, "chpst": true, "setarch": true, "linux32": true, "linux64": true, "prlimit": true,
	"systemd-run": true, "systemd-inhibit": true, "sem": true, "fakeroot": true, "pkexec": true, "sg": true, "newgrp": true, "mpirun": true,
	"srun": true, "perf": true, "trickle": true, "nocache": true, "eatmydata": true, "daemonize": true, "start-stop-daemon": true,
	"with-contenv": true, "s6-setuidgid": true, "gosu": true, "su-exec": true, "tini": true, "dumb-init": true, "entr": true,
	"tmux": true, "screen": true, "byobu": true, "npx": true, "npm": true, "pnpm": true, "pnpx": true, "yarn": true, "bunx": true,
	"uv": true, "uvx": true, "poetry": true, "pipenv": true, "pdm": true, "hatch": true, "conda": true, "mamba": true, "micromamba": true,
	"pixi": true, "pyenv": true, "rbenv": true, "nodenv": true, "asdf": true, "mise": true, "rtx": true, "direnv": true, "nix-shell": true,
	"nix": true, "devbox": true, "bundle": true, "op": true, "doppler": true, "dotenv": true, "dotenvx": true, "cross-env": true,
	"concurrently": true, "nodemon": true, "watchexec": true, "hyperfine": true, "bwrap": true, "proot": true, "aws-vault": true,
	"chronic": true, "flatpak-spawn": true, "distrobox-host-exec": true, "toolbox": true,
	// setarch's names for itself: i386 curl x is setarch i386 curl x.
	"i386": true, "i486": true, "i586": true, "i686": true, "x86_64": true, "uname26": true, "aarch64": true, "arm": true,
	"armv7l": true, "armv8l": true, "ppc": true, "ppc32": true, "ppc64": true, "ppc64le": true, "s390": true, "s390x": true,
	"sparc": true, "sparc32": true, "sparc64": true, "mips": true, "mips64": true, "ia64": true, "parisc": true, "parisc64": true,
	"alpha": true, "riscv64": true, "loongarch64": true, "cpulimit": true, "torify": true, "schedtool": true,
}

// runner records the commands a runner may run.
func (a *analyzer) runner(ctx leafCtx, name string, args []word, depth int) error {
	const candidates = 6
	n := 0
	for i, w := range args {
		text := w.text
		if w.kind == literal && (strings.HasPrefix(text, "-") || strings.HasPrefix(text, "+")) {
			_, text, _ = strings.Cut(text, "=")
		} else if k, v, ok := strings.Cut(text, "="); w.kind == literal && ok && !strings.ContainsAny(k, " \t") {
			text = v // scripts.t='curl x' (npm pkg set), NAME=value
		} else if n < candidates {
			n++
			if err := a.leaf(ctx, Leaf{}, args[i:], depth); err != nil {
				return err
			}
		}
		if w.kind == literal && strings.ContainsAny(text, " \t\n;|&") {
			if err := a.script(text, depth+1, nil); err != nil {
				a.unseen(name+" with a command toolpdp cannot parse ("+clip(text)+")", ctx.src)
			}
		}
	}
	return nil
}

// gitGlobal is git's own options, before the subcommand.
var gitGlobal = optSpec{flags: "pPh", values: "Cc", long: merge(
	longs(longFlag, "no-pager", "paginate", "bare", "no-replace-objects", "literal-pathspecs", "glob-pathspecs", "noglob-pathspecs",
		"icase-pathspecs", "no-optional-locks", "no-advice", "version", "help", "html-path", "man-path", "info-path", "no-lazy-fetch"),
	longs(longValue, "git-dir", "work-tree", "namespace", "super-prefix", "config-env", "list-cmds", "attr-source"),
	longs(longOptional, "exec-path"))}

// git follows the git subcommands that run commands: bisect run,
// submodule foreach, and config of a key that runs one (an alias, a pager,
// an editor, a hook path …, the keys of exec_options' git -c); and the
// ext:: transport, whose URL is a command.
func (a *analyzer) git(ctx leafCtx, args []word, depth int) error {
	_, rest, _ := gitGlobal.scan(args)
	for _, w := range args {
		if w.kind == literal && strings.HasPrefix(strings.ToLower(w.text), "ext::") {
			a.unseen("git's ext:: transport (its URL is a command)", ctx.src)
		}
	}
	if rest >= len(args) {
		return nil
	}
	sub, tail := args[rest], args[rest+1:]
	if sub.kind != literal {
		a.unseen("a git subcommand computed at run time ("+clip(sub.text)+"), which may be an alias", ctx.src)
		return nil
	}
	switch sub.text {
	case "config":
		var keys []string
		for _, o := range a.t.ExecOptions["git"] {
			if o.Option == "-c" {
				keys = o.Values
			}
		}
		for _, w := range tail {
			if w.kind != literal || (!strings.HasPrefix(w.text, "-") && valueMatches(w.text, keys)) {
				a.unseen("git config of "+clip(w.text)+", a key that runs commands", ctx.src)
				break
			}
		}
	case "bisect":
		if len(tail) > 0 && tail[0].text == "run" {
			return a.leaf(ctx, Leaf{}, tail[1:], depth)
		}
	case "submodule":
		for i, w := range tail {
			if w.text == "foreach" {
				var cmd []string
				for _, c := range tail[i+1:] {
					if c.kind != literal {
						a.unseen("git submodule foreach with a command computed at run time", ctx.src)
						return nil
					}
					if !strings.HasPrefix(c.text, "-") || len(cmd) > 0 {
						cmd = append(cmd, c.text)
					}
				}
				return a.scriptWord(ctx, "git submodule foreach", word{text: strings.Join(cmd, " "), kind: literal}, nil, depth)
			}
		}
	case "clone":
		for _, w := range tail {
			if w.kind == literal && (w.text == "-u" || strings.HasPrefix(w.text, "-u")) {
				a.unseen("git clone -u (an upload-pack command)", ctx.src)
			}
		}
	}
	return nil
}

// runs follows what a literal program runs: a wrapper's command, a shell's
// script, an interpreter's inline code.
func (a *analyzer) runs(ctx leafCtx, name string, words []word, depth int) error {
	args := words[1:]
	a.checkProgram(ctx, name, args)
	if isShell(name) {
		return a.shell(ctx, name, args, depth)
	}
	switch name {
	case "find":
		return a.findExec(ctx, args, depth)
	case "busybox", "toybox":
		if len(args) > 0 && args[0].kind == literal && !strings.HasPrefix(args[0].text, "-") {
			return a.leaf(ctx, Leaf{}, args, depth)
		}
		return nil
	case "watch":
		return a.watch(ctx, args, depth)
	case "su", "runuser":
		return a.su(ctx, name, args, depth)
	case "parallel":
		return a.parallel(ctx, args, depth)
	case "git":
		return a.git(ctx, args, depth)
	}
	if runners[name] {
		return a.runner(ctx, name, args, depth)
	}
	if name == "--" {
		// `time -- cmd`: the keyword's end of options, which the parser
		// leaves as the first word.
		return a.leaf(ctx, Leaf{}, args, depth)
	}
	w, ok := wrappers[name]
	if !ok {
		return nil
	}
	opts, rest, unknown := w.opts.scan(args)
	if unknown != "" {
		a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	for _, o := range opts {
		for _, s := range w.scripts {
			if o.name == s {
				if err := a.scriptWord(ctx, name+" "+s, o.value, nil, depth); err != nil {
					return err
				}
			}
		}
	}
	if name == "env" {
		if split := values(opts, "-S", "--split-string"); len(split) > 0 {
			// The split string's words are env's own arguments again —
			// options included (env -S '-i curl x') — before its operands.
			words := []word{{text: "env", kind: literal}}
			for _, s := range split {
				w, ok := envSplit(s)
				if !ok {
					a.unseen("env -S with a string it cannot split ("+clip(s.text)+")", ctx.src)
				}
				words = append(words, w...)
			}
			if depth >= MaxShellDepth {
				return fmt.Errorf("%w: env -S strings nested deeper than %d", ErrUncheckable, MaxShellDepth)
			}
			return a.runs(ctx, "env", append(words, args[rest:]...), depth+1)
		}
		if has(opts, "-P") {
			a.unseen("env -P (a search path for the program)", ctx.src)
		}
		if rest < len(args) && args[rest].text == "-" && args[rest].kind == literal {
			rest++
		}
	}
	if name == "strace" {
		for _, e := range values(opts, "-E", "--env") {
			a.envAssign(ctx, e)
		}
	}
	if has(opts, w.none...) {
		return nil
	}
	rest += w.operands
	if name == "flock" && rest+1 < len(args) && args[rest].kind == literal && (args[rest].text == "-c" || args[rest].text == "--command") {
		// flock FILE -c COMMAND: the string goes to a shell.
		return a.scriptWord(ctx, "flock -c", args[rest+1], nil, depth)
	}
	if w.assigns {
		for rest < len(args) && isAssignWord(args[rest]) {
			a.envAssign(ctx, args[rest])
			rest++
		}
	}
	if name == "xargs" && rest >= len(args) {
		return a.leaf(ctx, Leaf{}, xargsCommand(opts, []word{{text: "echo", kind: literal}}), depth)
	}
	if rest >= len(args) || w.files {
		if w.shell && len(values(opts, w.scripts...)) == 0 {
			a.stdinScript(ctx, name+" starting a shell")
		}
		return nil
	}
	inner := args[rest:]
	if name == "xargs" {
		inner = xargsCommand(opts, inner)
	}
	return a.leaf(ctx, Leaf{}, inner, depth)
}

// isAssignWord reports a NAME=VALUE word, as env and sudo take them.
func isAssignWord(w word) bool {
	if w.kind != literal && w.kind != opaque {
		return false
	}
	name, _, ok := strings.Cut(w.text, "=")
	return ok && syntax.ValidName(name)
}

// envAssign checks a NAME=VALUE a wrapper passes to the command it runs.
func (a *analyzer) envAssign(ctx leafCtx, w word) {
	name, value, _ := strings.Cut(w.text, "=")
	if a.t.unsafeName(name) {
		a.unseen("setting "+name+", which changes what a program runs", ctx.src)
	}
	if w.kind == literal && smuggles(value) {
		a.unseen("a value holding code for a later expansion ("+clip(w.text)+")", ctx.src)
	}
}

// xargsCommand is the command xargs runs: its words, with what it reads
// from stdin appended (or put in place of -I's replacement string), and
// echo when none is named.
func xargsCommand(opts []opt, inner []word) []word {
	stdin := word{text: "<xargs input>", kind: opaque}
	repl := ""
	for _, o := range opts {
		switch o.name {
		case "-I", "--replace":
			repl = o.value.text
			if !o.set {
				repl = "{}"
			}
		case "-i":
			repl = "{}"
			if o.set {
				repl = o.value.text
			}
		}
	}
	if repl == "" {
		out := append(append([]word(nil), inner...), stdin)
		return out
	}
	out := make([]word, len(inner))
	for i, w := range inner {
		out[i] = w
		if strings.Contains(w.text, repl) {
			out[i] = word{text: w.text, kind: opaque}
		}
	}
	return out
}

// scriptWord analyses a shell command given as one word (sh -c, flock -c,
// env -S); extra words are appended to it as arguments.
func (a *analyzer) scriptWord(ctx leafCtx, what string, w word, extra []word, depth int) error {
	if w.kind != literal {
		a.unseen(what+" with a script computed at run time ("+clip(w.text)+")", ctx.src)
		return nil
	}
	script := w.text
	for _, e := range extra {
		if e.kind == literal {
			script += " " + shellQuote(e.text)
		} else {
			script += ` "$TOOLPDP_RUNTIME_WORD"`
		}
	}
	return a.script(script, depth+1, nil)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// findExec records the commands of find's -exec, -execdir, -ok and -okdir,
// each ended by ";" or "+"; {} is a file name found at run time.
func (a *analyzer) findExec(ctx leafCtx, args []word, depth int) error {
	for i := 0; i < len(args); i++ {
		switch args[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
			end := i + 1
			for end < len(args) && args[end].text != ";" && args[end].text != "+" {
				end++
			}
			cmd := make([]word, 0, end-i-1)
			for _, w := range args[i+1 : end] {
				if w.text == "{}" {
					// A path found: it starts with its starting point, which
					// find never takes from a word starting with "-".
					w = word{text: w.text, kind: pattern, pattern: "^[^-].*$"}
				} else if strings.Contains(w.text, "{}") {
					w = word{text: w.text, kind: opaque}
				}
				cmd = append(cmd, w)
			}
			if err := a.leaf(ctx, Leaf{}, cmd, depth); err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// watch runs its operands joined by spaces through sh -c, or (with -x) as
// a command.
func (a *analyzer) watch(ctx leafCtx, args []word, depth int) error {
	spec := optSpec{flags: "bcCdeEgtxprwh", values: "nqs", long: merge(
		longs(longFlag, "beep", "color", "no-color", "errexit", "chgexit", "exec", "precise", "no-rerun", "no-title", "no-wrap", "help", "version"),
		longs(longValue, "interval", "equexit", "shotsdir"),
		longs(longOptional, "differences"))}
	opts, rest, unknown := spec.scan(args)
	if unknown != "" {
		a.unseen("watch given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	if rest >= len(args) {
		return nil
	}
	if has(opts, "-x", "--exec") {
		return a.leaf(ctx, Leaf{}, args[rest:], depth)
	}
	return a.scriptWord(ctx, "watch", args[rest], args[rest+1:], depth)
}

// su and runuser run a shell: -c's string is its script, -s names another
// shell, words after the user are the shell's own arguments; runuser -u
// runs its operands as a command.
func (a *analyzer) su(ctx leafCtx, name string, args []word, depth int) error {
	spec := optSpec{flags: "flmpPhV", values: "cgGswu", long: merge(
		longs(longFlag, "fast", "login", "preserve-environment", "pty", "help", "version"),
		longs(longValue, "command", "session-command", "group", "supp-group", "shell", "whitelist-environment", "user"))}
	// su permutes its options: read them anywhere before "--".
	var opts []opt
	var operands []word
	rest := args
	for len(rest) > 0 {
		o, n, unknown := spec.scan(rest)
		if unknown != "" {
			a.unseen(name+" given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
		}
		opts = append(opts, o...)
		if n > 0 && rest[n-1].text == "--" && rest[n-1].kind == literal {
			operands = append(operands, rest[n:]...)
			break
		}
		if n >= len(rest) {
			break
		}
		operands = append(operands, rest[n])
		rest = rest[n+1:]
	}
	for _, s := range values(opts, "-s", "--shell") {
		if s.kind != literal || !isShell(baseName(s.text)) {
			a.unseen(name+" -s with a program that is not a known shell ("+clip(s.text)+")", ctx.src)
		}
	}
	if name == "runuser" && has(opts, "-u", "--user") {
		return a.leaf(ctx, Leaf{}, operands, depth)
	}
	scripts := values(opts, "-c", "--command", "--session-command")
	for _, s := range scripts {
		if err := a.scriptWord(ctx, name+" -c", s, nil, depth); err != nil {
			return err
		}
	}
	if len(operands) > 0 && operands[0].kind == literal && operands[0].text == "-" {
		operands = operands[1:]
	}
	if len(operands) > 1 {
		// Words after the user are the shell's arguments: sh -c 'curl x'.
		return a.shell(ctx, "sh", operands[1:], depth)
	}
	if len(scripts) == 0 {
		a.stdinScript(ctx, name+" starting a shell")
	}
	return nil
}

// parallel (GNU) joins its command words into a shell command, with the
// arguments after ::: or from stdin put in place of {} or appended.
func (a *analyzer) parallel(ctx leafCtx, args []word, depth int) error {
	spec := optSpec{flags: "kvqXm0u", values: "jNnLIdaSC", long: merge(
		longs(longFlag, "keep-order", "tag", "line-buffer", "null", "will-cite", "bar", "progress", "eta", "dry-run", "quote", "group",
			"ungroup", "verbose", "halt-on-error", "no-notice", "citation", "pipe", "xargs", "shuf", "lb"),
		longs(longValue, "jobs", "max-args", "max-lines", "halt", "arg-file", "colsep", "delimiter", "timeout", "retries", "joblog",
			"results", "sshlogin", "workdir", "tmpdir", "block", "replace", "max-replace-args", "load", "memfree", "delay"))}
	opts, rest, unknown := spec.scan(args)
	if unknown != "" {
		a.unseen("parallel given an option toolpdp does not know ("+clip(unknown)+"): what it runs is uncertain", ctx.src)
	}
	if has(opts, "-S", "--sshlogin") {
		a.unseen("parallel running commands on other hosts (--sshlogin)", ctx.src)
	}
	var cmd []string
	placeholder := false
	for _, w := range args[rest:] {
		if w.kind == literal && strings.HasPrefix(w.text, ":::") || w.kind == literal && w.text == "::::" {
			break
		}
		t := w.text
		if w.kind != literal {
			t = `"$TOOLPDP_RUNTIME_WORD"`
		}
		if strings.Contains(t, "{") && strings.Contains(t, "}") {
			placeholder = true
			t = parallelPlaceholder(t)
		}
		cmd = append(cmd, t)
	}
	if len(cmd) == 0 {
		a.unseen("parallel running its input lines as commands", ctx.src)
		return nil
	}
	script := strings.Join(cmd, " ")
	if !placeholder {
		script += ` $TOOLPDP_RUNTIME_WORDS`
	}
	return a.script(script, depth+1, nil)
}

// parallelPlaceholder turns GNU parallel's replacement strings ({}, {.},
// {1}, {/} …) into a parameter expansion: text known only at run time.
func parallelPlaceholder(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString("$TOOLPDP_RUNTIME_WORD")
		s = s[i+j+1:]
	}
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// envSplit splits env -S's string as env does (not as a shell would): at
// blanks, with single and double quotes, backslash escapes (\_ is a blank,
// \c ends the string), a # starting a word ends it, and ${NAME} — the only
// expansion — is a word known at run time.
func envSplit(w word) ([]word, bool) {
	if w.kind != literal {
		return []word{{text: w.text, kind: opaque}}, true
	}
	s := w.text
	var out []word
	var cur strings.Builder
	inWord, dynamic := false, false
	flush := func() {
		if inWord {
			k := literal
			if dynamic {
				k = opaque
			}
			out = append(out, word{text: cur.String(), kind: k})
		}
		cur.Reset()
		inWord, dynamic = false, false
	}
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else if c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'') {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\\':
			if i+1 >= len(s) {
				return out, false
			}
			i++
			if s[i] == 'c' {
				flush()
				return out, quote == 0
			}
			if s[i] == '_' && quote == 0 {
				flush() // outside quotes \_ separates words
				continue
			}
			inWord = true
			switch s[i] {
			case '_':
				cur.WriteByte(' ')
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			case 'r':
				cur.WriteByte('\r')
			case 'f':
				cur.WriteByte('\f')
			case 'v':
				cur.WriteByte('\v')
			case '\\', '"', '\'', '$', '#', ' ':
				cur.WriteByte(s[i])
			default:
				return out, false // env refuses other escapes
			}
		case c == '$':
			inWord, dynamic = true, true
			if end := strings.IndexByte(s[i:], '}'); i+1 < len(s) && s[i+1] == '{' && end > 0 {
				i += end
			}
			cur.WriteString("${}")
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			flush()
		case c == '#' && !inWord:
			flush()
			return out, true
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	flush()
	return out, quote == 0
}
