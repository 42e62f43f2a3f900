package grpcapi_test

import (
	"context"
	"testing"

	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// BenchmarkGRPC is the round trip over loopback TCP and a unix socket, with
// health Check as the transport floor.
func BenchmarkGRPC(b *testing.B) {
	for _, unix := range []bool{false, true} {
		name := "tcp"
		if unix {
			name = "unix"
		}
		ts := startServer(b, grpcapitest.Options{Unix: unix})
		req := &pb.DecideRequest{ToolName: "Read"}
		b.Run(name+"/decide", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ts.Client.Decide(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
