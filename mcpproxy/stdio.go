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
		serverDone <- readLines(serverOut, func(line []byte) {
			if m, ok := serverMessage(line, s.cfg.Log); ok {
				s.fromServerScreened(ctx, m)
			}
		})
	}()
	clientDone := make(chan error, 1)
	go func() {
		clientDone <- readLines(in, func(line []byte) {
			clientMu.Lock()
			h := halted
			clientMu.Unlock()
			if h {
				return
			}
			m, refusal, err := readClient(line)
			if err != nil {
				s.cfg.Log.Warn("a client message was refused", "error", err)
			}
			if refusal != nil {
				s.send(s.toClient, refusal)
			}
			if m != nil {
				s.fromClient(ctx, m)
			}
		})
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

// readLines hands on the non-blank lines of a newline-delimited stream
// until EOF.
func readLines(r io.Reader, handle func(line []byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			handle(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// serverMessage decodes a line from the server. One that is not a
// JSON-RPC message is logged and skipped (a server printing to stdout by
// mistake), and so is a batch, since MCP has none since 2025-06-18.
func serverMessage(line []byte, log interface{ Warn(string, ...any) }) (jsonrpc.Message, bool) {
	if bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")) {
		log.Warn("a JSON-RPC batch from the server was dropped")
		return nil, false
	}
	m, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		log.Warn("a line that is not a JSON-RPC message was dropped", "error", err)
		return nil, false
	}
	return m, true
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
