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

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// status asks a running server for its active policy and last reload error.
// It exits 1 when the last reload was rejected or no policy is loaded.
func status(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	addr := fs.String("addr", DefaultListen, "the server: host:port or unix:///path")
	if err := parse(fs, args); err != nil {
		return err
	}
	target := *addr
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
	st, err := pb.NewDecisionServiceClient(conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return fmt.Errorf("%s: %w", *addr, err)
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
