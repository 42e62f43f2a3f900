package grpcapi_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
)

// TestMessages reads every message a conformance run produces — the
// shared corpus when it is beside the repository, and this repository's
// own cases in testdata/messages — and rejects what reads as a slip:
// doubled words, empty quotes, raw Go error chains.
func TestMessages(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/messages/*.decisions.json")
	if len(files) == 0 {
		t.Fatal("no cases in testdata/messages")
	}
	if corpus, _ := filepath.Glob(filepath.Join(conformanceDir, "*.json")); len(corpus) > 0 {
		files = append(files, corpus...)
	} else {
		t.Logf("no conformance corpus at %s: only this repository's cases are read", conformanceDir)
	}
	seen, read := map[string]bool{}, 0
	pending := testkit.PendingConformance(t)
	for _, f := range files {
		if issue, ok := pending[filepath.Base(f)]; ok {
			// Its steps may use what is not built yet, shapes of the file
			// included: its messages are read once it passes.
			t.Logf("%s: pending (issue %s), its messages not read", filepath.Base(f), issue)
			continue
		}
		res := runConformance(t, f)
		for _, fl := range res.Failures {
			t.Errorf("%s: %s", filepath.Base(f), fl)
		}
		for _, m := range res.Messages {
			read++
			if seen[m] {
				continue
			}
			seen[m] = true
			for _, p := range messageProblems(m) {
				t.Errorf("%s: %s: %q", filepath.Base(f), p, m)
			}
		}
	}
	t.Logf("read %d messages (%d distinct) from %d files", read, len(seen), len(files))
}

var (
	emptyQuotes = regexp.MustCompile(`(^|[\s(:=\[])(""|''|“”)([\s),.;:\]]|$)`)
	// A Go error chain: three or more "text: text" links of lower-case
	// error words, or wrapped errors' tell-tale pieces.
	errorChain = regexp.MustCompile(`(?:: [a-z/][^:;"'()]*){3,}`)
	goTells    = regexp.MustCompile(`%!|<nil>|\bruntime error\b|\bgoroutine \d|&\{|0x[0-9a-f]{6,}|rpc error: code =`)
	words      = regexp.MustCompile(`[A-Za-z]+`)
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// messageProblems says what is wrong with a message for a model or a
// person, if anything.
func messageProblems(m string) []string {
	var bad []string
	if strings.Contains(m, "\n") {
		bad = append(bad, "a newline (a raw error's second line)")
	}
	if emptyQuotes.MatchString(m) {
		bad = append(bad, "empty quotes")
	}
	if errorChain.MatchString(m) {
		bad = append(bad, "a raw Go error chain")
	}
	if goTells.MatchString(m) {
		bad = append(bad, "Go formatting leaking")
	}
	if w := doubledWord(m); w != "" {
		bad = append(bad, "the doubled word "+w)
	}
	return bad
}

// doubledWord finds a word written twice in a row ("is is", "cannot be
// checked (command cannot be checked"), ignoring case; "" when none.
func doubledWord(m string) string {
	locs := words.FindAllStringIndex(m, -1)
	for i := 1; i < len(locs); i++ {
		a, b := m[locs[i-1][0]:locs[i-1][1]], m[locs[i][0]:locs[i][1]]
		between := m[locs[i-1][1]:locs[i][0]]
		if strings.EqualFold(a, b) && strings.TrimSpace(between) == "" && len(a) > 1 {
			return a
		}
	}
	// a phrase of three words said twice in one clause, outside quotes
	// ("the command cannot be checked (command: command cannot be checked")
	for _, clause := range strings.Split(quoted.ReplaceAllString(m, `""`), "; ") {
		ws := words.FindAllString(strings.ToLower(clause), -1)
		seen := map[string]bool{}
		for i := 0; i+3 <= len(ws); i++ {
			phrase := strings.Join(ws[i:i+3], " ")
			if seen[phrase] && len(phrase) >= 12 {
				return phrase
			}
			seen[phrase] = true
		}
	}
	return ""
}

func TestMessageProblems(t *testing.T) {
	for m, want := range map[string]bool{
		`path "" is not a valid path: not a path` + "\nthe argument is not a string": true,
		`Bash cannot be checked (command cannot be checked: unterminated quote)`:     true,
		`this is is a slip`: true,
		`open /x: stat /x: no such file or directory: permission denied`:                       true,
		`command "curl https://x" is denied by guardrail deny_commands["curl"]; do not run it`: false,
		`Read of "/p/a" (resolved "/p/a") is outside read_paths`:                               false,
		`git commit -m 'fix' is fine`:                                                          false,
	} {
		if got := len(messageProblems(m)) > 0; got != want {
			t.Errorf("messageProblems(%q) = %v, want problems: %v", m, messageProblems(m), want)
		}
	}
}
