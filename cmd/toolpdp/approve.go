package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// approverFlags are the flags pending and confirm share: where the
// approver's address is, the token it takes, the output format.
type approverFlags struct {
	addr, tokenFile string
	format          outputFormat
}

func (a *approverFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "addr", server.DefaultListen, "the approver's address (serve --confirm-listen): host:port or unix:///path (env TOOLPDP_ADDR)")
	fs.StringVar(&a.tokenFile, "token-file", "", "file holding the approver token (serve --approver-token-file) to present (env TOOLPDP_TOKEN_FILE)")
	a.format = formatFlag(fs, "text")
}

func (a *approverFlags) check() error { return a.format.valid() }

// parseInterleaved parses flags that may come before, between and after
// the positional arguments (toolpdp confirm ID allow --message M), and
// returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, nil
}

// pending lists the asks a running server holds for a person to answer,
// each in full: the arguments (masked unless --reveal, every hidden
// character escaped, cut at a bound that is said), the reasons, env and
// call-site policy.
func pending(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("pending", stderr)
	var af approverFlags
	af.define(fs)
	agent := fs.String("agent", "", "only this agent's asks")
	reveal := fs.Bool("reveal", false, "show the values the decision log masks as secret")
	bound := fs.Int("max-argument-bytes", 0, "bytes of each ask's arguments shown (0: the server's 16 KiB; at most 1 MiB)")
	withSynopsis(fs, "toolpdp pending [--addr ADDR] [--token-file FILE] [--agent ID] [--reveal] [--format text|json]")
	if err := parseEnv(fs, args); err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: pending takes no arguments, got %q", errUsage, fs.Args())
	}
	var asks []*pb.PendingAsk
	err := callWith(ctx, af.addr, af.tokenFile, func(ctx context.Context, c pb.DecisionServiceClient) error {
		req := &pb.ListPendingRequest{AgentId: *agent, PageSize: 100, Reveal: *reveal, MaxArgumentBytes: int32(*bound)}
		for {
			resp, err := c.ListPending(ctx, req)
			if err != nil {
				return err
			}
			asks = append(asks, resp.Asks...)
			if req.PageToken = resp.NextPageToken; req.PageToken == "" {
				return nil
			}
		}
	})
	if err != nil {
		return err
	}
	if af.format.json() {
		out := make([]json.RawMessage, 0, len(asks))
		for _, a := range asks {
			raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(a)
			if err != nil {
				return err
			}
			out = append(out, raw)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"asks": out})
	}
	for _, a := range asks {
		printAsk(stdout, a)
	}
	fmt.Fprintf(stdout, "%d waiting\n", len(asks))
	return nil
}

// printAsk shows one ask as text. The server has made every character
// visible; nothing here is interpreted by the terminal.
func printAsk(w io.Writer, a *pb.PendingAsk) {
	fmt.Fprintf(w, "ask %s (waiting %s)\n", a.DecisionId, (time.Duration(a.AgeMillis) * time.Millisecond).Round(time.Second))
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-10s %s\n", k+":", v)
		}
	}
	row("tool", a.ToolName)
	row("server", a.Server)
	row("agent", a.AgentId)
	row("session", a.SessionId)
	row("call id", a.CallId)
	row("why", a.Message)
	for _, r := range a.Reasons {
		fmt.Fprintf(w, "  reason:    %s %s (%s): %s\n", r.Axis, r.Rule, strings.TrimPrefix(r.Effect.String(), "DECISION_"), r.Message)
	}
	if a.DefinitionChange != nil {
		printDefinitionChange(w, a.DefinitionChange)
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "  arguments (%d bytes):\n", a.ArgumentsBytes)
	for _, line := range strings.Split(a.Arguments, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
	if a.ArgumentsTruncated {
		fmt.Fprintf(w, "  !! only %d of %d bytes of the arguments are shown: you have not seen the whole call (--max-argument-bytes)\n", len(a.Arguments), a.ArgumentsBytes)
	}
	if len(a.Env) > 0 {
		keys := make([]string, 0, len(a.Env))
		for k := range a.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(w, "  env:")
		for _, k := range keys {
			fmt.Fprintf(w, "    %s=%s\n", k, a.Env[k])
		}
	}
	if a.ExecutionPolicy != "" {
		fmt.Fprintln(w, "  call-site execution policy:")
		for _, line := range strings.Split(a.ExecutionPolicy, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	if len(a.Secrets) > 0 {
		if a.Revealed {
			fmt.Fprintf(w, "  secrets shown: %s\n", strings.Join(a.Secrets, ", "))
		} else {
			fmt.Fprintf(w, "  secrets masked: %s (--reveal shows them)\n", strings.Join(a.Secrets, ", "))
		}
	}
	fmt.Fprintln(w)
}

// confirm answers an ask from a terminal: toolpdp confirm ID allow|deny,
// or the ask named by the agent's call id.
func confirm(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("confirm", stderr)
	var af approverFlags
	af.define(fs)
	message := fs.String("message", "", "with deny: what the agent is told to do instead")
	remember := fs.Bool("remember", false, "with allow: later calls of the session that are exactly this call are allowed without asking")
	callID := fs.String("call-id", "", "name the ask by the agent's call id instead of its decision id (with --agent-id and --session-id)")
	agentID := fs.String("agent-id", "", "with --call-id: the agent of the call")
	sessionID := fs.String("session-id", "", "with --call-id: the session of the call")
	withSynopsis(fs, "toolpdp confirm DECISION_ID allow|deny [--message M] [--remember] [--addr ADDR] [--token-file FILE] [--format text|json]\n       toolpdp confirm --call-id C --agent-id A --session-id S allow|deny ...")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := fromEnv(fs, os.Getenv); err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	req := &pb.ConfirmRequest{DenyMessage: *message, Remember: *remember, CallId: *callID, AgentId: *agentID, SessionId: *sessionID}
	switch {
	case *callID != "" && len(pos) == 1:
		req.Result = pos[0]
	case *callID == "" && len(pos) == 2:
		req.DecisionId, req.Result = pos[0], pos[1]
	default:
		fs.Usage()
		return errUsage
	}
	if req.Result != "allow" && req.Result != "deny" {
		return fmt.Errorf("%w: %q is not allow or deny", errUsage, req.Result)
	}
	var resp *pb.ConfirmResponse
	err = callWith(ctx, af.addr, af.tokenFile, func(ctx context.Context, c pb.DecisionServiceClient) (err error) {
		resp, err = c.Confirm(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if af.format.json() {
		raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(raw))
		return nil
	}
	switch {
	case req.Result == "allow" && resp.Decision != pb.Decision_DECISION_ALLOW:
		fmt.Fprintln(stdout, "denied: the policy in force now denies this call, so the approval does not stand; the agent is told why")
	case resp.Decision == pb.Decision_DECISION_ALLOW:
		fmt.Fprintln(stdout, "allowed")
	default:
		fmt.Fprintln(stdout, "denied")
	}
	if resp.Halt {
		fmt.Fprintln(stdout, "the session reached its cap of consecutive denials: the agent is told to stop")
	}
	return nil
}

// stateCmd is `toolpdp state accept-reset`: an operator accepts, on the
// approver's address, that the session state store lost its data.
func stateCmd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("state", stderr)
	var af approverFlags
	af.define(fs)
	withSynopsis(fs, "toolpdp state accept-reset [--addr ADDR] [--token-file FILE] [--format text|json]")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := fromEnv(fs, os.Getenv); err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "accept-reset" {
		fs.Usage()
		return errUsage
	}
	var resp *pb.AcceptStateResetResponse
	err = callWith(ctx, af.addr, af.tokenFile, func(ctx context.Context, c pb.DecisionServiceClient) (err error) {
		resp, err = c.AcceptStateReset(ctx, &pb.AcceptStateResetRequest{})
		return err
	})
	if err != nil {
		return err
	}
	if af.format.json() {
		raw, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(raw))
		return nil
	}
	if !resp.Accepted {
		fmt.Fprintf(stdout, "the state store lost nothing (epoch %s): nothing to accept\n", resp.Epoch)
		return nil
	}
	fmt.Fprintf(stdout, "accepted: the state store's epoch %s is given up, sessions start afresh under %s\n", resp.LostEpoch, resp.Epoch)
	return nil
}
