package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/pdp/server"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// status asks a running server for its active policy and last reload error.
// It exits 1 when the last reload was rejected or no policy is loaded.
func status(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	addr := fs.String("addr", server.DefaultListen, "the server: host:port or unix:///path (env TOOLPDP_ADDR)")
	withSynopsis(fs, "toolpdp status [--addr ADDR]")
	if err := parseEnv(fs, args); err != nil {
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
	out, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(st)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(out))
	switch {
	case st.PolicyRevision == "" && len(st.Bundles) == 0:
		return fmt.Errorf("no policy is loaded")
	case st.LastError != "":
		return fmt.Errorf("the last reload was rejected; revision %q keeps serving", st.PolicyRevision)
	}
	return nil
}

// pending lists the asks a running server holds for a person to answer.
func pending(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("pending", stderr)
	addr := fs.String("addr", server.DefaultListen, "the server: host:port or unix:///path (env TOOLPDP_ADDR)")
	agent := fs.String("agent", "", "only this agent's asks")
	withSynopsis(fs, "toolpdp pending [--addr ADDR] [--agent ID]")
	if err := parseEnv(fs, args); err != nil {
		return err
	}
	var asks []*pb.PendingAsk
	err := call(ctx, *addr, func(ctx context.Context, c pb.DecisionServiceClient) error {
		req := &pb.ListPendingRequest{AgentId: *agent, PageSize: 1000}
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
	now := time.Now()
	for _, a := range asks {
		waited := now.Sub(time.Unix(0, a.CreatedUnixNanos)).Round(time.Second)
		fmt.Fprintf(stdout, "%s\tagent=%s\tsession=%s\ttool=%s\twaiting=%s\t%s\n", a.DecisionId, a.AgentId, a.SessionId, a.ToolName, waited, a.Message)
	}
	fmt.Fprintf(stdout, "%d waiting\n", len(asks))
	return nil
}

// call runs f against a running server, over TCP or a unix socket, with
// a 5 s deadline.
func call(ctx context.Context, addr string, f func(context.Context, pb.DecisionServiceClient) error) error {
	target := addr
	if !strings.HasPrefix(target, "unix://") {
		target = "passthrough:///" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
