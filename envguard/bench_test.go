package envguard

import "testing"

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
