package pdp

import (
	"context"
	"errors"
	"math"
	"path"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/envguard"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// buildInput is the document the library decides on: the request, the
// agent's index entry (agent may be a session's pinned one), the agent's
// guardrails from snap, the effective execution policy with its resolved
// roots, and envguard's view of the tool's paths and command.
// Resolving and parsing stop when ctx is done; the caller checks it.
func buildInput(ctx context.Context, snap *Snapshot, agentID string, agent *Agent, req *pb.DecideRequest) ast.Value {
	t := &snap.tables
	in := ast.NewObject(
		item("agent_id", ast.String(agentID)),
		item("session_id", ast.String(req.GetSessionId())),
		item("tool_name", ast.String(req.GetToolName())),
		item("server", ast.String(req.GetServer())),
		item("category", ast.String(categoryName(req.GetCategory()))),
		item("args", structValue(req.GetArgs())),
		item("env", stringMap(req.GetEnv())),
		item("guardrails", snap.guardrailsFor(agentID)),
	)
	if agent != nil {
		in.Insert(ast.StringTerm("agent"), ast.NewTerm(agent.Index))
	}
	policy := effectivePolicy(agent, req)
	if policy != nil {
		in.Insert(ast.StringTerm("policy"), ast.NewTerm(policyValue(policy)))
	}
	if ft, ok := t.fileTools[req.GetToolName()]; ok {
		in.Insert(ast.StringTerm("scope"), ast.NewTerm(scopeValue(ctx, policy)))
		in.Insert(ast.StringTerm("paths"), ast.NewTerm(pathsValue(ctx, ft, policy, req.GetArgs())))
	} else {
		in.Insert(ast.StringTerm("paths"), ast.ArrayTerm())
	}
	if t.shellTools[req.GetToolName()] {
		if c := commandValue(req.GetArgs()); c != nil {
			in.Insert(ast.StringTerm("command"), ast.NewTerm(c))
		}
	}
	return in
}

// effectivePolicy is the call site's policy when it sent one, else the
// agent's: the call site wins (SPEC §4.4).
func effectivePolicy(agent *Agent, req *pb.DecideRequest) *ExecutionPolicy {
	if p := req.GetExecutionPolicy(); p != nil {
		return policyFromProto(p)
	}
	if agent != nil {
		return agent.Policy
	}
	return nil
}

func policyFromProto(p *pb.ExecutionPolicy) *ExecutionPolicy {
	out := &ExecutionPolicy{Cwd: p.GetCwd()}
	if e := p.GetEnv(); e != nil {
		out.Env = &EnvSpec{Mode: e.GetMode(), Names: e.GetNames(), IncludeSafeEnvVars: e.GetIncludeSafeEnvVars()}
	}
	if r := p.GetReadPaths(); r != nil {
		paths := r.GetPaths()
		out.ReadPaths = &paths
	}
	if w := p.GetWritePaths(); w != nil {
		paths := w.GetPaths()
		out.WritePaths = &paths
	}
	return out
}

func policyValue(p *ExecutionPolicy) ast.Value {
	o := ast.NewObject()
	if p.Cwd != "" {
		o.Insert(ast.StringTerm("cwd"), ast.StringTerm(p.Cwd))
	}
	if p.Env != nil {
		names := make([]*ast.Term, len(p.Env.Names))
		for i, n := range p.Env.Names {
			names[i] = ast.StringTerm(n)
		}
		o.Insert(ast.StringTerm("env"), ast.ObjectTerm(
			item("mode", ast.String(p.Env.Mode)),
			item("names", ast.NewArray(names...)),
			item("include_safe_env_vars", ast.Boolean(p.Env.IncludeSafeEnvVars)),
		))
	}
	if p.ReadPaths != nil {
		o.Insert(ast.StringTerm("read_paths"), ast.NewTerm(stringArray(*p.ReadPaths)))
	}
	if p.WritePaths != nil {
		o.Insert(ast.StringTerm("write_paths"), ast.NewTerm(stringArray(*p.WritePaths)))
	}
	return o
}

// scopeValue resolves the policy's roots (symlinks in roots are followed
// too, each distinct root once); a root that does not resolve admits nothing.
func scopeValue(ctx context.Context, p *ExecutionPolicy) ast.Value {
	o := ast.NewObject()
	if p == nil {
		return o
	}
	for access, roots := range map[string]*[]string{"read": p.ReadPaths, "write": p.WritePaths} {
		if roots == nil {
			continue
		}
		resolved := make([]*ast.Term, 0, len(*roots))
		seen := make(map[string]bool, len(*roots))
		for _, r := range *roots {
			if seen[r] {
				continue
			}
			seen[r] = true
			if c, err := envguard.ResolveContext(ctx, p.Cwd, r); err == nil {
				resolved = append(resolved, ast.StringTerm(c))
			}
		}
		o.Insert(ast.StringTerm(access), ast.ArrayTerm(resolved...))
	}
	return o
}

// pathsValue resolves each path argument of a file tool; a call naming no
// path works on the cwd.
func pathsValue(ctx context.Context, ft fileTool, p *ExecutionPolicy, args *structpb.Struct) ast.Value {
	cwd := ""
	if p != nil {
		cwd = p.Cwd
	}
	var out []*ast.Term
	for _, name := range ft.Args {
		v, ok := args.GetFields()[name]
		if !ok {
			continue
		}
		s, isString := v.GetKind().(*structpb.Value_StringValue)
		if !isString {
			out = append(out, pathTerm(name, ft.Access, "", "", errNotString))
			continue
		}
		resolved, err := envguard.ResolveContext(ctx, cwd, s.StringValue)
		out = append(out, pathTerm(name, ft.Access, s.StringValue, resolved, err))
	}
	if len(out) == 0 {
		resolved, err := envguard.ResolveContext(ctx, cwd, cwd)
		if cwd == "" {
			err = errNoPath
		}
		out = append(out, pathTerm("", ft.Access, ".", resolved, err))
	}
	return ast.NewArray(out...)
}

var (
	errNotString = errors.Join(envguard.ErrInvalid, errors.New("the argument is not a string"))
	errNoPath    = errors.Join(envguard.ErrUnresolved, errors.New("no path given and no policy cwd to default to"))
)

func pathTerm(arg, access, raw, resolved string, err error) *ast.Term {
	kind, msg := "", ""
	switch {
	case errors.Is(err, envguard.ErrInvalid):
		kind, msg = "invalid", err.Error()
	case err != nil:
		kind, msg = "unresolved", err.Error()
	}
	return ast.ObjectTerm(
		item("arg", ast.String(arg)),
		item("access", ast.String(access)),
		item("raw", ast.String(raw)),
		item("resolved", ast.String(resolved)),
		item("error", ast.String(msg)),
		item("error_kind", ast.String(kind)),
	)
}

// commandValue is the command of a Bash/Exec call as leaves: the "command"
// string parsed by envguard, or an "argv" list as one leaf. Nil when the
// call names no command.
func commandValue(args *structpb.Struct) ast.Value {
	f := args.GetFields()
	if v, ok := f["command"]; ok {
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return commandError("the command argument is not a string")
		}
		leaves, err := parseCommand(s.StringValue)
		if err != nil {
			return commandError(err.Error())
		}
		terms := make([]*ast.Term, len(leaves))
		for i, l := range leaves {
			terms[i] = leafTerm(l)
		}
		return ast.NewObject(item("leaves", ast.NewArray(terms...)), item("error", ast.String("")))
	}
	if v, ok := f["argv"]; ok {
		list := v.GetListValue().GetValues()
		argv := make([]string, 0, len(list))
		for _, a := range list {
			s, ok := a.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return commandError("the argv argument is not a list of strings")
			}
			argv = append(argv, s.StringValue)
		}
		if len(argv) == 0 {
			return commandError("the argv argument is empty")
		}
		leaf := envguard.Leaf{Argv: argv, Name: path.Base(argv[0])}
		return ast.NewObject(item("leaves", ast.NewArray(leafTerm(leaf))), item("error", ast.String("")))
	}
	return nil
}

func commandError(msg string) ast.Value {
	return ast.NewObject(item("leaves", ast.NewArray()), item("error", ast.String(msg)))
}

func leafTerm(l envguard.Leaf) *ast.Term {
	return ast.ObjectTerm(
		item("argv", stringArray(l.Argv)),
		item("name", ast.String(l.Name)),
		item("dynamic", ast.Boolean(l.Dynamic)),
		item("assigns", stringArray(l.Assigns)),
		item("redirects", stringArray(l.Redirects)),
	)
}

func item(k string, v ast.Value) [2]*ast.Term { return ast.Item(ast.StringTerm(k), ast.NewTerm(v)) }

func stringArray(list []string) ast.Value {
	terms := make([]*ast.Term, len(list))
	for i, s := range list {
		terms[i] = ast.StringTerm(s)
	}
	return ast.NewArray(terms...)
}

func stringMap(m map[string]string) ast.Value {
	o := ast.NewObject()
	for k, v := range m {
		o.Insert(ast.StringTerm(k), ast.StringTerm(v))
	}
	return o
}

func categoryName(c pb.Category) string {
	switch c {
	case pb.Category_CATEGORY_SAFE:
		return "SAFE"
	case pb.Category_CATEGORY_ASK:
		return "ASK"
	}
	return ""
}

// structValue converts a protobuf Struct to Rego without a JSON round trip.
func structValue(s *structpb.Struct) ast.Value {
	o := ast.NewObject()
	for k, v := range s.GetFields() {
		o.Insert(ast.StringTerm(k), ast.NewTerm(protoValue(v)))
	}
	return o
}

func protoValue(v *structpb.Value) ast.Value {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return ast.String(k.StringValue)
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return ast.Null{} // not a JSON number; protojson refuses them too
		}
		return ast.Number(strconv.FormatFloat(k.NumberValue, 'g', -1, 64))
	case *structpb.Value_BoolValue:
		return ast.Boolean(k.BoolValue)
	case *structpb.Value_StructValue:
		return structValue(k.StructValue)
	case *structpb.Value_ListValue:
		vals := k.ListValue.GetValues()
		terms := make([]*ast.Term, len(vals))
		for i, e := range vals {
			terms[i] = ast.NewTerm(protoValue(e))
		}
		return ast.NewArray(terms...)
	}
	return ast.Null{}
}
