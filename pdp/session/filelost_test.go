package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A file store carries an epoch written once, kept across opens; a state
// file removed or replaced under the process makes the store lost
// (nothing written from then on would be kept) until a restart opens the
// file the path names.
func TestFileStoreLostWhenItsFileIsReplaced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	f, err := OpenFile(path, testBounds)
	if err != nil {
		t.Fatal(err)
	}
	epoch := f.storeEpoch
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = OpenFile(path, testBounds); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.storeEpoch != epoch || epoch == "" {
		t.Fatalf("the epoch after a reopen: %q, first %q", f.storeEpoch, epoch)
	}
	if err := f.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Another store's file put in its place (a volume restored from elsewhere).
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if err := f.Ping(ctx); !errors.Is(err, ErrStateLost) {
		t.Fatalf("Ping after the file was replaced: %v, want ErrStateLost", err)
	}
	c := &Call{DecisionID: "d1", AgentID: "a", SessionID: "s", Decision: pb.Decision_DECISION_DENY, MaxDenials: 3, Created: time.Now()}
	if _, err := f.Decided(ctx, c, time.Now()); !errors.Is(err, ErrStateLost) {
		t.Fatalf("Decided after the file was replaced: %v, want ErrStateLost", err)
	}
	if _, _, err := f.AcceptReset(ctx, "test"); err == nil {
		t.Fatal("a replaced file accepted without a restart")
	}
}
