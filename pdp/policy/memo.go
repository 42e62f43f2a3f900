package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
	library "github.com/toolpdp/toolpdp/rego"
)

// Decide once, answer many. With a deterministic policy, the decision
// document is a pure function of the snapshot and of the input fields the
// policy reads: the snapshot works out which fields those are when it loads
// (every reference to input in every compiled module), and a memo keys a
// decision by the pinned definition's identity and a SHA-256 of exactly
// those fields of the input, encoded from the facts it is built from. The
// facts come first, so a file tool's key holds its paths as resolved now
// (symlinks may change between calls) and a shell tool's key the analysis
// of its command as parsed now.
//
// A snapshot memoizes nothing when any module
//   - calls or names a non-deterministic builtin (time.now_ns, rand.intn,
//     http.send, ...: OPA marks them), or
//   - reads input other than by a constant first key (input[x], input as a
//     whole), or
//   - defines a data.guardrails package: security teams' own Rego may read
//     anything, and is simplest kept out of the key entirely.
//
// A path that no rule can fire on is keyed by its argument and access
// alone: with the embedded library (no bundle replaces it), the paths and
// search globs of a file tool reach the decision only through rules that
// fire on a path that is invalid, protected, outside its scope or
// unresolved where a scope applies, so every other path decides alike
// whatever its name (quietPath;
// TestPlainPathsDecideAlike holds the library to it; a library rule that
// reads a path's name or a command's leaves otherwise must change quietPath
// or appendKey with it). Reading src/a.go and
// then src/b.go is one decision, not two. Likewise the library reads a
// command's analysis only through what it matched, could not see, reaches,
// or sends over the network — never the programs it runs (leaves, there
// for Explain and for guardrail Rego, which keeps decisions out of the
// memo) — so `cat src/a.go` and `cat src/b.go` decide alike too.
//
// What a memo keeps is the response as Snapshot.Decide returns it, messages
// already bounded; every caller gets its own copy (decision ids, sessions
// and the log are the engine's, per call).

// DefaultMemoEntries and DefaultMemoBytes bound a memo by default.
const (
	DefaultMemoEntries = 4096
	DefaultMemoBytes   = 8 << 20
	maxMemoEntryBytes  = 16 << 10 // a larger response is not kept
)

// memoKey names one decision of one snapshot: the definition decided with
// (pointer identity: a pinned definition is immutable) and the SHA-256 of
// the agent id and the input fields the policy reads.
type memoKey struct {
	agent *Agent
	sum   [sha256.Size]byte
}

// Memo is a bounded cache of one snapshot's decisions, least recently used
// first out. Safe for concurrent use. Build a new one for every snapshot.
type Memo struct {
	kept *lru[memoKey, *pb.DecideResponse]
}

// NewMemo is a memo of at most entries decisions and about maxBytes bytes
// (0: DefaultMemoBytes).
func NewMemo(entries int, maxBytes int64) *Memo {
	if maxBytes <= 0 {
		maxBytes = DefaultMemoBytes
	}
	return &Memo{kept: newLRU[memoKey, *pb.DecideResponse](entries, maxBytes)}
}

// Len is the number of decisions kept.
func (m *Memo) Len() int { return m.kept.len() }

func (m *Memo) get(k memoKey) (*pb.DecideResponse, bool) { return m.kept.get(k) }

func (m *Memo) put(k memoKey, resp *pb.DecideResponse) {
	if size := responseBytes(resp); size <= maxMemoEntryBytes {
		m.kept.put(k, resp, size)
	}
}

// responseBytes estimates what a kept response holds.
func responseBytes(r *pb.DecideResponse) int64 {
	n := 256 + len(r.Message) + len(r.PolicyRevision)
	for _, x := range r.Reasons {
		n += 96 + len(x.Axis) + len(x.Rule) + len(x.Message)
	}
	if ex := r.GetExecution(); ex != nil {
		n += 64 + len(ex.Cwd) + len(ex.Network)
		if r := ex.GetNetworkRules(); r != nil {
			for _, e := range slices.Concat(r.Allow, r.Ask, r.Deny) {
				n += 24 + len(e)
			}
		}
		for k, v := range ex.Env {
			n += 48 + len(k) + len(v)
		}
		for _, list := range [][]string{ex.GetReadPaths().GetPaths(), ex.GetWritePaths().GetPaths(), ex.ReadOnlyNames, ex.UnreadableNames} {
			for _, p := range list {
				n += 24 + len(p)
			}
		}
	}
	return int64(n)
}

// copyResponse is a deep copy of what Snapshot.Decide fills in.
func copyResponse(dst, src *pb.DecideResponse) {
	dst.PolicyRevision = src.PolicyRevision
	dst.Decision = src.Decision
	dst.Message = src.Message
	dst.Reasons = make([]*pb.Reason, len(src.Reasons))
	for i, r := range src.Reasons {
		dst.Reasons[i] = &pb.Reason{Axis: r.Axis, Rule: r.Rule, Effect: r.Effect, Message: r.Message}
	}
	dst.Execution = nil
	if ex := src.Execution; ex != nil {
		out := &pb.Execution{Cwd: ex.Cwd, EnvEnforced: ex.EnvEnforced, Env: make(map[string]string, len(ex.Env)), Network: ex.Network,
			ReadOnlyNames: slices.Clone(ex.ReadOnlyNames), UnreadableNames: slices.Clone(ex.UnreadableNames),
			ConfinementRequired: ex.ConfinementRequired}
		for k, v := range ex.Env {
			out.Env[k] = v
		}
		if ex.ReadPaths != nil {
			out.ReadPaths = &pb.PathList{Paths: slices.Clone(ex.ReadPaths.Paths)}
		}
		if ex.WritePaths != nil {
			out.WritePaths = &pb.PathList{Paths: slices.Clone(ex.WritePaths.Paths)}
		}
		if r := ex.NetworkRules; r != nil {
			out.NetworkRules = &pb.NetworkRules{Allow: slices.Clone(r.Allow), Ask: slices.Clone(r.Ask), Deny: slices.Clone(r.Deny), Otherwise: r.Otherwise,
				Private: slices.Clone(r.Private)}
		}
		dst.Execution = out
	}
}

// Memoizable reports whether this snapshot's decisions may be memoized,
// and why not when they may not.
func (s *Snapshot) Memoizable() (bool, string) { return s.memoOff == "", s.memoOff }

// memoPlan works out, once per snapshot, which input fields a decision
// depends on, or why decisions cannot be memoized (s.memoOff).
func (s *Snapshot) memoPlan() {
	if s.hasGuardrailPackages() {
		s.memoOff = "the bundle has data.guardrails Rego packages"
		return
	}
	fields := map[string]bool{}
	for _, path := range slices.Sorted(maps.Keys(s.modules)) {
		m := s.modules[path]
		if name := nondeterministicBuiltin(m); name != "" {
			s.memoOff = fmt.Sprintf("%s uses the non-deterministic builtin %s", path, name)
			return
		}
		if !inputFields(m, fields) {
			s.memoOff = fmt.Sprintf("%s reads input other than by a constant key", path)
			return
		}
	}
	// The agent entry and the guardrails are keyed by the definition's
	// identity and the agent id, not by content.
	delete(fields, "agent")
	delete(fields, "guardrails")
	s.memoFields = slices.Sorted(maps.Keys(fields))
	s.embedded = s.embeddedLibrary()
	// Nothing reads the call's raw arguments: a decision's input goes
	// without them (Input and Explain, for people, keep them).
	s.argsUnread = !fields["args"]
}

// nondeterministicBuiltin is the first builtin OPA marks non-deterministic
// that m calls or names (a `with` may substitute one), or "".
func nondeterministicBuiltin(m *ast.Module) string {
	found := ""
	ast.NewGenericVisitor(func(x any) bool {
		if r, ok := x.(ast.Ref); ok && found == "" {
			if b, ok := ast.BuiltinMap[r.String()]; ok && b.IsNondeterministic() {
				found = b.Name
			}
		}
		return found != ""
	}).Walk(m)
	return found
}

// inputFields adds to fields the first keys of every reference to input
// in m; false when m reads input otherwise (input[x], input whole). A
// `with input...` target replaces input rather than reading it.
func inputFields(m *ast.Module, fields map[string]bool) bool {
	ok := true
	var v *ast.GenericVisitor
	v = ast.NewGenericVisitor(func(x any) bool {
		switch x := x.(type) {
		case *ast.With:
			v.Walk(x.Value)
			return true
		case ast.Ref:
			if !x.HasPrefix(ast.InputRootRef) {
				return false
			}
			if len(x) < 2 {
				ok = false
				return true
			}
			key, isString := x[1].Value.(ast.String)
			if !isString {
				ok = false
				return true
			}
			fields[string(key)] = true
			for _, t := range x[2:] {
				v.Walk(t)
			}
			return true
		case ast.Var:
			if x.Equal(ast.InputRootDocument.Value) {
				ok = false
			}
		}
		return false
	})
	v.Walk(m)
	return ok
}

// key is the memo key of the decision f's input holds: exactly the fields
// the policy reads (memoFields), each encoded from the facts the input is
// built from, so a decision the memo holds needs no input document.
// keyedFields lists the fields it knows; the input has no other.
func (s *Snapshot) key(f *facts) memoKey {
	buf := make([]byte, 0, 1024)
	buf = appendString(buf, f.agentID)
	req := f.req
	for _, name := range s.memoFields {
		buf = appendString(buf, name)
		switch name {
		case "agent_id":
			buf = appendString(buf, f.agentID)
		case "session_id":
			buf = appendString(buf, req.GetSessionId())
		case "tool_name":
			buf = appendString(buf, req.GetToolName())
		case "server":
			buf = appendString(buf, req.GetServer())
		case "category":
			buf = appendString(buf, categoryName(req.GetCategory()))
		case "env":
			env := req.GetEnv()
			buf = binary.AppendUvarint(buf, uint64(len(env)))
			for _, k := range slices.Sorted(maps.Keys(env)) {
				buf = appendString(appendString(buf, k), env[k])
			}
		case "args":
			buf, _ = appendValue(buf, structValue(req.GetArgs()))
		case "agent", "guardrails":
			// the definition's identity and the agent id, in the key already
		case "policy":
			switch {
			case req.GetExecutionPolicy() != nil:
				buf, _ = appendValue(append(buf, 'r'), policyValue(f.policy))
			case f.agent != nil && f.agent.Policy != nil:
				buf = append(buf, 'A') // the definition's, by its identity
			default:
				buf = append(buf, 'u')
			}
		case "scope":
			if f.scope == nil {
				buf = append(buf, 'u')
				continue
			}
			buf = appendList(appendList(append(buf, 's'), f.scope.read), f.scope.write)
		case "paths":
			buf = binary.AppendUvarint(buf, uint64(len(f.paths)))
			for _, p := range f.paths {
				if s.embedded && quietPath(p, f.scope) {
					buf = appendString(appendString(append(buf, 'q'), p.arg), p.access)
					continue
				}
				buf = append(buf, 'P')
				for _, v := range [...]string{p.arg, p.access, p.raw, p.resolved, p.err, p.kind, p.protected} {
					buf = appendString(buf, v)
				}
			}
		case "globs":
			buf = binary.AppendUvarint(buf, uint64(len(f.globs)))
			for _, g := range f.globs {
				if s.embedded && g.protected == "" {
					buf = appendString(append(buf, 'q'), g.arg)
					continue
				}
				buf = appendString(appendString(appendString(append(buf, 'G'), g.arg), g.raw), g.protected)
			}
		case "command":
			if f.command == nil {
				buf = append(buf, 'u')
				continue
			}
			buf = f.command.appendKey(append(buf, 'c'), !s.embedded)
		case "arguments":
			if f.arguments == nil {
				buf = append(buf, 'u')
				continue
			}
			buf = f.arguments.appendKey(append(buf, 'a'))
		case "confinement":
			if f.confine == nil {
				buf = append(buf, 'u')
				continue
			}
			buf = appendList(appendBool(appendString(append(buf, 'k'), f.confine.mode), f.confine.confined), f.confine.homes)
		case "network":
			if f.network == nil {
				buf = append(buf, 'u')
				continue
			}
			buf, _ = appendValue(append(buf, 'n'), f.network.value())
		default:
			buf = append(buf, 'u') // no input has it
		}
	}
	return memoKey{agent: f.agent, sum: sha256.Sum256(buf)}
}

// keyedFields are the input fields key encodes: every field buildInput
// may produce (TestKeyKnowsEveryInputField).
var keyedFields = []string{"agent_id", "session_id", "tool_name", "server", "category", "env", "args", "agent", "guardrails", "policy", "scope", "paths", "globs", "command", "arguments", "confinement", "network"}

// appendKey encodes the command as its value has it, leaves only when
// asked for.
func (c *commandFact) appendKey(buf []byte, leaves bool) []byte {
	terms := func(buf []byte, ts []*ast.Term) []byte {
		buf = binary.AppendUvarint(buf, uint64(len(ts)))
		for _, t := range ts {
			buf, _ = appendValue(buf, t.Value)
		}
		return buf
	}
	if leaves {
		buf = terms(append(buf, 'l'), c.leaves)
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.matches)))
	for _, m := range c.matches {
		buf = appendList(appendString(appendString(buf, m.list), m.rule), m.argv)
		buf = appendBool(buf, m.certain)
	}
	buf = terms(buf, c.unseen)
	buf = binary.AppendUvarint(buf, uint64(len(c.protected)))
	for _, p := range c.protected {
		for _, v := range [...]string{p.Access, p.Word, p.Name, p.What, p.Text} {
			buf = appendString(buf, v)
		}
		buf = appendBool(appendBool(buf, p.Certain), p.Tree)
	}
	buf = terms(buf, c.network)
	buf = binary.AppendUvarint(buf, uint64(len(c.netUses)))
	for _, argv := range c.netUses {
		buf = appendList(buf, argv)
	}
	return appendBool(appendBool(appendString(buf, c.errs), c.missing), c.guarded)
}

// quietPath is a path no rule of the library fires on: no protected
// name, and either no scope for its access and no error but "unresolved"
// (which is refused only where a scope applies), or no error and inside
// one of the scope's roots as the library's scope.inside has it (equal,
// or below by whole segments).
func quietPath(p pathFact, scope *scopeFact) bool {
	if p.protected != "" || p.kind != "" && p.kind != "unresolved" {
		return false
	}
	var roots []string
	if scope != nil {
		switch p.access {
		case "read":
			roots = scope.read
		case "write":
			roots = scope.write
		default:
			return false
		}
	}
	if roots == nil {
		return true // no scope for this access: nothing to be inside, or to fail to check against
	}
	if p.kind != "" {
		return false
	}
	for _, root := range roots {
		if inside(p.resolved, root) {
			return true
		}
	}
	return false
}

// inside is scope.inside: path is root or lies below it by whole segments.
func inside(path, root string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// embeddedLibrary reports whether the snapshot decides with the library
// as embedded: its toolpdp modules are exactly the embedded files.
func (s *Snapshot) embeddedLibrary() bool {
	want := embeddedLibraryModules()
	got := 0
	for _, m := range s.modules {
		if !m.Package.Path.HasPrefix(libraryPackage) {
			continue
		}
		got++
		if !want[moduleSum(m)] {
			return false
		}
	}
	return got == len(want)
}

var libraryPackage = ast.MustParseRef("data.toolpdp")

// moduleSum names a module by its parsed content.
func moduleSum(m *ast.Module) [sha256.Size]byte { return sha256.Sum256([]byte(m.String())) }

// embeddedLibraryModules are the embedded library's modules, tests too (a
// bundle's reader keeps them), by moduleSum.
var embeddedLibraryModules = sync.OnceValue(func() map[[sha256.Size]byte]bool {
	out := map[[sha256.Size]byte]bool{}
	_ = fs.WalkDir(library.Library(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return err
		}
		src, err := fs.ReadFile(library.Library(), path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		out[moduleSum(m)] = true
		return nil
	})
	return out
})

// appendValue is an unambiguous encoding of a JSON-like value: a type tag,
// lengths before contents, object keys sorted.
func appendValue(buf []byte, v ast.Value) ([]byte, bool) {
	switch v := v.(type) {
	case ast.Null:
		return append(buf, 'n'), true
	case ast.Boolean:
		if v {
			return append(buf, 't'), true
		}
		return append(buf, 'f'), true
	case ast.Number:
		return appendString(append(buf, 'd'), string(v)), true
	case ast.String:
		return appendString(append(buf, 's'), string(v)), true
	case *ast.Array:
		buf = binary.AppendUvarint(append(buf, 'a'), uint64(v.Len()))
		ok := true
		for i := 0; i < v.Len() && ok; i++ {
			buf, ok = appendValue(buf, v.Elem(i).Value)
		}
		return buf, ok
	case ast.Object:
		return appendObject(buf, v, nil)
	}
	return buf, false // sets, refs, comprehensions: never in a built input
}

// appendObject is appendValue of an object, its keys in order, without
// the key skip.
func appendObject(buf []byte, o ast.Object, skip *ast.Term) ([]byte, bool) {
	n := o.Len()
	if skip != nil && o.Get(skip) != nil {
		n--
	}
	buf = binary.AppendUvarint(append(buf, 'o'), uint64(n))
	ok := true
	o.Until(func(k, v *ast.Term) bool {
		if skip != nil && k.Equal(skip) {
			return false
		}
		if buf, ok = appendValue(buf, k.Value); ok {
			buf, ok = appendValue(buf, v.Value)
		}
		return !ok
	})
	return buf, ok
}

// appendList is a list of strings, nil and empty told apart.
func appendList(buf []byte, list []string) []byte {
	if list == nil {
		return append(buf, 'n')
	}
	buf = binary.AppendUvarint(append(buf, 'a'), uint64(len(list)))
	for _, s := range list {
		buf = appendString(buf, s)
	}
	return buf
}

func appendBool(buf []byte, b bool) []byte {
	if b {
		return append(buf, 't')
	}
	return append(buf, 'f')
}

func appendString(buf []byte, s string) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}
