package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// status asks a running server for its active policy and last reload error.
// It exits 1 when no policy is loaded, the last reload or a bundle
// server's last download was rejected, or a bundle server's bundle is stale.
func status(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	addr := fs.String("addr", server.DefaultListen, "the server: host:port or unix:///path (env TOOLPDP_ADDR)")
	format := formatFlag(fs, "json")
	withSynopsis(fs, "toolpdp status [--addr ADDR] [--format json|text]")
	if err := parseEnv(fs, args); err != nil {
		return err
	}
	if err := format.valid(); err != nil {
		return err
	}
	var st *pb.StatusResponse
	err := call(ctx, *addr, func(ctx context.Context, c pb.DecisionServiceClient) (err error) {
		st, err = c.Status(ctx, &pb.StatusRequest{})
		return err
	})
	if err != nil {
		return err
	}
	if format.json() {
		out, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(st)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(out))
	} else {
		fmt.Fprintf(stdout, "policy revision: %s\n", st.GetPolicyRevision())
		for _, b := range st.GetBundles() {
			fmt.Fprintf(stdout, "  bundle %s: revision %s\n", b.GetName(), b.GetRevision())
		}
		if st.GetLastError() != "" {
			fmt.Fprintf(stdout, "last reload rejected: %s\n", st.GetLastError())
		}
		switch {
		case st.GetState().GetLost():
			fmt.Fprintf(stdout, "state store: lost (%s)\n", st.GetState().GetMessage())
		case st.GetState() != nil && !st.GetState().GetUp():
			fmt.Fprintln(stdout, "state store: cannot be reached")
		}
	}
	if st.GetState().GetLost() {
		return fmt.Errorf("the state store lost its data: calls with a session are denied (state_lost) until `toolpdp state accept-reset`")
	}
	switch {
	case st.PolicyRevision == "" && len(st.Bundles) == 0:
		return fmt.Errorf("no policy is loaded")
	case st.LastError != "":
		return fmt.Errorf("the last reload or download was rejected; revision %q keeps serving", st.PolicyRevision)
	}
	for _, src := range st.Sources {
		if src.Stale {
			return fmt.Errorf("bundle %s has not been refreshed for several polls; revision %q may be out of date", src.Name, st.PolicyRevision)
		}
	}
	return nil
}

// call runs f against a running server, over TCP or a unix socket, with
// a 5 s deadline.
func call(ctx context.Context, addr string, f func(context.Context, pb.DecisionServiceClient) error) error {
	return callWith(ctx, addr, "", f)
}

// callWith is call presenting the bearer token read from tokenFile
// ("": none).
func callWith(ctx context.Context, addr, tokenFile string, f func(context.Context, pb.DecisionServiceClient) error) error {
	if tokenFile != "" {
		raw, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(raw)))
	}
	conn, err := grpc.NewClient(client.Target(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f(ctx, pb.NewDecisionServiceClient(conn)); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}
