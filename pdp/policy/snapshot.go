package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/envguard"
	"github.com/toolpdp/toolpdp/envguard/protectednames"
	"github.com/toolpdp/toolpdp/pdp/bundles"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Queries the library answers.
const (
	DecisionQuery = "data.toolpdp.decision.result"
	indexQuery    = "data.toolpdp.index"
)

// DefaultAgent is the agent a request with no agent_id is decided for.
const DefaultAgent = "default"

// DefaultMaxDenials is an agent's max_consecutive_denials when its
// definition sets none, and the cap of a request naming no known agent:
// Agent.Denials applies it, and nothing else knows it.
const DefaultMaxDenials = 5

// AgentID is the agent a request names: DefaultAgent when it names none.
func AgentID(id string) string {
	if id == "" {
		return DefaultAgent
	}
	return id
}

// Snapshot is one loaded policy: immutable once built, shared by every
// request that loaded it, replaced whole on reload.
type Snapshot struct {
	Revision string // every bundle's revision, comma-separated
	Digest   string // SHA-256 of every module and all data: the policy's content
	Bundles  []BundleInfo
	Loaded   time.Time
	Warnings []string

	query rego.PreparedEvalQuery
	// toolQuery names a call's tool canonically (CanonicalTool).
	toolQuery rego.PreparedEvalQuery
	logMask   *LogPolicy // the bundle's decision-log mask policy; nil: none
	compiler  *ast.Compiler
	store     storage.Store
	modules   map[string]*ast.Module
	agents    map[string]*Agent
	tables    tables
	shellMemo *shellMemo // the analyses of the commands decided on
	// secretTables are the shell tables with the bundles' own
	// secret_arguments added: what masking reads.
	secretTables *envguard.Tables
	toolNames    *lru[string, canonicalTool]

	// guardrails[agent] is data.toolpdp.index.guardrails: handed to every
	// decision from the newest snapshot, whatever definition a session pinned.
	guardrails       map[string]ast.Value
	globalGuardrails ast.Value
	// commands[agent] are the agent's command rules, compiled for the shell
	// analysis, from the same merged guardrails.
	commands       map[string]*compiledGuardrails
	globalCommands *compiledGuardrails

	// memoFields are the input fields decisions read (memo.go); memoOff
	// says why decisions may not be memoized, "" when they may.
	memoFields []string
	argsUnread bool // no module reads input.args (known only when memoOff is "")
	embedded   bool // the library as embedded decides: quiet paths and commands key alike
	memoOff    string
}

// compiledGuardrails are the guardrails in force for an agent in the form
// Go checks them: the command rules, and the protected names (writes: the
// library's names and the listed ones; reads: the listed ones). guarded is
// set when any command rule applies — a rule in data or a guardrail package
// of the bundle's owners — so what toolpdp cannot see in a command is asked.
type compiledGuardrails struct {
	rules          *envguard.Rules
	guarded        bool
	protected      *protectednames.Set
	protectedReads *protectednames.Set
}

// BundleInfo names one bundle of a snapshot.
type BundleInfo struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
}

// Agent is one agent definition as a decision uses it. A session pins it.
type Agent struct {
	ID    string
	Index ast.Value // data.toolpdp.index.agents[ID]
	Definition

	// ownGuardrails is data.toolpdp.index.own_guardrails[ID]: the
	// definition's own guardrails key. A session pinned to this definition
	// keeps it beside the newest bundle's guardrails; merged caches that
	// union for the newest snapshot.
	ownGuardrails ast.Value
	merged        atomic.Pointer[mergedGuardrails]
	enc           encoded                  // what a durable session store keeps (pin.go)
	policy        atomic.Pointer[ast.Term] // the definition's execution policy as input, made once
}

// policyTerm is the definition's execution policy as the input carries it
// (nil: none), made on first use: a definition never changes.
func (a *Agent) policyTerm() *ast.Term {
	if a.Policy == nil {
		return nil
	}
	if t := a.policy.Load(); t != nil {
		return t
	}
	t := ast.NewTerm(policyValue(a.Policy))
	a.policy.Store(t)
	return t
}

type mergedGuardrails struct {
	snap     *Snapshot
	value    ast.Value
	commands *compiledGuardrails
	err      error // the merged command rules do not compile: every call of the session is denied
}

// ExecutionPolicy is the environment axis of an agent or a call: the
// variables, working directory and path roots a tool call gets. A nil
// pointer field is not enforced; a non-nil empty path list allows nothing.
type ExecutionPolicy struct {
	Env        *EnvSpec  `json:"env,omitempty"`
	Cwd        string    `json:"cwd,omitempty"`
	ReadPaths  *[]string `json:"read_paths,omitempty"`
	WritePaths *[]string `json:"write_paths,omitempty"`
	// Network is "none" (no network use), "any", "rules" (NetRules decide
	// each new host of a confined run) or "" (not enforced). MarshalJSON
	// writes both as the definition's one network key.
	Network  string    `json:"-"`
	NetRules *NetRules `json:"-"`
	// Confinement says what a call's DecideRequest.confined counts for:
	// "off" or "" (nothing), "trusted", "required". An agent definition's
	// alone: a call site's policy cannot set it.
	Confinement string `json:"confinement,omitempty"`
}

// EnvSpec says which variables of the request's env a Bash or Exec call gets.
type EnvSpec struct {
	Mode               string   `json:"mode"`
	Names              []string `json:"names"`
	IncludeSafeEnvVars bool     `json:"include_safe_env_vars,omitempty"`
}

// tables are the library's data that Go needs before evaluating: which tools
// take paths, which run shell commands (and in which arguments), and what
// the shell analysis reads.
type tables struct {
	fileTools  map[string]fileTool
	shellTools map[string][]string
	shell      *envguard.Tables
	// misnamed maps a guardrail rule name toolpdp does not read (warn,
	// denies, ...) to the one meant.
	misnamed map[string]string
	// customServer is the server a custom tool may also arrive under
	// (mcp__<it>__<name>): its argument constraints may apply there too.
	customServer string
}

// fileTool is an entry of the library's file_tools table: the access its
// paths need, its path arguments, and its search-glob arguments; the
// argument values that make a writing tool only read (the text editor's
// view); arguments holding URLs, whose file: ones name paths it reads;
// arguments holding patches, whose file names it writes.
type fileTool struct {
	Access   string              `json:"access"`
	Args     []string            `json:"args"`
	Globs    []string            `json:"globs"`
	ReadWhen map[string][]string `json:"read_when"`
	URLs     []string            `json:"urls"`
	Patches  []string            `json:"patches"`
}

// access is the access a call of the tool needs: read where one of its
// arguments has a value that only reads.
func (ft fileTool) access(args *structpb.Struct) string {
	for name, values := range ft.ReadWhen {
		if v, ok := args.GetFields()[name]; ok {
			for _, r := range values {
				if v.GetStringValue() == r {
					return "read"
				}
			}
		}
	}
	return ft.Access
}

// sandbox is the set of builtins a bundle may call: no network, no
// randomness, no runtime introspection.
func sandbox() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	banned := map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true, "rand.intn": true, "uuid.rfc4122": true, "uuid.parse": false}
	kept := caps.Builtins[:0]
	for _, b := range caps.Builtins {
		if !banned[b.Name] {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{} // empty, not nil: nil allows every host
	return caps
}

// Option changes how a bundle is loaded.
type Option func(*options)

type options struct {
	warnUnknownKeys bool
}

// WarnUnknownKeys makes an unknown key of an agent definition a warning
// instead of a rejected bundle: the migration escape hatch
// (serve --unknown-keys=warn).
func WarnUnknownKeys(warn bool) Option { return func(o *options) { o.warnUnknownKeys = warn } }

// NewSnapshot validates, merges, compiles and prepares bundles: the agent
// definitions are decoded once, here, and a custom tool may not take the
// name of a tool of the library's tables.
func NewSnapshot(ctx context.Context, bs []*bundles.Bundle, now time.Time, opts ...Option) (*Snapshot, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	lib, err := libraryTables(bs)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Loaded: now, tables: lib.tables, shellMemo: newShellMemo(lib.tables.shell),
		toolNames: newLRU[string, canonicalTool](4096, 1<<20)}
	var errs []error
	defs := map[string]Definition{}
	for _, b := range bs {
		w, err := validateAgents(b, lib.builtins, defs, o.warnUnknownKeys)
		s.Warnings = append(s.Warnings, w...)
		errs = append(errs, err)
		s.Bundles = append(s.Bundles, BundleInfo{Name: b.Name, Revision: b.Revision()})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	merged, err := bundles.Merge(bs)
	if err != nil {
		return nil, err
	}
	if err := checkGuardrailData(merged.Data, parsedModules(merged), func(path ...string) string { return dataFileOf(bs, path...) }); err != nil {
		return nil, err
	}
	if s.secretTables, err = withBundleSecretArguments(lib.tables.shell, merged.Data, func(path ...string) string { return dataFileOf(bs, path...) }); err != nil {
		return nil, err
	}
	if err := s.compile(ctx, merged); err != nil {
		return nil, err
	}
	if err := s.index(ctx, defs); err != nil {
		return nil, err
	}
	if err := s.argumentsRead(); err != nil {
		return nil, err
	}
	s.memoPlan()
	if s.logMask, err = prepareLogPolicy(ctx, s); err != nil {
		return nil, err
	}
	revs := make([]string, 0, len(s.Bundles))
	for _, b := range s.Bundles {
		if b.Revision != "" {
			revs = append(revs, b.Revision)
		}
	}
	s.Revision = strings.Join(revs, ",")
	return s, nil
}

func (s *Snapshot) compile(ctx context.Context, b *bundle.Bundle) error {
	s.modules = make(map[string]*ast.Module, len(b.Modules)+1)
	for _, m := range b.Modules {
		s.modules[m.Path] = m.Parsed
	}
	if err := s.digest(b); err != nil {
		return err
	}
	refs, err := guardrailRules(s.modules, s.tables.misnamed)
	if err != nil {
		return err
	}
	if len(refs) > 0 {
		if s.modules[ownedGuardrailsModule], err = ownedGuardrails(refs); err != nil {
			return fmt.Errorf("guardrail rules: %w", err)
		}
	}
	s.compiler = ast.NewCompiler().WithCapabilities(sandbox())
	if s.compiler.Compile(s.modules); s.compiler.Failed() {
		return fmt.Errorf("compile: %w", s.compiler.Errors)
	}
	s.store = inmem.NewFromObjectWithOpts(b.Data, inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
	pq, err := rego.New(
		rego.Compiler(s.compiler),
		rego.Store(s.store),
		rego.Query(DecisionQuery),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", DecisionQuery, err)
	}
	s.query = pq
	if s.toolQuery, err = rego.New(rego.Compiler(s.compiler), rego.Store(s.store), rego.Query(toolQuery)).PrepareForEval(ctx); err != nil {
		return fmt.Errorf("prepare %s: %w", toolQuery, err)
	}
	return nil
}

// digest names the policy's content: every module's path and text, and
// the data (encoding/json sorts its keys).
func (s *Snapshot) digest(b *bundle.Bundle) error {
	h := sha256.New()
	for _, path := range slices.Sorted(maps.Keys(s.modules)) {
		for _, m := range b.Modules {
			if m.Path == path {
				fmt.Fprintf(h, "%d:%s%d:", len(path), path, len(m.Raw))
				h.Write(m.Raw)
			}
		}
	}
	data, err := json.Marshal(b.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	h.Write(data)
	s.Digest = hex.EncodeToString(h.Sum(nil))
	return nil
}

// toolQuery is the library's canonical name of a call's tool: the
// permission axis splits mcp__S__X names, and nothing else does.
const toolQuery = "data.toolpdp.permission.tool"

// CanonicalTool is the tool of a call as the library's permission axis
// names it: mcp__S__X with server "" or "S" is tool X of server S. ok is
// false for a name that contradicts its server or does not split (such a
// call is denied), or when the policy says nothing.
func (s *Snapshot) CanonicalTool(ctx context.Context, name, server string) (canonServer, canonName string, ok bool) {
	// A function of the two names and the snapshot: each pair is asked once.
	key := appendString(appendString(nil, name), server)
	if t, hit := s.toolNames.get(string(key)); hit {
		return t.server, t.name, t.ok
	}
	in := ast.NewObject(item("tool_name", ast.String(name)), item("server", ast.String(server)))
	rs, err := eval(ctx, s.toolQuery, in)
	if err != nil || ctx.Err() != nil {
		return "", "", false
	}
	var t canonicalTool
	if len(rs) == 1 && len(rs[0].Expressions) == 1 {
		doc, _ := rs[0].Expressions[0].Value.(map[string]any)
		var okServer, okName bool
		t.server, okServer = doc["server"].(string)
		t.name, okName = doc["name"].(string)
		t.ok = doc["kind"] != "mismatch" && okServer && okName
	}
	if !t.ok {
		t = canonicalTool{}
	}
	s.toolNames.put(string(key), t, int64(64+len(key)+len(t.server)+len(t.name)))
	return t.server, t.name, t.ok
}

// canonicalTool is CanonicalTool's answer for one pair of names.
type canonicalTool struct {
	server, name string
	ok           bool
}

// index evaluates the library's index once for the whole bundle; defs are
// the decoded agent definitions.
func (s *Snapshot) index(ctx context.Context, defs map[string]Definition) error {
	rs, err := rego.New(rego.Compiler(s.compiler), rego.Store(s.store), rego.Query(indexQuery)).Eval(ctx)
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", indexQuery, err)
	}
	var idx struct {
		Agents           map[string]any `json:"agents"`
		Guardrails       map[string]any `json:"guardrails"`
		OwnGuardrails    map[string]any `json:"own_guardrails"`
		GlobalGuardrails any            `json:"global_guardrails"`
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return fmt.Errorf("%s is undefined", indexQuery)
	}
	raw, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return fmt.Errorf("%s: %w", indexQuery, err)
	}
	hasPackages := s.hasGuardrailPackages()
	packages := ast.BooleanTerm(hasPackages)
	if s.globalGuardrails, err = guardrailsValue(idx.GlobalGuardrails, packages); err != nil {
		return err
	}
	if s.globalCommands, err = s.compileGuardrails(idx.GlobalGuardrails, hasPackages); err != nil {
		return err
	}
	s.guardrails = make(map[string]ast.Value, len(idx.Guardrails))
	s.commands = make(map[string]*compiledGuardrails, len(idx.Guardrails))
	for id, g := range idx.Guardrails {
		if s.guardrails[id], err = guardrailsValue(g, packages); err != nil {
			return fmt.Errorf("agent '%s': guardrails: %w", id, err)
		}
		if s.commands[id], err = s.compileGuardrails(g, hasPackages); err != nil {
			return fmt.Errorf("agent '%s': guardrails: %w", id, err)
		}
	}
	s.agents = make(map[string]*Agent, len(idx.Agents))
	for id, v := range idx.Agents {
		val, err := ast.InterfaceToValue(v)
		if err != nil {
			return fmt.Errorf("agent '%s': %w", id, err)
		}
		a := &Agent{ID: id, Index: val, Definition: defs[id]}
		if a.ownGuardrails, err = ast.InterfaceToValue(idx.OwnGuardrails[id]); err != nil {
			return fmt.Errorf("agent '%s': own guardrails: %w", id, err)
		}
		s.agents[id] = a
	}
	return nil
}

// Denials is the agent's cap of consecutive failures in a session; a nil
// agent (none is known by the request's id) has the default.
func (a *Agent) Denials() int {
	if a == nil || a.MaxDenials == 0 {
		return DefaultMaxDenials
	}
	return a.MaxDenials
}

// compileGuardrails compiles an index guardrails entry: its command rules
// and its protected names.
func (s *Snapshot) compileGuardrails(v any, packages bool) (*compiledGuardrails, error) {
	var g struct {
		Deny           []string `json:"deny_commands"`
		Ask            []string `json:"ask_commands"`
		Protected      []string `json:"protected"`
		ProtectedReads []string `json:"protected_reads"`
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("deny_commands, ask_commands and protected_paths must be lists of strings: %w", err)
	}
	rules, err := s.tables.shell.CompileRules(g.Deny, g.Ask)
	if err != nil {
		return nil, err
	}
	protected, reads := protectednames.New(g.Protected), protectednames.New(g.ProtectedReads)
	return &compiledGuardrails{
		rules:          rules.Protect(protected, reads),
		guarded:        packages || !rules.Empty(),
		protected:      protected,
		protectedReads: reads,
	}, nil
}

// commandsFor are an agent's command rules in this snapshot.
func (s *Snapshot) commandsFor(agentID string) *compiledGuardrails {
	if c, ok := s.commands[agentID]; ok {
		return c
	}
	return s.globalCommands
}

// guardrailsValue is an index guardrails entry, with "packages" saying
// whether the bundle has guardrail Rego that every call must consult.
func guardrailsValue(v any, packages *ast.Term) (ast.Value, error) {
	val, err := ast.InterfaceToValue(v)
	if err != nil {
		return nil, err
	}
	obj, ok := val.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("is %T, not an object", v)
	}
	obj.Insert(ast.StringTerm("packages"), packages)
	return obj, nil
}

// hasGuardrailPackages reports whether any module defines rules under
// data.guardrails (tests aside).
func (s *Snapshot) hasGuardrailPackages() bool {
	for path, m := range s.modules {
		if isGuardrailModule(path, m) {
			return true
		}
	}
	return false
}

// guardrailsFor is an agent's guardrails in this snapshot, as Rego sees
// them and as command rules for the shell analysis. For a session pinned to
// a definition of an older snapshot (pinned), the pinned definition's own
// guardrails apply beside the newest: a reload never loosens a running
// session. When the two do not compile together, that is the error: the
// session's own command rules are never dropped.
func (s *Snapshot) guardrailsFor(agentID string, pinned *Agent) (ast.Value, *compiledGuardrails, error) {
	g, ok := s.guardrails[agentID]
	if !ok {
		g = s.globalGuardrails
	}
	if pinned == nil || pinned == s.agents[agentID] || pinned.ownGuardrails == nil {
		return g, s.commandsFor(agentID), nil
	}
	if m := pinned.merged.Load(); m != nil && m.snap == s {
		return m.value, m.commands, m.err
	}
	m := &mergedGuardrails{snap: s, value: mergeGuardrails(g, pinned.ownGuardrails)}
	raw, err := ast.JSON(m.value)
	if err == nil {
		m.commands, err = s.compileGuardrails(raw, s.commandsFor(agentID).guarded)
	}
	if err != nil {
		m.err = fmt.Errorf("agent '%s': this session's pinned guardrails do not combine with the policy in force (%v): start a new session", agentID, err)
	}
	pinned.merged.Store(m)
	return m.value, m.commands, m.err
}

// mergeGuardrails is the union of two guardrails entries: objects merged
// key by key, lists concatenated, and any other value taken from newest.
func mergeGuardrails(newest, own ast.Value) ast.Value {
	switch n := newest.(type) {
	case ast.Object:
		o, ok := own.(ast.Object)
		if !ok {
			return newest
		}
		out := ast.NewObject()
		n.Foreach(func(k, v *ast.Term) {
			if ov := o.Get(k); ov != nil {
				out.Insert(k, ast.NewTerm(mergeGuardrails(v.Value, ov.Value)))
			} else {
				out.Insert(k, v)
			}
		})
		o.Foreach(func(k, v *ast.Term) {
			if n.Get(k) == nil {
				out.Insert(k, v)
			}
		})
		return out
	case *ast.Array:
		o, ok := own.(*ast.Array)
		if !ok {
			return newest
		}
		terms := make([]*ast.Term, 0, n.Len()+o.Len())
		n.Foreach(func(t *ast.Term) { terms = append(terms, t) })
		o.Foreach(func(t *ast.Term) { terms = append(terms, t) })
		return ast.NewArray(terms...)
	}
	return newest
}

type libTables struct {
	tables
	builtins map[string]bool
}

// libraryTables reads data.toolpdp.tables from whichever bundle holds it.
func libraryTables(bs []*bundles.Bundle) (libTables, error) {
	for _, b := range bs {
		tp, _ := b.Bundle.Data[bundles.LibraryRoot].(map[string]any)
		raw, ok := tp["tables"]
		if !ok {
			continue
		}
		file := b.DataFileOf(bundles.LibraryRoot, "tables")
		obj, ok := raw.(map[string]any)
		if !ok {
			return libTables{}, fmt.Errorf("%s: toolpdp.tables: not an object", file)
		}
		if unknown := unknownTableKeys(obj); len(unknown) > 0 {
			return libTables{}, fmt.Errorf("%s: %s", file, strings.Join(unknown, "\n  "+file+": "))
		}
		enc, err := json.Marshal(raw)
		if err != nil {
			return libTables{}, err
		}
		var t libraryTablesGo
		shell := &envguard.Tables{}
		if err := json.Unmarshal(enc, &t); err != nil {
			return libTables{}, fmt.Errorf("%s: toolpdp.tables: %w", file, err)
		}
		if err := json.Unmarshal(enc, shell); err != nil {
			return libTables{}, fmt.Errorf("%s: toolpdp.tables: %w", file, err)
		}
		if err := shell.Validate(); err != nil {
			return libTables{}, fmt.Errorf("%s: toolpdp.tables.%w", file, err)
		}
		out := libTables{tables: tables{fileTools: t.FileTools, shellTools: t.ShellTools, shell: shell, misnamed: t.Misnamed, customServer: t.Custom}, builtins: map[string]bool{}}
		for _, m := range []map[string]bool{keySet(t.ShellTools), keySet(t.FileTools), keySet(t.Categories)} {
			for k := range m {
				out.builtins[k] = true
			}
		}
		return out, nil
	}
	return libTables{}, errors.New("no bundle holds the library's data.toolpdp.tables")
}

func keySet[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// Modules are the snapshot's compiled Rego modules by file.
func (s *Snapshot) Modules() map[string]*ast.Module { return s.modules }

// Agent returns the agent definition with this id, or nil.
func (s *Snapshot) Agent(id string) *Agent { return s.agents[id] }

// AgentIDs are the ids of the snapshot's agent definitions, sorted.
func (s *Snapshot) AgentIDs() []string { return slices.Sorted(maps.Keys(s.agents)) }

// Store is the snapshot's data store.
func (s *Snapshot) Store() storage.Store { return s.store }

// Input is the document the library decides req on, as Decide builds it:
// for policy authors (`toolpdp decide --print-input`) and for feeding the
// same input to OPA's own server in the benchmarks.
func (s *Snapshot) Input(req *pb.DecideRequest) (ast.Value, error) {
	id := AgentID(req.GetAgentId())
	return buildInput(context.Background(), s, id, s.agents[id], req, true)
}

// parsedModules are a merged bundle's modules by file.
func parsedModules(b *bundle.Bundle) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		out[m.Path] = m.Parsed
	}
	return out
}

// dataFileOf is the data file of whichever bundle holds path.
func dataFileOf(bs []*bundles.Bundle, path ...string) string {
	for _, b := range bs {
		if v, ok := b.Bundle.Data[path[0]].(map[string]any); ok {
			if _, ok := v[path[1]]; ok {
				return b.DataFileOf(path...)
			}
		}
	}
	return "data"
}
