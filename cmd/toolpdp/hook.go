package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/integrations/claudecode"
	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// exitCode makes main exit with this code and print nothing more: the
// command has already said what it had to, in the form its caller reads.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

const hookUsage = `usage: toolpdp hook claude-code [--addr ADDR] [--agent-id ID] [--timeout D] [--confine=false] < event.json
Answers one Claude Code hook event (PreToolUse, PostToolUse, PostToolUseFailure,
SessionEnd) by asking a running toolpdp sidecar. See docs/INTEGRATIONS.md.
`

// hook adapts an agent framework's hook protocol to the sidecar. A bad
// command line exits 2 (errUsage), which Claude Code also reads as "block".
func hook(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, hookUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "claude-code" {
		fmt.Fprint(stderr, hookUsage)
		return errUsage
	}
	fs := newFlagSet("hook claude-code", stderr)
	addr := fs.String("addr", server.DefaultListen, "the sidecar: host:port or unix:///path (env TOOLPDP_ADDR)")
	agent := fs.String("agent-id", "", "the agent definition to decide under; empty means default (env TOOLPDP_AGENT_ID)")
	timeout := fs.Duration("timeout", claudecode.DefaultTimeout, "bound on each call to the sidecar; past it a tool call is denied (keep it well under the hook's timeout in Claude Code's settings)")
	confined := fs.Bool("confine", true, "run every allowed Bash call confined, through toolpdp exec --decision (answered as updatedInput); false decides without confinement (env TOOLPDP_CONFINE)")
	withSynopsis(fs, "toolpdp hook claude-code [--addr ADDR] [--agent-id ID] [--timeout D] [--confine=false] < event.json")
	if err := parseEnv(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var svc pb.DecisionServiceClient
	conn, err := grpc.NewClient(client.Target(*addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		defer conn.Close()
		svc = pb.NewDecisionServiceClient(conn)
	} else {
		// An address gRPC cannot even parse: the event (not yet read) still
		// gets its fail-closed answer.
		svc = unreachable{err: fmt.Errorf("%s: %w", *addr, err)}
	}
	cfg := claudecode.Config{AgentID: *agent, Timeout: *timeout}
	if *confined {
		cfg.Exec, cfg.CanConfine = selfPath(), func() error { return checkConfinement().err() }
	}
	res := claudecode.Handle(ctx, svc, cfg, stdin)
	if _, err := stdout.Write(res.Stdout); err != nil {
		fmt.Fprintf(stderr, "toolpdp: writing the hook answer: %v; the tool call is denied\n", err)
		return exitCode(claudecode.BlockExit)
	}
	fmt.Fprint(stderr, res.Stderr)
	if res.Code != 0 {
		return exitCode(res.Code)
	}
	return nil
}

// selfPath is this binary's absolute path, links resolved ("" when it
// cannot be told): what a rewritten Bash call runs.
func selfPath() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if !filepath.IsAbs(p) {
		return ""
	}
	return p
}

// unreachable answers the calls a hook makes with the dial error, as
// UNAVAILABLE. (The embedded nil interface stands for the RPCs a hook never
// makes.)
type unreachable struct {
	pb.DecisionServiceClient
	err error
}

func (u unreachable) Decide(context.Context, *pb.DecideRequest, ...grpc.CallOption) (*pb.DecideResponse, error) {
	return nil, grpcstatus.Error(codes.Unavailable, u.err.Error())
}

func (u unreachable) ReportResult(context.Context, *pb.ReportResultRequest, ...grpc.CallOption) (*pb.ReportResultResponse, error) {
	return nil, grpcstatus.Error(codes.Unavailable, u.err.Error())
}

func (u unreachable) EndSession(context.Context, *pb.EndSessionRequest, ...grpc.CallOption) (*pb.EndSessionResponse, error) {
	return nil, grpcstatus.Error(codes.Unavailable, u.err.Error())
}
