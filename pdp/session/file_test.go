package session

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

var testBounds = Bounds{MaxSessions: 100, SessionIdle: time.Hour, MaxPending: 100, PendingTTL: time.Hour}

// What a file store holds is there again when it is opened anew: a halt,
// a pin (the definition itself), an unanswered ask, a remembered approval
// under an unchanged policy; and one process holds a file at a time.
func TestFileStoreKeepsStateAcrossOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	f, err := OpenFile(path, testBounds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, testBounds); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("a second open of the same file: %v, want it refused as locked", err)
	}
	now := time.Now()
	body := []byte(`{"id":"a"}`)
	pin := &Pin{Digest: sha256.Sum256(body), Body: body}
	k := Key{"", "a", "s"}
	if _, err := f.Begin(ctx, k, pin, now); err != nil {
		t.Fatal(err)
	}
	epoch, err := f.Activate(ctx, "content-1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		halt, err := f.Decided(ctx, &Call{DecisionID: "d" + string(rune('0'+i)), AgentID: "a", SessionID: "s", Created: now, MaxDenials: 3, Decision: pb.Decision_DECISION_DENY}, now)
		if err != nil || halt != (i == 2) {
			t.Fatalf("denial %d: halt %v, %v", i, halt, err)
		}
	}
	if _, err := f.Decided(ctx, &Call{DecisionID: "ask", CallID: "c1", AgentID: "a", SessionID: "t", Created: now, MaxDenials: 3, Decision: pb.Decision_DECISION_ASK}, now); err != nil {
		t.Fatal(err)
	}
	if err := f.Remember(ctx, k, RememberKey{7}, epoch, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = OpenFile(path, testBounds)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := f.Begin(ctx, k, nil, now)
	if err != nil || b.Pin == nil || string(b.Pin.Body) != string(body) {
		t.Fatalf("the pin after a reopen: %+v, %v", b.Pin, err)
	}
	if halt, _ := f.Decided(ctx, &Call{DecisionID: "d9", AgentID: "a", SessionID: "s", Created: now, MaxDenials: 3, Decision: pb.Decision_DECISION_DENY}, now); !halt {
		t.Error("the halted session's next denial after a reopen carries no halt")
	}
	if id, _, _ := f.ByCallID(ctx, "", "a", "t", "c1"); id != "ask" {
		t.Errorf("the ask's call id after a reopen names %q", id)
	}
	if asks, _, _ := f.Page(ctx, "", "", 0, 10, now); len(asks) != 1 || asks[0].DecisionID != "ask" {
		t.Errorf("asks after a reopen: %v", asks)
	}
	again, _ := f.Activate(ctx, "content-1")
	if again != epoch {
		t.Errorf("the same content's epoch after a reopen: %q, want %q", again, epoch)
	}
	if ok, _ := f.Remembered(ctx, k, RememberKey{7}, again, now); !ok {
		t.Error("a remembered approval under the unchanged policy did not survive the reopen")
	}
	if e, _ := f.Activate(ctx, "content-1"); e == epoch {
		t.Error("a second activation in one process kept the epoch: a reload must end remembered approvals")
	}
	c, found, answered, err := f.Answer(ctx, "ask", "", func(c *Call) { c.Answer = pb.Decision_DECISION_ALLOW }, now)
	if err != nil || found != Found || !answered || c.Answer != pb.Decision_DECISION_ALLOW {
		t.Fatalf("answering the ask after a reopen: %v %v %v %v", c, found, answered, err)
	}
}
