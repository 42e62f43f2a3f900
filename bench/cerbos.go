package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Cerbos decides the trace's permission axis: may this agent run this tool
// at all, run it only with a person's confirmation, or not. Every agent is
// a role; a tool is a resource of kind "tool" with its server and name as
// attributes; two actions: "run" (without a person) and "ask" (with one).
// Allowed to run is allow, allowed only to ask is ask, neither is deny.
// The policy is written from the trace's agent definitions, one rule per
// configured tool and one per toolset default, as a Cerbos user would
// write it; cerbosPolicy refuses a definition using anything else.

// agentDef is the part of an agent definition the translation reads.
type agentDef struct {
	Tools []struct {
		Type          string       `json:"type"`
		Server        string       `json:"mcp_server_name"`
		DefaultConfig *toolConfig  `json:"default_config"`
		Configs       []toolConfig `json:"configs"`
	} `json:"tools"`
	Servers []struct {
		Name string `json:"name"`
	} `json:"mcp_servers"`
}

type toolConfig struct {
	Name             string `json:"name"`
	Enabled          *bool  `json:"enabled"`
	PermissionPolicy *struct {
		Type string `json:"type"`
	} `json:"permission_policy"`
}

// cerbosPolicy is the resource policy for the trace's agents.
func cerbosPolicy(agents map[string]json.RawMessage) ([]byte, error) {
	type rule struct {
		Actions   []string       `json:"actions"`
		Effect    string         `json:"effect"`
		Roles     []string       `json:"roles"`
		Condition map[string]any `json:"condition"`
	}
	var rules []rule
	add := func(role, effect, expr string) {
		actions := []string{"run", "ask"}
		if effect == "ask" {
			actions = []string{"ask"}
		}
		rules = append(rules, rule{Actions: actions, Effect: "EFFECT_ALLOW", Roles: []string{role},
			Condition: map[string]any{"match": map[string]any{"expr": expr}}})
	}
	effects := map[string]string{"always_allow": "allow", "always_ask": "ask"}
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		var def agentDef
		dec := json.NewDecoder(bytes.NewReader(agents[id]))
		if err := dec.Decode(&def); err != nil {
			return nil, fmt.Errorf("agent %s: %w", id, err)
		}
		declared := map[string]bool{}
		for _, s := range def.Servers {
			declared[s.Name] = true
		}
		for _, ts := range def.Tools {
			server := ""
			switch ts.Type {
			case "agent_toolset":
			case "mcp_toolset":
				if server = ts.Server; !declared[server] {
					continue // an undeclared server's tools are refused: no rule
				}
			default:
				return nil, fmt.Errorf("agent %s: a %s, which the Cerbos translation does not cover", id, ts.Type)
			}
			var named []string
			for _, c := range ts.Configs {
				named = append(named, fmt.Sprintf("%q", c.Name))
				switch {
				case c.Enabled != nil && !*c.Enabled:
					// disabled: no rule, so neither action is allowed
				case c.PermissionPolicy != nil && effects[c.PermissionPolicy.Type] != "":
					add(id, effects[c.PermissionPolicy.Type], fmt.Sprintf("R.attr.server == %q && R.attr.name == %q", server, c.Name))
				default:
					return nil, fmt.Errorf("agent %s: configs entry %s is neither disabled nor a permission policy the translation covers", id, c.Name)
				}
			}
			effect := "ask" // an MCP toolset asks by default
			switch {
			case ts.DefaultConfig != nil && ts.DefaultConfig.PermissionPolicy != nil && effects[ts.DefaultConfig.PermissionPolicy.Type] != "":
				effect = effects[ts.DefaultConfig.PermissionPolicy.Type]
			case ts.DefaultConfig != nil || server == "":
				return nil, fmt.Errorf("agent %s: a toolset default the Cerbos translation does not cover", id)
			}
			add(id, effect, fmt.Sprintf("R.attr.server == %q && !(R.attr.name in [%s])", server, strings.Join(named, ", ")))
		}
	}
	return json.MarshalIndent(map[string]any{
		"apiVersion":     "api.cerbos.dev/v1",
		"resourcePolicy": map[string]any{"version": "default", "resource": "tool", "rules": rules},
	}, "", "  ")
}

// cerbosRequest is the CheckResources body for one call.
func cerbosRequest(i int, req *pb.DecideRequest) ([]byte, error) {
	server, name := req.GetServer(), req.GetToolName()
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok && server == "" {
		var found bool
		if server, name, found = strings.Cut(rest, "__"); !found {
			return nil, fmt.Errorf("request %d: tool %q is not mcp__<server>__<tool>", i, req.GetToolName())
		}
	}
	return json.Marshal(map[string]any{
		"requestId": fmt.Sprint(i),
		"principal": map[string]any{"id": req.GetAgentId(), "roles": []string{req.GetAgentId()}},
		"resources": []any{map[string]any{
			"actions":  []string{"run", "ask"},
			"resource": map[string]any{"kind": "tool", "id": req.GetToolName(), "attr": map[string]any{"server": server, "name": name}},
		}},
	})
}

// cerbosDecision posts one CheckResources body: allow, ask or deny.
func cerbosDecision(c *http.Client, url string, body []byte) (string, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Results []struct {
			Actions map[string]string `json:"actions"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Results) != 1 {
		return "", fmt.Errorf("an answer that is not one result: %s", raw)
	}
	switch a := out.Results[0].Actions; {
	case a["run"] == "EFFECT_ALLOW":
		return "allow", nil
	case a["ask"] == "EFFECT_ALLOW":
		return "ask", nil
	}
	return "deny", nil
}

// permissionEffect is the effect of toolpdp's permission-axis reason.
func permissionEffect(resp *pb.DecideResponse) string {
	for _, r := range resp.GetReasons() {
		if r.GetAxis() == "permission" {
			return policy.EffectName(r.GetEffect())
		}
	}
	return ""
}

// startCerbos builds Cerbos (scripts/build-cerbos) and starts its server on
// loopback with the policy in dir; the URL of CheckResources, or why not.
func startCerbos(dir string) (string, func(), error) {
	out, err := exec.Command("scripts/build-cerbos").Output()
	if err != nil {
		return "", nil, fmt.Errorf("scripts/build-cerbos: %w", err)
	}
	addr, grpcAddr := freeAddr(), freeAddr()
	conf := fmt.Sprintf("server:\n  httpListenAddr: %q\n  grpcListenAddr: %q\n  metricsEnabled: false\nstorage:\n  driver: disk\n  disk:\n    directory: %q\n    watchForChanges: false\naudit:\n  enabled: false\n", addr, grpcAddr, filepath.Join(dir, "policies"))
	if err := writeFile(filepath.Join(dir, "cerbos.yaml"), []byte(conf)); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(strings.TrimSpace(string(out)), "server", "--config", filepath.Join(dir, "cerbos.yaml"), "--log-level", "error")
	cmd.Env = append(os.Environ(), "CERBOS_NO_TELEMETRY=1")
	stop, err := startHealthy(cmd, "Cerbos", "http://"+addr+"/_cerbos/health", 20*time.Second)
	return "http://" + addr + "/api/check/resources", stop, err
}

// cerbosRun writes the trace's policy for Cerbos under dir, starts Cerbos,
// checks that it decides every request's permission axis as toolpdp does,
// and drives it with -concurrency in flight: its req/s.
func cerbosRun(out io.Writer, dir string, agents map[string]json.RawMessage, snap *policy.Snapshot, reqs []*pb.DecideRequest) (float64, error) {
	pol, err := cerbosPolicy(agents)
	if err != nil {
		return 0, err
	}
	if err := writeFile(filepath.Join(dir, "policies", "tool.json"), pol); err != nil {
		return 0, err
	}
	url, stop, err := startCerbos(dir)
	if err != nil {
		return 0, err
	}
	defer stop()
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}}
	bodies := make([][]byte, len(reqs))
	for i, req := range reqs {
		if bodies[i], err = cerbosRequest(i, req); err != nil {
			return 0, err
		}
		resp, err := snap.Decide(context.Background(), req, nil)
		if err != nil {
			return 0, fmt.Errorf("request %d: %w", i, err)
		}
		got, err := cerbosDecision(httpc, url, bodies[i])
		if err != nil {
			return 0, fmt.Errorf("request %d: %w", i, err)
		}
		if want := permissionEffect(resp); got != want {
			return 0, fmt.Errorf("request %d (%s of %s): Cerbos decides %s, toolpdp's permission axis %s: not the same policy", i, req.GetToolName(), req.GetAgentId(), got, want)
		}
	}
	var next atomic.Int64
	res := closedLoop("Cerbos", func() error {
		return post(httpc, url, bodies[int(next.Add(1)-1)%len(bodies)])()
	})
	if res.errors > 0 {
		return 0, fmt.Errorf("%d errors, the first: %s", res.errors, res.firstErr)
	}
	return res.throughput, nil
}
