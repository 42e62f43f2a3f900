package policy

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolpdp/toolpdp/internal/regorun"
	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// runBundleTests fails when any test of the user bundles fails.
func runBundleTests(ctx context.Context, snap *Snapshot, bs []*bundles.Bundle, timeout time.Duration) error {
	return TestBundles(ctx, snap, bs, nil, timeout)
}

// TestBundles runs the user bundles' tests (tracer, when not nil, sees
// their evaluation) and fails, naming each, when any fails.
func TestBundles(ctx context.Context, snap *Snapshot, bs []*bundles.Bundle, tracer topdown.QueryTracer, timeout time.Duration) error {
	results, err := RunBundleTests(ctx, snap, bs, tracer, timeout)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range results {
		if !r.Pass() {
			failed = append(failed, describeResult(r))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bundle tests failed:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// RunBundleTests runs the _test.rego tests of the user bundles against the
// whole snapshot (the library's own tests are run by toolpdp's tests, not at
// every reload). tracer, when not nil, collects coverage.
func RunBundleTests(ctx context.Context, snap *Snapshot, bs []*bundles.Bundle, tracer topdown.QueryTracer, timeout time.Duration) ([]*regorun.Result, error) {
	var pkgs []string
	for _, b := range bs {
		if !b.IsUser() {
			continue
		}
		for _, m := range b.Bundle.Modules {
			if strings.HasSuffix(m.Path, "_test.rego") {
				pkgs = append(pkgs, regexp.QuoteMeta(m.Parsed.Package.Path.String()))
			}
		}
	}
	if len(pkgs) == 0 {
		return nil, nil
	}
	return RunTests(ctx, snap.modules, snap.store, "^("+strings.Join(pkgs, "|")+`)\.`, tracer, timeout)
}

// RunTests runs the test rules of modules whose full name matches filter
// (all when ""), with the sandboxed builtins. tracer may be nil.
func RunTests(ctx context.Context, modules map[string]*ast.Module, store storage.Store, filter string, tracer topdown.QueryTracer, timeout time.Duration) ([]*regorun.Result, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)
	runner := regorun.NewRunner().
		SetCompiler(ast.NewCompiler().WithCapabilities(sandbox())).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetTimeout(timeout)
	if tracer != nil {
		runner = runner.SetCoverageQueryTracer(tracer)
	}
	if filter != "" {
		runner = runner.Filter(filter)
	}
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		return nil, err
	}
	var out []*regorun.Result
	for r := range ch {
		out = append(out, r)
	}
	return out, nil
}

func describeResult(r *regorun.Result) string {
	where := ""
	if r.Location != nil {
		where = fmt.Sprintf("%s:%d: ", r.Location.File, r.Location.Row)
	}
	if r.Error != nil {
		return fmt.Sprintf("%s%s.%s: error: %v", where, r.Package, r.Name, r.Error)
	}
	return fmt.Sprintf("%s%s.%s: failed", where, r.Package, r.Name)
}
