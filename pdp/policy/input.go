package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/envguard"
	"github.com/toolpdp/toolpdp/envguard/protectednames"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// buildInput is the document the library decides on: the request, the
// agent's index entry (agent may be a session's pinned one), the agent's
// guardrails from snap, the effective execution policy with its resolved
// roots, and envguard's view of the tool's paths and command.
// Resolving and parsing stop when ctx is done; the caller checks it. The
// error is a pinned session's guardrails that no longer compile. Unless
// whole, the call's raw arguments are left out when no module reads them.
func buildInput(ctx context.Context, snap *Snapshot, agentID string, agent *Agent, req *pb.DecideRequest, whole bool) (ast.Value, error) {
	f, err := gather(ctx, snap, agentID, agent, req)
	if err != nil {
		return nil, err
	}
	return f.input(snap, whole), nil
}

// facts are what a decision's input is built from, worked out in Go:
// the paths resolved, the command analysed. A decision the memo holds is
// found by them alone (Snapshot.factsKey); only a decision to evaluate
// builds the input document.
type facts struct {
	agentID    string
	agent      *Agent
	req        *pb.DecideRequest
	guardrails ast.Value
	policy     *ExecutionPolicy // the effective one: the call site's, else the agent's
	scope      *scopeFact       // nil: the input has no scope
	file       bool             // a file tool: paths and globs are its own
	paths      []pathFact
	globs      []globFact
	command    *commandFact   // nil: not a shell tool
	arguments  *argumentsFact // nil: no argument constraint may apply
	confine    *confineFact   // nil: not a shell tool
	network    *networkFact   // a Network call's host as the rules decided it; nil otherwise
}

func gather(ctx context.Context, snap *Snapshot, agentID string, agent *Agent, req *pb.DecideRequest) (*facts, error) {
	t := &snap.tables
	guardrails, compiled, err := snap.guardrailsFor(agentID, agent)
	if err != nil {
		return nil, err
	}
	f := &facts{agentID: agentID, agent: agent, req: req, guardrails: guardrails, policy: effectivePolicy(agent, req)}
	r := envguard.NewResolver(ctx)
	if ft, ok := t.fileTools[req.GetToolName()]; ok {
		// The call's paths first: the roots are often prefixes of them.
		f.file = true
		f.paths, f.globs = pathFacts(r, ft, f.policy, compiled, req.GetArgs())
		f.scope = scopeRoots(r, f.policy)
	}
	if names, ok := t.shellTools[req.GetToolName()]; ok {
		if !f.file {
			// A shell tool's execution carries the resolved scopes for a confined run.
			f.scope = scopeRoots(r, f.policy)
		}
		cwd := ""
		if f.policy != nil {
			cwd = f.policy.Cwd
		}
		f.command = analyzeCommand(r, snap.shellMemo, compiled, names, req.GetArgs(), cwd, networkForbidden(f.policy, guardrails))
		f.confine = confinement(r, agent, req)
	}
	f.arguments = checkArguments(ctx, snap, agent, req)
	return f, nil
}

// checkArguments is what the call's arguments break of the agent's
// constraints for its tool, named canonically as the permission axis names
// it. A name the library does not split (such a call is denied) is taken as
// written, so a library that cannot name it never leaves a constraint
// unchecked.
func checkArguments(ctx context.Context, snap *Snapshot, agent *Agent, req *pb.DecideRequest) *argumentsFact {
	if agent == nil || agent.Args.empty() {
		return nil
	}
	server, name, ok := snap.CanonicalTool(ctx, req.GetToolName(), req.GetServer())
	if !ok {
		server, name = req.GetServer(), req.GetToolName()
	}
	return agent.Args.checkArgs(snap.tables.customServer, server, name, req.GetArgs())
}

// input is the document the library decides on, built from f.
func (f *facts) input(snap *Snapshot, whole bool) ast.Value {
	req := f.req
	in := ast.NewObject(
		item("agent_id", ast.String(f.agentID)),
		item("session_id", ast.String(req.GetSessionId())),
		item("tool_name", ast.String(req.GetToolName())),
		item("server", ast.String(req.GetServer())),
		item("category", ast.String(categoryName(req.GetCategory()))),
		item("env", stringMap(req.GetEnv())),
		item("guardrails", f.guardrails),
	)
	if whole || snap.memoOff != "" || !snap.argsUnread {
		in.Insert(ast.StringTerm("args"), ast.NewTerm(structValue(req.GetArgs())))
	}
	if f.agent != nil {
		in.Insert(ast.StringTerm("agent"), ast.NewTerm(f.agent.Index))
	}
	switch {
	case req.GetExecutionPolicy() != nil:
		in.Insert(ast.StringTerm("policy"), ast.NewTerm(policyValue(f.policy)))
	case f.agent != nil && f.agent.Policy != nil:
		in.Insert(ast.StringTerm("policy"), f.agent.policyTerm())
	}
	if f.scope != nil {
		in.Insert(ast.StringTerm("scope"), ast.NewTerm(f.scope.value()))
	}
	paths := make([]*ast.Term, len(f.paths))
	for i, p := range f.paths {
		paths[i] = p.term()
	}
	globs := make([]*ast.Term, len(f.globs))
	for i, g := range f.globs {
		globs[i] = g.term()
	}
	in.Insert(ast.StringTerm("paths"), ast.ArrayTerm(paths...))
	in.Insert(ast.StringTerm("globs"), ast.ArrayTerm(globs...))
	if f.command != nil {
		in.Insert(ast.StringTerm("command"), ast.NewTerm(f.command.value(whole || !snap.embedded)))
	}
	if f.arguments != nil {
		in.Insert(ast.StringTerm("arguments"), ast.NewTerm(f.arguments.value()))
	}
	if f.confine != nil {
		in.Insert(ast.StringTerm("confinement"), ast.NewTerm(f.confine.value()))
	}
	if f.network != nil {
		in.Insert(ast.StringTerm("network"), ast.NewTerm(f.network.value()))
	}
	return in
}

// confineFact is what a shell call's confined flag counts for: the agent
// definition's confinement mode, whether the call will run confined and
// the definition trusts that, and, then, the home directories a write
// root must not hold (the server's user's and the call's HOME, resolved).
type confineFact struct {
	mode     string
	confined bool
	homes    []string
}

// confinement is the call's confineFact. Only the agent's own definition
// says how far confined is trusted: the call site sends the flag, never
// the mode.
func confinement(r *envguard.Resolver, agent *Agent, req *pb.DecideRequest) *confineFact {
	c := &confineFact{mode: "off"}
	if agent != nil && agent.Policy != nil && agent.Policy.Confinement != "" {
		c.mode = agent.Policy.Confinement
	}
	c.confined = req.GetConfined() && c.mode != "off"
	if !c.confined {
		return c
	}
	seen := map[string]bool{}
	for _, h := range []string{userHome(), req.GetEnv()["HOME"]} {
		if !filepath.IsAbs(h) {
			continue
		}
		resolved, err := r.Resolve("", h)
		if err != nil {
			// A home that cannot be resolved is judged as written.
			resolved = filepath.Clean(h)
		}
		for _, p := range []string{filepath.Clean(h), resolved} {
			if !seen[p] {
				seen[p] = true
				c.homes = append(c.homes, p)
			}
		}
	}
	return c
}

// userHome is the server's user's home directory ("" when it has none):
// a confined run as that user must not get it to write.
var userHome = sync.OnceValue(func() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
})

func (c *confineFact) value() ast.Value {
	return ast.NewObject(
		item("mode", ast.String(c.mode)),
		item("confined", ast.Boolean(c.confined)),
		item("homes", stringArray(c.homes)),
	)
}

// effectivePolicy is the call site's policy when it sent one, else the
// agent's: the call site wins.
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
	out := &ExecutionPolicy{Cwd: p.GetCwd(), Network: p.GetNetwork()}
	switch out.Network {
	case "", NetworkNone, NetworkAny:
	case NetworkRules:
		rules, err := netRulesFromProto(p.GetNetworkRules())
		if err != nil || p.GetNetworkRules() == nil {
			// The server refuses such a request; in-process, the strictest reading.
			out.Network = NetworkNone
			break
		}
		out.NetRules = rules
	default:
		out.Network = NetworkNone
	}
	if e := p.GetEnv(); e != nil {
		out.Env = &EnvSpec{Mode: e.GetMode(), Names: e.GetNames(), IncludeSafeEnvVars: e.GetIncludeSafeEnvVars()}
		if CheckEnvMode(e.GetMode()) != nil {
			// The server refuses such a request; a caller in-process gets
			// the strictest reading: an allowlist of nothing.
			out.Env = &EnvSpec{Mode: "allowlist"}
		}
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
	if p.Network != "" {
		o.Insert(ast.StringTerm("network"), ast.StringTerm(p.Network))
	}
	if p.Network == NetworkRules && p.NetRules != nil {
		o.Insert(ast.StringTerm("network_rules"), ast.ObjectTerm(
			item("allow", stringArray(p.NetRules.Allow)),
			item("ask", stringArray(p.NetRules.Ask)),
			item("deny", stringArray(p.NetRules.Deny)),
			item("otherwise", ast.String(p.NetRules.Otherwise)),
			item("private", stringArray(p.NetRules.Private)),
		))
	}
	return o
}

// scopeFact is the policy's roots resolved, each scope present only when
// the policy sets it (nil: not set).
type scopeFact struct{ read, write []string }

// scopeRoots resolves the policy's roots (symlinks in roots are followed
// too, each distinct root once); a root that does not resolve admits nothing.
func scopeRoots(r *envguard.Resolver, p *ExecutionPolicy) *scopeFact {
	out := &scopeFact{}
	if p == nil {
		return out
	}
	// Longest first: a shorter root is often a prefix the kernel has walked.
	var all []string
	for _, roots := range []*[]string{p.ReadPaths, p.WritePaths} {
		if roots != nil {
			all = append(all, *roots...)
		}
	}
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	resolved := make(map[string]string, len(all))
	for _, root := range all {
		if _, done := resolved[root]; !done {
			resolved[root] = ""
			if c, err := r.Resolve(p.Cwd, root); err == nil {
				resolved[root] = c
			}
		}
	}
	list := func(roots *[]string) []string {
		if roots == nil {
			return nil
		}
		out := make([]string, 0, len(*roots))
		seen := make(map[string]bool, len(*roots))
		for _, root := range *roots {
			if !seen[root] && resolved[root] != "" {
				out = append(out, resolved[root])
			}
			seen[root] = true
		}
		return out
	}
	out.read, out.write = list(p.ReadPaths), list(p.WritePaths)
	return out
}

func (s *scopeFact) value() ast.Value {
	o := ast.NewObject()
	if s.read != nil {
		o.Insert(ast.StringTerm("read"), ast.NewTerm(stringArray(s.read)))
	}
	if s.write != nil {
		o.Insert(ast.StringTerm("write"), ast.NewTerm(stringArray(s.write)))
	}
	return o
}

// stringArg is one argument of a call: absent, present but not a string,
// or its text.
func stringArg(args *structpb.Struct, name string) (raw string, present, isString bool) {
	v, ok := args.GetFields()[name]
	if !ok {
		return "", false, false
	}
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return "", true, false
	}
	return s.StringValue, true, true
}

// pathsValue resolves each path argument of a file tool (a call naming no
// path works on the cwd) and the directory each alternative of its search
// globs reads, and names the protected name each one names (or, for a glob,
// could match); globs lists the search globs themselves.
func pathFacts(r *envguard.Resolver, ft fileTool, p *ExecutionPolicy, g *compiledGuardrails, args *structpb.Struct) (paths []pathFact, globs []globFact) {
	cwd := ""
	if p != nil {
		cwd = p.Cwd
	}
	ft.Access = ft.access(args)
	protected := g.protected
	if ft.Access == "read" {
		protected = g.protectedReads
	}
	// The symlinks a glob's wildcards reach are looked for only where a
	// scope or a protected name can deny what they lead to.
	walk := !protected.Empty() || p != nil && (ft.Access == "read" && p.ReadPaths != nil || ft.Access == "write" && p.WritePaths != nil)
	var out []pathFact
	var gs []globFact
	base := "" // the tool's own path argument: a relative glob is under it
	for _, name := range ft.Args {
		raw, present, isString := stringArg(args, name)
		if list, ok := args.GetFields()[name].GetKind().(*structpb.Value_ListValue); ok && present {
			// a list of paths (read_many_files): each one a path
			for _, v := range list.ListValue.GetValues() {
				p, ok := v.GetKind().(*structpb.Value_StringValue)
				if !ok {
					out = append(out, newPathFact(name, ft.Access, "", "", errNotString, ""))
					continue
				}
				resolved, err := r.Resolve(cwd, p.StringValue)
				out = append(out, newPathFact(name, ft.Access, p.StringValue, resolved, err, protectedName(protected, p.StringValue, resolved)))
			}
			continue
		}
		switch {
		case !present:
			continue
		case !isString:
			out = append(out, newPathFact(name, ft.Access, "", "", errNotString, ""))
			continue
		case name == "path":
			base = raw
		}
		resolved, err := r.Resolve(cwd, raw)
		out = append(out, newPathFact(name, ft.Access, raw, resolved, err, protectedName(protected, raw, resolved)))
	}
	for _, name := range ft.URLs {
		// a file: URL names a path the tool reads
		raw, present, isString := stringArg(args, name)
		if !present || !isString || !strings.HasPrefix(strings.ToLower(strings.TrimSpace(raw)), "file:") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(raw))
		path := ""
		if err == nil {
			path = u.Path
			if path == "" {
				path = u.Opaque
			}
		}
		if path == "" {
			out = append(out, newPathFact(name, "read", raw, "", errNotPath, ""))
			continue
		}
		resolved, err := r.Resolve(cwd, path)
		out = append(out, newPathFact(name, "read", raw, resolved, err, protectedName(g.protectedReads, path, resolved)))
	}
	for _, name := range ft.Patches {
		raw, present, isString := stringArg(args, name)
		if !present || !isString {
			continue
		}
		for _, file := range envguard.PatchFiles(raw) {
			resolved, err := r.Resolve(cwd, file)
			out = append(out, newPathFact(name, "write", file, resolved, err, protectedName(g.protected, file, resolved)))
		}
	}
	if len(out) == 0 && len(ft.Args) > 0 {
		resolved, err := r.Resolve(cwd, cwd)
		if cwd == "" {
			err = errNoPath
		}
		out = append(out, newPathFact("", ft.Access, ".", resolved, err, protectedName(protected, "", resolved)))
	}
	for _, name := range ft.Globs {
		raw, present, isString := stringArg(args, name)
		if !present {
			continue
		}
		if !isString {
			out = append(out, newPathFact(name, ft.Access, "", "", errNotString, ""))
			continue
		}
		terms, could := globTerms(r, name, ft.Access, raw, base, cwd, walk, protected)
		out = append(out, terms...)
		gs = append(gs, globFact{arg: name, raw: raw, protected: could})
	}
	return out, gs
}

// globTerms are the paths a search glob reads: the literal directory of
// each alternative of its braces, under base (the tool's path) when
// relative, resolved like any path, each distinct one once; could is the
// protected name some alternative could match, "" if none. A glob that
// cannot be checked is one unresolved path.
func globTerms(r *envguard.Resolver, arg, access, raw, base, cwd string, walk bool, protected *protectednames.Set) (terms []pathFact, could string) {
	alts, err := globAlternatives(raw)
	if err != nil {
		// What it could match is unknown: any protected name.
		if names := protected.Names(); len(names) > 0 {
			could = names[0]
		}
		return []pathFact{newPathFact(arg, access, raw, "", err, "")}, could
	}
	seen := make(map[string]bool, len(alts))
	for _, alt := range alts {
		if could == "" {
			could, _ = protected.GlobCouldMatch(alt, false)
		}
		dir, wild, err := envguard.GlobDir(alt)
		if err != nil {
			terms = append(terms, newPathFact(arg, access, raw, "", err, ""))
			continue
		}
		if !filepath.IsAbs(dir) && !strings.HasPrefix(dir, "~") && !envguard.IsURL(dir) && base != "" {
			dir = base + "/" + dir
		} else if dir == "" {
			dir = "."
		}
		resolved, err := r.Resolve(cwd, dir)
		add := func(resolved string, err error) {
			key := resolved + "\x00" + fmt.Sprint(err)
			if !seen[key] {
				seen[key] = true
				terms = append(terms, newPathFact(arg, access, raw, resolved, err, protectedName(protected, "", resolved)))
			}
		}
		add(resolved, err)
		if err != nil || wild == "" || !walk {
			continue
		}
		links, err := envguard.GlobLinks(r.Context(), resolved, wild)
		if err != nil {
			add("", err)
		}
		for _, l := range links {
			add(l, nil)
		}
	}
	return terms, could
}

// globAlternatives are the globs raw can stand for: each alternative of
// its braces, and, since some tools split a glob argument at blanks and a
// brace-less one at commas ("*.c ../x/*", "*.c,../x/*"), those of each
// field too.
func globAlternatives(raw string) ([]string, error) {
	alts, err := envguard.ExpandBraces(raw)
	if err != nil {
		return nil, err
	}
	var fields []string
	for _, f := range strings.Fields(raw) {
		if strings.Contains(f, "{") {
			fields = append(fields, f)
		} else {
			fields = append(fields, strings.Split(f, ",")...)
		}
	}
	if len(fields) > 1 {
		for _, f := range fields {
			more, err := envguard.ExpandBraces(f)
			if err != nil {
				return nil, err
			}
			if alts = append(alts, more...); len(alts) > envguard.MaxGlobAlternatives {
				return nil, fmt.Errorf("%w: more than %d alternatives", envguard.ErrGlobUncheckable, envguard.MaxGlobAlternatives)
			}
		}
	}
	return alts, nil
}

// protectedName is the protected name a path names as written or as
// resolved ("" when none): the one comparison of names toolpdp has.
func protectedName(s *protectednames.Set, raw, resolved string) string {
	if name, ok := s.Match(raw); ok {
		return name
	}
	name, _ := s.Match(resolved)
	return name
}

var (
	errNotString = fmt.Errorf("%w: it is not a string", envguard.ErrInvalid)
	errNotPath   = fmt.Errorf("%w: a file: URL naming no path", envguard.ErrInvalid)
	errNoPath    = fmt.Errorf("%w: no path given and no policy cwd to default to", envguard.ErrUnresolved)
)

// pathFact is a path the tool reads or writes: the argument it came from,
// the access, as written and as resolved, why it could not be (error,
// with error_kind invalid or unresolved) and the protected name it names.
type pathFact struct{ arg, access, raw, resolved, err, kind, protected string }

func newPathFact(arg, access, raw, resolved string, err error, protected string) pathFact {
	p := pathFact{arg: arg, access: access, raw: raw, resolved: resolved, protected: protected}
	switch {
	case errors.Is(err, envguard.ErrInvalid):
		p.kind, p.err = "invalid", cause(err, envguard.ErrInvalid)
	case err != nil:
		p.kind, p.err = "unresolved", cause(err, envguard.ErrUnresolved)
	}
	return p
}

func (p pathFact) term() *ast.Term {
	return ast.ObjectTerm(
		item("arg", ast.String(p.arg)),
		item("access", ast.String(p.access)),
		item("raw", ast.String(p.raw)),
		item("resolved", ast.String(p.resolved)),
		item("error", ast.String(p.err)),
		item("error_kind", ast.String(p.kind)),
		item("protected", ast.String(p.protected)),
	)
}

// globFact is a search glob: its argument, as written, and the protected
// name it could match.
type globFact struct{ arg, raw, protected string }

func (g globFact) term() *ast.Term {
	return ast.ObjectTerm(item("arg", ast.String(g.arg)), item("raw", ast.String(g.raw)), item("protected", ast.String(g.protected)))
}

// commandFact is what a shell tool's call would run: the leaves, the agent's
// command rules that match them, what the analysis could not see, the
// protected files it reaches and its network use.
type commandFact struct {
	leaves, unseen, network []*ast.Term
	matches                 []match
	protected               []envguard.ProtectedUse
	netUses                 [][]string
	errs                    string
	missing, guarded        bool
}

type match struct {
	list, rule string
	argv       []string
	certain    bool
}

// analyzeCommand is what a shell tool's call would run: each of its command
// arguments (a string is parsed, a list of strings is an argv) analysed by
// envguard, the agent's command rules matched against every leaf, what
// the analysis could not see, the protected files it names (resolved
// against cwd) and its network use.
func analyzeCommand(r *envguard.Resolver, memo *shellMemo, cr *compiledGuardrails, names []string, args *structpb.Struct, cwd string, noNetwork bool) *commandFact {
	c := &commandFact{guarded: cr.guarded}
	var errs []string
	found := false
	for _, name := range names {
		v, ok := argAt(args, name)
		if !ok {
			continue
		}
		found = true
		s := memo.analyze(r.Context(), v)
		if s.err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s", name, cause(s.err, envguard.ErrUncheckable)))
			continue
		}
		a := s.a
		for _, m := range cr.rules.Match(memo.t, a) {
			c.matches = append(c.matches, match{list: m.List, rule: m.Rule, argv: a.Leaves[m.Leaf].Argv, certain: m.Certain})
		}
		c.leaves = append(c.leaves, s.leaves...)
		c.unseen = append(c.unseen, s.unseen...)
		c.protected = append(c.protected, cr.rules.Protected(r, a, cwd)...)
		c.network = append(c.network, s.network...)
		if noNetwork {
			c.netUses = append(c.netUses, memo.t.NetworkUses(a)...)
		}
	}
	c.errs, c.missing = strings.Join(errs, "; "), !found
	return c
}

// value is the command as the input has it; without leaves unless asked
// for (the library never reads them; Explain and guardrail Rego may).
func (c *commandFact) value(leaves bool) ast.Value {
	matches := make([]*ast.Term, len(c.matches))
	for i, m := range c.matches {
		matches[i] = ast.ObjectTerm(
			item("list", ast.String(m.list)),
			item("rule", ast.String(m.rule)),
			item("argv", stringArray(m.argv)),
			item("certain", ast.Boolean(m.certain)),
		)
	}
	protected := make([]*ast.Term, len(c.protected))
	for i, p := range c.protected {
		protected[i] = ast.ObjectTerm(
			item("access", ast.String(p.Access)),
			item("word", ast.String(p.Word)),
			item("name", ast.String(p.Name)),
			item("what", ast.String(p.What)),
			item("text", ast.String(p.Text)),
			item("certain", ast.Boolean(p.Certain)),
			item("tree", ast.Boolean(p.Tree)),
		)
	}
	netUses := make([]*ast.Term, len(c.netUses))
	for i, argv := range c.netUses {
		netUses[i] = ast.NewTerm(stringArray(argv))
	}
	o := ast.NewObject(
		item("matches", ast.NewArray(matches...)),
		item("unseen", ast.NewArray(c.unseen...)),
		item("protected", ast.NewArray(protected...)),
		item("network", ast.NewArray(c.network...)),
		item("network_uses", ast.NewArray(netUses...)),
		item("error", ast.String(c.errs)),
		item("missing", ast.Boolean(c.missing)),
		item("guarded", ast.Boolean(c.guarded)),
	)
	if leaves {
		o.Insert(ast.StringTerm("leaves"), ast.ArrayTerm(c.leaves...))
	}
	return o
}

// networkForbidden reports network "none" from the execution policy or
// the guardrails: only then are a command's network programs looked for.
func networkForbidden(p *ExecutionPolicy, guardrails ast.Value) bool {
	if p != nil && p.Network == "none" {
		return true
	}
	if o, ok := guardrails.(ast.Object); ok {
		if v := o.Get(ast.StringTerm("network")); v != nil {
			return v.Value.Compare(ast.String("none")) == 0
		}
	}
	return false
}

// argAt looks up a command argument by its dotted path ("action.command").
func argAt(args *structpb.Struct, name string) (*structpb.Value, bool) {
	fields := args.GetFields()
	for {
		key, rest, nested := strings.Cut(name, ".")
		v, ok := fields[key]
		if !ok {
			return nil, false
		}
		if !nested {
			return v, true
		}
		fields, name = v.GetStructValue().GetFields(), rest
	}
}

// analyzeArg analyses one command argument: a string is a shell command, a
// list of strings an argv.
func analyzeArg(ctx context.Context, t *envguard.Tables, v *structpb.Value) (*envguard.Analysis, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return t.Analyze(ctx, k.StringValue)
	case *structpb.Value_ListValue:
		list := k.ListValue.GetValues()
		argv := make([]string, 0, len(list))
		for _, a := range list {
			s, ok := a.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, errors.New("not a list of strings")
			}
			argv = append(argv, s.StringValue)
		}
		if len(argv) == 0 {
			return nil, errors.New("an empty argv")
		}
		return t.AnalyzeArgv(ctx, argv)
	}
	return nil, errors.New("neither a string nor a list of strings")
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

// parsePosition is the "line:col: " prefix of a shell parser's error.
var parsePosition = regexp.MustCompile(`^(\d+):(\d+): `)

// cause is err's text for a message, without the sentinel the message
// already says in words ("not a path: ", "command cannot be checked: ")
// and with a parser's "1:6: " spelt out as "line 1, column 6: ".
func cause(err, sentinel error) string {
	msg := strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	return parsePosition.ReplaceAllString(msg, "line $1, column $2: ")
}
