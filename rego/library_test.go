package rego_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"

	"github.com/toolpdp/toolpdp/pdp/bundles"
	"github.com/toolpdp/toolpdp/pdp/policy"
	lib "github.com/toolpdp/toolpdp/rego"
)

// TestLibraryRegoTests runs every _test.rego of the embedded bundles, as
// `opa test rego/` would.
func TestLibraryRegoTests(t *testing.T) {
	ctx := context.Background()
	bundles, err := (&bundles.Sources{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := policy.NewSnapshot(ctx, bundles, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	results, err := policy.RunTests(ctx, snap.Modules(), snap.Store(), "", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 50 {
		t.Fatalf("ran %d Rego tests, want the library's 50 or more", len(results))
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("%s\n%s", r.String(), r.Output)
		}
	}
}

// TestLibraryFormattedAndStrict holds the library to `opa fmt` and
// `opa check --strict`.
func TestLibraryFormattedAndStrict(t *testing.T) {
	modules := map[string]*ast.Module{}
	for name, fsys := range map[string]fs.FS{"library": lib.Library(), "default": lib.Default()} {
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(path, ".rego") {
				return err
			}
			src, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			formatted, err := format.SourceWithOpts(path, src, format.Opts{RegoVersion: ast.RegoV1})
			if err != nil {
				return err
			}
			if string(formatted) != string(src) {
				t.Errorf("%s/%s is not `opa fmt` clean", name, path)
			}
			m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				return err
			}
			modules[name+"/"+path] = m
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := ast.NewCompiler().WithStrict(true)
	if c.Compile(modules); c.Failed() {
		t.Fatalf("opa check --strict: %v", c.Errors)
	}
}
