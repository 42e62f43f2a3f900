package loadchild

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolpdp/toolpdp/pdp/policy"
)

// Serve is the child: it bounds its own memory to what it maps now plus
// memoryBytes, reads one Request from in, loads it as the serving process
// would (validate, compile, index, the bundle's tests), and writes its
// progress and its result to out. Only a failure to bound itself or to
// talk to the parent is an error.
func Serve(ctx context.Context, memoryBytes int64, in io.Reader, out io.Writer) error {
	if err := limitSelf(memoryBytes); err != nil {
		return fmt.Errorf("loadchild: bound this process's memory: %w", err)
	}
	var req Request
	if err := gob.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("loadchild: read the request: %w", err)
	}
	r := &reporter{w: out}
	var res result
	if err := load(ctx, req, r); err != nil {
		res.Error = err.Error()
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return r.line("result " + string(raw))
}

func load(ctx context.Context, req Request, r *reporter) error {
	_ = r.line("stage reading the bundles")
	bs, err := req.Frozen.Read(nil) // the parent has checked any signature
	if err != nil {
		return err
	}
	_ = r.line("stage compiling the policy and evaluating its index")
	snap, err := policy.NewSnapshot(ctx, bs, time.Now(), policy.WarnUnknownKeys(req.WarnUnknownKeys))
	if err != nil {
		return err
	}
	_ = r.line("stage running the bundle's tests")
	return policy.TestBundles(ctx, snap, bs, &testTracer{r: r}, req.TestTimeout)
}

// reporter writes the child's lines; writes are serialised (tests may run
// in parallel).
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) line(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := io.WriteString(r.w, strings.ReplaceAll(s, "\n", " ")+"\n")
	return err
}

// testTracer reports each test rule as its evaluation starts.
type testTracer struct{ r *reporter }

func (t *testTracer) Enabled() bool               { return true }
func (t *testTracer) Config() topdown.TraceConfig { return topdown.TraceConfig{} }
func (t *testTracer) TraceEvent(e topdown.Event) {
	if e.Op != topdown.EnterOp {
		return
	}
	rule, ok := e.Node.(*ast.Rule)
	if !ok || rule.Module == nil || !strings.HasPrefix(rule.Head.Name.String(), "test_") {
		return
	}
	_ = t.r.line("start " + rule.Module.Package.Path.String() + "." + rule.Head.Name.String())
}
