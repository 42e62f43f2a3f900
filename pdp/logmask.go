package pdp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// OPA's decision-log mask policy, as OPA documents it: a bundle's
// data.system.log.mask is a set of JSON pointers into the decision event to
// erase ("/input/args/password"), or of {"op": "upsert", "path", "value"}
// objects to overwrite; data.system.log.drop, when true, drops the event.
// Both see the event as input, so input.input.args is the request's args.
// The pointer semantics follow OPA's v1/plugins/logs/mask.go (whose types
// are not exported): the first segment is "input" or "result", segments are
// path-unescaped, array elements are named by index, a pointer to a missing
// place does nothing, and the event lists what it erased and masked.
const (
	logMaskQuery = "data.system.log.mask"
	logDropQuery = "data.system.log.drop"
)

// logMaskTimeout bounds one evaluation of a bundle's mask or drop policy.
const logMaskTimeout = 100 * time.Millisecond

// logPolicy is a snapshot's prepared mask and drop queries; nil when the
// bundle has no package system.log.
type logPolicy struct {
	mask, drop *rego.PreparedEvalQuery
}

// prepareLogPolicy prepares the bundle's system.log rules, if it has any.
func prepareLogPolicy(ctx context.Context, s *Snapshot) (*logPolicy, error) {
	pkg := ast.MustParseRef("data.system.log")
	has := false
	for _, m := range s.modules {
		has = has || m.Package.Path.Equal(pkg)
	}
	if !has {
		return nil, nil
	}
	lp := &logPolicy{}
	for q, dst := range map[string]**rego.PreparedEvalQuery{logMaskQuery: &lp.mask, logDropQuery: &lp.drop} {
		pq, err := rego.New(rego.Compiler(s.compiler), rego.Store(s.store), rego.Query(q), rego.StrictBuiltinErrors(true)).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", q, err)
		}
		*dst = &pq
	}
	return lp, nil
}

// apply evaluates the policy on a decision line and masks it in place. It
// reports whether the line is to be dropped. Errors leave the line masked
// as far as it got (toolpdp's own masking has already run).
func (lp *logPolicy) apply(line map[string]any) (drop bool, err error) {
	if lp == nil {
		return false, nil
	}
	input, err := ast.InterfaceToValue(line)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), logMaskTimeout)
	defer cancel()
	if rs, err := lp.drop.Eval(ctx, rego.EvalParsedInput(input)); err != nil {
		return false, fmt.Errorf("%s: %w", logDropQuery, err)
	} else if len(rs) == 1 && rs[0].Expressions[0].Value == true {
		return true, nil
	}
	rs, err := lp.mask.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return false, fmt.Errorf("%s: %w", logMaskQuery, err)
	}
	if len(rs) != 1 {
		return false, nil
	}
	rules, _ := rs[0].Expressions[0].Value.([]any)
	var errs []error
	for _, r := range rules {
		if err := maskPointer(line, r); err != nil {
			errs = append(errs, err)
		}
	}
	return false, errors.Join(errs...)
}

// maskPointer applies one mask rule: a pointer string (erase) or an
// {"op": "remove"|"upsert", "path", "value"} object.
func maskPointer(line map[string]any, rule any) error {
	op, path, value := "remove", "", any(nil)
	switch r := rule.(type) {
	case string:
		path = r
	case map[string]any:
		path, _ = r["path"].(string)
		if o, ok := r["op"].(string); ok {
			op = o
		}
		value = r["value"]
	default:
		return fmt.Errorf("mask rule %v is not a pointer or an object", rule)
	}
	if op != "remove" && op != "upsert" {
		return fmt.Errorf("mask rule %q: op %q is not remove or upsert", path, op)
	}
	parts, err := maskPath(path)
	if err != nil {
		return err
	}
	done := false
	if len(parts) == 1 {
		if op == "remove" {
			delete(line, parts[0])
		} else {
			line[parts[0]] = value
		}
		done = true
	} else if parent, ok := walk(line[parts[0]], parts[1:len(parts)-1], op == "upsert"); ok {
		done = setOrDelete(parent, parts[len(parts)-1], op == "remove", value)
	}
	if done {
		key := map[string]string{"remove": "erased", "upsert": "masked"}[op]
		list, _ := line[key].([]any)
		line[key] = append(list, "/"+strings.Join(parts, "/"))
	}
	return nil
}

// maskPath splits a pointer into unescaped segments; its first must be
// input or result.
func maskPath(path string) ([]string, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("mask %q is not slash-prefixed", path)
	}
	parts := strings.Split(path[1:], "/")
	if parts[0] != "input" && parts[0] != "result" {
		return nil, fmt.Errorf("mask %q: prefix %q is not input or result", path, parts[0])
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("mask %q: %w", path, err)
		}
		parts[i] = u
	}
	return parts, nil
}

// walk follows segments from node; with create, missing objects are made.
func walk(node any, segs []string, create bool) (any, bool) {
	for _, s := range segs {
		switch n := node.(type) {
		case map[string]any:
			child, ok := n[s]
			if !ok {
				if !create {
					return nil, false
				}
				child = map[string]any{}
				n[s] = child
			}
			node = child
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// setOrDelete removes or sets key in an object or array. A removed array
// element becomes null (OPA shortens the array instead).
func setOrDelete(node any, key string, remove bool, value any) bool {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n[key]; !ok && remove {
			return false
		}
		if remove {
			delete(n, key)
		} else {
			n[key] = value
		}
		return true
	case []any:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(n) {
			return false
		}
		if remove {
			n[i] = nil
		} else {
			n[i] = value
		}
		return true
	}
	return false
}
