package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ListTools starts the stdio MCP server cmd, initializes a session and
// lists its tools, every page, each tool as the server wrote it (the bytes
// a gateway's digest is taken of), then stops the server. Requests the
// server makes meanwhile are refused; its notifications are ignored.
func ListTools(ctx context.Context, cmd *exec.Cmd, stderr io.Writer) ([]json.RawMessage, error) {
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the MCP server could not be started: %w", err)
	}
	defer func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	}()
	responses := make(chan *jsonrpc.Response, 16)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(out, func(line []byte) {
			m, ok := serverMessage(line, discardWarn{})
			if !ok {
				return
			}
			// Read strictly, as the gateway reads the server: a definition
			// with ambiguous keys is an error answer, not a digest.
			if pass, _, _ := screenServer(m); pass != nil {
				m = pass
			}
			switch m := m.(type) {
			case *jsonrpc.Response:
				responses <- m
			case *jsonrpc.Request:
				if m.IsCall() {
					_ = writeLine(in, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: codeRefused, Message: "toolpdp mcp pin only lists tools"}})
				}
			}
		})
	}()
	n := 0
	call := func(method string, params any) (json.RawMessage, error) {
		n++
		id, _ := jsonrpc.MakeID(fmt.Sprintf("toolpdp-pin-%d", n))
		if err := writeLine(in, &jsonrpc.Request{ID: id, Method: method, Params: raw(params)}); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		for {
			select {
			case r := <-responses:
				if r.ID != id {
					continue
				}
				if r.Error != nil {
					return nil, fmt.Errorf("%s: the server answered %v", method, r.Error)
				}
				return r.Result, nil
			case err := <-readErr:
				return nil, fmt.Errorf("%s: the server's output ended (%v)", method, err)
			case <-ctx.Done():
				return nil, fmt.Errorf("%s: %w", method, ctx.Err())
			}
		}
	}
	if _, err := call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolpdp-mcp-pin", "version": "1"}}); err != nil {
		return nil, err
	}
	if err := writeLine(in, &jsonrpc.Request{Method: "notifications/initialized", Params: raw(map[string]any{})}); err != nil {
		return nil, err
	}
	var tools []json.RawMessage
	cursor := ""
	for range maxOwnListPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := call("tools/list", params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: the answer could not be read: %v", err)
		}
		tools = append(tools, page.Tools...)
		if cursor = page.NextCursor; cursor == "" {
			return tools, nil
		}
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxOwnListPages)
}

type discardWarn struct{}

func (discardWarn) Warn(string, ...any) {}
