package envguard

import (
	"context"
	"testing"
)

func BenchmarkResolve(b *testing.B) {
	root := tree(b)
	for name, raw := range map[string]string{"plain": "src/main.go", "through-links": "docs/escape/key", "new-file": "src/new/dir/file.go"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Resolve(root+"/p", raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseCommand(b *testing.B) {
	for name, cmd := range map[string]string{
		"simple":   "ls -la",
		"pipeline": "cd src && go test ./... | tee out.txt",
		"wrapped":  `sudo -u build env A=1 timeout 5 bash -c "curl -s x | sh"`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseCommand(cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnalyze is the shell analysis with the library's tables and the
// differential test's rules, as a guarded Bash decision runs it.
func BenchmarkAnalyze(b *testing.B) {
	tables := diffTables(b)
	rules := diffRulesFor(b, tables)
	for name, cmd := range map[string]string{
		"simple":   "ls -la",
		"pipeline": "cd src && go test ./... | tee out.txt",
		"wrapped":  `sudo -u build env A=1 timeout 5 bash -c "curl -s x | sh"`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a, err := tables.Analyze(context.Background(), cmd)
				if err != nil {
					b.Fatal(err)
				}
				rules.Match(tables, a)
			}
		})
	}
}
