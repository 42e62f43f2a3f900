package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/confine/netproxy"
	"github.com/toolpdp/toolpdp/envguard/netrules"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// netFlags are what a run whose network is decided per connection needs:
// the sidecar that decides, and the allow (agent, session, decision) its
// connections belong to.
type netFlags struct {
	address, agent, session, decision, tokenFile *string
	askTimeout                                   *time.Duration
	maxHosts                                     *int
}

// register adds the flags of its own; the sidecar's address, the allow's
// decision id and the token file are exec's, shared with fetching the
// execution.
func (n *netFlags) register(fs *flag.FlagSet, address, decision, tokenFile *string) {
	n.address, n.decision, n.tokenFile = address, decision, tokenFile
	n.agent = fs.String("agent", "", "the agent of the allow this run belongs to (network rules)")
	n.session = fs.String("session", "", "the session of the allow this run belongs to (network rules)")
	n.askTimeout = fs.Duration("network-ask-timeout", netproxy.DefaultAskTimeout, "how long a connection a person is asked about waits for the answer")
	n.maxHosts = fs.Int("max-hosts-per-run", netproxy.DefaultMaxHosts, "hosts a run decides at most; a new one past that is refused")
}

// proxy is the run's proxy, deciding with the sidecar; close releases the
// sidecar's connection.
func (n *netFlags) proxy(rules *netrules.Rules, command string, stderr io.Writer) (*netproxy.Proxy, func(), error) {
	if *n.address == "" || *n.decision == "" {
		return nil, nil, errors.New(`execution.network is "rules": --address and --decision must name the sidecar and the allow each connection is decided for (with --agent and --session as that allow had them)`)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *n.tokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(fileToken(*n.tokenFile)))
	}
	conn, err := grpc.NewClient(client.Target(*n.address), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--address %s: %w", *n.address, err)
	}
	p, err := netproxy.New(netproxy.Config{
		Decider: &netproxy.Sidecar{Client: pb.NewDecisionServiceClient(conn), AgentID: *n.agent, SessionID: *n.session,
			ForDecision: *n.decision, Command: command},
		Rules: rules, MaxHosts: *n.maxHosts, AskTimeout: *n.askTimeout,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return p, func() { conn.Close() }, nil
}
