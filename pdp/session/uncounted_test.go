package session

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolpdp/toolpdp/internal/redistest"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Every store keeps an allow's execution for a later lookup (a confined
// run's connections are decided by the rules in it), and counts neither an
// uncounted decision nor its answer toward the session's cap.
func TestStoresKeepExecutionsAndSkipUncounted(t *testing.T) {
	b := Bounds{MaxSessions: 8, SessionIdle: time.Hour, MaxPending: 50, PendingTTL: time.Hour}
	for name, open := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory(b) },
		"file": func(t *testing.T) Store {
			f, err := OpenFile(filepath.Join(t.TempDir(), "state.db"), b)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		"redis": func(t *testing.T) Store {
			r, err := OpenRedis(context.Background(), redistest.Start(t).URL(), b, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			ctx, now := context.Background(), time.Now()
			k := Key{Agent: "a", Session: "s"}
			if _, err := s.Begin(ctx, k, testPin("a"), now); err != nil {
				t.Fatal(err)
			}
			ex := []byte("\x0a\x03run")
			allow := &Call{DecisionID: "allow-1", AgentID: "a", SessionID: "s", ToolName: "Bash", Created: now, MaxDenials: 1,
				Decision: pb.Decision_DECISION_ALLOW, Execution: ex}
			if _, err := s.Decided(ctx, allow, now); err != nil {
				t.Fatal(err)
			}
			c, found, err := s.Get(ctx, "allow-1", "", now)
			if err != nil || found != Found || !bytes.Equal(c.Execution, ex) {
				t.Fatalf("the allow's execution: %q %v %v", c.Execution, found, err)
			}
			ask := &Call{DecisionID: "net-1", AgentID: "a", SessionID: "s", ToolName: "Network", Created: now, MaxDenials: 1,
				Decision: pb.Decision_DECISION_ASK, Uncounted: true}
			if halt, err := s.Decided(ctx, ask, now); err != nil || halt {
				t.Fatalf("an uncounted ask: halt %v %v", halt, err)
			}
			answered, _, ok, err := s.Answer(ctx, "net-1", "", func(c *Call) { c.Answer = pb.Decision_DECISION_DENY }, now)
			if err != nil || !ok || answered.Halt {
				t.Fatalf("a person's deny of an uncounted ask halted the session (cap 1): %+v %v %v", answered, ok, err)
			}
			deny := &Call{DecisionID: "deny-1", AgentID: "a", SessionID: "s", ToolName: "Bash", Created: now, MaxDenials: 1, Decision: pb.Decision_DECISION_DENY}
			if halt, err := s.Decided(ctx, deny, now); err != nil || !halt {
				t.Errorf("a counted deny at cap 1: halt %v %v, want the session halted", halt, err)
			}
		})
	}
}
