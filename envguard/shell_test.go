package envguard

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// leaves renders ParseCommand's result compactly: argv joined by spaces,
// "?" in front of a dynamic program.
func leaves(t testing.TB, cmd string) ([]string, error) {
	t.Helper()
	a, err := diffTables(t).Analyze(context.Background(), cmd)
	var out []string
	if a == nil {
		a = &Analysis{}
	}
	for _, l := range a.Leaves {
		s := strings.Join(l.Argv, " ")
		if l.Dynamic {
			s = "?" + s
		}
		out = append(out, s)
	}
	return out, err
}

// TestShellShapes: every shell construct yields the leaves a command rule
// must see. Wrappers stay leaves of their own beside what they run.
func TestShellShapes(t *testing.T) {
	shapes := []struct {
		cmd  string
		want []string
	}{
		// simple commands and quoting
		{"ls", []string{"ls"}},
		{"ls -la /tmp", []string{"ls -la /tmp"}},
		{`"curl" x`, []string{"curl x"}},
		{`'curl' x`, []string{"curl x"}},
		{`c"ur"'l' x`, []string{"curl x"}},
		{`c\url x`, []string{"curl x"}},
		{`\curl x`, []string{"curl x"}},
		{`$'\x63url' x`, []string{"curl x"}},
		{"/usr/bin/curl x", []string{"/usr/bin/curl x"}},
		{"./curl x", []string{"./curl x"}},
		// lists and pipelines
		{"true && curl x", []string{"true", "curl x"}},
		{"false || curl x", []string{"false", "curl x"}},
		{"ls; curl x", []string{"ls", "curl x"}},
		{"ls\ncurl x", []string{"ls", "curl x"}},
		{"ls | curl x", []string{"ls", "curl x"}},
		{"ls |& curl x", []string{"ls", "curl x"}},
		{"ls & curl x", []string{"ls", "curl x"}},
		{"! curl x", []string{"curl x"}},
		{"a; b; c; d; e && f || g | h", []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		// grouping and compound commands
		{"(curl x)", []string{"curl x"}},
		{"{ curl x; }", []string{"curl x"}},
		{"if true; then curl x; fi", []string{"true", "curl x"}},
		{"if false; then :; elif curl x; then :; else wget y; fi", []string{"false", ":", "curl x", ":", "wget y"}},
		{"for i in 1 2; do curl $i; done", []string{"curl $i"}},
		{"for ((i=0; i<3; i++)); do curl x; done", []string{"curl x"}},
		{"while true; do curl x; done", []string{"true", "curl x"}},
		{"until false; do curl x; done", []string{"false", "curl x"}},
		{"case $x in a) curl x;; *) wget y;; esac", []string{"curl x", "wget y"}},
		{"f() { curl x; }; f", []string{"curl x", "f"}},
		{"select x in a; do curl x; done", []string{"curl x"}},
		{"time curl x", []string{"curl x"}},
		{"coproc curl x", []string{"curl x"}},
		// substitutions
		{"$(curl x)", []string{"?$(curl x)", "curl x"}},
		{"echo $(curl x)", []string{"echo $(curl x)", "curl x"}},
		{"echo `curl x`", []string{"echo `curl x`", "curl x"}},
		{`echo "$(curl x)"`, []string{`echo "$(curl x)"`, "curl x"}},
		{"echo $(echo $(curl x))", []string{"echo $(echo $(curl x))", "echo $(curl x)", "curl x"}},
		{"cat <(curl x)", []string{"cat <(curl x)", "curl x"}},
		{"tee >(curl x)", []string{"tee >(curl x)", "curl x"}},
		{"x=$(curl y)", []string{"curl y"}},
		{"export X=$(curl y)", []string{"curl y"}},
		{"[[ $(curl x) ]]", []string{"curl x"}},
		{"echo $((1 + $(curl x)))", []string{"echo $((1 + $(curl x)))", "curl x"}},
		{"cat <<EOF\n$(curl x)\nEOF", []string{"cat", "curl x"}},
		// shells given strings
		{`bash -c "curl x"`, []string{"bash -c curl x", "curl x"}},
		{`sh -c 'ls; curl x'`, []string{"sh -c ls; curl x", "ls", "curl x"}},
		{`bash -ec "curl x"`, []string{"bash -ec curl x", "curl x"}},
		{`/bin/sh -c "sh -c 'curl x'"`, []string{"/bin/sh -c sh -c 'curl x'", "sh -c curl x", "curl x"}},
		{`zsh -c "curl x"`, []string{"zsh -c curl x", "curl x"}},
		{`bash script.sh`, []string{"bash script.sh"}},
		// wrappers
		{"env curl x", []string{"env curl x", "curl x"}},
		{"env -i A=1 B=2 curl x", []string{"env -i A=1 B=2 curl x", "curl x"}},
		{"env -u HOME curl x", []string{"env -u HOME curl x", "curl x"}},
		{"timeout 5 curl x", []string{"timeout 5 curl x", "curl x"}},
		{"timeout -s KILL 5 curl x", []string{"timeout -s KILL 5 curl x", "curl x"}},
		{"nice -n 10 curl x", []string{"nice -n 10 curl x", "curl x"}},
		{"nohup curl x", []string{"nohup curl x", "curl x"}},
		{"command curl x", []string{"command curl x", "curl x"}},
		{"exec curl x", []string{"exec curl x", "curl x"}},
		{"xargs curl", []string{"xargs curl", "curl <xargs input>"}},
		{"xargs -n 1 -P 4 curl", []string{"xargs -n 1 -P 4 curl", "curl <xargs input>"}},
		{"sudo curl x", []string{"sudo curl x", "curl x"}},
		{"sudo -u root curl x", []string{"sudo -u root curl x", "curl x"}},
		{"stdbuf -o L curl x", []string{"stdbuf -o L curl x", "curl x"}},
		{"sudo env timeout 5 nice curl x", []string{"sudo env timeout 5 nice curl x", "env timeout 5 nice curl x", "timeout 5 nice curl x", "nice curl x", "curl x"}},
		{"env -- curl x", []string{"env -- curl x", "curl x"}},
		{`find . -exec curl {} \;`, []string{"find . -exec curl {} ;", "curl {}"}},
		{"find . -exec curl {} ;", []string{"find . -exec curl {}", "curl {}"}}, // an unquoted ; ends the command
		{"find . -name '*.go' -execdir rm {} +", []string{"find . -name *.go -execdir rm {} +", "rm {}"}},
		// assignments and redirections
		{"A=1 B=2 curl x", []string{"curl x"}},
		{"curl x > /tmp/out 2>&1", []string{"curl x"}},
		{"curl x >> ~/.bashrc", []string{"curl x"}},
		// dynamic programs: no rule can see them
		{"$CMD x", []string{"?$CMD x"}},
		{`"$CMD" x`, []string{`?"$CMD" x`}},
		{"${CMD} x", []string{"?${CMD} x"}},
		{"$(echo curl) x", []string{"?$(echo curl) x", "echo curl"}},
		{"{curl,wget} x", []string{"?{curl,wget} x"}},
		{"cur* x", []string{"?cur* x"}},
		{"cur? x", []string{"?cur? x"}},
		{"~/bin/curl x", []string{"?~/bin/curl x"}},
		// brace expansion is never performed: {1..99999999} would be 10⁸ words
		{"echo {1..99999999999}", []string{"echo {1..99999999999}"}},
		// nothing to run
		{"", nil},
		{"# just a comment", nil},
		{"x=1", nil},
	}
	if len(shapes) < 60 {
		t.Fatalf("%d shapes; the table promises 60 or more", len(shapes))
	}
	for _, s := range shapes {
		got, err := leaves(t, s.cmd)
		if err != nil {
			t.Errorf("%q: %v", s.cmd, err)
			continue
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%q:\n got  %q\n want %q", s.cmd, got, s.want)
		}
	}
}

func TestShellNamesAreBaseNames(t *testing.T) {
	ls, err := ParseCommand("/usr/bin/curl x; ./bin/wget y")
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Name != "curl" || ls[1].Name != "wget" {
		t.Fatalf("names %q %q", ls[0].Name, ls[1].Name)
	}
}

func TestShellAssignsAndRedirectsRecorded(t *testing.T) {
	ls, err := ParseCommand("A=1 curl x > /etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ls[0].Assigns, []string{"A=1"}) || !reflect.DeepEqual(ls[0].Redirects, []string{"> /etc/passwd"}) {
		t.Fatalf("assigns %q redirects %q", ls[0].Assigns, ls[0].Redirects)
	}
}

func TestShellUncheckable(t *testing.T) {
	deep := "curl x"
	for range MaxShellDepth + 2 {
		deep = "sh -c " + quote(deep)
	}
	for name, cmd := range map[string]string{
		"unterminated quote": "echo 'unterminated",
		"unterminated subst": "echo $(curl x",
		"bad syntax":         "if then fi",
		"too long":           strings.Repeat("a", MaxCommandBytes+1),
		"too many leaves":    strings.Repeat("a;", MaxLeaves+1),
		"too deep":           deep,
	} {
		if _, err := ParseCommand(cmd); !errors.Is(err, ErrUncheckable) {
			t.Errorf("%s: got %v, want ErrUncheckable", name, err)
		}
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// FuzzParseCommand: the whole analysis — parser, wrappers, interpreters,
// awk and sed scanners, env -S splitting, rule matching — never panics and
// stays quick for any input; and every word that stands as a plain literal
// program at the start of a line is among the leaves' names.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"ls && curl x", "$(curl x)", "env A=1 curl", "bash -c 'curl x'", "a | b; c & d", "echo 'x",
		"for i in a; do b; done", "f() { g; }", "x=$(y) z", "find . -exec rm {} ;", "sudo -u r timeout 5 curl", "case a in b) c;; esac",
		"env -S 'a \\_b' c", "sed -e '1e x' -e 's/a/b/e'", "awk 'BEGIN{system(1)}'", "x='a[$(b)]'; echo $((x))", "rm -r{f,} [a-z]*",
		"git -c alias.x='!y' x", "parallel 'a {}' ::: b", "su - r -c 'x'", "perl -ne 1", "echo ${!x} ${x@P} ${a[i]}"} {
		f.Add(s)
	}
	tables := diffTables(f)
	rules := diffRulesFor(f, tables)
	f.Fuzz(func(t *testing.T, cmd string) {
		// Parsing is on the decision path: it must be quick for any input.
		// A watchdog crashes the worker, naming the input, past the bound.
		watchdog := time.AfterFunc(2*time.Second, func() { panic(fmt.Sprintf("Analyze(%q) took over 2s", cmd)) })
		defer watchdog.Stop()
		a, err := tables.Analyze(context.Background(), cmd)
		if err != nil {
			if !errors.Is(err, ErrUncheckable) {
				t.Fatalf("%q: error %v is not ErrUncheckable", cmd, err)
			}
			return
		}
		rules.Match(tables, a)
		names := map[string]bool{}
		for _, l := range a.Leaves {
			if len(l.Argv) == 0 {
				t.Fatalf("%q: a leaf with no argv", cmd)
			}
			if !l.Dynamic && l.Name == "" && l.Argv[0] != "" {
				t.Fatalf("%q: static leaf %q has no name", cmd, l.Argv)
			}
			names[l.Argv[0]] = true
		}
		// In the sub-language of lowercase words, blanks, newlines and ";",
		// with no keywords, the first word of every command is a program:
		// each must be a leaf.
		if !simpleScript(cmd) {
			return
		}
		for _, c := range strings.FieldsFunc(cmd, func(r rune) bool { return r == '\n' || r == ';' }) {
			if words := strings.Fields(c); len(words) > 0 && !names[words[0]] {
				t.Fatalf("%q: program %q missing from leaves %v", cmd, words[0], a.Leaves)
			}
		}
	})
}

func simpleScript(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z') && r != ' ' && r != '\n' && r != ';' {
			return false
		}
	}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == ';' }) {
		if reserved[w] {
			return false
		}
	}
	return true
}

// Shell keywords are not programs.
var reserved = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true, "function": true, "select": true,
	"time": true, "coproc": true}

// ParseCommand is called from every gRPC handler at once: it must share no
// mutable state (run under -race; mvdan.cc/sh's nil expand config did).
func TestParseCommandConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				ls, err := ParseCommand(fmt.Sprintf(`cd src%d && "go" test ./... | c\url -s x%d`, g, i))
				if err != nil || len(ls) != 3 || ls[2].Name != "curl" {
					t.Errorf("got %v %v", ls, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
