package main

import (
	"encoding/json"
	"fmt"
)

// The realistic bundle's agent definitions (testdata/bench/agents/data.json),
// generated here so that their shape is reviewable and changeable:
// TestRealisticBundleIsGenerated fails when the file and this generator
// disagree, and `go test ./bench -run RealisticBundle -update` rewrites it.
const (
	benchAgents      = 10
	benchTools       = 30 // configured built-in tools, and tools of each MCP server
	benchGuardrails  = 10 // deny_commands, and as many ask_commands
	benchOverrides   = 5  // safety overrides of the first server's tools
	benchDataFile    = "testdata/bench/agents/data.json"
	benchDataFromDir = "../" + benchDataFile
)

var benchServers = []string{"github", "tickets", "docs", "billing", "wiki"}

type (
	benchAgent struct {
		Version         int               `json:"version"`
		Workspace       string            `json:"workspace"`
		Tools           []benchToolset    `json:"tools"`
		MCPServers      []benchServer     `json:"mcp_servers"`
		SafetyOverrides map[string]string `json:"safety_overrides"`
		ExecutionPolicy benchExecution    `json:"execution_policy"`
		Guardrails      benchGuardrailSet `json:"guardrails"`
	}
	benchToolset struct {
		Type          string        `json:"type"`
		MCPServerName string        `json:"mcp_server_name,omitempty"`
		DefaultConfig *benchConfig  `json:"default_config,omitempty"`
		Configs       []benchConfig `json:"configs"`
	}
	benchConfig struct {
		Name             string      `json:"name,omitempty"`
		PermissionPolicy benchPolicy `json:"permission_policy"`
	}
	benchPolicy struct {
		Type string `json:"type"`
	}
	benchServer struct {
		Name string `json:"name"`
		Type string `json:"type"`
		URL  string `json:"url"`
	}
	benchExecution struct {
		Cwd        string   `json:"cwd"`
		ReadPaths  []string `json:"read_paths"`
		WritePaths []string `json:"write_paths"`
		Env        benchEnv `json:"env"`
	}
	benchEnv struct {
		Mode               string   `json:"mode"`
		Names              []string `json:"names"`
		IncludeSafeEnvVars bool     `json:"include_safe_env_vars"`
	}
	benchGuardrailSet struct {
		DenyCommands []string `json:"deny_commands"`
		AskCommands  []string `json:"ask_commands"`
	}
)

// realisticAgents is the content of benchDataFile.
func realisticAgents() ([]byte, error) {
	agents := map[string]benchAgent{}
	for i := range benchAgents {
		a := benchAgent{Version: 1, Workspace: "acme", SafetyOverrides: map[string]string{},
			ExecutionPolicy: benchExecution{Cwd: "/tmp", ReadPaths: []string{"/tmp", "/usr"}, WritePaths: []string{"/tmp"},
				Env: benchEnv{Mode: "allowlist", Names: []string{"PATH", "HOME", "GOFLAGS"}, IncludeSafeEnvVars: true}}}
		builtins := benchToolset{Type: "agent_toolset", DefaultConfig: &benchConfig{PermissionPolicy: benchPolicy{"always_allow"}}}
		for t := range benchTools {
			policy := "always_allow"
			if t%2 == 0 {
				policy = "always_ask"
			}
			builtins.Configs = append(builtins.Configs, benchConfig{Name: fmt.Sprintf("tool_%d", t), PermissionPolicy: benchPolicy{policy}})
		}
		builtins.Configs = append(builtins.Configs, benchConfig{Name: "bash", PermissionPolicy: benchPolicy{"always_ask"}})
		a.Tools = append(a.Tools, builtins)
		for _, s := range benchServers {
			ts := benchToolset{Type: "mcp_toolset", MCPServerName: s}
			for t := range benchTools {
				ts.Configs = append(ts.Configs, benchConfig{Name: fmt.Sprintf("%s_op_%d", s, t), PermissionPolicy: benchPolicy{"always_allow"}})
			}
			a.Tools = append(a.Tools, ts)
			a.MCPServers = append(a.MCPServers, benchServer{Name: s, Type: "url", URL: "https://mcp.example.com/" + s})
		}
		for t := range benchOverrides {
			a.SafetyOverrides[fmt.Sprintf("mcp__%s__%s_op_%d", benchServers[0], benchServers[0], t)] = "ASK"
		}
		for g := range benchGuardrails {
			a.Guardrails.DenyCommands = append(a.Guardrails.DenyCommands, fmt.Sprintf("danger%d", g))
			a.Guardrails.AskCommands = append(a.Guardrails.AskCommands, fmt.Sprintf("git push origin%d", g))
		}
		agents[fmt.Sprintf("agent%d", i)] = a
	}
	return json.MarshalIndent(agents, "", " ")
}
