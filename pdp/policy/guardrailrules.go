package policy

import (
	"errors"
	"fmt"
	"maps"
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
	for _, path := range slices.Sorted(maps.Keys(modules)) {
		m := modules[path]
		if err := misplacedGuardrail(path, m); err != nil {
			errs = append(errs, err)
		}
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
	for _, pkg := range slices.Sorted(maps.Keys(decides)) {
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

// misplacedGuardrail refuses a package outside data.guardrails (and
// outside the library's own, a test, or OPA's system.log) that defines a
// rule named deny, violation or ask: toolpdp reads guardrails only under
// data.guardrails, so "package guardrail.team" would be a guardrail nobody
// reads.
func misplacedGuardrail(path string, m *ast.Module) error {
	p := m.Package.Path
	if p.HasPrefix(guardrailsRoot) || isTestModule(path, m) || p.HasPrefix(ast.MustParseRef("data.toolpdp")) || p.HasPrefix(ast.MustParseRef("data.system")) {
		return nil
	}
	for _, r := range m.Rules {
		name := r.Head.Ref()[0].Value.(ast.Var).String()
		if _, decision := guardrailDecisions[name]; decision {
			pkg := strings.TrimPrefix(p.String(), "data.")
			meant := "guardrails." + pkg
			if first := strings.Split(pkg, ".")[0]; closest(first, []string{"guardrails"}) != "" {
				meant = "guardrails" + strings.TrimPrefix(pkg, first)
			}
			return fmt.Errorf("%s:%d: package %s defines %s, but toolpdp reads guardrails only under data.guardrails: did you mean package %s?", path, r.Location.Row, pkg, name, meant)
		}
	}
	return nil
}

// guardrailDataKeys are the keys of data.guardrails the library reads.
var guardrailDataKeys = []string{"ask_commands", "deny_commands", "network", "protect_vcs_and_agent_config", "protected_paths", "secret_arguments"}

// checkGuardrailData refuses a key of data.guardrails that is neither one
// the library reads, nor the name of a guardrail package (whose data is
// its owners'), nor an x- key: "deny_command" would be a rule nobody
// enforces.
func checkGuardrailData(data map[string]any, modules map[string]*ast.Module, fileOf func(...string) string) error {
	g, ok := data["guardrails"].(map[string]any)
	if !ok {
		return nil
	}
	packages := map[string]bool{}
	for _, m := range modules {
		if p := m.Package.Path; p.HasPrefix(guardrailsRoot) && len(p) > 2 {
			if s, ok := p[2].Value.(ast.String); ok {
				packages[string(s)] = true
			}
		}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(g)) {
		if slices.Contains(guardrailDataKeys, k) || packages[k] || strings.HasPrefix(k, "x-") {
			continue
		}
		where := fileOf("guardrails", k)
		if m := closest(k, guardrailDataKeys); m != "" {
			errs = append(errs, fmt.Errorf("%s: guardrails.%s: unknown key (did you mean %q?)", where, k, m))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: guardrails.%s: unknown key; the keys known here are %s, and the names of guardrail packages", where, k, strings.Join(guardrailDataKeys, ", ")))
	}
	return errors.Join(errs...)
}
