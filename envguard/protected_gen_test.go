package envguard

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The protected-names generator writes commands that read the secret in
// .env or write into .git by combining programs, spellings of the name and
// the shell's ways of building it; the oracle is the real bash: a command
// the analysis allows, run in a copy of the tree, must neither print the
// secret nor change .git.

var (
	genReaders = []string{"cat", "head -n5", "tail -n5", "grep -h SECRET", "sed -n p", "awk '{print}'", "sort", "uniq",
		"od -c", "base64", "tac", "nl", "cut -c1-40", "paste", "dd status=none if=", "tr a-z A-Z <", "comm -3 /dev/null",
		"diff /dev/null", "grep -r SECRET", "grep -rl SECRET", "wc -c", "ls -la", "stat -c %s"}
	genReadTargets = []string{".env", "./.env", `"$PWD/.env"`, `"$(pwd)/.env"`, `$(echo .env)`, ".e*", ".e?v", ".[e]nv",
		`".e"*`, "{.env,src/a.txt}", "src/../.env", `"$d/.env"`, `$f`, `"${f}"`, `$(ls -a | grep en)`, `$(find . -name '.e*')`,
		"*", ".", ".*", `$(printf .en)v`, "src/..", `"$(cat src/name)"`}
	genReadPrefixes = []string{"", "d=.; ", "f=.env; ", "shopt -s dotglob; ", "cd src && cd .. && ", "f=src/a.txt; ", "d=src; "}
	genWriters      = []string{"touch", "cp src/a.txt", "echo x >", "echo x >>", "tee <<<x", "dd status=none if=src/a.txt of=",
		"sort src/a.txt -o", "mkdir -p", "ln -s src/a.txt", "install -D src/a.txt", "split -n1 src/a.txt", "uniq src/a.txt",
		"cp -r src/stage/.", "truncate -s0", "chmod -R 700", "sed -n 'w X' src/a.txt #", "awk '{print > \"X\"}' src/a.txt #"}
	genWriteTargets = []string{".git/X", "./.git/X", ".g*/X", ".gi?/X", `"$PWD/.git/X"`, `$(printf .git)/X`, `"$d/X"`, ".GIT/X",
		"src/../.git/X", "{.git,src}/X", ".git", ".", "src/new", `"$(pwd)/src/new"`}
	genWritePrefixes = []string{"", "d=.git; ", "d=src; ", "cd .git && ", "cd $(echo .git) && ", "cd src && ", "for d in .g*; do ",
		"shopt -s dotglob; "}
	genForms = []string{"%s", "bash -c '%s'", "( %s )", "{ %s; }", "true && %s", "for i in 1; do %s; done", "echo | %s",
		"timeout 5 %s", "env %s"}
)

// genProtected writes one command from the grammar.
func genProtected(r *rand.Rand) string {
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	var cmd string
	if r.IntN(2) == 0 {
		cmd = pick(genReadPrefixes) + pick(genReaders) + " " + pick(genReadTargets)
	} else {
		prefix := pick(genWritePrefixes)
		w, target := pick(genWriters), pick(genWriteTargets)
		if strings.Contains(w, "X") {
			cmd = prefix + strings.ReplaceAll(w, "X", strings.Trim(target, `"`))
		} else {
			cmd = prefix + w + " " + target
		}
		if strings.HasPrefix(prefix, "for ") {
			cmd += "; done"
		}
	}
	form := pick(genForms)
	if strings.Contains(form, "'") && strings.Contains(cmd, "'") {
		form = "%s"
	}
	return strings.Replace(form, "%s", cmd, 1)
}

// TestProtectedGenerated runs a bounded sample of the grammar (the fuzz
// target below runs it without bound).
func TestProtectedGenerated(t *testing.T) {
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	base := protectedTree(t)
	os.WriteFile(filepath.Join(base, "src/name"), []byte(".env\n"), 0o644)
	r := rand.New(rand.NewPCG(1, 2))
	allowed := 0
	for range 300 {
		if checkProtected(t, tables, rules, base, genProtected(r)) {
			allowed++
		}
	}
	t.Logf("300 generated commands, %d allowed and run under bash", allowed)
}

func FuzzProtectedDifferential(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		tables := diffTables(t)
		rules := diffRulesFor(t, tables)
		base := protectedTree(t)
		os.WriteFile(filepath.Join(base, "src/name"), []byte(".env\n"), 0o644)
		checkProtected(t, tables, rules, base, genProtected(rand.New(rand.NewPCG(a, b))))
	})
}

// checkProtected judges one command; an allowed one is run in a copy of
// base. It reports whether the command was allowed.
func checkProtected(t *testing.T, tables *Tables, rules *Rules, base, cmd string) bool {
	t.Helper()
	a, err := tables.Analyze(context.Background(), cmd)
	if err != nil {
		return false
	}
	work := copyTree(t, base)
	if verdictOf(tables, rules, a) != "allow" || len(rules.Protected(NewResolver(context.Background()), a, work)) > 0 {
		return false
	}
	runAllowed(t, work, cmd)
	return true
}
