package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"google.golang.org/protobuf/types/known/structpb"
)

// Argument constraints are data: a tool's entry in a definition (a
// toolset's configs entry, a custom tool's declaration) may carry
// "args": {NAME: SCHEMA}, SCHEMA a small subset of JSON Schema. Go compiles
// them at load (a schema that does not compile rejects the bundle) and
// checks a call's arguments against them; the library turns what they
// break into denies (toolpdp.arguments, rule argument_constraint). They only
// tighten: a call that satisfies them is decided as it would be without.

// ArgKeywords are the JSON Schema keywords an argument constraint may use,
// the one list: anything else is refused at load, since a keyword nobody
// checks would be a constraint that silently is not there. required (a
// boolean: the argument must be present) belongs to the argument, not to
// its value, and so is allowed only at the top of its schema.
var ArgKeywords = []string{"type", "enum", "const", "pattern", "minimum", "maximum", "maxLength", "items", "required"}

// Which set of constraints a call meets: a declared custom tool's own, or
// its toolset's configs entry (the built-in toolset is server "").
const (
	argSetCustom  = "custom"
	argSetToolset = "toolset"
)

// argSetKey names one tool's constraints in a definition.
type argSetKey struct {
	set    string // argSetCustom or argSetToolset
	server string // the toolset's server ("" for the built-in one); "" for custom tools
	tool   string // the bare name a call arrives with
}

// argSchema is one argument's constraint, compiled.
type argSchema struct {
	name     string
	required bool
	schema   *jsonschema.Schema // nil: only required
}

// ArgConstraints are an agent definition's argument constraints, compiled,
// beside the schemas as written (a pinned definition keeps those).
type ArgConstraints struct {
	tools map[argSetKey][]argSchema
	docs  []pinnedArgs
}

// pinnedArgs is one tool's constraints as a pinned definition keeps them.
type pinnedArgs struct {
	Set    string         `json:"set"`
	Server string         `json:"server,omitempty"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
}

// add compiles the constraints of one tool (a valid args object);
// errors name the argument and the keyword.
func (c *ArgConstraints) add(key argSetKey, args map[string]any) error {
	var errs []error
	var compiled []argSchema
	for _, name := range sortedKeys(args) {
		s, err := compileArg(name, args[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		compiled = append(compiled, s)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.put(key, compiled, args)
	return nil
}

// put keeps one tool's compiled constraints and the schemas as written.
func (c *ArgConstraints) put(key argSetKey, compiled []argSchema, args map[string]any) {
	if c.tools == nil {
		c.tools = map[argSetKey][]argSchema{}
	}
	c.tools[key] = compiled
	c.docs = append(c.docs, pinnedArgs{Set: key.set, Server: key.server, Tool: key.tool, Args: args})
}

// empty reports whether no tool has constraints.
func (c *ArgConstraints) empty() bool { return c == nil || len(c.tools) == 0 }

// decodeArgConstraints compiles the constraints a pinned definition kept.
func decodeArgConstraints(docs []pinnedArgs) (*ArgConstraints, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	c := &ArgConstraints{}
	for _, d := range docs {
		if d.Set != argSetCustom && d.Set != argSetToolset {
			return nil, fmt.Errorf("argument constraints of %q: set %q is not custom or toolset", d.Tool, d.Set)
		}
		if err := c.add(argSetKey{set: d.Set, server: d.Server, tool: d.Tool}, d.Args); err != nil {
			return nil, fmt.Errorf("argument constraints of %q: %w", d.Tool, err)
		}
	}
	return c, nil
}

// argSchemaErrors are what is wrong with one argument's schema as written:
// keywords outside the subset, required not a boolean, items not a
// schema, each error naming the keyword (under path: "items." inside
// items). Keys beginning with x- are the owners' own, as everywhere in a
// definition.
func argSchemaErrors(path string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		where := "the constraint"
		if path != "" {
			where = strings.TrimSuffix(path, ".")
		}
		return []string{fmt.Sprintf("%s must be an object of JSON Schema keywords, got %s", where, typeName(v))}
	}
	var errs []string
	for _, k := range sortedKeys(m) {
		switch {
		case strings.HasPrefix(k, "x-"):
		case k == "required":
			if path != "" {
				errs = append(errs, fmt.Sprintf("%srequired: keyword \"required\" is allowed only at the top of an argument's constraint (the argument must be present)", path))
			} else if _, ok := m[k].(bool); !ok {
				errs = append(errs, fmt.Sprintf("required: keyword \"required\" must be true or false, got %s", typeName(m[k])))
			}
		case k == "items":
			errs = append(errs, argSchemaErrors(path+"items.", m[k])...)
		case !slices.Contains(ArgKeywords, k):
			errs = append(errs, fmt.Sprintf("%s%s: keyword %q is not one argument constraints know (they are %s)", path, k, k, strings.Join(ArgKeywords, ", ")))
		}
	}
	return errs
}

// compileArg compiles one argument's schema, checked by argSchemaErrors.
func compileArg(name string, v any) (argSchema, error) {
	if errs := argSchemaErrors("", v); len(errs) > 0 {
		return argSchema{}, fmt.Errorf("argument %q: %s", name, strings.Join(errs, "; "))
	}
	return compileSchema(name, v.(map[string]any))
}

// compileSchema compiles the JSON Schema of m: required comes off (it is
// the argument's, not its value's) and so does whatever argSchemaErrors
// refuses; the rest the library compiles and checks against its metaschema
// (a pattern that is not a regular expression, a maxLength that is not a
// whole number). Both kinds of error are found in one load.
func compileSchema(name string, m map[string]any) (argSchema, error) {
	out := argSchema{name: name}
	out.required, _ = m["required"].(bool)
	doc := schemaDoc(m)
	if len(doc) == 0 {
		return out, nil
	}
	const url = "mem:///argument.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, doc); err != nil {
		return argSchema{}, fmt.Errorf("argument %q: %v", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return argSchema{}, fmt.Errorf("argument %q: %s", name, schemaError(err))
	}
	out.schema = s
	return out, nil
}

// schemaDoc is the JSON Schema of a constraint: its keywords of the subset
// but required, at any depth.
func schemaDoc(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k == "required" || !slices.Contains(ArgKeywords, k) {
			continue
		}
		if k == "items" {
			sub, ok := v.(map[string]any)
			if !ok {
				continue
			}
			v = schemaDoc(sub)
		}
		out[k] = v
	}
	return out
}

// schemaError says why a schema does not compile, by keyword: the
// metaschema's complaints, one per place.
func schemaError(err error) string {
	var sve *jsonschema.SchemaValidationError
	if !errors.As(err, &sve) {
		return err.Error()
	}
	var ve *jsonschema.ValidationError
	if !errors.As(sve.Err, &ve) {
		return sve.Err.Error()
	}
	var parts []string
	for _, leaf := range leaves(ve) {
		where := strings.Join(leaf.InstanceLocation, ".")
		if where == "" {
			where = "schema"
		}
		parts = append(parts, fmt.Sprintf("%s: %s", where, leaf.ErrorKind.LocalizedString(printer)))
	}
	return strings.Join(parts, "; ")
}

var printer = message.NewPrinter(language.English)

// leaves are the errors of a validation that name a keyword: the causes
// at the bottom of its tree, in order.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// argumentsRead refuses a snapshot where some agent constrains arguments
// but no module reads input.arguments: a bundle that replaces the library
// without toolpdp.arguments would leave every constraint unchecked.
func (s *Snapshot) argumentsRead() error {
	var constrained []string
	for _, id := range s.AgentIDs() {
		if !s.agents[id].Args.empty() {
			constrained = append(constrained, id)
		}
	}
	if len(constrained) == 0 {
		return nil
	}
	ref := ast.MustParseRef("input.arguments")
	for _, path := range slices.Sorted(maps.Keys(s.modules)) {
		found := false
		ast.WalkRefs(s.modules[path], func(r ast.Ref) bool {
			found = found || r.HasPrefix(ref)
			return found
		})
		if found {
			return nil
		}
	}
	return fmt.Errorf("agent '%s' constrains arguments (args), but no module of the policy reads input.arguments: a bundle that replaces the library must carry its toolpdp.arguments package, or the constraints would go unchecked", strings.Join(constrained, "', '"))
}

// argumentsFact is what a call's arguments break: for each set of
// constraints that may be the call's (a custom tool's and its toolset's;
// which one applies is the permission axis's to say), one violation per
// argument. A set the definition does not have is absent.
type argumentsFact struct {
	custom, toolset       []argViolation
	hasCustom, hasToolset bool
}

// argViolation is one argument's broken constraint: the argument, the
// keyword it breaks (the first, when it breaks several) and a message
// naming both.
type argViolation struct{ arg, keyword, message string }

// maxViolationsShown bounds how many of one argument's failures its
// message spells out (an array of many items can fail at each).
const maxViolationsShown = 3

// checkArgs is what args break of the constraints that may apply to a call
// of tool name of server (canonical, as the permission axis names it):
// customServer is the server a custom tool may also arrive under. nil when
// neither set exists.
func (c *ArgConstraints) checkArgs(customServer, server, name string, args *structpb.Struct) *argumentsFact {
	if c.empty() {
		return nil
	}
	f := &argumentsFact{}
	if server == "" || server == customServer {
		if set, ok := c.tools[argSetKey{set: argSetCustom, tool: name}]; ok {
			f.hasCustom, f.custom = true, violations(set, args)
		}
	}
	if set, ok := c.tools[argSetKey{set: argSetToolset, server: server, tool: name}]; ok {
		f.hasToolset, f.toolset = true, violations(set, args)
	}
	if !f.hasCustom && !f.hasToolset {
		return nil
	}
	return f
}

func violations(set []argSchema, args *structpb.Struct) []argViolation {
	var out []argViolation
	for _, s := range set {
		if other := caseVariant(args, s.name); other != "" {
			// A server that reads names ignoring case (Go's encoding/json
			// does) would take it for the constrained argument, unchecked.
			out = append(out, argViolation{arg: s.name, keyword: "name", message: fmt.Sprintf("argument %q: named like the constrained argument %q but for case; name it exactly %q", other, s.name, s.name)})
			continue
		}
		v, present := args.GetFields()[s.name]
		if !present {
			if s.required {
				out = append(out, argViolation{arg: s.name, keyword: "required", message: fmt.Sprintf("argument %q: required, and the call does not give it", s.name)})
			}
			continue
		}
		if s.schema == nil {
			continue
		}
		err := s.schema.Validate(instance(v))
		var ve *jsonschema.ValidationError
		if err == nil {
			continue
		}
		if !errors.As(err, &ve) {
			out = append(out, argViolation{arg: s.name, keyword: "type", message: fmt.Sprintf("argument %q: cannot be checked: %v", s.name, err)})
			continue
		}
		ls := leaves(ve)
		parts := make([]string, 0, min(len(ls), maxViolationsShown)+1)
		for _, l := range ls[:min(len(ls), maxViolationsShown)] {
			parts = append(parts, failure(s.name, l))
		}
		if len(ls) > maxViolationsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(ls)-maxViolationsShown))
		}
		out = append(out, argViolation{arg: s.name, keyword: keywordOf(ls[0]), message: strings.Join(parts, "; ")})
	}
	return out
}

// caseVariant is an argument of the call whose name equals name ignoring
// case but is not name, in sorted order; "" when none.
func caseVariant(args *structpb.Struct, name string) string {
	var found []string
	for k := range args.GetFields() {
		if k != name && strings.EqualFold(k, name) {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return ""
	}
	slices.Sort(found)
	return found[0]
}

// keywordOf is the keyword a failure breaks.
func keywordOf(e *jsonschema.ValidationError) string {
	if p := e.ErrorKind.KeywordPath(); len(p) > 0 {
		return p[0]
	}
	return "type"
}

// failure says how the value at e's place in argument name breaks its
// keyword, the argument and the keyword named in it.
func failure(name string, e *jsonschema.ValidationError) string {
	where := fmt.Sprintf("argument %q", name)
	for _, i := range e.InstanceLocation {
		where += "[" + i + "]"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.MaxLength:
		return fmt.Sprintf("%s: maxLength %d exceeded (%d characters)", where, k.Want, k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("%s: does not match pattern %q", where, k.Want)
	case *kind.Type:
		return fmt.Sprintf("%s: type is %s, not %s", where, k.Got, strings.Join(k.Want, " or "))
	case *kind.Minimum:
		want, _ := k.Want.Float64()
		return fmt.Sprintf("%s: below its minimum %v", where, want)
	case *kind.Maximum:
		want, _ := k.Want.Float64()
		return fmt.Sprintf("%s: above its maximum %v", where, want)
	case *kind.Enum:
		return fmt.Sprintf("%s: enum: %s", where, k.LocalizedString(printer))
	case *kind.Const:
		return fmt.Sprintf("%s: const: %s", where, k.LocalizedString(printer))
	}
	return fmt.Sprintf("%s: %s: %s", where, keywordOf(e), e.ErrorKind.LocalizedString(printer))
}

// instance is a call's argument as JSON Schema validates it; a number that
// is not a JSON number (NaN, infinities) is null, as the input has it.
func instance(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil
		}
		return k.NumberValue
	case *structpb.Value_StringValue:
		return k.StringValue
	case *structpb.Value_BoolValue:
		return k.BoolValue
	case *structpb.Value_StructValue:
		out := make(map[string]any, len(k.StructValue.GetFields()))
		for name, f := range k.StructValue.GetFields() {
			out[name] = instance(f)
		}
		return out
	case *structpb.Value_ListValue:
		vals := k.ListValue.GetValues()
		out := make([]any, len(vals))
		for i, e := range vals {
			out[i] = instance(e)
		}
		return out
	}
	return nil
}

// value is the fact as the input has it: {"custom": [...], "toolset": [...]},
// each set present only when the definition has it.
func (f *argumentsFact) value() ast.Value {
	list := func(vs []argViolation) *ast.Term {
		terms := make([]*ast.Term, len(vs))
		for i, v := range vs {
			terms[i] = ast.ObjectTerm(item("arg", ast.String(v.arg)), item("keyword", ast.String(v.keyword)), item("message", ast.String(v.message)))
		}
		return ast.ArrayTerm(terms...)
	}
	o := ast.NewObject()
	if f.hasCustom {
		o.Insert(ast.StringTerm(argSetCustom), list(f.custom))
	}
	if f.hasToolset {
		o.Insert(ast.StringTerm(argSetToolset), list(f.toolset))
	}
	return o
}

// appendKey encodes the fact as its value has it.
func (f *argumentsFact) appendKey(buf []byte) []byte {
	list := func(buf []byte, has bool, vs []argViolation) []byte {
		if !has {
			return append(buf, 'n')
		}
		buf = binary.AppendUvarint(append(buf, 'a'), uint64(len(vs)))
		for _, v := range vs {
			buf = appendString(appendString(appendString(buf, v.arg), v.keyword), v.message)
		}
		return buf
	}
	return list(list(buf, f.hasCustom, f.custom), f.hasToolset, f.toolset)
}
