package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/pdp/server"
)

// docs/OPERATING.md's flag table shows the defaults serve's flags have:
// every flag's default is its package's Default… constant, and a row of
// the table whose defaults are literal values must name exactly those.
// A flag missing from the table is an error too.
func TestOperatingDocShowsTheFlagDefaults(t *testing.T) {
	raw, err := os.ReadFile("../../docs/OPERATING.md")
	if err != nil {
		t.Fatal(err)
	}
	_, fs := serveFlagSet(io.Discard)
	documented := map[string]bool{}
	row := regexp.MustCompile("^\\| (`--[^|]*) \\| ([^|]*) \\|")
	flagName := regexp.MustCompile("`--([a-z0-9-]+)")
	value := regexp.MustCompile("`([^`]*)`")
	for _, line := range strings.Split(string(raw), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var names []string
		for _, n := range flagName.FindAllStringSubmatch(m[1], -1) {
			names = append(names, n[1])
			documented[n[1]] = true
		}
		values := value.FindAllStringSubmatch(m[2], -1)
		if len(values) != len(names) || strings.Trim(value.ReplaceAllString(m[2], ""), ", ") != "" {
			continue // the default is said in words ("off", "half of `--max-sessions`")
		}
		for i, name := range names {
			f := fs.Lookup(name)
			if f == nil {
				continue // another command's flag
			}
			def := f.DefValue
			if name == "listen" {
				def = server.DefaultListen // a repeatable flag's default is what none given means
			}
			if !sameDefault(def, values[i][1]) {
				t.Errorf("docs/OPERATING.md: --%s defaults to %q, the flag to %q", name, values[i][1], f.DefValue)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] {
			t.Errorf("docs/OPERATING.md: --%s is not in the flag table", f.Name)
		}
	})
}

func sameDefault(flagValue, doc string) bool {
	if flagValue == doc {
		return true
	}
	a, errA := time.ParseDuration(flagValue)
	b, errB := time.ParseDuration(doc)
	return errA == nil && errB == nil && a == b
}
