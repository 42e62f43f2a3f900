package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// argsAgent constrains the reference server's echo: a message of at most
// ten characters.
const argsAgent = `{
  "mcpargs": {
    "tools": [
      {"type": "mcp_toolset", "mcp_server_name": "everything",
       "default_config": {"permission_policy": {"type": "always_ask"}},
       "configs": [{"name": "echo", "permission_policy": {"type": "always_allow"},
                    "args": {"message": {"type": "string", "maxLength": 10}}}]}
    ],
    "mcp_servers": [{"name": "everything", "type": "stdio"}]
  }
}`

// Through the gateway, an argument constraint holds end to end: echo is
// listed, a long message is refused with a message naming the argument and
// the keyword and never reaches the server, a short one is answered by it.
func TestMCPProxyArgumentConstraint(t *testing.T) {
	dir := t.TempDir()
	bdir := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(filepath.Join(bdir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "agents", "data.json"), []byte(argsAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	sidecar := start(t, "serve", "--bundle", bdir, "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off", "--eval-timeout", "10s")
	waitServing(t, dialUnix(t, sock), sidecar)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.Command(binary(t), "mcp-proxy", "--addr", "unix://"+sock, "--agent-id", "mcpargs", "--server-name", "everything",
		"--timeout", "15s", "--", "node", everything(t), "stdio")
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "toolpdp-test-agent", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through mcp-proxy: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = s.Close() })

	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, stderr.String())
	}
	listed := false
	for _, tool := range list.Tools {
		listed = listed || tool.Name == "echo"
	}
	if !listed {
		t.Fatal("echo is not listed: a constraint must not hide its tool")
	}

	long := "a message well over ten characters"
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": long}})
	if err != nil {
		t.Fatalf("echo, a long message: %v\n%s", err, stderr.String())
	}
	if text := toolText(r); !r.IsError || !strings.Contains(text, `"message"`) || !strings.Contains(text, "maxLength") || strings.Contains(text, "Echo: ") {
		t.Fatalf("echo, a long message: isError %v, %q: want a refusal naming message and maxLength, nothing from the server", r.IsError, text)
	}

	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "short"}})
	if err != nil || r.IsError || !strings.Contains(toolText(r), "short") {
		t.Fatalf("echo, a short message: %v, %+v: want the server's echo", err, r)
	}
}
