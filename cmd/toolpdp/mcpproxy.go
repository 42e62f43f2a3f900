package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolpdp/toolpdp/mcpproxy"
	"github.com/toolpdp/toolpdp/pdp/tokenfile"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// mcpProxy puts the decision point in front of an MCP server: over stdio,
// wrapping a server started as a command, or as a streamable HTTP endpoint
// in front of a server's URL.
func mcpProxy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp-proxy", stderr)
	addr := fs.String("addr", envOr("TOOLPDP_ADDR", "127.0.0.1:8787"), "the sidecar's gRPC address, host:port or unix:///path (env TOOLPDP_ADDR)")
	agentID := fs.String("agent-id", os.Getenv("TOOLPDP_AGENT_ID"), "the agent definition the calls are decided for (required; env TOOLPDP_AGENT_ID)")
	serverName := fs.String("server-name", "", "the MCP server's name in the agent's mcp_servers (required)")
	tokenFile := fs.String("token-file", os.Getenv("TOOLPDP_TOKEN_FILE"), "file holding the workspace's bearer token, read again on every call (env TOOLPDP_TOKEN_FILE)")
	timeout := fs.Duration("timeout", mcpproxy.DefaultTimeout, "bound on one call to the sidecar; past it the MCP call is refused, never forwarded")
	listen := fs.String("listen", "", "serve streamable HTTP on this address (with --upstream-url) instead of wrapping a command over stdio")
	upstream := fs.String("upstream-url", "", "the MCP server's streamable HTTP URL (with --listen)")
	var allowedOrigins listFlag
	fs.Var(&allowedOrigins, "allowed-origin", "with --listen: a browser origin (scheme://host[:port]) allowed besides loopback ones; a request with any other Origin is refused (repeatable)")
	listenToken := fs.String("listen-token-file", "", "with --listen: file holding the bearer token every HTTP client must send, re-read when it changes (required when --listen is not loopback)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error (the log goes to stderr)")
	withSynopsis(fs, "toolpdp mcp-proxy --agent-id A --server-name S [--addr ADDR] [--token-file F] -- COMMAND ARGS...\n"+
		"       toolpdp mcp-proxy --agent-id A --server-name S [--addr ADDR] --listen ADDR --upstream-url URL [--allowed-origin ORIGIN]... [--listen-token-file F]")
	if err := parse(fs, args); err != nil {
		return err
	}
	httpMode := *listen != "" || *upstream != ""
	switch {
	case *agentID == "" || *serverName == "":
		fmt.Fprintln(stderr, "toolpdp mcp-proxy: --agent-id and --server-name are required")
		return errUsage
	case httpMode && (*listen == "" || *upstream == "" || fs.NArg() > 0):
		fmt.Fprintln(stderr, "toolpdp mcp-proxy: --listen and --upstream-url go together, without a command")
		return errUsage
	case !httpMode && (len(allowedOrigins) > 0 || *listenToken != ""):
		fmt.Fprintln(stderr, "toolpdp mcp-proxy: --allowed-origin and --listen-token-file go with --listen")
		return errUsage
	case !httpMode && fs.NArg() == 0:
		fmt.Fprintln(stderr, "toolpdp mcp-proxy: give the MCP server's command after --, or --listen and --upstream-url")
		return errUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level: %v", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	target := *addr
	if !strings.HasPrefix(target, "unix://") {
		target = "passthrough:///" + target
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *tokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(fileToken(*tokenFile)))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg := mcpproxy.Config{Sidecar: pb.NewDecisionServiceClient(conn), AgentID: *agentID, ServerName: *serverName, Timeout: *timeout, Log: log}

	if httpMode {
		front, err := httpFront(ctx, cfg, *upstream, *listen, allowedOrigins, *listenToken, log)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shut)
		}()
		log.Info("mcp-proxy listening", "addr", l.Addr().String(), "upstream", *upstream)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	err = mcpproxy.ServeStdio(ctx, cfg, stdin, stdout, cmd, stderr)
	if errors.Is(err, mcpproxy.ErrHalted) {
		fmt.Fprintln(stderr, "toolpdp mcp-proxy:", err)
		return exitCode(1)
	}
	return err
}

// httpFront is the HTTP endpoint behind its checks: Origin, and off
// loopback a bearer token.
func httpFront(ctx context.Context, cfg mcpproxy.Config, upstream, listen string, origins []string, tokenPath string, log *slog.Logger) (http.Handler, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: not host:port: %w", listen, err)
	}
	var token func() (string, error)
	switch {
	case tokenPath != "":
		f, err := tokenfile.Open(tokenPath, 16, "--listen-token-file", log)
		if err != nil {
			return nil, err
		}
		go f.Run(ctx, tokenfile.DefaultRefresh)
		token = f.Token
	case !mcpproxy.IsLoopbackHost(host):
		return nil, fmt.Errorf("--listen %q is not loopback: anyone who reaches it could call the MCP server as this agent, so pass --listen-token-file FILE (a bearer token every client must send)", listen)
	}
	h, err := mcpproxy.NewHTTP(cfg, upstream)
	if err != nil {
		return nil, err
	}
	return mcpproxy.NewFront(h, origins, token)
}

// fileToken sends the bearer token in a file, read again on every call so
// a rotated Secret takes effect.
type fileToken string

func (f fileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(b))}, nil
}

func (fileToken) RequireTransportSecurity() bool { return false }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
