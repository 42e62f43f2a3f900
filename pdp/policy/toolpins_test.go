package policy

import (
	"strings"
	"testing"
)

func TestToolPinsDecodedStrictly(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for agents, want := range map[string]string{
		`{"c": {"mcp_servers": [{"name": "s", "tools": {"echo": "x"}}]}}`:                                                                `b: agent 'c': mcp_servers[0].tools: must be an array`,
		`{"c": {"mcp_servers": [{"name": "s", "tools": [{"name": "echo"}]}]}}`:                                                           `b: agent 'c': mcp_servers[0].tools[0].digest: required`,
		`{"c": {"mcp_servers": [{"name": "s", "tools": [{"name": "echo", "digest": "abc"}]}]}}`:                                          `b: agent 'c': mcp_servers[0].tools[0].digest: "abc" is not a digest`,
		`{"c": {"mcp_servers": [{"name": "s", "tools": [{"name": "echo", "digest": "` + d + `", "hash": 1}]}]}}`:                         `b: agent 'c': mcp_servers[0].tools[0].hash: unknown key`,
		`{"c": {"mcp_servers": [{"name": "s", "tools": [{"name": "e", "digest": "` + d + `"}, {"name": "e", "digest": "` + d + `"}]}]}}`: `b: agent 'c': mcp_servers[0].tools[1].name: tool "e" is pinned twice`,
		`{"c": {"mcp_servers": [{"name": "s", "tool": []}]}}`:                                                                            `b: agent 'c': mcp_servers[0].tool: unknown key (did you mean "tools"?)`,
	} {
		_, err := validateAgents(agentsBundle(t, agents), nil, map[string]Definition{}, false)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", agents, err, want)
		}
	}
	defs := map[string]Definition{}
	if _, err := validateAgents(agentsBundle(t, `{"c": {"mcp_servers": [{"name": "s", "tools": [{"name": "echo", "digest": "`+d+`"}]}, {"name": "none", "tools": []}, {"name": "free"}]}}`), nil, defs, false); err != nil {
		t.Fatal(err)
	}
	def := defs["c"]
	if pins, ok := def.ToolPins("s"); !ok || pins["echo"] != d || len(pins) != 1 {
		t.Errorf("pins of s: %v %v", pins, ok)
	}
	if pins, ok := def.ToolPins("none"); !ok || len(pins) != 0 {
		t.Errorf("a server pinned to nothing has pins: %v %v", pins, ok)
	}
	if _, ok := def.ToolPins("free"); ok {
		t.Error("a server without tools has pins")
	}
}
