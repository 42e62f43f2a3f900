package pdp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Malformed shapes are INVALID_ARGUMENT naming the field, before any policy.
func TestRequestBounds(t *testing.T) {
	ts := startServer(t, serverOpts{})
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
	for i := range MaxEnvEntries + 1 {
		env[fmt.Sprintf("V%d", i)] = "x"
	}
	cases := []struct {
		req  *pb.DecideRequest
		want string
	}{
		{&pb.DecideRequest{ToolName: "Read", Args: deep(MaxArgsDepth + 1)}, "args: nested deeper than 64 levels"},
		{&pb.DecideRequest{ToolName: "Read", Args: deep(6000)}, "args: nested deeper than protobuf decodes"},
		{&pb.DecideRequest{ToolName: "Read", Env: env}, "env: 1025 entries, more than the limit of 1024"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{ReadPaths: &pb.PathList{Paths: many(MaxScopeRoots + 1)}}},
			"execution_policy.read_paths.paths: 65 entries"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{WritePaths: &pb.PathList{Paths: many(3000)}}},
			"execution_policy.write_paths.paths: 3000 entries"},
		{&pb.DecideRequest{ToolName: "Read", ExecutionPolicy: &pb.ExecutionPolicy{Env: &pb.EnvSpec{Mode: "allowlist", Names: many(2000)}}},
			"execution_policy.env.names: 2000 entries"},
	}
	for _, c := range cases {
		_, err := ts.client.Decide(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("want INVALID_ARGUMENT %q, got %v", c.want, err)
		}
	}
	if resp := ts.decide(t, &pb.DecideRequest{ToolName: "Read", Args: deep(MaxArgsDepth)}); resp.Decision != pb.Decision_DECISION_ALLOW {
		t.Errorf("args %d levels deep: %v", MaxArgsDepth, resp)
	}
}

// A message quotes at most a few hundred bytes of the caller's command, and
// a command nested past the parser's bounds is an ask, not a crash.
func TestMessagesQuoteLittle(t *testing.T) {
	dir := writeBundle(t, map[string]string{"agents/data.json": `{"default": {}}`, "guardrails/data.json": `{"ask_commands": ["git push"]}`})
	ts := startServer(t, serverOpts{bundles: []string{dir}})
	for _, cmd := range []string{"git push '" + strings.Repeat("\x01", 60000) + "'", strings.Repeat("(", 30000) + "true" + strings.Repeat(")", 30000)} {
		resp := ts.decide(t, &pb.DecideRequest{ToolName: "Bash", Args: mustStruct(t, map[string]any{"command": cmd})})
		if resp.Decision != pb.Decision_DECISION_ASK {
			t.Errorf("decision %v", resp.Decision)
		}
		for _, r := range resp.Reasons {
			if len(r.Message) > 1024 {
				t.Errorf("a reason of %d bytes: %.100q", len(r.Message), r.Message)
			}
		}
		if len(resp.Message) > MaxMessageBytes {
			t.Errorf("a message of %d bytes", len(resp.Message))
		}
	}
}

// ListPending pages through every ask, oldest first.
func TestListPendingPages(t *testing.T) {
	ts := startServer(t, serverOpts{})
	var want []string
	for i := range 25 {
		want = append(want, ts.decide(t, &pb.DecideRequest{SessionId: fmt.Sprint(i), ToolName: "Bash"}).DecisionId)
	}
	var got []string
	req := &pb.ListPendingRequest{PageSize: 10}
	for pages := 0; ; pages++ {
		resp, err := ts.client.ListPending(context.Background(), req)
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
	if resp, _ := ts.client.ListPending(context.Background(), &pb.ListPendingRequest{}); len(resp.Asks) != 25 || resp.NextPageToken != "" {
		t.Errorf("default page: %d asks, token %q", len(resp.Asks), resp.NextPageToken)
	}
	for _, bad := range []*pb.ListPendingRequest{{PageToken: "nonsense"}, {PageSize: -1}} {
		if _, err := ts.client.ListPending(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func TestPendingBoundedInBytes(t *testing.T) {
	p := NewPending(1000, time.Hour)
	p.SetMaxBytes(20_000)
	now := time.Now()
	for i := range 100 {
		p.Add(&PendingAsk{DecisionID: fmt.Sprint(i), Message: strings.Repeat("m", 1000), Created: now, decision: pb.Decision_DECISION_ASK})
	}
	asks, _ := p.Page("", "", 0, 1000, now)
	if len(asks) == 0 || len(asks) > 20 || asks[len(asks)-1].DecisionID != "99" || p.asks.bytes > 20_000 {
		t.Fatalf("%d asks held in %d bytes; want the newest, under 20,000 bytes", len(asks), p.asks.bytes)
	}
	if n := counterValue(t, p.evicted.WithLabelValues("asks", "bytes")); n != float64(100-len(asks)) {
		t.Errorf("evicted for bytes: %v", n)
	}
	p.Add(&PendingAsk{DecisionID: "late", Created: now.Add(2 * time.Hour), decision: pb.Decision_DECISION_ASK})
	if asks, _ := p.Page("", "", 0, 1000, now.Add(2*time.Hour)); len(asks) != 1 {
		t.Errorf("expired asks still held: %d", len(asks))
	}
}

func TestSessionsBoundedInBytes(t *testing.T) {
	s := NewSessions(100000, time.Hour)
	s.SetMaxBytes(64 << 10)
	now := time.Now()
	for i := range 1000 {
		s.Pin("", "agent", fmt.Sprintf("%0200d", i), nil, now)
	}
	if s.bytes > 64<<10 || s.Len() == 0 || s.Len() > 100 {
		t.Fatalf("%d sessions in %d bytes", s.Len(), s.bytes)
	}
	if n := counterValue(t, s.evicted); int(n) != 1000-s.Len() {
		t.Errorf("evicted %v", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.lru.Front().Value.(*session)
	if s.charge(ss, 1<<20) {
		t.Error("charged a session past the whole bound")
	}
}

// A session's remembered approvals are charged to it: at the byte bound a
// new one is not kept, and the ones dropped give their bytes back.
func TestRememberedApprovalsChargedToTheSession(t *testing.T) {
	s := NewSessions(10, time.Hour)
	s.SetMaxBytes(sessionOverhead + 64 + 3*rememberedSize)
	now := time.Now()
	s.Pin("", "a", "s", nil, now)
	for i := range 5 {
		s.Remember("", "a", "s", rememberKey{byte(i)}, 1, now.Add(time.Hour), now)
	}
	held := 0
	for i := range 5 {
		if s.Remembered("", "a", "s", rememberKey{byte(i)}, 1, now) {
			held++
		}
	}
	if held != 3 || s.bytes > s.maxBytes {
		t.Fatalf("%d approvals held in %d bytes (bound %d); want 3", held, s.bytes, s.maxBytes)
	}
	// A newer policy generation drops the old approvals and their bytes.
	s.Remember("", "a", "s", rememberKey{9}, 2, now.Add(time.Hour), now)
	if want := int64(sessionOverhead+2*(len("a")+len("s"))) + rememberedSize; s.bytes != want {
		t.Fatalf("bytes %d after a reload's approval, want %d", s.bytes, want)
	}
}
