package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp/grpcapi"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Malformed shapes are INVALID_ARGUMENT naming the field, before any policy.
func TestRequestBounds(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	deep := func(levels int) *structpb.Struct {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewBoolValue(true)}}
		for range levels - 1 {
			s = &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStructValue(s)}}
		}
		return s
	}
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("/r%d", i)
		}
		return out
	}
	env := map[string]string{}
	for i := range grpcapi.MaxEnvEntries + 1 {
		env[fmt.Sprintf("V%d", i)] = "x"
	}
	cases := []struct {
		req  *pb.DecideRequest
		want string
	}{
		{&pb.DecideRequest{ToolName: "Read", Args: deep(grpcapi.MaxArgsDepth + 1)}, "args: nested deeper than 64 levels"},
		{&pb.DecideRequest{ToolName: "Read", Args: deep(6000)}, "args: nested deeper than protobuf decodes"},
		{&pb.DecideRequest{ToolName: "Read", Env: env}, "env: 1025 entries, more than the limit of 1024"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{ReadPaths: &pb.PathList{Paths: many(grpcapi.MaxScopeRoots + 1)}}},
			"execution_policy.read_paths.paths: 65 entries"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{WritePaths: &pb.PathList{Paths: many(3000)}}},
			"execution_policy.write_paths.paths: 3000 entries"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: "allowlist", Names: many(2000)}}},
			"execution_policy.env.names: 2000 entries"},
	}
	for _, c := range cases {
		_, err := ts.Client.Decide(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("want INVALID_ARGUMENT %q, got %v", c.want, err)
		}
	}
	if resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Read", Args: deep(grpcapi.MaxArgsDepth)}); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Errorf("args %d levels deep: %v", grpcapi.MaxArgsDepth, resp)
	}
}

// A message quotes at most a few hundred bytes of the caller's command, and
// a command nested past the parser's bounds is an ask, not a crash.
func TestMessagesQuoteLittle(t *testing.T) {
	dir := testkit.WriteBundle(t, map[string]string{"agents/data.json": `{"default": {}}`, "guardrails/data.json": `{"ask_commands": ["git push"]}`})
	ts := startServer(t, grpcapitest.Options{Bundles: []string{dir}})
	for _, cmd := range []string{"git push '" + strings.Repeat("\x01", 60000) + "'", strings.Repeat("(", 30000) + "true" + strings.Repeat(")", 30000)} {
		resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": cmd})})
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Errorf("decision %v", resp.Decision)
		}
		for _, r := range resp.Reasons {
			if len(r.Message) > 1024 {
				t.Errorf("a reason of %d bytes: %.100q", len(r.Message), r.Message)
			}
		}
		if len(resp.Message) > policy.MaxMessageBytes {
			t.Errorf("a message of %d bytes", len(resp.Message))
		}
	}
}

// ListPending pages through every ask, oldest first.
func TestListPendingPages(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	var want []string
	for i := range 25 {
		want = append(want, ts.Decide(t, &pb.DecideRequest{SessionId: fmt.Sprint(i), ToolName: "Bash"}).DecisionId)
	}
	var got []string
	req := &pb.ListPendingRequest{PageSize: 10}
	for pages := 0; ; pages++ {
		resp, err := ts.Client.ListPending(context.Background(), req)
		if err != nil || len(resp.Asks) > 10 || pages > 3 {
			t.Fatalf("page %d: %v %v", pages, resp, err)
		}
		for _, a := range resp.Asks {
			got = append(got, a.DecisionId)
		}
		if req.PageToken = resp.NextPageToken; req.PageToken == "" {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v\nwant %v", got, want)
	}
	if resp, _ := ts.Client.ListPending(context.Background(), &pb.ListPendingRequest{}); len(resp.Asks) != 25 || resp.NextPageToken != "" {
		t.Errorf("default page: %d asks, token %q", len(resp.Asks), resp.NextPageToken)
	}
	for _, bad := range []*pb.ListPendingRequest{{PageToken: "nonsense"}, {PageSize: -1}} {
		if _, err := ts.Client.ListPending(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
