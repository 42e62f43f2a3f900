package pdp

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/prometheus/client_golang/prometheus"
)

// Loader reads the configured bundles into snapshots and hands good ones
// to the engine. A bundle that fails to read, compile, validate or pass its
// own tests is rejected, and the last good snapshot keeps serving.
type Loader struct {
	sources     *Sources
	engine      *Engine
	log         *slog.Logger
	testTimeout time.Duration
	onSwap      func(*Snapshot)
	reloads     *prometheus.CounterVec
	now         func() time.Time

	mu       sync.Mutex // serialises loads; guards the fields below
	lastErr  error
	lastHash string
}

// LoaderConfig holds what a Loader is built from.
type LoaderConfig struct {
	Sources     *Sources // the --bundle arguments; none: the embedded default agent
	Engine      *Engine
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	TestTimeout time.Duration    // bound on a bundle's own _test.rego run
	OnSwap      func(*Snapshot)  // called after each swap; may be nil
	Now         func() time.Time // clock; time.Now when nil
}

// NewLoader returns a loader; call Reload to load.
func NewLoader(c LoaderConfig) (*Loader, error) {
	if c.Now == nil {
		c.Now = time.Now
	}
	l := &Loader{sources: c.Sources, engine: c.Engine, log: c.Logger, testTimeout: c.TestTimeout, onSwap: c.OnSwap, now: c.Now,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_bundle_reloads_total",
			Help: "Bundle loads by result: ok, rejected (the last good policy kept serving) or unchanged.",
		}, []string{"result"}),
	}
	if c.Registerer != nil {
		if err := c.Registerer.Register(l.reloads); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// LastError is the error of the last rejected load, nil after a good one.
func (l *Loader) LastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// Reload builds a snapshot from the bundles and swaps it in. With force
// false, bundles whose content has not changed since the last good load are
// not reloaded.
func (l *Loader) Reload(ctx context.Context, force bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	hash, err := l.sources.Hash()
	if err == nil && !force && hash == l.lastHash {
		return nil
	}
	var snap *Snapshot
	if err == nil {
		snap, err = Load(ctx, l.sources, l.testTimeout, l.now())
	}
	if err != nil {
		l.lastErr = err
		l.reloads.WithLabelValues("rejected").Inc()
		l.log.Error("bundle rejected; the last good policy keeps serving", "bundles", l.sources.Paths, "error", err.Error())
		return err
	}
	for _, w := range snap.Warnings {
		l.log.Warn("bundle warning", "warning", w)
	}
	l.engine.Swap(snap)
	l.lastErr, l.lastHash = nil, hash
	l.reloads.WithLabelValues("ok").Inc()
	l.log.Info("policy loaded", "revision", snap.Revision, "bundles", l.sources.Paths)
	if l.onSwap != nil {
		l.onSwap(snap)
	}
	return nil
}

// Load reads and builds a snapshot from the sources, running the bundles'
// own _test.rego tests.
func Load(ctx context.Context, src *Sources, testTimeout time.Duration, now time.Time) (*Snapshot, error) {
	bundles, err := src.Read()
	if err != nil {
		return nil, err
	}
	snap, err := NewSnapshot(ctx, bundles, now)
	if err != nil {
		return nil, err
	}
	if err := runBundleTests(ctx, snap, bundles, testTimeout); err != nil {
		return nil, err
	}
	return snap, nil
}

// runBundleTests fails when any test of the user bundles fails.
func runBundleTests(ctx context.Context, snap *Snapshot, bundles []*Bundle, timeout time.Duration) error {
	results, err := RunBundleTests(ctx, snap, bundles, nil, timeout)
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
func RunBundleTests(ctx context.Context, snap *Snapshot, bundles []*Bundle, tracer *cover.Cover, timeout time.Duration) ([]*tester.Result, error) {
	var pkgs []string
	for _, b := range bundles {
		if !isUser(b) {
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

func isUser(b *Bundle) bool { return b.Name != "library" && b.Name != "default" }

// IsUserFile reports whether a module file belongs to a user bundle.
func IsUserFile(bundles []*Bundle, file string) bool {
	for _, b := range bundles {
		for _, m := range b.Bundle.Modules {
			if m.Path == file {
				return isUser(b)
			}
		}
	}
	return false
}

// RunTests runs the test rules of modules whose full name matches filter
// (all when ""), with the sandboxed builtins. tracer may be nil.
func RunTests(ctx context.Context, modules map[string]*ast.Module, store storage.Store, filter string, tracer *cover.Cover, timeout time.Duration) ([]*tester.Result, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)
	runner := tester.NewRunner().
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
	var out []*tester.Result
	for r := range ch {
		out = append(out, r)
	}
	return out, nil
}

func describeResult(r *tester.Result) string {
	where := ""
	if r.Location != nil {
		where = fmt.Sprintf("%s:%d: ", r.Location.File, r.Location.Row)
	}
	if r.Error != nil {
		return fmt.Sprintf("%s%s.%s: error: %v", where, r.Package, r.Name, r.Error)
	}
	return fmt.Sprintf("%s%s.%s: failed", where, r.Package, r.Name)
}
