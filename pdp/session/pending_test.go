package session

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// An ask is answered once, by its own workspace, within its ttl; an allowed
// call is reported once; call ids name the latest decision.
func TestPendingLifecycle(t *testing.T) {
	p := NewPending(10, time.Minute)
	now := time.Now()
	add := func(id, ws, callID string, d pb.Decision) {
		p.Add(&Call{Workspace: ws, DecisionID: id, CallID: callID, AgentID: "a", SessionID: "s", Created: now, Decision: d})
	}
	add("ask1", "acme", "c1", pb.Decision_DECISION_ASK)
	add("allow1", "acme", "c2", pb.Decision_DECISION_ALLOW)
	add("ask2", "acme", "c1", pb.Decision_DECISION_ASK) // a retried call id names the latest

	if got, ambiguous := p.ByCallID("acme", "a", "s", "c1"); got != "ask2" || ambiguous {
		t.Errorf("ByCallID(c1) = %q, %v; want ask2, the same call retried", got, ambiguous)
	}
	if got, _ := p.ByCallID("globex", "a", "s", "c1"); got != "" {
		t.Errorf("another workspace found %q", got)
	}
	if _, found, _ := p.Answer("ask1", "globex", answer(pb.Decision_DECISION_ALLOW), now); found != NotFound {
		t.Errorf("another workspace's ask: %v", found)
	}
	if _, found, _ := p.Report("ask1", "acme"); found != Found {
		t.Errorf("report of an unanswered ask: %v", found)
	}
	if a, found, answered := p.Answer("ask1", "acme", answer(pb.Decision_DECISION_ALLOW), now); found != Found || !answered || !a.Allowed() {
		t.Fatalf("Answer = %v, %v, %v", a, found, answered)
	}
	if _, found, answered := p.Answer("ask1", "acme", answer(pb.Decision_DECISION_DENY), now); found != Found || answered {
		t.Errorf("answered twice: %v, %v", found, answered)
	}
	for _, id := range []string{"ask1", "allow1"} {
		if _, _, marked := p.Report(id, "acme"); !marked {
			t.Errorf("%s: first report not marked", id)
		}
		if _, _, marked := p.Report(id, "acme"); marked {
			t.Errorf("%s: reported twice", id)
		}
	}
	if asks, next := p.Page("acme", "", 0, 10, now); len(asks) != 1 || asks[0].DecisionID != "ask2" || next != 0 {
		t.Errorf("Page = %v, %d; want ask2 alone", asks, next)
	}
	if _, found, _ := p.Answer("ask2", "acme", answer(pb.Decision_DECISION_ALLOW), now.Add(2*time.Minute)); found != Expired {
		t.Errorf("an ask past its ttl: %v", found)
	}
	p.DropSession("acme", "a", "s")
	if _, found, _ := p.Report("allow1", "acme"); found != NotFound {
		t.Errorf("an ended session's call: %v", found)
	}
}

func answer(d pb.Decision) func(*Call) { return func(c *Call) { c.Answer = d } }

// A call id that another call takes over (another tool, or other
// arguments) while both are held names neither: a person answering "the
// call toolu_01" must not approve a different one.
func TestCallIDTakenOverIsAmbiguous(t *testing.T) {
	for _, session := range []string{"s", ""} {
		p := NewPending(10, time.Minute)
		now := time.Now()
		p.Add(&Call{DecisionID: "d1", CallID: "dup", AgentID: "a", SessionID: session, ToolName: "purge", Signature: CallSig{1}, Created: now, Decision: pb.Decision_DECISION_ASK})
		p.Add(&Call{DecisionID: "d2", CallID: "dup", AgentID: "a", SessionID: session, ToolName: "purge", Signature: CallSig{2}, Created: now, Decision: pb.Decision_DECISION_ASK})
		if id, ambiguous := p.ByCallID("", "a", session, "dup"); !ambiguous {
			t.Fatalf("session %q: ByCallID = %q, not ambiguous", session, id)
		}
		p.DropSession("", "a", session)
		if id, ambiguous := p.ByCallID("", "a", session, "dup"); session != "" && (id != "" || ambiguous) {
			t.Fatalf("after the session ended: %q, %v", id, ambiguous)
		}
	}
}

// Two requests are one call when tool, server, args, env and call-site
// policy are; anything else differs.
func TestCallSignature(t *testing.T) {
	args := func(m map[string]any) *structpb.Struct { s, _ := structpb.NewStruct(m); return s }
	base := &pb.DecideRequest{ToolName: "Bash", Args: args(map[string]any{"command": "ls", "n": 1}), SessionId: "s", CallId: "c"}
	same := &pb.DecideRequest{ToolName: "Bash", Args: args(map[string]any{"n": 1.0, "command": "ls"}), CallId: "c"}
	if CallSignature(base) != CallSignature(same) {
		t.Error("the same call, keys reordered, differs")
	}
	for _, other := range []*pb.DecideRequest{
		{ToolName: "Bash", Args: args(map[string]any{"command": "rm -rf ~", "n": 1})},
		{ToolName: "bash", Args: base.Args},
		{ToolName: "Bash", Server: "x", Args: base.Args},
		{ToolName: "Bash", Args: base.Args, Env: map[string]string{"PATH": "/tmp"}},
		{ToolName: "Bash", Args: base.Args, ExecutionPolicy: &pb.ExecutionPolicy{Cwd: "/"}},
	} {
		if CallSignature(base) == CallSignature(other) {
			t.Errorf("%v has the signature of %v", other, base)
		}
	}
}

// A page holds at most limit asks and names where the next one starts.
func TestPendingPages(t *testing.T) {
	p := NewPending(10, time.Hour)
	now := time.Now()
	for _, id := range []string{"1", "2", "3"} {
		p.Add(&Call{DecisionID: id, AgentID: "a", Created: now, Decision: pb.Decision_DECISION_ASK})
	}
	first, next := p.Page("", "a", 0, 2, now)
	if len(first) != 2 || next == 0 {
		t.Fatalf("first page %d asks, next %d", len(first), next)
	}
	if rest, last := p.Page("", "a", next, 2, now); len(rest) != 1 || rest[0].DecisionID != "3" || last != 0 {
		t.Fatalf("second page %v, next %d", rest, last)
	}
	if other, _ := p.Page("", "b", 0, 2, now); len(other) != 0 {
		t.Errorf("another agent's page: %v", other)
	}
}

// A wait ends when the ask is answered, when it leaves the store, when
// it expires, or when the caller gives up; a decision that is not an ask
// returns at once.
func TestPendingWait(t *testing.T) {
	p := NewPending(2, time.Minute)
	now := time.Now()
	clock := func() time.Time { return now }
	add := func(id string, d pb.Decision) {
		p.Add(&Call{Workspace: "acme", DecisionID: id, AgentID: "a", SessionID: "s", Created: now, Decision: d})
	}
	add("ask1", pb.Decision_DECISION_ASK)
	add("allow1", pb.Decision_DECISION_ALLOW)
	if c, found := p.Wait(context.Background(), "allow1", "acme", clock); found != Found || c.Decision != pb.Decision_DECISION_ALLOW {
		t.Fatalf("not an ask: %v %v", c, found)
	}
	if _, found := p.Wait(context.Background(), "ask1", "globex", clock); found != NotFound {
		t.Fatalf("another workspace's: %v", found)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c, found := p.Wait(ctx, "ask1", "acme", clock); found != Found || c.Answer != pb.Decision_DECISION_UNSPECIFIED {
		t.Fatalf("given up: %v %v", c, found)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.Answer("ask1", "acme", func(c *Call) { c.Answer, c.AnswerMessage = pb.Decision_DECISION_DENY, "no" }, now)
	}()
	if c, found := p.Wait(context.Background(), "ask1", "acme", clock); found != Found || c.Answer != pb.Decision_DECISION_DENY || c.AnswerMessage != "no" {
		t.Fatalf("answered: %v %v", c, found)
	}
	// Pushed out at the bound of two asks: the wait ends, not found.
	add("ask2", pb.Decision_DECISION_ASK)
	go func() {
		time.Sleep(20 * time.Millisecond)
		add("ask3", pb.Decision_DECISION_ASK)
		add("ask4", pb.Decision_DECISION_ASK)
	}()
	if _, found := p.Wait(context.Background(), "ask2", "acme", clock); found != NotFound {
		t.Fatalf("evicted: %v", found)
	}
	// Past the ttl: expired, and still expired once moved out of the asks.
	now = now.Add(2 * time.Minute)
	if _, found := p.Wait(context.Background(), "ask3", "acme", clock); found != Expired {
		t.Fatalf("past the ttl: %v", found)
	}
	p.Add(&Call{Workspace: "acme", DecisionID: "ask5", AgentID: "a", Created: now, Decision: pb.Decision_DECISION_ASK})
	if _, found := p.Wait(context.Background(), "ask3", "acme", clock); found != Expired {
		t.Fatalf("expired and moved: %v", found)
	}
}
