package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// floodMethods are a 1 MB request for every method: Decide's in args, the
// others' in a field of their own (deny_message, error, an id) or, for a
// method with none, as fields it does not know — grpc-go buffers a message
// whole whatever its fields.
func floodMethods() map[string]proto.Message {
	mb := strings.Repeat("x", 1<<20-1024)
	return map[string]proto.Message{
		"Decide":        &pb.DecideRequest{ToolName: "Read", Args: mustStruct(map[string]any{"file_path": "/tmp/x", "pad": mb})},
		"Confirm":       &pb.ConfirmRequest{DecisionId: "d", Result: "deny", DenyMessage: mb},
		"ReportResult":  &pb.ReportResultRequest{DecisionId: "d", IsError: true, Error: mb},
		"EndSession":    &pb.EndSessionRequest{SessionId: mb},
		"AwaitDecision": &pb.AwaitDecisionRequest{CallId: mb},
		"FilterTools":   &pb.ConfirmRequest{DenyMessage: mb},
		"Status":        &pb.ConfirmRequest{DenyMessage: mb},
	}
}

// 64 and 256 callers, each on a connection of its own, send 1 MB requests
// to each method as fast as they are answered, each caller a fixed number
// of them: the server (with the shipped GOMEMLIMIT) stays under the shipped
// memory limit, and a plain Decide on a new connection is answered
// afterwards. The flood is a count, so a loaded machine floods as hard, only
// slower; the deadlines only stop a hung server.
// floodCallsPerCaller is what each caller of TestFloodEveryMethod sends.
const floodCallsPerCaller = 2

func TestFloodEveryMethod(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a server process")
	}
	limit := manifestMemoryLimit(t)
	var env []string
	for k, v := range manifestEnv(t) {
		if !strings.HasPrefix(k, "TOOLPDP_") {
			env = append(env, k+"="+v)
		}
	}
	methods := floodMethods()
	for _, callers := range []int{64, 256} {
		for _, method := range []string{"Decide", "Confirm", "ReportResult", "EndSession", "AwaitDecision", "FilterTools", "Status"} {
			t.Run(fmt.Sprintf("%s/%d", method, callers), func(t *testing.T) {
				sock := filepath.Join(t.TempDir(), "s.sock")
				p := startBinaryEnv(t, binary(t), env, "serve", "--listen", "unix://"+sock, "--metrics-listen", "", "--decision-log", "off")
				waitServing(t, dialUnix(t, sock), p)
				tree := &treeSampler{root: p.cmd.Process.Pid}
				stop := tree.run()
				var sent, failed atomic.Int64
				deadline := time.Now().Add(floodHangGuard)
				var wg sync.WaitGroup
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						conn := dialUnix(t, sock)
						for range floodCallsPerCaller {
							if time.Now().After(deadline) {
								break
							}
							ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
							err := conn.Invoke(ctx, "/toolpdp.v1.DecisionService/"+method, methods[method], &emptypb.Empty{}, grpc.MaxCallSendMsgSize(4<<20))
							cancel()
							sent.Add(1)
							if err != nil {
								failed.Add(1)
							}
						}
						conn.Close()
					}()
				}
				wg.Wait()
				stop()
				t.Logf("%d callers on %s: %d calls (%d refused or failed); peak RSS %.1f MiB (limit %.0f MiB)",
					callers, method, sent.Load(), failed.Load(), float64(tree.peak.Load())/(1<<20), float64(limit)/(1<<20))
				if want := int64(callers * floodCallsPerCaller); sent.Load() < want {
					t.Fatalf("%d of %d calls sent in %v: the server hangs\n%s", sent.Load(), want, floodHangGuard, p.stderr.String())
				}
				plainDecideAnswers(t, dialUnix(t, sock), p)
				if tree.peak.Load() >= limit {
					t.Errorf("peak RSS %d bytes, over the shipped limit of %d", tree.peak.Load(), limit)
				}
			})
		}
	}
}
