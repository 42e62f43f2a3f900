package policy

import "testing"

// Which search globs reach beyond the tool's path, and the directory each
// one is checked by.
func TestGlobDir(t *testing.T) {
	cases := []struct {
		glob, base, dir string
		reaches, err    bool
	}{
		{glob: "*.go"},
		{glob: "**/*.go", base: "/p"},
		{glob: "src/a..b/*"},
		{glob: "/etc/*", dir: "/etc/", reaches: true},
		{glob: "/etc/pass*", dir: "/etc/", reaches: true},
		{glob: "/*", dir: "/", reaches: true},
		{glob: "/etc/passwd", dir: "/etc/passwd", reaches: true},
		{glob: "../secret/*", dir: "./../secret/", reaches: true},
		{glob: "../secret/*", base: "/p/src", dir: "/p/src/../secret/", reaches: true},
		{glob: "a/../../*.key", base: "sub", dir: "sub/a/../../", reaches: true},
		{glob: "~/.ssh/*", dir: "~/.ssh/", reaches: true},
		{glob: "file:///etc/*", dir: "file:///etc/", reaches: true},
		{glob: "/p/*/../../etc/x", reaches: true, err: true},
		{glob: "src/{a,..}/../x", reaches: true, err: true},
	}
	for _, c := range cases {
		dir, reaches, err := globDir(c.glob, c.base)
		if dir != c.dir || reaches != c.reaches || (err != nil) != c.err {
			t.Errorf("globDir(%q, %q) = %q, %v, %v; want %q, %v, error %v", c.glob, c.base, dir, reaches, err, c.dir, c.reaches, c.err)
		}
	}
}
