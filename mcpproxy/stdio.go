package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MaxMessageBytes bounds one JSON-RPC message on a stdio stream; a longer
// line ends the connection rather than growing without bound.
const MaxMessageBytes = 32 << 20

// ErrHalted is returned by ServeStdio when the session reached its cap of
// consecutive failures: the proxy answered the call that reached it and
// ended the session.
var ErrHalted = errors.New("the session reached its cap of consecutive failures and was ended")

// ServeStdio wraps the MCP server that cmd starts: the client speaks MCP
// on in and out (newline-delimited JSON-RPC), the server on cmd's stdin and
// stdout; cmd's stderr is passed through to stderr. It returns when the
// client closes its side (the server is then stopped) or the server exits.
// The whole connection is one toolpdp session.
func ServeStdio(ctx context.Context, cfg Config, in io.Reader, out io.Writer, cmd *exec.Cmd, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd.Stderr = stderr
	serverIn, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	serverOut, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("the MCP server could not be started: %w", err)
	}
	var (
		clientMu, serverMu sync.Mutex
		haltOnce           sync.Once
		halted             bool
	)
	s := newSession(cfg, "mcp-"+uuid.NewString())
	s.toClient = func(m jsonrpc.Message) error {
		clientMu.Lock()
		defer clientMu.Unlock()
		return writeLine(out, m)
	}
	s.toServer = func(m jsonrpc.Message) error {
		serverMu.Lock()
		defer serverMu.Unlock()
		return writeLine(serverIn, m)
	}
	s.end = func(reason string) {
		haltOnce.Do(func() {
			s.cfg.Log.Warn("session ended", "session", s.id, "reason", reason)
			clientMu.Lock()
			halted = true
			clientMu.Unlock()
			cancel()
		})
	}

	serverDone := make(chan error, 1)
	go func() {
		serverDone <- readLines(serverOut, func(m jsonrpc.Message) { s.fromServer(ctx, m) }, s.cfg.Log)
	}()
	clientDone := make(chan error, 1)
	go func() {
		clientDone <- readLines(in, func(m jsonrpc.Message) {
			clientMu.Lock()
			h := halted
			clientMu.Unlock()
			if !h {
				s.fromClient(ctx, m)
			}
		}, s.cfg.Log)
	}()

	var result error
	select {
	case <-clientDone: // the client is gone: stop the server
	case err := <-serverDone:
		if err != nil {
			result = fmt.Errorf("reading the MCP server: %w", err)
		}
	case <-ctx.Done():
	}
	clientMu.Lock()
	if halted {
		result = ErrHalted
	}
	clientMu.Unlock()
	_ = serverIn.Close()
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Wait() }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-stopped
		}
	}
	return result
}

func writeLine(w io.Writer, m jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readLines decodes newline-delimited JSON-RPC messages until EOF. A line
// that is not a JSON-RPC message is logged and skipped (a server printing
// to stdout by mistake); a batch is refused, since MCP has none since
// 2025-06-18 and the proxy decides every call on its own.
func readLines(r io.Reader, handle func(jsonrpc.Message), log interface{ Warn(string, ...any) }) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			if bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")) {
				log.Warn("a JSON-RPC batch was dropped: each message is decided on its own, send them one by one")
			} else if m, derr := jsonrpc.DecodeMessage(line); derr != nil {
				log.Warn("a line that is not a JSON-RPC message was dropped", "error", derr)
			} else {
				handle(m)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxMessageBytes {
			return nil, fmt.Errorf("a message of more than %d bytes", MaxMessageBytes)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, err
	}
}
