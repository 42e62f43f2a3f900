package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/testkit"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

func TestPendingBoundedInBytes(t *testing.T) {
	p := NewPending(1000, time.Hour)
	p.SetMaxBytes(20_000)
	now := time.Now()
	for i := range 100 {
		p.Add(&Call{DecisionID: fmt.Sprint(i), Message: strings.Repeat("m", 1000), Created: now, Decision: pb.Decision_DECISION_ASK})
	}
	asks, _ := p.Page("", "", 0, 1000, now)
	if len(asks) == 0 || len(asks) > 20 || asks[len(asks)-1].DecisionID != "99" || p.asks.bytes > 20_000 {
		t.Fatalf("%d asks held in %d bytes; want the newest, under 20,000 bytes", len(asks), p.asks.bytes)
	}
	if n := testkit.CounterValue(t, p.evicted.WithLabelValues("asks", "bytes")); n != float64(100-len(asks)) {
		t.Errorf("evicted for bytes: %v", n)
	}
	p.Add(&Call{DecisionID: "late", Created: now.Add(2 * time.Hour), Decision: pb.Decision_DECISION_ASK})
	if asks, _ := p.Page("", "", 0, 1000, now.Add(2*time.Hour)); len(asks) != 1 {
		t.Errorf("expired asks still held: %d", len(asks))
	}
}

func TestSessionsBoundedInBytes(t *testing.T) {
	s := NewSessions(100000, time.Hour)
	s.SetMaxBytes(64 << 10)
	s.SetMaxPerAgent(100000)
	now := time.Now()
	for i := range 1000 {
		s.Pin(Key{"", "agent", fmt.Sprintf("%0200d", i)}, nil, now)
	}
	if s.bytes > 64<<10 || s.Len() == 0 || s.Len() > 100 {
		t.Fatalf("%d sessions in %d bytes", s.Len(), s.bytes)
	}
	if n := testkit.CounterValue(t, s.evicted); int(n) != 1000-s.Len() {
		t.Errorf("evicted %v", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.all.Front().Value.(*session)
	if s.charge(ss, 1<<20, now) {
		t.Error("charged a session past the whole bound")
	}
}

// A session's remembered approvals are charged to it: at the byte bound a
// new one is not kept, and the ones dropped give their bytes back.
func TestRememberedApprovalsChargedToTheSession(t *testing.T) {
	s := NewSessions(10, time.Hour)
	s.SetMaxBytes(sessionOverhead + 64 + 3*rememberedSize)
	now := time.Now()
	k := Key{"", "a", "s"}
	s.Pin(k, nil, now)
	for i := range 5 {
		s.Remember(k, RememberKey{byte(i)}, "1", now.Add(time.Hour), now)
	}
	held := 0
	for i := range 5 {
		if s.Remembered(k, RememberKey{byte(i)}, "1", now) {
			held++
		}
	}
	if held != 3 || s.bytes > s.maxBytes {
		t.Fatalf("%d approvals held in %d bytes (bound %d); want 3", held, s.bytes, s.maxBytes)
	}
	// A newer policy epoch drops the old approvals and their bytes.
	s.Remember(k, RememberKey{9}, "2", now.Add(time.Hour), now)
	if want := int64(sessionOverhead+2*(len("a")+len("s"))) + rememberedSize; s.bytes != want {
		t.Fatalf("bytes %d after a reload's approval, want %d", s.bytes, want)
	}
}

// Sessions released at the bound are remembered, in a bounded ring, as
// lost: they come back lost; the ring never holds more than 4×max keys.
func TestEvictedSessionsComeBackLost(t *testing.T) {
	s := NewSessions(2, time.Hour)
	s.SetMaxPerAgent(2)
	now := time.Now()
	for i := range 20 {
		s.Pin(Key{"", "a", fmt.Sprint(i)}, nil, now)
	}
	if n := len(s.buried); n != 8 {
		t.Fatalf("%d keys buried, want the ring's 8", n)
	}
	if b := s.Pin(Key{"", "a", "17"}, nil, now); !b.Lost {
		t.Error("a recently released session came back afresh")
	}
	if b := s.Pin(Key{"", "a", "0"}, nil, now); b.Lost {
		t.Error("a key the ring forgot is still lost")
	}
	if b := s.Pin(Key{"", "a", "new"}, nil, now); b.Lost {
		t.Error("a new session is lost")
	}
}
