package envguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/envguard/protectednames"
)

// The differential test runs commands under the real bash and checks the
// analysis against what bash actually started. Programs the rules are about
// are stubs that append their argv to a log; wrappers, shells and the
// interpreters that can start programs (perl, awk, sed) are the real
// binaries. Everything runs in fresh mount and network namespaces with the
// stub directory mounted over /usr/bin and /usr/sbin, so even a command that
// resets PATH (env -i, command -p) or names /bin/curl starts a stub, and
// nothing can reach a network.
//
// The oracle, for each command: if the analysis would let it through for an
// agent with the rules below (no rule matches, nothing unseen, it parses),
// then no program bash started may match a rule, and every stub program bash
// started must be a leaf the analysis reported, with the same argv where
// the leaf's words are all literal.

var diffRules = struct{ deny, ask []string }{
	deny: []string{"curl", "wget", "rm -rf", "python", "nc"},
	ask:  []string{"git push"},
}

// stubs are the programs recorded; real are copied in and run for real.
var (
	stubs = []string{"curl", "wget", "rm", "python", "python3", "python3.12", "python2.7", "git", "id", "ls", "cat", "echo",
		"true", "false", "tee", "head", "nc", "sleep", "touch", "grep", "go", "pytest", "make", "npm", "node"}
	real = []string{"bash", "dash", "sh", "env", "timeout", "nice", "nohup", "stdbuf", "setsid", "xargs", "find", "flock", "sed",
		"awk", "perl", "tr", "taskset", "ionice", "mount", "gdb", "sqlite3", "vim.basic", "logsave", "capsh", "gcc", "split", "sort",
		"diff", "diff3", "sdiff"}
)

type sandbox struct {
	dir, bin, work, log string
	mu                  sync.Mutex
}

var (
	sandboxOnce sync.Once
	theSandbox  *sandbox
	sandboxErr  error
)

// getSandbox builds the stub directory once per test process.
func getSandbox(t testing.TB) *sandbox {
	t.Helper()
	sandboxOnce.Do(func() { theSandbox, sandboxErr = newSandbox() })
	if sandboxErr != nil {
		t.Fatalf("differential sandbox: %v (needs bash, unshare and mount namespaces: run as root or with unprivileged user namespaces)", sandboxErr)
	}
	return theSandbox
}

func newSandbox() (*sandbox, error) {
	dir, err := os.MkdirTemp("", "toolpdp-diff-")
	if err != nil {
		return nil, err
	}
	s := &sandbox{dir: dir, bin: filepath.Join(dir, "bin"), work: filepath.Join(dir, "work"), log: filepath.Join(dir, "exec.log")}
	for _, d := range []string{s.bin, s.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range real {
		src, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if src, err = filepath.EvalSymlinks(src); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(s.bin, name), data, 0o755); err != nil {
			return nil, err
		}
	}
	// A stub writes its name and arguments NUL-separated, then an end mark,
	// to the log in one printf (one write, so programs of a pipeline do not
	// interleave); /usr/bin/dash is the copy above once mounted.
	stub := fmt.Sprintf("#!/usr/bin/dash\nprintf '%%s\\0' \"${0##*/}\" \"$@\" '\x1e' >> %s\n", s.log)
	for _, name := range stubs {
		if err := os.WriteFile(filepath.Join(s.bin, name), []byte(stub), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"x", "y", "d/z", "script.sh", ".venv/bin/activate", "go.mod"} {
		p := filepath.Join(s.work, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte("true\n"), 0o644); err != nil {
			return nil, err
		}
	}
	if records, out, err := s.run("id probe"); err != nil || fmt.Sprint(records) != "[[id probe]]" {
		return nil, fmt.Errorf("a probe recorded %q (%v): %s", records, err, out)
	}
	return s, nil
}

// run executes cmd under bash in the sandbox and returns the argv of every
// stub it started.
func (s *sandbox) run(cmd string) ([][]string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.WriteFile(s.log, nil, 0o666); err != nil {
		return nil, "", err
	}
	out, err := s.exec(cmd)
	if err != nil {
		return nil, out, err
	}
	data, err := os.ReadFile(s.log)
	if err != nil {
		return nil, out, err
	}
	var records [][]string
	for _, rec := range bytes.Split(data, []byte("\x1e\x00")) {
		if len(rec) == 0 {
			continue
		}
		fields := strings.Split(strings.TrimSuffix(string(rec), "\x00"), "\x00")
		records = append(records, fields)
	}
	return records, out, nil
}

func (s *sandbox) exec(cmd string) (string, error) {
	// Login and interactive shells read the system's startup files: masked,
	// so that what runs is only what the command says.
	setup := `for f in /etc/profile /etc/bash.bashrc; do [ -e $f ] && mount --bind /dev/null $f; done; ` +
		`mount --bind "$1" /usr/bin && mount --bind "$1" /usr/sbin && cd "$2" && exec /usr/bin/timeout -s KILL 3 /usr/bin/bash -c "$3"`
	// A PID namespace too: when its first process ends, the kernel ends
	// every process the command left behind (a flock waiting on itself).
	c := exec.Command("unshare", "--mount", "--net", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c", setup, "sh", s.bin, s.work, cmd)
	c.WaitDelay = 5 * time.Second
	if os.Geteuid() != 0 {
		c.Args = append([]string{"unshare", "--map-root-user"}, c.Args[1:]...)
	}
	c.Env = []string{"PATH=/usr/bin", "HOME=" + s.work, "LANG=C"}
	c.Stdin = nil
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if _, exit := err.(*exec.ExitError); exit {
		err = nil // the command's own failure is data, not a harness error
	}
	return out.String(), err
}

// diffTables are the library's tables, read from the bundle's data file.
func diffTables(t testing.TB) *Tables { return readTables(t, nil) }

// readTables reads the library's tables, edited by edit when it is not
// nil, and compiles them.
func readTables(t testing.TB, edit func(map[string]any)) *Tables {
	t.Helper()
	data, err := os.ReadFile("../rego/library/toolpdp/tables/data.json")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		edit(raw)
		if data, err = json.Marshal(raw); err != nil {
			t.Fatal(err)
		}
	}
	var tables Tables
	if err := json.Unmarshal(data, &tables); err != nil {
		t.Fatal(err)
	}
	if err := tables.Validate(); err != nil {
		t.Fatal(err)
	}
	return &tables
}

// diffRulesFor are the differential test's rules, with the library's
// protected names for writes and .env for reads.
func diffRulesFor(t testing.TB, tables *Tables) *Rules {
	t.Helper()
	rules, err := tables.CompileRules(diffRules.deny, diffRules.ask)
	if err != nil {
		t.Fatal(err)
	}
	return rules.Protect(protectednames.New(append([]string{".env"}, libraryProtectedNames(t)...)), protectednames.New([]string{".env"}))
}

// libraryProtectedNames are the library's protected_names, a table the
// policy library reads (the analysis is given them as a set).
func libraryProtectedNames(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("../rego/library/toolpdp/tables/data.json")
	if err != nil {
		t.Fatal(err)
	}
	var tables struct {
		ProtectedNames []string `json:"protected_names"`
	}
	if err := json.Unmarshal(data, &tables); err != nil {
		t.Fatal(err)
	}
	return tables.ProtectedNames
}

// checkDifferential runs one command and reports a disagreement; it
// reports whether the command was allowed (and so run).
func checkDifferential(t testing.TB, s *sandbox, tables *Tables, rules *Rules, cmd string) bool {
	t.Helper()
	a, err := tables.Analyze(context.Background(), cmd)
	if err != nil {
		return false // asked: the command cannot be checked
	}
	if len(a.Unseen) > 0 || len(rules.Match(tables, a)) > 0 || len(rules.Protected(NewResolver(context.Background()), a, s.work)) > 0 {
		return false // asked or denied
	}
	records, out, err := s.run(cmd)
	if err != nil {
		t.Fatalf("running %q: %v\n%s", cmd, err, out)
	}
	for _, r := range records {
		ran := &Analysis{Leaves: []Leaf{literalLeaf(r)}}
		if m := rules.Match(tables, ran); len(m) > 0 {
			t.Errorf("BYPASS: %q was allowed, but bash ran %q (rule %q)\nleaves: %v", cmd, r, m[0].Rule, leafArgvs(a))
			continue
		}
		if !reported(a, r) {
			t.Errorf("UNSEEN: %q ran %q, which no leaf reports\nleaves: %v", cmd, r, leafArgvs(a))
		}
	}
	return true
}

func literalLeaf(argv []string) Leaf {
	words := make([]word, len(argv))
	for i, s := range argv {
		words[i] = word{text: s, kind: literal}
	}
	return Leaf{Argv: argv, Name: argv[0], words: words}
}

// reported: some leaf names the program, with the same arguments when its
// words are all literal.
func reported(a *Analysis, argv []string) bool {
	for _, l := range a.Leaves {
		if l.Dynamic || l.Name != argv[0] {
			continue
		}
		literalOnly := true
		for _, w := range l.words[1:] {
			if w.kind != literal {
				literalOnly = false
			}
		}
		if !literalOnly || strings.Join(l.Argv[1:], "\x00") == strings.Join(argv[1:], "\x00") {
			return true
		}
	}
	return false
}

func leafArgvs(a *Analysis) []string {
	var out []string
	for _, l := range a.Leaves {
		out = append(out, strings.Join(l.Argv, " "))
	}
	return out
}

// TestShellDifferentialShapes runs the attack shapes of every class and the
// ordinary commands that must stay allowed under the real bash.
func TestShellDifferentialShapes(t *testing.T) {
	s := getSandbox(t)
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	for _, cmd := range append(attackShapes, ordinaryShapes...) {
		checkDifferential(t, s, tables, rules, cmd)
	}
}

// TestShellDifferentialGenerated runs a fixed number of generated commands
// (a fixed seed, so every run checks the same ones, however loaded the
// machine); FuzzShellDifferential runs the same generator for as long as it
// is given, which CI (.ci/run) does for a bounded time.
func TestShellDifferentialGenerated(t *testing.T) {
	s := getSandbox(t)
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	const n = 60
	r := rand.New(rand.NewPCG(1, 2))
	ran, i := 0, 0
	for ; i < n; i++ {
		seed := make([]byte, 64)
		for j := range seed {
			seed[j] = byte(r.UintN(256))
		}
		if checkDifferential(t, s, tables, rules, generate(seed)) {
			ran++
		}
	}
	t.Logf("%d generated commands, %d allowed and run under bash", i, ran)
}

// FuzzShellDifferential: go test ./envguard -run '^$' -fuzz FuzzShellDifferential -fuzztime 10m
func FuzzShellDifferential(f *testing.F) {
	f.Add([]byte("curl"))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{200, 100, 50, 25, 12, 6, 3, 1, 0, 255, 128, 64, 32, 16, 8, 4, 2})
	tables := diffTables(f)
	rules := diffRulesFor(f, tables)
	f.Fuzz(func(t *testing.T, seed []byte) {
		checkDifferential(t, getSandbox(t), tables, rules, generate(seed))
	})
}

// gen turns fuzz bytes into choices.
type gen struct {
	b []byte
	i int
}

func (g *gen) n(k int) int {
	if g.i >= len(g.b) {
		g.i++
		return g.i % k
	}
	v := int(g.b[g.i])
	g.i++
	return v % k
}

func (g *gen) pick(list ...string) string { return list[g.n(len(list))] }

// generate composes a command from wrappers, shells, quoting, substitutions,
// pipes, lists, functions and indirections around the programs the rules
// name.
func generate(seed []byte) string {
	g := &gen{b: seed}
	return g.command(3)
}

func (g *gen) command(depth int) string {
	if depth <= 0 {
		return g.simple()
	}
	d := depth - 1
	switch g.n(40) {
	case 0:
		return g.command(d) + "; " + g.command(d)
	case 1:
		return g.command(d) + " && " + g.command(d)
	case 2:
		return "false || " + g.command(d)
	case 3:
		return "echo x | " + g.command(d)
	case 4:
		return "( " + g.command(d) + " )"
	case 5:
		return "{ " + g.command(d) + "; }"
	case 6:
		return "echo $(" + g.command(d) + ")"
	case 7:
		return g.wrapper() + " " + g.command(d)
	case 8:
		return g.shell() + " " + shellQuote(g.command(d))
	case 9:
		return "f() { " + g.command(d) + "; }; f"
	case 10:
		return "if true; then " + g.command(d) + "; fi"
	case 11:
		return "for i in a; do " + g.command(d) + "; done"
	case 12:
		return "eval " + shellQuote(g.command(d))
	case 13:
		return "echo " + shellQuote(g.command(d)) + " | " + g.pick("sh", "bash", "bash -s", "xargs -I{} sh -c {}", "perl")
	case 14:
		return g.pick("sh", "bash", "dash") + " <<< " + shellQuote(g.command(d))
	case 15:
		return "x=" + shellQuote("a[$("+g.command(d)+")0]") + "; echo " + g.pick("$((x))", "$((x+1))", "${a[x]}", "$[x]")
	case 16:
		return "env -S " + shellQuote(g.command(d))
	case 17:
		return "flock l -c " + shellQuote(g.command(d))
	case 18:
		return "perl -e " + shellQuote("system(q{"+g.simple()+"})")
	case 19:
		return "awk " + shellQuote(`BEGIN{system("`+g.simple()+`")}`)
	case 20:
		return "echo x | sed " + shellQuote("1e "+g.simple())
	case 21:
		return "find d -maxdepth 0 -exec " + g.simple() + " \\;"
	case 22:
		return "echo " + g.pick("x", "-rf", "push") + " | xargs " + g.simple()
	case 23:
		return "cat <(" + g.command(d) + ")"
	case 24:
		return "P=" + g.program() + "; $P " + g.args()
	case 25:
		return "env -S " + shellQuote(strings.ReplaceAll(g.simple(), " ", g.pick(" ", `\_`, "  ")))
	case 26:
		return "a=(1 2); unset " + shellQuote("a[$("+g.command(d)+")0]")
	case 27:
		return "printf '%s' " + shellQuote("a[$("+g.simple()+")0]") + " > f; x=$(<f); " + g.pick("echo $((x))", "unset a[x]", "for ((i=x;0;)); do :; done", "[[ $x -eq 1 ]]", "echo ${s:x}")
	case 28:
		return "X=" + shellQuote(g.command(d)) + "; " + g.pick("bash -c \"$X\"", "eval \"$X\"", "$X", "echo \"$X\" | sh")
	case 29:
		return "declare -a v; sleep 0 & wait -n -p " + shellQuote("v[$("+g.simple()+")0]")
	case 31, 32, 33, 34, 35, 36, 37, 38:
		return g.closedWorld(d)
	default:
		return "time " + g.command(d)
	}
}

// closedWorld composes the classes a closed world must model: the shell's
// own variables by each assignment form, extended globs and patterns,
// option clusters, path spellings of stdin, command readers, options that
// run commands, and runners.
func (g *gen) closedWorld(d int) string {
	inner := g.command(d)
	q := shellQuote(inner)
	sub := shellQuote("$(" + inner + ")")
	switch g.n(9) {
	case 0: // variables bash reads, by every means of assignment
		set := g.pick("set -x", "set -o xtrace", "set -xv", "set -ex")
		return g.pick(": ${PS4:="+sub+"}", ": ${PS4="+sub+"}", "printf -vPS4 %s "+sub, "printf -v PS4 %s "+sub,
			"read -r PS4 <<< "+sub, "read -ra PS4 <<< "+sub, "mapfile -t PS4 <<< "+sub, "declare PS4="+sub, "export PS4="+sub,
			"PS4="+sub, "typeset PS4="+sub, "local PS4="+sub+" 2>/dev/null") + "; " + set + "; true 2>/dev/null"
	case 1:
		prog := g.pick("curl", "rm", "python3", "git", "id")
		return g.pick("BASH_CMDS[zz]=/usr/bin/"+prog+"; zz "+g.args(), ": ${BASH_CMDS[zz]:=/usr/bin/"+prog+"}; zz "+g.args(),
			"hash -p /usr/bin/"+prog+" zz; zz "+g.args(), "shopt -s expand_aliases; BASH_ALIASES[zz]="+prog+"\nzz "+g.args(),
			"for PS4 in "+sub+"; do set -x; true; done 2>/dev/null", "X="+sub+"; export PS4=$X; bash -xc true 2>/dev/null")
	case 2: // extended globs and patterns
		return g.pick("[[ a == @($("+inner+")) ]]", "[[ a == !($("+inner+")|b) ]]", "[[ a == +(x|*($("+inner+"))) ]]",
			"shopt -s extglob\ncase a in @($("+inner+"))) ;; esac", "shopt -s extglob\necho ?($("+inner+"))",
			"x=a; echo ${x#@($("+inner+"))}", "case a in $("+inner+")) ;; esac", "[[ a == $("+inner+")* ]]")
	case 3: // option clusters as bash and dash read them
		return g.pick("bash -oc errexit", "bash -co errexit", "sh -oc errexit", "bash -xoc errexit", "bash -Oc extglob",
			"dash -ec", "bash -ooc errexit nounset", "bash --norc -oc errexit", "bash -c -e") + " " + q
	case 4: // stdin by any spelling
		path := g.pick("/dev//stdin", "/dev/./stdin", "/dev/../dev/stdin", "/proc/self/fd/0", "/dev/fd/0", "/proc/self/root/dev/stdin",
			"/proc/thread-self/fd/0", "//dev/stdin", "/dev/fd/../fd/0")
		return g.pick("bash "+path, "sh "+path, ". "+path, "source "+path, "perl "+path) + " <<< " + q
	case 5:
		return g.pick("bash /dev/fd/3 3<<< "+q, "echo x | sed -f /dev//fd/3 3<<< "+shellQuote("1e "+g.simple()),
			"echo x | awk -f /dev/./stdin", "bash < /dev/./stdin <<< "+q)
	case 6: // command readers and inline code
		s := g.simple()
		return g.pick("perl -wwwwwwwe "+shellQuote("system q{"+s+"}"), "perl -wwlwwwwe "+shellQuote("system q{"+s+"}"),
			"gdb -q -batch -iex "+shellQuote("shell "+s), "gdb -q -batch --ex "+shellQuote("shell "+s), "echo "+shellQuote("shell "+s)+" | gdb -q",
			"gdb -q -batch -eval-command="+shellQuote("shell "+s), "sqlite3 :memory: "+shellQuote(".sys "+s), "sqlite3 :memory: "+shellQuote(".sh "+s),
			"echo "+shellQuote(".shell "+s)+" | sqlite3", "vim.basic -es -c "+shellQuote("!"+s)+" -c q", "echo "+shellQuote("!"+s)+" | vim.basic -es",
			"awk 'BEGIN{system\\\n(\""+s+"\")}'")
	case 7: // options that run a command
		s := g.simple()
		return g.pick("gcc -wrapper "+strings.ReplaceAll(s, " ", ",")+" -E -x c /dev/null", "echo x | split --filter="+shellQuote(s),
			"echo x | sort --compress-program="+g.program()+" -S 1 -T /tmp", "diff3 --diff-program="+g.program()+" x y x",
			"sdiff --diff-program="+g.program()+" x y")
	default: // runners
		s := g.simple()
		return g.pick("logsave /dev/null "+s, "logsave -a log "+s, "capsh -- -c "+shellQuote(s), "capsh --shell=/usr/bin/"+g.pick("curl", "rm", "id")+" -- "+g.args(),
			"ssh-agent -t 1 -t 2 -t 3 -t 4 -t 5 -t 6 "+s)
	}
}

func (g *gen) simple() string {
	return strings.TrimSpace(g.program() + " " + g.args())
}

func (g *gen) program() string {
	name := g.pick("curl", "wget", "rm", "python", "python3", "python3.12", "git", "ls", "id", "cat", "nc", "true")
	switch g.n(8) {
	case 0:
		return `\` + name
	case 1:
		return `"` + name + `"`
	case 2:
		return "'" + name[:1] + "'" + name[1:]
	case 3:
		return name[:1] + `\` + name[1:]
	case 4:
		return "$'" + fmt.Sprintf(`\x%02x`, name[0]) + name[1:] + "'"
	case 5:
		return "command " + name
	case 6:
		return "/usr/bin/" + name
	}
	return name
}

func (g *gen) args() string {
	var out []string
	for range g.n(4) {
		out = append(out, g.pick("x", "-s", "-r", "-f", "-rf", "-fr", "-Rf", "-r -f", "--recursive", "--force", "--rec", "push", "origin",
			"-C d", "--no-pager", "-c k=v", "status", "-v", `"$Y"`, "-[r]f", "-{r,f}", "-c 'print(1)'", "*", "pus[h]", "$(echo push)",
			"--r", "--f", "--forc", "-R", "--", "-fR"))
	}
	return strings.Join(out, " ")
}

func (g *gen) wrapper() string {
	return g.pick("env", "env -i", "env -u X", "env A=1", "env -", "env --", "timeout 1", "timeout -s KILL 1", "timeout --foreground 1",
		"nice", "nice -n 1", "nice -5", "nohup", "stdbuf -o L", "stdbuf -oL", "setsid", "command", "builtin", "exec", "xargs",
		"xargs -0", "flock l", "flock -n l", "taskset 1", "ionice -c 3", "env -C d", "time", "command -p", "nice --adjustment=1")
}

func (g *gen) shell() string {
	return g.pick("sh -c", "bash -c", "dash -c", "bash -ec", "sh -lc", "bash -o errexit -c", "bash +x -c", "bash -x -c",
		"bash --norc -c", "bash -O extglob -c", "sh -e -u -c", "bash -c --")
}

// attackShapes are commands of every class of the shell guardrails' attack
// surface; none may run a denied program while being allowed.
var attackShapes = []string{
	"curl x", "c\\url x", "\"curl\" x", "$'\\x63url' x", "/usr/bin/curl x", "command -p curl x",
	"env -i curl x", "env -i - curl x", "env -S 'curl x'", "env -S'curl x'", "env --split-string='curl x'", "env -uX curl x",
	"bash -o errexit -c 'curl x'", "sh -e -u -c 'curl x'", "bash +x -c 'curl x'", "bash --norc -c 'curl x'", "sh -lc 'curl x'",
	"flock l -c 'curl x'", "flock -n l curl x", "timeout -s KILL 5 curl x", "timeout --foreground 1 curl x", "nice -5 curl x",
	"nice --adjustment=1 curl x", "stdbuf -oL curl x", "setsid -w curl x", "xargs -a x curl", "echo x | xargs curl",
	"echo x | xargs -I{} curl {}", "echo curl | xargs -I{} sh -c '{} x'", "find d -maxdepth 0 -exec curl {} \\;",
	"find . -maxdepth 0 -execdir rm -rf {} +", "eval 'curl x'", "eval \"$(echo curl x)\"", "echo curl x | sh", "echo curl x | bash -s",
	"sh <<< 'curl x'", "bash <<EOF\ncurl x\nEOF", "source <(echo curl x)", ". /dev/stdin <<< 'curl x'", "bash /dev/stdin <<< 'curl x'",
	"X='curl x'; sh -c \"$X\"", "perl -e 'system(q{curl x})'", "perl -we 'system(q{curl x})'", "awk 'BEGIN{system(\"curl x\")}'",
	"awk 'BEGIN{print \"x\" | \"curl x\"}'", "awk 'BEGIN{\"curl x\" | getline}'", "echo x | sed '1e curl x'", "echo x | sed 's/x/curl x/e'",
	"x='a[$(curl x)0]'; echo $((x))", "x='a[$(curl x)0]'; (( x ))", "x='a[$(curl x)0]'; echo ${a[x]}", "x='a[$(curl x)0]'; [[ $x -eq 0 ]]",
	"let 'x=a[$(curl x)0]'", "declare -i x='a[$(curl x)0]'", "printf -v 'a[$(curl x)0]' %s 1", "read 'a[$(curl x)0]' <<< 1",
	"test -v 'a[$(curl x)0]'", "x=$(echo 'a[$(curl x)0]'); echo $((x))", "read x <<< 'a[$(curl x)0]'; echo $((x))",
	"y='a[$(curl x)0]'; x=y; echo ${!x}", "PATH=.:$PATH ls", "alias ls=curl", "shopt -s expand_aliases; alias ls='curl x'\nls",
	"trap 'curl x' EXIT", "hash -p /usr/bin/curl ls; ls x", "P=curl; $P x", "$(echo curl) x", "`echo curl` x", "cur* x", "{curl,x} x",
	"rm -fr x", "rm -r -f x", "rm x -Rf", "rm --recursive --force x", "rm --rec --for x", "rm -r -- -f", "f=-rf; rm $f x", "rm -{r,f} x",
	"git -C d push", "git --no-pager push", "git -c k=v push", "P=push; git $P", "git pus[h]", "git $(echo push)",
	"python3.12 -V", "python2.7 x", "/usr/bin/python3 x", "Python3 x", "exec curl x", "builtin eval 'curl x'", "command eval 'curl x'",
	"coproc curl x", "time curl x", "f() { curl x; }; f", "function f { curl x; }; f", "ls() { curl x; }; ls",
	"command_not_found_handle() { curl x; }; zzz", "for c in curl; do $c x; done", "case x in x) curl x;; esac",
	"while curl x; do break; done", "until ! curl x; do :; done", "[[ $(curl x) ]]", "cat <(curl x)", "echo >(curl x)",
	"echo $(( $(curl x) ))", "x=$(curl x)", "export X=$(curl x)", "local x 2>/dev/null; curl x", "{ curl x; } 2>&1",
	"ionice -c 3 curl x", "taskset 1 curl x", "nohup curl x", "env A=1 B=2 curl x", "env LD_PRELOAD=x ls", "BASH_ENV=x bash -c ls",
	"sh -c 'sh -c \"curl x\"'", "bash -c 'eval \"curl x\"'", "bash -c 'rm \"$@\"' _ -rf x", "bash -c 'curl \"$1\"' _ x",
	"set -- curl x; \"$@\"", "a=(curl x); \"${a[@]}\"", "IFS=,; c=curl,x; $c", "echo x | perl", "perl <<< 'system(q{curl x})'",
	"perl /dev/stdin <<< 'system(q{curl x})'", "awk -f /dev/stdin <<< 'BEGIN{system(\"curl x\")}'", "sed -n -e '1e curl x' x",
	"sed --expression='1e curl x' x", "sed -e 's/a/b/' -e '1e curl x' x", "xargs -0 -a x curl",
	"echo x | xargs -n1 -I{} curl {}", "env -- curl x", "env -C d curl x", "env --chdir=d curl x", "exec -a ls curl x",
}

// ordinaryShapes are everyday commands: they must parse with nothing unseen
// and, run for real, start only the leaves reported.
var ordinaryShapes = []string{
	"ls -la", "ls -la d", "go test ./... | tee out.txt", "git status && git diff", "rm notes.txt", "rm -r build", "awk '{print $1}' go.mod",
	"git status", "source .venv/bin/activate && pytest -q", "git commit -m 'fix `x` in $(NF)'", "git add *.go", "cat x | head -1", "echo curl | xargs",
	"for f in x y; do echo $f; done", "echo $((1 + 2))", "i=0; i=$((i+1)); echo $i", "grep -r TODO . | head", "sed -n '1,2p' x",
	"sed -i 's/a/b/g' x", "sed -e 's/a/b/' x", "find . -name '*.go' -type f", "echo x > out.txt", "make -j2", "npm test",
	"node -r dotenv/config app.js", "git log --oneline -5", "touch x && ls x", "x=1; echo $x", "cat x y",
}

// TestShellShapesOrdinaryHaveNothingUnseen: everyday commands stay allowed.
func TestShellShapesOrdinaryHaveNothingUnseen(t *testing.T) {
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	for _, cmd := range ordinaryShapes {
		a, err := tables.Analyze(context.Background(), cmd)
		if err != nil {
			t.Errorf("%q: %v", cmd, err)
			continue
		}
		if len(a.Unseen) > 0 {
			t.Errorf("%q: unseen %v", cmd, a.Unseen)
		}
		if m := rules.Match(tables, a); len(m) > 0 {
			t.Errorf("%q: matches %v", cmd, m)
		}
	}
}

// TestShellAttackShapesAreNotAllowed: every attack shape is denied or asked
// for an agent with command rules, whatever bash would make of it.
func TestShellAttackShapesAreNotAllowed(t *testing.T) {
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	for _, cmd := range attackShapes {
		a, err := tables.Analyze(context.Background(), cmd)
		if err != nil {
			continue
		}
		if len(a.Unseen) == 0 && len(rules.Match(tables, a)) == 0 {
			t.Errorf("%q is allowed; leaves %v", cmd, leafArgvs(a))
		}
	}
}

// TestDifferentialSandboxRecords: the harness sees what bash starts, even
// through a reset PATH or an absolute path, and runs real wrappers.
func TestDifferentialSandboxRecords(t *testing.T) {
	s := getSandbox(t)
	records, out, err := s.run(`curl a; env -i curl b; command -p curl c; /bin/curl d; timeout 1 nice rm -r -f e; perl -e 'system(q{id f})'`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := [][]string{{"curl", "a"}, {"curl", "b"}, {"curl", "c"}, {"curl", "d"}, {"rm", "-r", "-f", "e"}, {"id", "f"}}
	if fmt.Sprint(records) != fmt.Sprint(want) {
		t.Fatalf("recorded %q, want %q\noutput: %s", records, want, out)
	}
}
