package policy

import (
	"fmt"

	"github.com/toolpdp/toolpdp/pdp/tooldef"
)

// toolPins checks a server's pinned tool definitions: a list of
// {"name", "digest"}, each name once, each digest as toolpdp mcp pin
// writes it. A pin that cannot be read would leave a tool unpinned, so it
// rejects the bundle.
func (a *agentIssues) toolPins(field string, v any) {
	list, ok := a.array(field, v)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for i, p := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		m, ok := a.object(f, p)
		if !ok {
			continue
		}
		a.onlyKeys(f, m, "name", "digest")
		name, ok := a.requiredString(f+".name", m["name"])
		if ok && seen[name] {
			a.errorf(f+".name", "tool %q is pinned twice", name)
		}
		seen[name] = true
		if d, ok := a.requiredString(f+".digest", m["digest"]); ok && !tooldef.ValidDigest(d) {
			a.errorf(f+".digest", "%q is not a digest of the form sha256:<64 lowercase hex digits> (toolpdp mcp pin writes them)", d)
		}
	}
}

// decodePins reads a valid definition's pins by server, then tool.
func decodePins(def map[string]any) map[string]map[string]string {
	var out map[string]map[string]string
	list, _ := def["mcp_servers"].([]any)
	for _, s := range list {
		m, _ := s.(map[string]any)
		name, _ := m["name"].(string)
		pins, ok := m["tools"].([]any)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		byTool := map[string]string{}
		for _, p := range pins {
			pm, _ := p.(map[string]any)
			tool, _ := pm["name"].(string)
			byTool[tool], _ = pm["digest"].(string)
		}
		out[name] = byTool
	}
	return out
}

// ToolPins are the pinned definitions of server's tools, by name, and
// whether the server has pins at all ("tools" given, even empty: a server
// pinned to nothing passes no tool).
func (d *Definition) ToolPins(server string) (map[string]string, bool) {
	if d == nil {
		return nil, false
	}
	pins, ok := d.Pins[server]
	return pins, ok
}
