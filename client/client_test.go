package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/client"
	"github.com/toolpdp/toolpdp/internal/testkit"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/grpcapi/grpcapitest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// serve starts a real toolpdp server on a unix socket, on the embedded
// default and the bundles given; its address.
func serve(t *testing.T, bundles ...string) string {
	t.Helper()
	return grpcapitest.NewServer(t, grpcapitest.Options{Bundles: bundles, Unix: true, Engine: pdp.Config{EvalTimeout: testkit.EvalTimeout, MaxSessions: 10, MaxPending: 10}}).Addr
}

func TestCheckDecides(t *testing.T) {
	c, err := client.Dial(serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Read"}).Decision; d != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Read: %s", d)
	}
	ask := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Bash", SessionId: "s"})
	if ask.Decision != pb.Decision_DECISION_ASK {
		t.Fatalf("Bash: %s", ask.Decision)
	}
	if r, err := c.Confirm(context.Background(), ask.DecisionId, false, "not on a Friday"); err != nil || r.Decision != pb.Decision_DECISION_DENY {
		t.Fatalf("Confirm: %v %v", r, err)
	}
	// Remember an approval: the same call is then allowed in this session.
	again := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Bash", SessionId: "s", CallId: "toolu_1"})
	if r, err := c.Answer(context.Background(), &pb.ConfirmRequest{CallId: "toolu_1", SessionId: "s", Result: "allow", Remember: true}); err != nil || r.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("Answer with remember: %v %v (ask %s)", r, err, again.Decision)
	}
	same := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Bash", SessionId: "s"})
	if same.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("the remembered call: %s", same.Decision)
	}
	// Errors share the consecutive cap (5 on the default agent).
	for i := 1; i <= 5; i++ {
		allowed := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Read", SessionId: "s"})
		halt, err := c.ReportResult(context.Background(), allowed.DecisionId, errors.New("ENOENT"))
		if err != nil || halt != (i == 5) {
			t.Fatalf("error %d: halt %v %v", i, halt, err)
		}
	}
	if err := c.EndSession(context.Background(), "", "s"); err != nil {
		t.Fatal(err)
	}
}

// An unreachable sidecar is a deny, never an allow.
// CheckAndWait returns the person's answer, however long it takes, and a
// deny when the caller stops waiting.
func TestCheckAndWait(t *testing.T) {
	c, err := client.Dial(serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	go func() {
		time.Sleep(300 * time.Millisecond)
		p, err := c.Raw().ListPending(ctx, &pb.ListPendingRequest{})
		if err != nil || len(p.Asks) != 1 {
			t.Errorf("ListPending: %v %v", p, err)
			return
		}
		if _, err := c.Confirm(ctx, p.Asks[0].DecisionId, false, "use the staging copy"); err != nil {
			t.Error(err)
		}
	}()
	if r := c.CheckAndWait(ctx, &pb.DecideRequest{ToolName: "Bash", SessionId: "w"}); r.Decision != pb.Decision_DECISION_DENY || r.Message != "use the staging copy" {
		t.Fatalf("CheckAndWait: %v", r)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if r := c.CheckAndWait(short, &pb.DecideRequest{ToolName: "Bash", SessionId: "w"}); r.Decision != pb.Decision_DECISION_DENY || time.Since(start) > testkit.EvalTimeout {
		t.Fatalf("an ended wait: %v after %v", r, time.Since(start))
	}
}

func TestCheckFailsClosed(t *testing.T) {
	c, err := client.Dial("unix://" + filepath.Join(t.TempDir(), "nobody-listens.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.WithTimeout(300 * time.Millisecond)
	resp := c.Check(context.Background(), &pb.DecideRequest{ToolName: "Read"})
	if resp.Decision != pb.Decision_DECISION_DENY || !strings.Contains(resp.Message, "could not be asked") || !strings.Contains(resp.Message, `so the tool "Read" is denied`) {
		t.Fatalf("unreachable sidecar: %s %q", resp.Decision, resp.Message)
	}
	// An invalid request is a deny too.
	c2, _ := client.Dial(serve(t))
	defer c2.Close()
	if resp := c2.Check(context.Background(), &pb.DecideRequest{}); resp.Decision != pb.Decision_DECISION_DENY || !strings.Contains(resp.Message, "tool_name") ||
		!strings.Contains(resp.Message, "so the tool call (it names no tool) is denied") || strings.Contains(resp.Message, "rpc error") {
		t.Fatalf("invalid request: %s %q", resp.Decision, resp.Message)
	}
}
