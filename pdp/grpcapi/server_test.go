package grpcapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

func TestEmbeddedDefaultDecisions(t *testing.T) {
	for _, unix := range []bool{false, true} {
		ts := startServer(t, grpcapitest.Options{Unix: unix})
		t.Run(ts.Addr, func(t *testing.T) {
			cases := []struct {
				req  *pb.DecideRequest
				want pb.Decision
				msg  string
			}{
				{&pb.DecideRequest{ToolName: "Read"}, pb.Decision_DECISION_ALLOW, ""},
				{&pb.DecideRequest{ToolName: "Bash", Args: testkit.Struct(t, map[string]any{"command": "ls"})}, pb.Decision_DECISION_ASK, "Bash needs a person's confirmation"},
				{&pb.DecideRequest{ToolName: "mcp__github__create_issue"}, pb.Decision_DECISION_DENY, "MCP server 'github' is not declared for agent 'default'"},
				{&pb.DecideRequest{ToolName: "create_issue", Server: "github"}, pb.Decision_DECISION_DENY, "'github' is not declared"},
				{&pb.DecideRequest{AgentId: "ghost", ToolName: "Read"}, pb.Decision_DECISION_DENY, "unknown agent 'ghost'"},
			}
			ids := map[string]bool{}
			for _, c := range cases {
				resp := ts.Decide(t, c.req)
				if resp.Decision != c.want || !strings.Contains(resp.Message, c.msg) {
					t.Errorf("%s: got %s %q, want %s containing %q", c.req.ToolName, resp.Decision, resp.Message, c.want, c.msg)
				}
				if resp.PolicyRevision != "library-0.1.0,default-0.1.0" {
					t.Errorf("policy_revision %q", resp.PolicyRevision)
				}
				if resp.DecisionId == "" || ids[resp.DecisionId] {
					t.Errorf("decision_id %q is empty or repeated", resp.DecisionId)
				}
				ids[resp.DecisionId] = true
				if len(resp.Reasons) == 0 || resp.Reasons[0].Axis != "permission" {
					t.Errorf("%s: reasons %v lack the permission axis", c.req.ToolName, resp.Reasons)
				}
			}
		})
	}
}

func TestHealthAndReflection(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	ctx := context.Background()
	for _, svc := range []string{"", "toolpdp.v1.DecisionService"} {
		h, err := ts.Health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health(%q) = %v, %v", svc, h, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(ts.Conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "toolpdp.v1.DecisionService") {
		t.Fatalf("reflection lists %v", names)
	}
}

// Before any bundle loads, health is NOT_SERVING and every Decide denies.
func TestNoPolicyDeniesAndIsNotServing(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{NoLoad: true})
	h, err := ts.Health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health = %v, %v; want NOT_SERVING", h, err)
	}
	resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Read"})
	if resp.Decision != pb.Decision_DECISION_DENY || !strings.Contains(resp.Message, "no policy is loaded") {
		t.Fatalf("got %s %q", resp.Decision, resp.Message)
	}
}

func TestValidationErrorsNameTheField(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	big := strings.Repeat("x", 70<<10)
	cases := []struct {
		name string
		req  *pb.DecideRequest
		want string
	}{
		{"missing tool_name", &pb.DecideRequest{}, "tool_name: required"},
		{"long tool_name", &pb.DecideRequest{ToolName: strings.Repeat("t", 257)}, "tool_name: 257 bytes, more than the limit of 256"},
		{"large args", &pb.DecideRequest{ToolName: "Write", Args: testkit.Struct(t, map[string]any{"content": big})}, "args: "},
		{"long agent_id", &pb.DecideRequest{ToolName: "Read", AgentId: strings.Repeat("a", 300)}, "agent_id: 300 bytes"},
		{"unknown category", &pb.DecideRequest{ToolName: "Read", Category: 7}, "category: 7 is not a known category"},
		{"blank around tool_name", &pb.DecideRequest{ToolName: "Bash\t"}, "tool_name: "},
		{"control character in tool_name", &pb.DecideRequest{ToolName: "Ba\x00sh"}, "control characters"},
		{"unknown env mode", &pb.DecideRequest{ToolName: "Bash", ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: "ALLOWLIST"}}},
			"execution_policy.env.mode: \"ALLOWLIST\" is not allowlist or denylist"},
		{"unknown network rule", &pb.DecideRequest{ToolName: "Bash", ExecutionPolicy: &pb.ExecutionPolicy{Network: "loopback"}},
			"execution_policy.network: \"loopback\" is not \"none\", \"any\", \"rules\" or empty"},
	}
	for _, c := range cases {
		_, err := ts.Client.Decide(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT containing %q", c.name, err, c.want)
		}
	}
}

// rawCodec sends bytes as they are, so a test can put invalid UTF-8 on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{})
	bad := []byte{0xff, 0xfe, 'x'}
	for _, c := range []struct {
		field string
		msg   []byte
	}{
		{"tool_name", protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), bad)},
		{"agent_id", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bad)},
		{"args", func() []byte {
			// args = Struct{fields: {"k": Value{string_value: bad}}}
			val := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), bad)
			entry := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("k"))
			entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), val)
			st := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
			m := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("Read"))
			return protowire.AppendBytes(protowire.AppendTag(m, 6, protowire.BytesType), st)
		}()},
	} {
		var out []byte
		err := ts.Conn.Invoke(context.Background(), "/toolpdp.v1.DecisionService/Decide", &c.msg, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), c.field) {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT naming %s", c.field, err, c.field)
		}
	}
	// The server lives on and decides.
	if resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Read"}); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("after bad input: %s", resp.Decision)
	}
}

// A panicking handler becomes INTERNAL; the server lives on.
func TestHandlerPanicDoesNotKillServer(t *testing.T) {
	desc := grpc.ServiceDesc{
		ServiceName: "toolpdp.test.Panicky",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Boom", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { panic("boom") }
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/toolpdp.test.Panicky/Boom"}, h)
		}}},
	}
	ts := startServer(t, grpcapitest.Options{Register: func(s *grpc.Server) { s.RegisterService(&desc, struct{}{}) }})
	for range 3 {
		err := ts.Conn.Invoke(context.Background(), "/toolpdp.test.Panicky/Boom", &emptypb.Empty{}, &emptypb.Empty{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("got %v, want INTERNAL", err)
		}
	}
	if resp := ts.Decide(t, &pb.DecideRequest{ToolName: "Read"}); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("after panics: %s", resp.Decision)
	}
	// The panic was counted by the metrics interceptor.
	mfs, err := ts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := false
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["grpc_method"] == "Boom" && labels["grpc_code"] == "Internal" && m.GetCounter().GetValue() == 3 {
				counted = true
			}
		}
	}
	if !counted {
		t.Fatal("grpc_server_handled_total{grpc_method=Boom,grpc_code=Internal} is not 3")
	}
}

// An evaluation that overruns its deadline is a deny, never an allow.
func TestEvaluationTimeoutDenies(t *testing.T) {
	ts := startServer(t, grpcapitest.Options{Engine: pdp.Config{EvalTimeout: time.Nanosecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := ts.Client.Decide(ctx, &pb.DecideRequest{ToolName: "Read"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Decision != pb.Decision_DECISION_DENY || !strings.Contains(resp.Message, "could not be evaluated") {
		t.Fatalf("got %s %q", resp.Decision, resp.Message)
	}
}
