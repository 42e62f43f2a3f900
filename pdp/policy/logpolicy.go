package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// OPA's decision-log mask policy, as OPA documents it: a bundle's
// data.system.log.mask is a set of JSON pointers into the decision event to
// erase ("/input/args/password"), or of {"op": "upsert", "path", "value"}
// objects to overwrite; data.system.log.drop, when true, drops the event.
// Both see the event as input, so input.input.args is the request's args.
// This file evaluates them; package decisionlog applies the pointers.
const (
	logMaskQuery = "data.system.log.mask"
	logDropQuery = "data.system.log.drop"
)

// logMaskTimeout bounds one evaluation of a bundle's mask or drop policy.
const logMaskTimeout = 100 * time.Millisecond

// LogPolicy is a snapshot's prepared mask and drop queries; nil when the
// bundle has no package system.log.
type LogPolicy struct {
	mask, drop *rego.PreparedEvalQuery
}

// prepareLogPolicy prepares the bundle's system.log rules, if it has any.
func prepareLogPolicy(ctx context.Context, s *Snapshot) (*LogPolicy, error) {
	pkg := ast.MustParseRef("data.system.log")
	has := false
	for _, m := range s.modules {
		has = has || m.Package.Path.Equal(pkg)
	}
	if !has {
		return nil, nil
	}
	lp := &LogPolicy{}
	for q, dst := range map[string]**rego.PreparedEvalQuery{logMaskQuery: &lp.mask, logDropQuery: &lp.drop} {
		pq, err := rego.New(rego.Compiler(s.compiler), rego.Store(s.store), rego.Query(q), rego.StrictBuiltinErrors(true)).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", q, err)
		}
		*dst = &pq
	}
	return lp, nil
}

// Rules evaluates the policy on a decision line: whether to drop it, else
// the mask rules to apply to it (pointers, or op/path/value objects).
func (lp *LogPolicy) Rules(line map[string]any) (drop bool, mask []any, err error) {
	input, err := ast.InterfaceToValue(line)
	if err != nil {
		return false, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), logMaskTimeout)
	defer cancel()
	if rs, err := lp.drop.Eval(ctx, rego.EvalParsedInput(input)); err != nil {
		return false, nil, fmt.Errorf("%s: %w", logDropQuery, err)
	} else if len(rs) == 1 && rs[0].Expressions[0].Value == true {
		return true, nil, nil
	}
	rs, err := lp.mask.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return false, nil, fmt.Errorf("%s: %w", logMaskQuery, err)
	}
	if len(rs) != 1 {
		return false, nil, nil
	}
	mask, _ = rs[0].Expressions[0].Value.([]any)
	return false, mask, nil
}

// LogPolicy is the bundle's decision-log policy (package system.log), or
// nil when it has none.
func (s *Snapshot) LogPolicy() *LogPolicy { return s.logMask }
