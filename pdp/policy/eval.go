package policy

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// eval evaluates a prepared query on input, stopped when ctx is done. OPA
// would start a goroutine per evaluation to watch ctx (and wake a thread
// for it); context.AfterFunc costs nothing until ctx is done. Nothing reads
// OPA's per-evaluation metrics, so none are kept.
func eval(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value, opts ...rego.EvalOption) (rego.ResultSet, error) {
	c := topdown.NewCancel()
	stop := context.AfterFunc(ctx, c.Cancel)
	defer stop()
	return pq.Eval(ctx, append(opts, rego.EvalParsedInput(input), rego.EvalExternalCancel(c), rego.EvalMetrics(metrics.NoOp()))...)
}
