package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/toolpdp/toolpdp/mcpproxy"
	"github.com/toolpdp/toolpdp/pdp/tooldef"
)

// mcpCmd groups the commands about MCP servers: `toolpdp mcp pin`.
func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "pin" {
		return mcpPin(ctx, args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, "usage: toolpdp mcp pin --agent-id A --server-name S [--write FILE] -- COMMAND ARGS...")
		return nil
	}
	fmt.Fprintln(stderr, "usage: toolpdp mcp pin --agent-id A --server-name S [--write FILE] -- COMMAND ARGS...")
	return errUsage
}

// A pin is one tool's definition digest, as mcp_servers[].tools holds it.
type toolPin struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// mcpPin starts a stdio MCP server, lists its tools and pins their
// definitions, as a lock file pins versions: it prints the server's entry
// with its "tools" pins, or with --write puts them into the agent's
// definition in that file, changing nothing else of it.
func mcpPin(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp pin", stderr)
	agentID := fs.String("agent-id", os.Getenv("TOOLPDP_AGENT_ID"), "the agent whose definition pins the server's tools (required; env TOOLPDP_AGENT_ID)")
	serverName := fs.String("server-name", "", "the MCP server's name in the agent's mcp_servers (required)")
	write := fs.String("write", "", "put the pins into this JSON file of agent definitions (agents keyed by id, or the agent's own definition) instead of printing them")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on starting the server and listing its tools")
	withSynopsis(fs, "toolpdp mcp pin --agent-id A --server-name S [--write FILE] -- COMMAND ARGS...")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *agentID == "" || *serverName == "":
		fmt.Fprintln(stderr, "toolpdp mcp pin: --agent-id and --server-name are required")
		return errUsage
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "toolpdp mcp pin: give the MCP server's command after --")
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	tools, err := mcpproxy.ListTools(ctx, cmd, stderr)
	if err != nil {
		return fmt.Errorf("server %q: %w", *serverName, err)
	}
	pins := make([]toolPin, 0, len(tools))
	seen := map[string]bool{}
	for i, raw := range tools {
		t, err := tooldef.Of(raw)
		if err != nil {
			return fmt.Errorf("server %q: tools[%d]: %w", *serverName, i, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("server %q: tool %q is listed twice", *serverName, t.Name)
		}
		seen[t.Name] = true
		pins = append(pins, toolPin{Name: t.Name, Digest: t.Digest})
	}
	sort.Slice(pins, func(i, j int) bool { return pins[i].Name < pins[j].Name })
	if *write == "" {
		out, _ := json.MarshalIndent(map[string]any{"name": *serverName, "tools": pins}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
		return nil
	}
	if err := writePins(*write, *agentID, *serverName, pins); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: agent '%s': mcp_servers[%s].tools: %d tools pinned\n", *write, *agentID, *serverName, len(pins))
	return nil
}

// writePins replaces the tools pins of server in agent's definition in
// file, which holds agents keyed by id ({"coder": {...}}, as agents/data.json
// does; {"agents": {...}} too) or the agent's own definition (as
// agents/coder/data.json does). Keys keep their order and numbers their
// spelling; the file is written as indented JSON, atomically.
func writePins(file, agentID, server string, pins []toolPin) error {
	if ext := strings.ToLower(filepath.Ext(file)); ext == ".yaml" || ext == ".yml" {
		return fmt.Errorf("%s: only JSON files are written; run without --write and paste the printed pins into the file", file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc, err := decodeOrdered(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	root, ok := doc.(*orderedObject)
	if !ok {
		return fmt.Errorf("%s: not a JSON object of agent definitions", file)
	}
	def := root
	where := "the file's definition"
	if agents, ok := root.get("agents").(*orderedObject); ok {
		root = agents
	}
	if a, ok := root.get(agentID).(*orderedObject); ok {
		def, where = a, fmt.Sprintf("agent '%s'", agentID)
	} else if root.get("mcp_servers") == nil {
		return fmt.Errorf("%s: defines no agent '%s'", file, agentID)
	}
	servers, ok := def.get("mcp_servers").([]any)
	if !ok {
		return fmt.Errorf("%s: %s: mcp_servers: absent or not an array; declare server %q first", file, where, server)
	}
	var entry *orderedObject
	for _, s := range servers {
		if o, ok := s.(*orderedObject); ok && o.get("name") == server {
			entry = o
		}
	}
	if entry == nil {
		return fmt.Errorf("%s: %s: mcp_servers: server %q is not declared; declare it first", file, where, server)
	}
	list := make([]any, 0, len(pins))
	for _, p := range pins {
		list = append(list, &orderedObject{keys: []string{"name", "digest"}, values: map[string]any{"name": p.Name, "digest": p.Digest}})
	}
	entry.set("tools", list)
	var b bytes.Buffer
	writeOrdered(&b, doc, "")
	b.WriteByte('\n')
	tmp, err := os.CreateTemp(filepath.Dir(file), ".pins-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if st, err := os.Stat(file); err == nil {
		_ = os.Chmod(tmp.Name(), st.Mode().Perm())
	}
	return os.Rename(tmp.Name(), file)
}

// orderedObject is a JSON object that keeps its keys' order.
type orderedObject struct {
	keys   []string
	values map[string]any
}

func (o *orderedObject) get(k string) any { return o.values[k] }

func (o *orderedObject) set(k string, v any) {
	if _, ok := o.values[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.values[k] = v
}

// decodeOrdered reads one JSON value: objects as *orderedObject, numbers
// as written (json.Number); a duplicate key is an error.
func decodeOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &orderedObject{values: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			if _, dup := o.values[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := dec.Token() // }
		return o, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ]
		return list, err
	}
	return tok, nil
}

func writeOrdered(b *bytes.Buffer, v any, indent string) {
	switch t := v.(type) {
	case *orderedObject:
		if len(t.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range t.keys {
			key, _ := json.Marshal(k)
			b.WriteString(indent + "  ")
			b.Write(key)
			b.WriteString(": ")
			writeOrdered(b, t.values[k], indent+"  ")
			if i < len(t.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, x := range t {
			b.WriteString(indent + "  ")
			writeOrdered(b, x, indent+"  ")
			if i < len(t)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	case json.Number:
		b.WriteString(t.String())
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(t)
		b.Truncate(b.Len() - 1) // Encode's newline
	}
}
