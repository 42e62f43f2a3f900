package session

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/redistest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Every store keeps the same promises: the same test runs against each.
func TestStoreContract(t *testing.T) {
	b := Bounds{MaxSessions: 8, MaxSessionsPerAgent: 4, SessionIdle: time.Hour, MaxPending: 50, PendingTTL: time.Hour}
	open := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory(b) },
		"file": func(t *testing.T) Store {
			f, err := OpenFile(filepath.Join(t.TempDir(), "state.db"), b)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		"redis": func(t *testing.T) Store {
			srv := redistest.Start(t)
			r, err := OpenRedis(context.Background(), srv.URL(), b, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, o := range open {
		t.Run(name, func(t *testing.T) {
			s := o(t)
			defer s.Close()
			contract(t, s)
		})
	}
}

func testPin(s string) *Pin {
	body := []byte(`{"id":"` + s + `"}`)
	return &Pin{Digest: sha256.Sum256(body), Body: body}
}

func contract(t *testing.T, s Store) {
	ctx := context.Background()
	now := time.Now()
	seq := 0
	decide := func(k Key, d pb.Decision, callID string) (string, bool) {
		t.Helper()
		seq++
		id := fmt.Sprintf("d%d", seq)
		halt, err := s.Decided(ctx, &Call{Workspace: k.Workspace, DecisionID: id, CallID: callID, AgentID: k.Agent, SessionID: k.Session,
			ToolName: "t", Created: now, MaxDenials: 3, Decision: d}, now)
		if err != nil {
			t.Fatal(err)
		}
		return id, halt
	}
	begin := func(k Key, p *Pin) Begun {
		t.Helper()
		b, err := s.Begin(ctx, k, p, now)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A pin is kept; a later definition does not replace it.
	k := Key{"", "a", "s1"}
	if b := begin(k, testPin("v1")); b.Pin == nil || b.Pin.Digest != testPin("v1").Digest {
		t.Fatalf("first Begin: %+v", b)
	}
	if b := begin(k, testPin("v2")); b.Pin == nil || b.Pin.Digest != testPin("v1").Digest {
		t.Fatalf("the pin after a newer definition: %+v", b)
	}
	if body, err := s.PinBody(ctx, testPin("v1").Digest); err != nil || (body != nil && string(body) != string(testPin("v1").Body)) {
		t.Fatalf("PinBody: %q, %v", body, err)
	}

	// Count then halt: three denials halt; an allow resets a session that
	// never reported; a reported success resets; a reported error counts.
	decide(k, pb.Decision_DECISION_DENY, "")
	decide(k, pb.Decision_DECISION_ALLOW, "")
	decide(k, pb.Decision_DECISION_DENY, "")
	decide(k, pb.Decision_DECISION_DENY, "")
	if _, halt := decide(k, pb.Decision_DECISION_DENY, ""); !halt {
		t.Fatal("the third consecutive denial carries no halt")
	}
	allowID, halt := decide(k, pb.Decision_DECISION_ALLOW, "")
	if halt {
		t.Fatal("an allow carries a halt")
	}
	if _, _, marked, _, err := s.Report(ctx, allowID, "", true, now); !marked || err != nil {
		t.Fatalf("report: %v %v", marked, err)
	}
	if _, _, marked, _, _ := s.Report(ctx, allowID, "", false, now); marked {
		t.Fatal("a call reported twice")
	}

	// Concurrent denials in one session: every one is counted.
	k2 := Key{"", "a", "s2"}
	begin(k2, testPin("v1"))
	var wg sync.WaitGroup
	halts := make(chan bool, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			halt, err := s.Decided(ctx, &Call{DecisionID: fmt.Sprintf("c%d", i), AgentID: "a", SessionID: "s2", Created: now, MaxDenials: 3, Decision: pb.Decision_DECISION_DENY}, now)
			if err != nil {
				t.Error(err)
			}
			halts <- halt
		}()
	}
	wg.Wait()
	close(halts)
	n := 0
	for h := range halts {
		if h {
			n++
		}
	}
	if n != 18 {
		t.Fatalf("%d of 20 concurrent denials halted, want 18 (all from the third on)", n)
	}

	// An ask: found by call id, listed, answered once (with its count), then
	// no longer listed; another workspace sees none of it.
	ask, _ := decide(Key{"acme", "a", "s3"}, pb.Decision_DECISION_ASK, "toolu_1")
	if id, amb, _ := s.ByCallID(ctx, "acme", "a", "s3", "toolu_1"); id != ask || amb {
		t.Fatalf("ByCallID: %q %v", id, amb)
	}
	if asks, _, _ := s.Page(ctx, "acme", "", 0, 10, now); len(asks) != 1 || asks[0].DecisionID != ask {
		t.Fatalf("Page: %v", asks)
	}
	if asks, _, _ := s.Page(ctx, "globex", "", 0, 10, now); len(asks) != 0 {
		t.Fatalf("another workspace's Page: %v", asks)
	}
	if _, found, _, _ := s.Answer(ctx, ask, "globex", func(c *Call) { c.Answer = pb.Decision_DECISION_ALLOW }, now); found != NotFound {
		t.Fatalf("another workspace answered: %v", found)
	}
	var answers sync.WaitGroup
	won := make(chan bool, 5)
	for range 5 {
		answers.Add(1)
		go func() {
			defer answers.Done()
			_, _, answered, err := s.Answer(ctx, ask, "acme", func(c *Call) { c.Answer = pb.Decision_DECISION_ALLOW }, now)
			if err != nil {
				t.Error(err)
			}
			won <- answered
		}()
	}
	answers.Wait()
	close(won)
	wins := 0
	for w := range won {
		if w {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("an ask answered %d times by concurrent Confirms, want once", wins)
	}
	if asks, _, _ := s.Page(ctx, "acme", "", 0, 10, now); len(asks) != 0 {
		t.Fatalf("an answered ask still listed: %v", asks)
	}
	if _, _, marked, _, _ := s.Report(ctx, ask, "acme", false, now); !marked {
		t.Fatal("the approved ask's result was not accepted")
	}

	// A call id reused for another call names neither.
	kc := Key{"", "a", "s4"}
	begin(kc, testPin("v1"))
	decide(kc, pb.Decision_DECISION_ALLOW, "dup")
	if _, err := s.Decided(ctx, &Call{DecisionID: "other", CallID: "dup", AgentID: "a", SessionID: "s4", ToolName: "other tool", Signature: CallSig{9}, Created: now, MaxDenials: 3, Decision: pb.Decision_DECISION_ALLOW}, now); err != nil {
		t.Fatal(err)
	}
	if _, amb, _ := s.ByCallID(ctx, "", "a", "s4", "dup"); !amb {
		t.Fatal("a call id naming two different calls is not ambiguous")
	}

	// Remembered approvals hold in their epoch only.
	e1, err := s.Activate(ctx, "content")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remember(ctx, k, RememberKey{1}, e1, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Remembered(ctx, k, RememberKey{1}, e1, now); !ok {
		t.Fatal("a remembered approval is not remembered")
	}
	e2, _ := s.Activate(ctx, "content")
	if ok, _ := s.Remembered(ctx, k, RememberKey{1}, e2, now); ok || e2 == e1 {
		t.Fatal("a remembered approval outlived a reload")
	}

	// Bounds: an agent holds at most its share (4); its flood evicts its
	// own sessions that are not halted, never a halted one; with every
	// place halted a new session is refused; another agent still starts.
	for _, sid := range []string{"h1", "h2"} {
		hk := Key{"", "flood", sid}
		begin(hk, testPin("f"))
		for range 3 {
			decide(hk, pb.Decision_DECISION_DENY, "")
		}
	}
	for i := range 30 {
		if b := begin(Key{"", "flood", fmt.Sprintf("x%d", i)}, testPin("f")); b.Refused || b.Lost {
			t.Fatalf("flood session %d: %+v", i, b)
		}
	}
	for _, sid := range []string{"h1", "h2"} {
		if _, halt := decide(Key{"", "flood", sid}, pb.Decision_DECISION_DENY, ""); !halt {
			t.Fatalf("halted session %s lost its halt to a flood", sid)
		}
	}
	if b := begin(Key{"", "flood", "x0"}, testPin("f")); !b.Lost {
		t.Fatalf("a session evicted by the flood came back %+v, want lost", b)
	}
	for _, sid := range []string{"h3", "h4"} {
		hk := Key{"", "flood", sid}
		begin(hk, testPin("f"))
		for range 3 {
			decide(hk, pb.Decision_DECISION_DENY, "")
		}
	}
	if b := begin(Key{"", "flood", "more"}, testPin("f")); !b.Refused {
		t.Fatalf("a new session when the agent's every place is halted: %+v, want refused", b)
	}
	if b := begin(Key{"", "other", "s"}, testPin("o")); b.Refused {
		t.Fatal("one agent's halted sessions locked another agent out")
	}

	// End releases the session and its decisions.
	if found, err := s.End(ctx, k); !found || err != nil {
		t.Fatalf("End: %v %v", found, err)
	}
	if _, found, _, _, _ := s.Report(ctx, allowID, "", false, now); found != NotFound {
		t.Fatal("an ended session's decision is still found")
	}
	if b := begin(k, testPin("v2")); b.Pin.Digest != testPin("v2").Digest {
		t.Fatal("an ended session did not start afresh")
	}
}

// A Redis that could evict keys is refused: an evicted key would clear a
// halt or forget an ask.
func TestRedisThatEvictsIsRefused(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy allkeys-lru")
	_, err := OpenRedis(context.Background(), srv.URL(), Bounds{MaxSessions: 10, SessionIdle: time.Hour, MaxPending: 10, PendingTTL: time.Hour}, OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "allkeys-lru") || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("OpenRedis of an evicting Redis: %v, want a refusal naming the policy", err)
	}
}

// A password read from a file; a wrong one is a clear start-up error.
func TestRedisPasswordFromFile(t *testing.T) {
	srv := redistest.Start(t, "--requirepass s3cret-of-the-test")
	b := Bounds{MaxSessions: 10, SessionIdle: time.Hour, MaxPending: 10, PendingTTL: time.Hour}
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("s3cret-of-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRedis(context.Background(), srv.URL(), b, OpenOptions{PasswordFile: file})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := OpenRedis(context.Background(), srv.URL(), b, OpenOptions{}); err == nil {
		t.Fatal("no password accepted")
	}
}
