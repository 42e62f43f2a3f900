package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/format"
	"github.com/pmezard/go-difflib/difflib"
)

// fmtCmd formats a bundle's Rego as `opa fmt` does (OPA's own formatter,
// Rego v1). With --check or --diff it changes nothing: it lists (or shows
// the diff of) every file the formatter would change and exits 1 when there
// is one, as `opa fmt --fail` and `gofmt -l` are used in CI; a file that does
// not parse exits 3, like a bundle that does not compile.
func fmtCmd(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fset := newFlagSet("fmt", stderr)
	checkOnly := fset.Bool("check", false, "change nothing: list the files that are not formatted and exit 1 when there is one")
	diff := fset.Bool("diff", false, "change nothing: print a unified diff of what formatting would change, and exit 1 when it would")
	withSynopsis(fset, "toolpdp fmt [--check] [--diff] PATH...   (PATH: a .rego file or a directory, walked for .rego files)")
	if err := parse(fset, args); err != nil {
		return err
	}
	if fset.NArg() == 0 {
		fset.Usage()
		return errUsage
	}
	files, err := regoFiles(fset.Args())
	if err != nil {
		return err
	}
	var unformatted, broken int
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := format.SourceWithOpts(f, src, format.Opts{})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			broken++
			continue
		}
		if bytes.Equal(src, out) {
			continue
		}
		unformatted++
		switch {
		case *diff:
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(string(src)), B: difflib.SplitLines(string(out)),
				FromFile: f, ToFile: f + " (formatted)", Context: 3,
			})
			if err != nil {
				return err
			}
			fmt.Fprint(stdout, text)
		case *checkOnly:
			fmt.Fprintln(stdout, f)
		default:
			info, err := os.Stat(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(f, out, info.Mode().Perm()); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "formatted", f)
		}
	}
	switch {
	case broken > 0:
		fmt.Fprintf(stderr, "toolpdp fmt: %d file(s) do not parse\n", broken)
		return exitCode(3) // as a bundle that does not compile
	case unformatted > 0 && (*checkOnly || *diff):
		fmt.Fprintf(stderr, "toolpdp fmt: %d file(s) are not formatted: run toolpdp fmt %s\n", unformatted, strings.Join(fset.Args(), " "))
		return exitCode(1)
	}
	return nil
}

// regoFiles lists the .rego files of paths, each directory walked (symlinks
// not followed), sorted.
func regoFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".rego") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}
