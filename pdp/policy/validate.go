package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/toolpdp/toolpdp/pdp/bundles"
)

// Definition is what Go reads of an agent definition (the Rego index reads
// the rest), decoded once per load, after validation has named every bad
// field by its path.
type Definition struct {
	Workspace  string           // "" when the definition names none
	MaxDenials int              // max_consecutive_denials; 0 when unset (Agent.Denials applies the default)
	Policy     *ExecutionPolicy // execution_policy; nil when unset
	// AsksViaClient lets an MCP gateway ask the person at the MCP client
	// (elicitation); AllowSampling lets the server ask the client's model.
	// Both default to false: the client is the governed agent's own process.
	AsksViaClient, AllowSampling bool
	Args                         *ArgConstraints // the tools' argument constraints; nil when none
	// Pins are the tool definitions an MCP gateway may pass, by server
	// and tool name (mcp_servers[].tools); a server absent has none.
	Pins map[string]map[string]string
}

// agentIssues collects what is wrong with one agent definition: errors
// reject the bundle, warnings are logged. An unknown key is an error (a
// misspelt scope must never be a scope that silently is not there) unless
// warnUnknown, the migration escape hatch, makes it a warning.
type agentIssues struct {
	where       string // "agents/data.json: agent 'coder'"
	warnUnknown bool
	errs        []error
	warnings    []string
	args        *ArgConstraints // compiled as the tools are checked
}

func (a *agentIssues) errorf(field, format string, args ...any) {
	a.errs = append(a.errs, fmt.Errorf("%s: %s: %s", a.where, field, fmt.Sprintf(format, args...)))
}

func (a *agentIssues) warnf(field, format string, args ...any) {
	a.warnings = append(a.warnings, fmt.Sprintf("%s: %s: %s", a.where, field, fmt.Sprintf(format, args...)))
}

// unknown refuses an unknown key, suggesting the known key it is closest
// to: a typo ("write_path") would otherwise drop a scope silently. Keys
// beginning with x- are the owners' own, at any depth.
func (a *agentIssues) unknown(field, key string, known []string) {
	if strings.HasPrefix(key, "x-") {
		return
	}
	report, what := a.errorf, "unknown key"
	if a.warnUnknown {
		report, what = a.warnf, "unknown key, ignored (--unknown-keys=warn)"
	}
	if m := closest(key, known); m != "" {
		report(field, "%s (did you mean %q?)", what, m)
		return
	}
	report(field, "%s; the keys known here are %s", what, strings.Join(known, ", "))
}

// closest is the name in known nearest to s by edit distance, if near
// enough to be a slip (at most a third of its length, and 3), else "".
func closest(s string, known []string) string {
	best, bestD := "", min(3, max(1, len(s)/3))+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// validateAgents checks every definition under data.agents of b and, when
// one is valid, decodes it into defs. builtins are the names of the
// library's built-in tools, which a custom tool may not take.
func validateAgents(b *bundles.Bundle, builtins map[string]bool, defs map[string]Definition, warnUnknown bool) (warnings []string, err error) {
	raw, ok := b.Bundle.Data["agents"]
	if !ok {
		return nil, nil
	}
	agents, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: agents: must be an object keyed by agent id, got %s", b.DataFileOf("agents"), typeName(raw))
	}
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var errs []error
	for _, id := range ids {
		a := &agentIssues{where: fmt.Sprintf("%s: agent '%s'", b.DataFileOf("agents", id), id), warnUnknown: warnUnknown}
		a.definition(agents[id], builtins)
		if len(a.errs) == 0 {
			defs[id] = a.decode(agents[id].(map[string]any))
		}
		errs = append(errs, a.errs...)
		warnings = append(warnings, a.warnings...)
	}
	return warnings, errors.Join(errs...)
}

var agentKeys = map[string]func(a *agentIssues, v any, def map[string]any, builtins map[string]bool){
	"version":             func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.number("version", v) },
	"workspace":           func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.str("workspace", v) },
	"permission_callback": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.boolean("permission_callback", v) },
	"max_consecutive_denials": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) {
		a.positiveInt("max_consecutive_denials", v)
	},
	"mcp_servers": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.servers(v) },
	"tools": func(a *agentIssues, v any, def map[string]any, b map[string]bool) {
		a.tools(v, declaredServers(def), b)
	},
	"safety_overrides": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.overrides(v) },
	"execution_policy": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) {
		a.executionPolicy("execution_policy", v)
	},
	"guardrails":      func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.guardrails(v) },
	"asks_via_client": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.boolean("asks_via_client", v) },
	"allow_sampling":  func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.boolean("allow_sampling", v) },
	// The keys of an agent resource that decide nothing here.
	"description": func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.str("description", v) },
	"name":        func(a *agentIssues, v any, _ map[string]any, _ map[string]bool) { a.str("name", v) },
	"model":       func(*agentIssues, any, map[string]any, map[string]bool) {},
	"system":      func(*agentIssues, any, map[string]any, map[string]bool) {},
	"metadata":    func(*agentIssues, any, map[string]any, map[string]bool) {},
}

func (a *agentIssues) definition(v any, builtins map[string]bool) {
	def, ok := a.object("definition", v)
	if !ok {
		return
	}
	for _, k := range sortedKeys(def) {
		check, known := agentKeys[k]
		if !known {
			a.unknown(k, k, slices.Sorted(maps.Keys(agentKeys)))
			continue
		}
		check(a, def[k], def, builtins)
	}
}

// decode reads a valid definition's settings, each default applied here.
func (a *agentIssues) decode(def map[string]any) Definition {
	var d Definition
	d.Workspace, _ = def["workspace"].(string)
	d.AsksViaClient, _ = def["asks_via_client"].(bool)
	d.AllowSampling, _ = def["allow_sampling"].(bool)
	if !a.args.empty() {
		d.Args = a.args
	}
	if n, ok := toFloat(def["max_consecutive_denials"]); ok {
		d.MaxDenials = int(n)
	}
	d.Pins = decodePins(def)
	if p, ok := def["execution_policy"]; ok {
		raw, err := json.Marshal(p)
		if err == nil {
			d.Policy = &ExecutionPolicy{}
			err = json.Unmarshal(raw, d.Policy)
		}
		if err != nil {
			a.errorf("execution_policy", "%v", err)
		}
	}
	return d
}

func declaredServers(def map[string]any) map[string]bool {
	out := map[string]bool{}
	list, _ := def["mcp_servers"].([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				out[n] = true
			}
		}
	}
	return out
}

func (a *agentIssues) servers(v any) {
	list, ok := a.array("mcp_servers", v)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for i, s := range list {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		m, ok := a.object(field, s)
		if !ok {
			continue
		}
		name, ok := a.requiredString(field+".name", m["name"])
		if ok && seen[name] {
			a.errorf(field+".name", "server %q is declared twice", name)
		}
		seen[name] = true
		if ok && strings.Contains(name, "__") {
			a.warnf(field+".name", "%q contains \"__\": its tools can be named only through the request's server field", name)
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "name":
			case "type", "url":
				a.str(field+"."+k, m[k])
			case "tools":
				a.toolPins(field+".tools", m[k])
			default:
				a.unknown(field+"."+k, k, []string{"name", "tools", "type", "url"})
			}
		}
	}
}

func (a *agentIssues) tools(v any, servers map[string]bool, builtins map[string]bool) {
	list, ok := a.array("tools", v)
	if !ok {
		return
	}
	agentToolsets, mcpToolsets, customs := 0, map[string]bool{}, map[string]bool{}
	for i, t := range list {
		field := fmt.Sprintf("tools[%d]", i)
		m, ok := a.object(field, t)
		if !ok {
			continue
		}
		typ, _ := a.requiredString(field+".type", m["type"])
		switch typ {
		case "agent_toolset":
			if agentToolsets++; agentToolsets > 1 {
				a.errorf(field, "a second agent_toolset; an agent has at most one")
			}
			a.toolset(field, m, "", "")
		case "mcp_toolset":
			server, ok := a.requiredString(field+".mcp_server_name", m["mcp_server_name"])
			if ok && !servers[server] {
				a.errorf(field+".mcp_server_name", "server %q is not declared in mcp_servers", server)
			}
			if ok && mcpToolsets[server] {
				a.errorf(field+".mcp_server_name", "a second mcp_toolset for server %q", server)
			}
			mcpToolsets[server] = true
			a.toolset(field, m, "mcp_server_name", server)
		case "custom":
			name, ok := a.requiredString(field+".name", m["name"])
			switch {
			case !ok:
			case builtins[name]:
				a.errorf(field+".name", "custom tool %q takes the name of a built-in tool", name)
			case name == NetworkTool:
				a.errorf(field+".name", "custom tool %q takes the reserved name of the tool a confined run's connections are decided by", name)
			case strings.HasPrefix(name, "mcp__"):
				a.errorf(field+".name", "custom tool %q may not be named in the mcp__ form", name)
			case customs[name]:
				a.errorf(field+".name", "custom tool %q is declared twice", name)
			}
			customs[name] = true
			a.onlyKeys(field, m, "type", "name", "description", "input_schema", "args")
			if args, ok := m["args"]; ok && name != "" {
				a.argConstraints(field+".args", argSetKey{set: argSetCustom, tool: name}, args)
			}
		case "":
		default:
			a.errorf(field+".type", "%q is not agent_toolset, mcp_toolset or custom", typ)
		}
	}
}

// toolset checks an agent_toolset (server "") or a server's mcp_toolset.
func (a *agentIssues) toolset(field string, m map[string]any, extra, server string) {
	a.onlyKeys(field, m, "type", "default_config", "configs", extra)
	if dc, ok := m["default_config"]; ok {
		a.toolConfig(field+".default_config", dc, false)
	}
	configs, ok := m["configs"]
	if !ok {
		return
	}
	list, ok := a.array(field+".configs", configs)
	if !ok {
		return
	}
	seen := map[string]bool{}
	constrained := map[string]string{} // bare name -> the configs name whose args constrain it
	for i, c := range list {
		cf := fmt.Sprintf("%s.configs[%d]", field, i)
		name := a.toolConfig(cf, c, true)
		if name != "" && seen[name] {
			a.errorf(cf+".name", "%q is configured twice in this toolset", name)
		}
		seen[name] = true
		entry, _ := c.(map[string]any) // nil when not an object: toolConfig said so
		args, ok := entry["args"]
		if !ok || name == "" {
			continue
		}
		// An MCP tool's entry may name it bare or in full: one tool, and
		// two sets of constraints for it would leave one unchecked.
		bare := strings.TrimPrefix(name, "mcp__"+server+"__")
		if server == "" {
			bare = name
		}
		if other, twice := constrained[bare]; twice {
			a.errorf(cf+".args", "tool %q has argument constraints in two entries (%q and %q): keep them in one", bare, other, name)
			continue
		}
		constrained[bare] = name
		a.argConstraints(cf+".args", argSetKey{set: argSetToolset, server: server, tool: bare}, args)
	}
}

// argConstraints checks and compiles a tool's "args": an object of
// argument names, each a constraint of the JSON Schema subset ArgKeywords.
// Every error names the tool, the argument and the keyword.
func (a *agentIssues) argConstraints(field string, key argSetKey, v any) {
	m, ok := a.object(field, v)
	if !ok {
		return
	}
	var compiled []argSchema
	bad := false
	for _, name := range sortedKeys(m) {
		errs := argSchemaErrors("", m[name])
		for _, e := range errs {
			a.errorf(field+"."+name, "tool %q, argument %q: %s", key.tool, name, e)
		}
		schema, isObject := m[name].(map[string]any)
		if !isObject {
			bad = true
			continue
		}
		s, err := compileSchema(name, schema)
		bad = bad || len(errs) > 0
		if err != nil {
			a.errorf(field+"."+name, "tool %q, %v", key.tool, err)
			bad = true
			continue
		}
		compiled = append(compiled, s)
	}
	if bad {
		return
	}
	if a.args == nil {
		a.args = &ArgConstraints{}
	}
	a.args.put(key, compiled, m)
}

// toolConfig checks a configs entry (named) or a default_config.
func (a *agentIssues) toolConfig(field string, v any, named bool) string {
	m, ok := a.object(field, v)
	if !ok {
		return ""
	}
	var name string
	if named {
		name, _ = a.requiredString(field+".name", m["name"])
		a.onlyKeys(field, m, "name", "enabled", "permission_policy", "args")
	} else {
		a.onlyKeys(field, m, "enabled", "permission_policy")
	}
	if e, ok := m["enabled"]; ok {
		a.boolean(field+".enabled", e)
	}
	if p, ok := m["permission_policy"]; ok {
		pm, ok := a.object(field+".permission_policy", p)
		if ok {
			typ, ok := a.requiredString(field+".permission_policy.type", pm["type"])
			if ok && typ != "always_allow" && typ != "always_ask" {
				a.errorf(field+".permission_policy.type", "%q is not always_allow or always_ask", typ)
			}
		}
	}
	return name
}

func (a *agentIssues) overrides(v any) {
	m, ok := a.object("safety_overrides", v)
	if !ok {
		return
	}
	for _, k := range sortedKeys(m) {
		s, ok := a.str(fmt.Sprintf("safety_overrides[%s]", k), m[k])
		if ok && s != "SAFE" && s != "ASK" {
			a.errorf(fmt.Sprintf("safety_overrides[%s]", k), "%q is not SAFE or ASK", s)
		}
	}
}

func (a *agentIssues) executionPolicy(field string, v any) {
	m, ok := a.object(field, v)
	if !ok {
		return
	}
	for _, k := range sortedKeys(m) {
		f := field + "." + k
		switch k {
		case "cwd":
			if s, ok := a.str(f, m[k]); ok && !filepath.IsAbs(s) {
				a.errorf(f, "%q is not an absolute path", s)
			}
		case "read_paths", "write_paths":
			a.absolutePaths(f, m[k])
		case "env":
			a.envSpec(f, m[k])
		case "network":
			a.networkPolicy(f, m[k])
		case "confinement":
			if s, ok := a.str(f, m[k]); ok && !slices.Contains(confinementModes, s) {
				a.errorf(f, "%q is not \"off\", \"trusted\" or \"required\"", s)
			}
		default:
			a.unknown(f, k, []string{"cwd", "read_paths", "write_paths", "env", "network", "confinement"})
		}
	}
}

// confinementModes are what execution_policy.confinement may say of a
// call that will run confined: ignore it (off, the default), trust it
// (trusted) or require it of every shell call (required).
var confinementModes = []string{"off", "trusted", "required"}

func (a *agentIssues) envSpec(field string, v any) {
	m, ok := a.object(field, v)
	if !ok {
		return
	}
	mode, ok := a.requiredString(field+".mode", m["mode"])
	if ok {
		if err := CheckEnvMode(mode); err != nil {
			a.errorf(field+".mode", "%v", err)
		}
	}
	if n, ok := m["names"]; ok {
		a.strings(field+".names", n)
	} else {
		a.errorf(field+".names", "required")
	}
	if s, ok := m["include_safe_env_vars"]; ok {
		a.boolean(field+".include_safe_env_vars", s)
	}
	a.onlyKeys(field, m, "mode", "names", "include_safe_env_vars")
}

func (a *agentIssues) guardrails(v any) {
	m, ok := a.object("guardrails", v)
	if !ok {
		return
	}
	for _, k := range sortedKeys(m) {
		f := "guardrails." + k
		switch k {
		case "deny_commands", "ask_commands", "protected_paths":
			a.strings(f, m[k])
		case "protect_vcs_and_agent_config":
			a.boolean(f, m[k])
		case "network":
			a.network(f, m[k])
		default:
			a.unknown(f, k, []string{"deny_commands", "ask_commands", "protected_paths", "protect_vcs_and_agent_config", "network"})
		}
	}
}

// network is "none" (no network for shell tools) or "" (not enforced): any
// other word would be a rule nobody enforces.
func (a *agentIssues) network(field string, v any) {
	if s, ok := a.str(field, v); ok && s != "" && s != "none" {
		a.errorf(field, "%q is not \"none\" or empty", s)
	}
}

func (a *agentIssues) absolutePaths(field string, v any) {
	list, ok := a.strings(field, v)
	if !ok {
		return
	}
	for i, p := range list {
		if !filepath.IsAbs(p) {
			a.errorf(fmt.Sprintf("%s[%d]", field, i), "%q is not an absolute path", p)
		}
	}
}

func (a *agentIssues) onlyKeys(field string, m map[string]any, keys ...string) {
	for _, k := range sortedKeys(m) {
		known := false
		for _, want := range keys {
			known = known || k == want
		}
		if !known {
			a.unknown(field+"."+k, k, keys)
		}
	}
}

func (a *agentIssues) object(field string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		a.errorf(field, "must be an object, got %s", typeName(v))
	}
	return m, ok
}

func (a *agentIssues) array(field string, v any) ([]any, bool) {
	l, ok := v.([]any)
	if !ok {
		a.errorf(field, "must be an array, got %s", typeName(v))
	}
	return l, ok
}

func (a *agentIssues) strings(field string, v any) ([]string, bool) {
	l, ok := a.array(field, v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := a.str(fmt.Sprintf("%s[%d]", field, i), e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func (a *agentIssues) str(field string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		a.errorf(field, "must be a string, got %s", typeName(v))
	}
	return s, ok
}

func (a *agentIssues) requiredString(field string, v any) (string, bool) {
	if v == nil {
		a.errorf(field, "required")
		return "", false
	}
	s, ok := a.str(field, v)
	if ok && s == "" {
		a.errorf(field, "must not be empty")
		return "", false
	}
	return s, ok
}

func (a *agentIssues) boolean(field string, v any) {
	if _, ok := v.(bool); !ok {
		a.errorf(field, "must be true or false, got %s", typeName(v))
	}
}

func (a *agentIssues) number(field string, v any) {
	if !isNumber(v) {
		a.errorf(field, "must be a number, got %s", typeName(v))
	}
}

func (a *agentIssues) positiveInt(field string, v any) {
	n, ok := toFloat(v)
	if !ok || n < 1 || n != float64(int64(n)) {
		a.errorf(field, "must be a whole number of at least 1, got %v", v)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	if isNumber(v) {
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// EnvModes are the modes of an execution policy's env, the one list:
// definitions, requests and the input handed to the library are checked
// against it.
var EnvModes = []string{"allowlist", "denylist"}

// CheckEnvMode says why mode is not one of EnvModes.
func CheckEnvMode(mode string) error {
	if slices.Contains(EnvModes, mode) {
		return nil
	}
	return fmt.Errorf("%q is not %s", mode, strings.Join(EnvModes, " or "))
}
