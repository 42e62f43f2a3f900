package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The owners' guardrail Rego: every package at or under data.guardrails
// (test packages aside) defines deny, violation or ask, in any shape OPA
// users write them; the library turns each value into reasons. Go finds the
// rules when the bundle loads and hands the library one generated module,
// data.toolpdp.owned_guardrails.rules, holding each rule's value under its
// name: only those rules are evaluated per decision, and a rule toolpdp
// would not read is refused here, never ignored.

// ownedGuardrailsModule is the generated module's file name.
const ownedGuardrailsModule = "toolpdp/owned_guardrails.rego"

var (
	guardrailsRoot = ast.MustParseRef("data.guardrails")
	// guardrailDecisions are the rule names read, with their effect.
	guardrailDecisions = map[string]string{"deny": "deny", "violation": "deny", "ask": "ask"}
)

// isGuardrailModule reports whether a module is the owners' guardrail Rego:
// its package is data.guardrails or below it, and it is not a test.
func isGuardrailModule(path string, m *ast.Module) bool {
	return m.Package.Path.HasPrefix(guardrailsRoot) && !isTestModule(path, m)
}

// isTestModule: a _test.rego file or a package whose last name ends in _test.
func isTestModule(path string, m *ast.Module) bool {
	if strings.HasSuffix(path, "_test.rego") {
		return true
	}
	p := m.Package.Path
	last, ok := p[len(p)-1].Value.(ast.String)
	return ok && strings.HasSuffix(string(last), "_test")
}

// guardrailRules checks the owners' guardrail packages and returns the
// refs of the decision rules they define, sorted. misnamed maps a rule name
// toolpdp does not read to the name meant (the library's table).
func guardrailRules(modules map[string]*ast.Module, misnamed map[string]string) ([]ast.Ref, error) {
	var errs []error
	seen := map[string]bool{}
	var refs []ast.Ref
	decides := map[string]bool{} // package -> defines a decision rule
	fileOf := map[string]string{}
	for _, path := range slices.Sorted(mapKeys(modules)) {
		m := modules[path]
		if !isGuardrailModule(path, m) {
			continue
		}
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		if _, ok := fileOf[pkg]; !ok {
			fileOf[pkg] = path
			decides[pkg] = false
		}
		for _, r := range m.Rules {
			ref, err := decisionRef(m, r, misnamed)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: package %s: %w", path, r.Location.Row, pkg, err))
				continue
			}
			if ref == nil {
				continue
			}
			decides[pkg] = true
			if k := ref.String(); !seen[k] {
				seen[k] = true
				refs = append(refs, ref)
			}
		}
	}
	for _, pkg := range slices.Sorted(mapKeys(decides)) {
		if !decides[pkg] {
			errs = append(errs, fmt.Errorf("%s: package %s defines none of deny, violation and ask, so toolpdp would never read it: define one, or move helpers outside data.guardrails", fileOf[pkg], pkg))
		}
	}
	slices.SortFunc(refs, func(a, b ast.Ref) int { return a.Compare(b) })
	return refs, errors.Join(errs...)
}

// decisionRef is the ref of the decision document a rule contributes to
// (data.guardrails.team.deny for `deny contains msg if …` in package
// guardrails.team), nil for a helper rule; an error for a rule named like a
// decision toolpdp does not read, a function so named, or a decision under
// a key known only at evaluation.
func decisionRef(m *ast.Module, r *ast.Rule, misnamed map[string]string) (ast.Ref, error) {
	head := r.Head.Ref()
	ground := head.GroundPrefix()
	for i, t := range head {
		s, ok := t.Value.(ast.String)
		if i == 0 {
			s = ast.String(head[0].Value.(ast.Var))
			ok = true
		}
		if !ok {
			continue
		}
		name := string(s)
		if meant, bad := misnamed[name]; bad && i == 0 {
			return nil, fmt.Errorf("rule %q is not a decision toolpdp reads: did you mean %q?", name, meant)
		}
		if _, decision := guardrailDecisions[name]; !decision {
			if _, near := guardrailDecisions[strings.ToLower(name)]; near && i == 0 {
				return nil, fmt.Errorf("rule %q is not a decision toolpdp reads: did you mean %q?", name, strings.ToLower(name))
			}
			continue
		}
		switch {
		case len(r.Head.Args) > 0:
			return nil, fmt.Errorf("%s is a function: toolpdp reads %s as a rule (deny contains msg if …, deny if …)", name, name)
		case i >= len(ground):
			return nil, fmt.Errorf("%s sits under a key known only when the rule is evaluated (%s): toolpdp cannot find it", name, head)
		}
		return m.Package.Path.Extend(head[:i+1]), nil
	}
	return nil, nil
}

// ownedGuardrails is the generated module: one element of rules per
// decision rule, holding its value (absent while the rule is undefined).
func ownedGuardrails(refs []ast.Ref) (*ast.Module, error) {
	var b strings.Builder
	b.WriteString("package toolpdp.owned_guardrails\n\n")
	for _, ref := range refs {
		name := string(ref[len(ref)-1].Value.(ast.String))
		fmt.Fprintf(&b, "rules contains {%q: %q, %q: %q, %q: %s}\n",
			"rule", strings.TrimPrefix(ref.String(), "data."), "effect", guardrailDecisions[name], "value", ref)
	}
	return ast.ParseModuleWithOpts(ownedGuardrailsModule, b.String(), ast.ParserOptions{RegoVersion: ast.RegoV1})
}
