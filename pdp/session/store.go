package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Store holds everything sessions hold: pins, consecutive-failure counts
// and halts, the decided calls Confirm, ReportResult and AwaitDecision look
// up, and remembered approvals. Every change is atomic in the store (the
// count and the halt it brings, an ask answered once), whichever process
// makes it. An error means the store could not be reached or could not
// keep the change: the caller fails closed.
type Store interface {
	// Begin finds or starts session k, pinning current (nil: the policy
	// defines no such agent) when it has none yet. The returned pin's Body
	// may be nil; PinBody has it.
	Begin(ctx context.Context, k Key, current *Pin, now time.Time) (Begun, error)
	// PinBody is the encoding of a pinned definition the store holds.
	PinBody(ctx context.Context, digest [sha256.Size]byte) ([]byte, error)
	// Decided counts c's decision in its session — a deny adds one, an allow
	// resets the count of a session that never reported a result, an ask
	// changes nothing — and keeps c for Confirm, ReportResult and
	// AwaitDecision. halt: the session is at its cap, c.MaxDenials.
	Decided(ctx context.Context, c *Call, now time.Time) (halt bool, err error)
	// Remember and Remembered: a person's approval of exactly the call key
	// in session k, under the policy of epoch, until expires.
	Remember(ctx context.Context, k Key, key RememberKey, epoch string, expires, now time.Time) error
	Remembered(ctx context.Context, k Key, key RememberKey, epoch string, now time.Time) (bool, error)
	// ByCallID is the decision id of workspace's Decide with that call id
	// in that session ("" for none); ambiguous when the id named different
	// calls.
	ByCallID(ctx context.Context, workspace, agentID, sessionID, callID string) (id string, ambiguous bool, err error)
	// Get is workspace's decision id as it stands now (a copy), and the
	// lookup's outcome: an ask past its ttl is Expired.
	Get(ctx context.Context, id, workspace string, now time.Time) (Call, Lookup, error)
	// Answer records a person's answer to workspace's ask id, once: answer
	// sets the call's Answer (and AnswerMessage, Execution, AnsweredBy);
	// the store counts it in the ask's session, sets Halt, and wakes the
	// ask's waiters, on whichever process they wait. It returns the
	// decision (a copy), the lookup's outcome and whether this call
	// answered it.
	Answer(ctx context.Context, id, workspace string, answer func(*Call), now time.Time) (c *Call, found Lookup, answered bool, err error)
	// Wait waits until workspace's decision id is settled — an ask
	// answered, expired or forgotten — or ctx ends, and returns it as it
	// then stands. now is the clock the ttl is measured by.
	Wait(ctx context.Context, id, workspace string, now func() time.Time) (Call, Lookup, error)
	// Report marks workspace's allowed call id as reported, once, and
	// counts the result in its session: an error adds one, a success resets.
	Report(ctx context.Context, id, workspace string, isError bool, now time.Time) (c *Call, found Lookup, marked, halt bool, err error)
	// Page lists workspace's asks awaiting an answer, oldest first, after
	// the one a token names, and the next token (0 on the last page).
	Page(ctx context.Context, workspace, agentID string, after uint64, limit int, now time.Time) ([]Call, uint64, error)
	// End releases a session and forgets its decisions; found: there was one.
	End(ctx context.Context, k Key) (found bool, err error)
	// Activate names the policy in force from now on by its content
	// digest and returns its epoch: remembered approvals hold only under
	// the epoch they were made in. The first activation of a process keeps
	// the store's epoch when the content is the one it names (approvals
	// survive a restart while the policy is unchanged); any later one is a
	// new epoch, unless another process sharing the store already
	// activated this content.
	Activate(ctx context.Context, digest string) (epoch string, err error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Sweep releases what has been idle past its timeout.
	Sweep(ctx context.Context, now time.Time)
	// Collectors are the store's metrics.
	Collectors() []prometheus.Collector
	// Close releases the store's resources.
	Close() error
}

// Bounds are what a store holds at most.
type Bounds struct {
	MaxSessions         int
	MaxSessionsPerAgent int // 0: half of MaxSessions
	SessionIdle         time.Duration
	MaxSessionBytes     int64 // 0: DefaultMaxSessionBytes
	MaxPending          int
	PendingTTL          time.Duration
	MaxPendingBytes     int64 // 0: DefaultMaxPendingBytes
}

// ErrUnavailable wraps every failure to reach a store.
var ErrUnavailable = errors.New("the state store is unavailable")

// ErrStateLost wraps the refusal of a store that no longer holds what this
// process knew it to hold: its epoch vanished or changed (a Redis
// restarted without its data, flushed, or replaced; a state file removed
// or replaced). Halts, pins, asks and approvals may be gone, so nothing
// that needs them is decided until an operator accepts the loss
// (AcceptReset).
var ErrStateLost = errors.New("the state store lost its data")

// Open is the store a --state URL names: memory, file:PATH, redis://… or
// rediss://….
func Open(ctx context.Context, url string, b Bounds, opts OpenOptions) (Store, error) {
	switch {
	case url == "" || url == "memory":
		return NewMemory(b), nil
	case strings.HasPrefix(url, "file:"):
		path := strings.TrimPrefix(url, "file:")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, fmt.Errorf("--state %q: file: names no path", url)
		}
		f, err := OpenFile(path, b)
		if err != nil {
			return nil, err
		}
		return f, nil
	case strings.HasPrefix(url, "redis://"), strings.HasPrefix(url, "rediss://"):
		r, err := OpenRedis(ctx, url, b, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("--state %q: not memory, file:PATH, redis://… or rediss://…", url)
}

// OpenOptions are what a shared store needs beyond its URL.
type OpenOptions struct {
	PasswordFile string // the store's password, read from this file; "" for none or the URL's
	CACert       string // PEM CA bundle trusted for rediss:// (the system's when "")
}
