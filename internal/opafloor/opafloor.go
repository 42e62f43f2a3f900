// Package opafloor is the cheapest OPA evaluation there is, a prepared
// `x := 1`: the yardstick an in-process decision is measured against, in
// the same run, so that a loaded machine slows both alike.
package opafloor

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

// Prepare prepares the floor's query once; each Eval of it is one floor
// evaluation.
func Prepare(ctx context.Context) (rego.PreparedEvalQuery, error) {
	return rego.New(rego.Query("x := 1")).PrepareForEval(ctx)
}

// Loop evaluates the prepared floor b.N times, as a benchmark body.
func Loop(b *testing.B, pq rego.PreparedEvalQuery) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pq.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// Measure is the floor's nanoseconds per evaluation, measured now with
// testing.Benchmark.
func Measure(ctx context.Context) (int64, error) {
	pq, err := Prepare(ctx)
	if err != nil {
		return 0, err
	}
	return testing.Benchmark(func(b *testing.B) { Loop(b, pq) }).NsPerOp(), nil
}
