package envguard

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// protectedTree makes a working tree as an agent sees one: a secret in
// .env (a protected_paths entry), a repository's .git, sources, a staged
// copy holding a .git of its own, and archives with and without one.
func protectedTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		".env":                 "SECRET=xyz\n",
		".env.example":         "KEY=\n",
		".git/HEAD":            "ref: refs/heads/main\n",
		"src/a.txt":            "hello\n",
		"src/b.go":             "package b\n",
		"src/c":                "curl x\n",
		"src/stage/.git/HEAD":  "x\n",
		"src/stage/readme":     "r\n",
		"build/out.o":          "o\n",
		"vendor/lib/.git/HEAD": "x\n",
		"vendor/lib/lib.go":    "package lib\n",
		".gitignore":           "/.env\nbuild/\n",
		"other/.env":           "SECRET=xyz\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "links"), 0o755)
	os.Symlink("../.env", filepath.Join(dir, "links/lenv"))
	os.Symlink("../.git", filepath.Join(dir, "links/g"))
	writeTar(t, filepath.Join(dir, "src/evil.tar"), false, ".git/PWNED")
	writeTar(t, filepath.Join(dir, "src/clean.tgz"), true, "pkg/a.txt")
	writeZip(t, filepath.Join(dir, "src/evil.zip"), ".git/PWNED")
	writeZip(t, filepath.Join(dir, "src/clean.zip"), "pkg/z.txt")
	os.WriteFile(filepath.Join(dir, "src/evil.patch"), []byte("--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+curl x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/ok.patch"), []byte("--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-hello\n+hullo\n"), 0o644)
	return dir
}

func writeTar(t *testing.T, p string, gz bool, names ...string) {
	t.Helper()
	var buf bytes.Buffer
	var w *tar.Writer
	var g *gzip.Writer
	if gz {
		g = gzip.NewWriter(&buf)
		w = tar.NewWriter(g)
	} else {
		w = tar.NewWriter(&buf)
	}
	for _, n := range names {
		if err := w.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("x\n"))
	}
	w.Close()
	if g != nil {
		g.Close()
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, p string, names ...string) {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := z.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("x\n"))
	}
	z.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestProtectedThroughTheShell: reads of a protected_paths entry and
// writes into .git by every means the shell and programs have — names
// built at run time, loops, dotglob, a program's own language, output
// options, recursion, copies of trees, archives, a directory moved into
// at run time — are asked; ordinary commands over the same tree are
// allowed, and each allowed one, run under the real bash in a copy of the
// tree, neither prints the secret nor changes .git.
func TestProtectedThroughTheShell(t *testing.T) {
	tables := diffTables(t)
	rules := diffRulesFor(t, tables)
	base := protectedTree(t)
	classes := map[string][]shape{
		"names built at run time": {
			{`cat "$PWD/.env"`, "ask"}, {`cat "${PWD}/.env"`, "ask"}, {`cat "$(pwd)/.env"`, "ask"}, {`cat "$(echo .env)"`, "ask"},
			{`cat $(printf .en)v`, "ask"}, {`f=$(ls -a | grep en); cat "$f"`, "ask"}, {`cat "$HOME/../$OLDPWD/.env"`, "ask"},
			{`cat "$PWD/src/a.txt"`, "allow"}, {`cat "$(pwd)/src/a.txt"`, "allow"}, {`f=src/a.txt; cat "$f"`, "allow"},
			{`sort -o "$(pwd)/.git/PWNED" src/a.txt`, "ask"}, {`cd src; cat "$PWD/../.env"`, "ask"},
		},
		"loops and globs": {
			{`for f in .e*; do cat $f; done`, "ask"}, {`for f in .*; do cat "$f"; done`, "ask"}, {`for f in src/*; do cat "$f"; done`, "allow"},
			{`for f in src/*.go; do gofmt -l "$f"; done`, "allow"}, {`shopt -s dotglob; cat *`, "ask"}, {`bash -O dotglob -c 'cat *'`, "ask"},
			{`shopt -s dotglob nullglob; grep SECRET *`, "ask"}, {`shopt -s dotglob; cat s*/../*`, "ask"}, {`cat *`, "allow"},
			{`for i in 1 2; do cat src/a.txt; done`, "allow"},
		},
		"trees read or written whole": {
			{`grep -r SECRET .`, "ask"}, {`grep -r SECRET`, "ask"}, {`grep -R SECRET .`, "ask"}, {`grep --recursive SECRET .`, "ask"},
			{`grep -rn --exclude=.env SECRET other`, "allow"}, {`grep -rn hello src`, "allow"}, {`rg --hidden SECRET`, "ask"}, {`rg SECRET`, "allow"},
			{`rm -r vendor/lib`, "ask"}, {`git grep --untracked SECRET`, "ask"}, {`git grep SECRET`, "allow"},
			{`tar -czf /tmp/src.tgz .`, "ask"}, {`git add -A`, "ask"}, {`git add src`, "allow"}, {`git add -A -- src`, "allow"},
			{`git add -f .env`, "ask"}, {`git stash push -u`, "ask"}, {`git add -A ':!other'`, "ask"}, {`git clean -fdx`, "ask"}, {`git clean -fdx src`, "allow"},
			{`git hash-object -w --stdin-paths <<< .env`, "ask"}, {`find . -maxdepth 1 -type f | git hash-object -w --stdin-paths`, "ask"},
			{`git --work-tree=vendor/lib checkout HEAD -- .`, "allow"},
			{`git --work-tree=.git/hooks checkout HEAD -- pre-commit`, "ask"}, {`git --work-tree=.claude checkout HEAD -- .`, "ask"},
			{`git init .codex`, "ask"}, {`git clone -q . .git/c`, "ask"}, {`git worktree add .claude/w`, "ask"}, {`git config --file .mcp.json a.b c`, "ask"},
			{`git --git-dir=.git log`, "allow"}, {`git --git-dir=.claude init`, "ask"}, {`git bundle create .mcp.json HEAD`, "ask"}, {`grep -r --exclude=.env --include=.* SECRET .`, "ask"},
			{`grep -r --exclude=.env --include="$x" SECRET .`, "ask"}, {`env -C .git touch x`, "ask"}, {`env -C src touch x`, "allow"},
			{`find . -name HEAD -execdir sh -c 'echo x > HEAD' \;`, "ask"}, {`git -C src diff --no-index . ..`, "ask"},
			{`unshare --wd=.git touch x`, "ask"}, {`tar czf /tmp/dist.tgz -C build .`, "allow"}, {`cd src && grep -r SECRET ..`, "ask"}, {`find . -name HEAD -delete`, "ask"}, {`find . -name '*.o' -delete`, "allow"},
			{`find . -name '*' -exec cat {} +`, "ask"}, {`wc -l $(find . -name '*.txt')`, "allow"}, {`cat $(find . -type f)`, "ask"}, {`rm -r build`, "allow"}, {`chmod -R 755 .`, "ask"}, {`chmod -R 755 src/b.go`, "allow"},
			{`cp -a src/stage/.git .`, "ask"}, {`cp -r src/stage/. .`, "ask"}, {`cp -r src/stage /tmp/x`, "ask"}, {`cp -r build /tmp/y`, "allow"},
			{`mv src/stage/.git .`, "ask"}, {`cp src/a.txt /tmp/a.txt`, "allow"},
		},
		"names found at run time": {
			{`ls -a | xargs cat`, "ask"}, {`find . -name '.e*' -exec cat {} +`, "ask"}, {`find . -maxdepth 1 -type f | xargs cat`, "ask"},
			{`find . -type f -exec cat {} +`, "ask"}, {`find src -name '*.go' -exec grep package {} +`, "allow"},
			{`find . -name '*.go' | xargs grep package`, "allow"}, {`find . -name '*.o' -exec rm {} +`, "allow"},
			{`find . -type f -exec chmod 644 {} +`, "ask"}, {`xargs cat < src/a.txt`, "ask"}, {`find . -fprint .git/PWNED`, "ask"},
		},
		"a program's own language": {
			{`sed 'r .env' src/a.txt`, "ask"}, {`sed -n 'R .env' src/a.txt`, "ask"}, {`sed -n 'w .git/PWNED' src/a.txt`, "ask"},
			{`sed 's/h/h/w .git/PWNED' src/a.txt`, "ask"}, {`sed -n '1{w .git/PWNED' -e '}' src/a.txt`, "ask"},
			{`awk 'BEGIN{while((getline l < ".env")>0) print l}'`, "ask"}, {`awk '{print > ".git/PWNED"}' src/a.txt`, "ask"},
			{`awk '{printf("%s", $0) >> ".git/PWNED"}' src/a.txt`, "ask"}, {`awk 'BEGIN{f=".en" "v"; while((getline l < f)>0) print l}'`, "ask"},
			{`awk 'BEGIN{ARGV[1]=".env"; ARGC=2} {print}'`, "ask"}, {`sqlite3 :memory: "select readfile('.env')"`, "ask"},
			{`sed 's/a/b/' src/a.txt`, "allow"}, {`sed -n '/hello/p' src/a.txt`, "allow"}, {`awk '$1 > 0 {print $1}' src/a.txt`, "allow"},
			{`awk '{print $1 > "/dev/stderr"}' src/a.txt`, "allow"}, {`awk 'NR > 1' src/a.txt`, "allow"}, {`sed 's/x/y/w /dev/stdout' src/a.txt`, "allow"},
		},
		"output options and operands": {
			{`sort -o .git/PWNED src/a.txt`, "ask"}, {`sort --output=.git/PWNED src/a.txt`, "ask"}, {`sort -o.git/PWNED src/a.txt`, "ask"},
			{`uniq src/a.txt .git/PWNED`, "ask"}, {`xxd src/a.txt .git/PWNED`, "ask"}, {`split -n1 src/a.txt .git/PWNED`, "ask"},
			{`dd if=.env`, "ask"}, {`dd if=.e{x,nv}`, "ask"}, {`dd if{=/dev/null,=.env}`, "ask"}, {`dd if=src/a.txt of={x,.git}/config`, "ask"},
			{`cat links/*`, "ask"}, {`cat links/l*`, "ask"}, {`cp -a links/g /tmp/z`, "ask"}, {`cp -P links/g gg && touch gg/x`, "ask"},
			{`cp -l .git/config /tmp/hl && echo x >> /tmp/hl`, "ask"}, {`cp --symbolic-link $PWD/.git/config /tmp/sl`, "ask"},
			{`cp src/a.txt src/a2.txt`, "allow"}, {`dd if=src/a.txt of=/tmp/out.txt`, "allow"}, {`git show HEAD:.env`, "ask"}, {`grep -f.env src/a.txt`, "ask"},
			{`sort -o /tmp/sorted src/a.txt`, "allow"}, {`sort src/a.txt`, "allow"}, {`gcc -o .git/hooks/pre-commit x.c`, "ask"},
			{`logsave .git/PWNED ls`, "ask"}, {`script -q -c ls .git/PWNED`, "ask"}, {`cargo build --target-dir .git/x`, "ask"},
			{`cat ".e"*`, "ask"}, {`cat '.e'*`, "ask"}, {`cat "."e*`, "ask"},
		},
		"archives": {
			{`tar -xf src/evil.tar`, "ask"}, {`tar xf src/evil.tar`, "ask"}, {`unzip -o src/evil.zip`, "ask"}, {`tar -xf - < src/evil.tar`, "ask"}, {`tar -xzf none.tgz -C /tmp`, "allow"}, {`patch -p1 < none.patch`, "allow"},
			{"git apply <<'EOF'\n--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-hello\n+hullo\nEOF", "allow"},
			{"git apply <<'EOF'\n--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+curl x\nEOF", "ask"},
			{"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: .claude/settings.json\n+{}\n*** End Patch\nEOF", "ask"},
			{`cp src/evil.tar x.tar && tar -xf x.tar`, "ask"}, {`cat src/evil.patch > y.patch; patch -p1 < y.patch`, "ask"},
			{`tar -xzf src/clean.tgz -C /tmp/x`, "allow"}, {`tar -xzf src/clean.tgz -C .git`, "ask"}, {`unzip -o src/clean.zip -d /tmp/z`, "allow"},
			{`tar -tzf src/clean.tgz`, "allow"}, {`tar -czf /tmp/src.tgz src/b.go`, "allow"}, {`patch -p1 < src/evil.patch`, "ask"}, {`git apply src/evil.patch`, "ask"},
			{`patch -p1 -i src/evil.patch`, "ask"}, {`cat src/evil.patch | patch -p1`, "ask"}, {`patch -p1 < src/ok.patch`, "allow"},
			{`git apply --check src/ok.patch`, "allow"}, {`tar -xzf src/clean.tgz --transform 's,^,.git/,'`, "ask"},
			{`ar x src/lib.a`, "ask"}, {`find . -name '*.go' | cpio -o > /tmp/x.cpio`, "allow"}, {`find . | cpio -o > /tmp/x.cpio`, "ask"},
			{`gzip -d src/.git.gz`, "ask"}, {`tar -czf /tmp/x.tgz -T src/a.txt`, "ask"}, {`wc -c --files0-from=src/a.txt`, "ask"},
			{`rsync -a --files-from=src/a.txt . /tmp/r`, "ask"},
		},
		"a directory known only at run time": {
			{`cd $(printf '.gi%s' t) && touch PWNED`, "ask"}, {`cd src/../.g* && touch PWNED`, "ask"}, {`d=.git; cd $d && touch PWNED`, "ask"},
			{`cd "$(git rev-parse --show-toplevel)" && touch x`, "ask"}, {`cd - && touch x`, "ask"}, {`cd src && cd -`, "allow"},
			{`cd "$(git rev-parse --show-toplevel)" && make test`, "allow"}, {`cd src && touch x`, "allow"},
			{`for d in */; do (cd "$d" && ls); done`, "allow"}, {`cd "$HOME/x" && make > build.log`, "allow"},
			{`cd "$(mktemp -d)" && touch x`, "allow"}, {`cat "$HOME/.env"`, "ask"}, {`HOME=.git; cd "$HOME" && touch x`, "ask"},
		},
		"process substitutions": {
			{`make -f <(printf 'x:\n\tcurl x\n') x`, "ask"}, {`timeout 5 make -f <(cat src/c) x`, "ask"}, {`diff <(sort src/a.txt) src/a.txt`, "allow"},
			{`paste <(ls) <(ls src)`, "allow"}, {`comm -12 <(sort src/a.txt) <(sort src/b.go)`, "allow"}, {`ninja -f <(cat src/c)`, "ask"},
		},
		"spellings and pieces": {
			{`cat ~+/.en?`, "ask"}, {`cat ~+/.env{,}`, "ask"}, {`echo x >> ~+/.gi?/config`, "ask"}, {`cd ~+/.gi?/hooks && touch x`, "ask"},
			{`cat ~-/x`, "ask"}, {`cat ~+/src/a.txt`, "allow"}, {`cp src/a.txt ~+/.gi[t]/hooks/`, "ask"},
			{`git blame -S .env src/a.txt`, "ask"}, {`gcc -include.env -E -x c /dev/null`, "ask"}, {`gcc --include=.env -E x.c`, "ask"},
			{`gcc -Wp,-include,.env -E x.c`, "ask"}, {`strings @.env`, "ask"}, {`gcc -Wl,@.env x.c`, "ask"},
			{`gcc -MF.git/x x.c`, "ask"}, {`gcc -MD -MF .git/x x.c`, "ask"}, {`gcc x.c -Wl,-o,.git/hooks/pre-commit`, "ask"},
			{`go build -o=.git/hooks/pre-commit .`, "ask"}, {`ssh -E .git/log host`, "ask"}, {`ssh-keygen -q -f.claude/k`, "ask"},
			{`cp -t.git/hooks src/a.txt`, "ask"}, {`cp -rt.git src`, "ask"}, {`mv -t.claude src/a.txt`, "ask"}, {`tar -xvC.git -f src/clean.tgz`, "ask"},
			{`tar -xzf src/clean.tgz --one-top-level=.claude`, "ask"}, {`GOBIN=$PWD/.git/hooks go install x`, "ask"}, {`TMPDIR=.git mktemp`, "ask"},
			{`gpg --homedir .git -k`, "ask"}, {`patch --directory=.git -p1 -i src/ok.patch`, "ask"}, {`git apply --directory=.claude src/ok.patch`, "ask"},
			{`cp /tmp/x.json $PWD`, "allow"}, {`cp src/stage/.git $PWD`, "ask"}, {`cp -r src/stage/.git ~+`, "ask"}, {`git init --separate-git-dir=/tmp/sep`, "ask"},
			{`git config --worktree core.worktree /tmp`, "ask"}, {`yq -i '.a=1' .claude/settings.json`, "ask"}, {`git ls-files -oi --exclude-standard | xargs cat`, "ask"},
			{`cat $(git ls-files -oi --exclude-standard)`, "ask"}, {`gcc -O2 -o build/app x.c`, "allow"}, {`go build -o bin/app ./cmd/app`, "allow"},
			{`ssh -i ~/.ssh/id host true`, "allow"}, {`make -C build all`, "allow"}, {`du -sh .git`, "allow"}, {`GOFLAGS=-mod=mod go test ./...`, "allow"},
		},
		"ordinary commands once asked": {
			{`sed -i.bak 's/foo/bar/' src/*.txt`, "allow"}, {`sed -i.orig -e 's/a/b/' src/a.txt`, "allow"}, {`git clean -n`, "allow"}, {`git clean -ndx`, "allow"},
			{`tar -cf - src/b.go | tar -xf - -C /tmp/copy`, "allow"}, {`tar -cf - src | tar -xf - -C /tmp/copy`, "ask"}, {`tar -C build -cf - . | tar -C /tmp/dist -xf -`, "allow"},
			{`tar -czf /tmp/a.tgz --exclude=.env --exclude=.git --exclude=stage --exclude=other --exclude=links --exclude=vendor .`, "allow"},
			{`tar czf /tmp/a.tgz *`, "ask"}, {`grep -rn TODO src/*`, "allow"}, {`grep -rn TODO other/* links/*`, "ask"}, {`grep -rn TODO build/*`, "allow"},
			{`git ls-files -z '*.go' | xargs -0 wc -l`, "allow"}, {`find . -name '*.go' -not -path './.git/*' | xargs wc -l`, "allow"},
			{`unzip -o src/clean.zip -x .env -d /tmp/z`, "allow"},
			{`tar --remove-files -cf /tmp/t.tar .claude`, "ask"}, {`tar --remove-files -cf /tmp/t.tar build`, "allow"}, {`git rm -r vendor`, "allow"},
			{`git rm .mcp.json`, "ask"}, {`git rm --cached src/a.txt`, "allow"}, {`git rm -rfq .`, "ask"},
			{`n=$(ls | wc -l); echo $((n*2))`, "allow"}, {`x=$(git rev-list --count HEAD); echo $((x+1))`, "allow"},
			{`declare -i n=5`, "allow"}, {`ls -la .env`, "allow"}, {`stat .env`, "allow"}, {`echo $(( $(ls | wc -l) * 2 ))`, "allow"},
			{`n=$(cat src/a.txt | head -1); echo $((n))`, "ask"}, {`n=5; make -j$((n*2))`, "allow"}, {`make -j$(nproc)`, "allow"},
			{`grep -rn TODO --include='*.go' .`, "allow"}, {`grep -rn TODO --include='.e*' .`, "ask"},
			{`for f in $(git ls-files '*.go'); do gofmt -l "$f"; done`, "allow"}, {`for f in $(git ls-files); do cat "$f"; done`, "ask"},
			{`for f in $(find . -name '*.go'); do cat "$f"; done`, "allow"}, {`for f in $(find . -name '*'); do cat "$f"; done`, "ask"},
			{`wc -l $(git ls-files '*.go')`, "allow"}, {`cat $(git ls-files '.e*')`, "ask"}, {`for f in $(ls src); do wc -l "src/$f"; done`, "allow"},
			{`awk '{print $1}' $(ls src/*.txt)`, "allow"}, {`for f in $(ls -a); do cat "$f"; done`, "ask"}, {`sed -i 's/a/b/' $(grep -rl o build)`, "allow"}, {`sed -i 's/a/b/' $(grep -rl x src)`, "ask"},
			{`grep -rl SECRET . | xargs cat`, "ask"}, {`git ls-files | xargs grep -l hello`, "ask"}, {`wc -l $(git ls-files)`, "ask"},
			{`for f in src/*.go; do mv "$f" "${f%.go}.bak"; done`, "allow"}, {`for f in .e*; do cp "$f" "${f%v}"; done`, "ask"},
			{`find . -name '*.go' -print0 | xargs -0 wc -l`, "allow"}, {`xargs -I{} cp {} /tmp/out < src/a.txt`, "ask"},
			{`find . -type d -name stage -prune -exec rm -r {} +`, "ask"}, {`find . -type d -name __pycache__ -exec rm -r {} +`, "allow"},
		},
	}
	total := 0
	for class, shapes := range classes {
		for _, s := range shapes {
			total++
			work := copyTree(t, base)
			a, err := tables.Analyze(context.Background(), s.cmd)
			got := "ask"
			var uses []ProtectedUse
			if err == nil {
				got = verdictOf(tables, rules, a)
				uses = rules.Protected(NewResolver(context.Background()), a, work)
				if got == "allow" && len(uses) > 0 {
					got = "ask"
				}
			}
			if got != s.want {
				detail := ""
				if a != nil {
					detail = strings.Join(leafArgvs(a), " | ")
					for _, u := range a.Unseen {
						detail += "\n    unseen: " + u.Construct
					}
				}
				for _, u := range uses {
					detail += "\n    protected: " + u.What + " " + u.Word
				}
				t.Errorf("[%s] %q: got %s, want %s\n    leaves: %s", class, s.cmd, got, s.want, detail)
				continue
			}
			if got == "allow" {
				runAllowed(t, work, s.cmd)
			}
		}
	}
	t.Logf("%d shapes in %d classes", total, len(classes))
}

// runAllowed runs an allowed command under the real bash in work, with
// programs that reach the network or run code replaced by stubs, and
// fails when it printed the secret or changed .git.
func runAllowed(t *testing.T, work, cmd string) {
	t.Helper()
	before := treeListing(t, filepath.Join(work, ".git"))
	stubs := t.TempDir()
	for _, p := range []string{"curl", "make", "ninja", "gofmt", "gcc", "python3"} {
		os.WriteFile(filepath.Join(stubs, p), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir = work
	c.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "HOME="+work)
	c.Stdin = nil
	out, _ := c.CombinedOutput()
	if bytes.Contains(out, []byte("SECRET=xyz")) {
		t.Errorf("%q was allowed and printed the secret:\n%s", cmd, out)
	}
	if after := treeListing(t, filepath.Join(work, ".git")); after != before {
		t.Errorf("%q was allowed and changed .git:\n before %s\n after  %s", cmd, before, after)
	}
}

func treeListing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			fi, _ := d.Info()
			b.WriteString(p + " " + fi.Mode().String() + ";")
		}
		return nil
	})
	return b.String()
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the tree: %v: %s", err, out)
	}
	return dst
}

// TestTrackedNames reads git's own index, as each version writes it, and
// agrees with git ls-files.
func TestTrackedNames(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: scripts/test installs it")
	}
	for _, version := range []string{"2", "3", "4"} {
		dir := t.TempDir()
		for _, f := range []string{"a.txt", "src/b.go", "src/deep/dir/c.md", "src/deep/dir/d.md", ".env", "x y"} {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
			os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
		}
		git := func(args ...string) string {
			c := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
			return string(out)
		}
		git("init", "-q")
		git("add", "-A")
		git("update-index", "--index-version", version)
		if version == "3" {
			git("update-index", "--skip-worktree", "a.txt") // an extended-flags entry
		}
		names, err := trackedNames(filepath.Join(dir, "src"))
		if err != nil {
			t.Fatalf("index version %s: %v", version, err)
		}
		var got []string
		for _, n := range names {
			rel, _ := filepath.Rel(dir, n)
			got = append(got, rel)
		}
		want := strings.Fields(strings.ReplaceAll(git("ls-files", "-z"), "\x00", "\n"))
		if strings.Join(got, "|") != strings.Join([]string{".env", "a.txt", "src/b.go", "src/deep/dir/c.md", "src/deep/dir/d.md", "x y"}, "|") {
			t.Errorf("index version %s: got %q (git ls-files: %q)", version, got, want)
		}
	}
}
