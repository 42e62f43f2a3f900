package session

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// File is the store of a sidecar whose container may restart: the state
// of the memory store, written through to an embedded database on local
// disk (bbolt) before each call returns, and read back whole at start. A
// process holds the file alone (bbolt's lock), so the copy in memory is
// the truth and reads never touch the disk.
type File struct {
	*Memory
	db   *bolt.DB
	path string

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []fileOp
	queued  uint64 // sequence number of the last op queued
	written uint64 // … of the last op committed (or failed)
	failed  struct {
		err error // the last commit's error while it is being retried; nil once one succeeds
	}
	closed   bool
	stopped  chan struct{}
	pinsSeen map[[sha256.Size]byte]bool // pins already written

	activated bool // Activate ran in this process

	opened     os.FileInfo // the file as opened: the path must keep naming it
	storeEpoch string      // the file's epoch, written once when it was made
	lost       error       // the path stopped naming the opened file: nothing written since is kept
}

var (
	sessionsBucket = []byte("sessions")
	callsBucket    = []byte("calls")
	pinsBucket     = []byte("pins")
	metaBucket     = []byte("meta")
	policyKey      = []byte("policy")
	epochKey       = []byte("epoch")
)

// fileOp is one write: value nil deletes.
type fileOp struct {
	bucket []byte
	key    []byte
	value  []byte
}

// OpenFile opens (or creates) the store at path, with the bounds b.
func OpenFile(path string, b Bounds) (*File, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("--state file:%s: the file is locked by another process: one toolpdp serves each state file (give each its own)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("--state file:%s: %w", path, err)
	}
	f := &File{Memory: NewMemory(b), db: db, path: path, stopped: make(chan struct{}), pinsSeen: map[[sha256.Size]byte]bool{}}
	f.cond = sync.NewCond(&f.mu)
	if f.opened, err = os.Stat(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("--state file:%s: %w", path, err)
	}
	if err := f.load(time.Now()); err != nil {
		db.Close()
		return nil, fmt.Errorf("--state file:%s: %w", path, err)
	}
	if err := f.loadTools(); err != nil {
		db.Close()
		return nil, fmt.Errorf("--state file:%s: %w", path, err)
	}
	f.sessions.changed = f.noteSession
	f.pending.changed = f.noteCall
	f.tools.changed = f.noteTool
	go f.writer()
	return f, nil
}

// sessionDoc is a session as the file keeps it.
type sessionDoc struct {
	Workspace  string          `json:"ws,omitempty"`
	Agent      string          `json:"agent"`
	Session    string          `json:"session"`
	Bucket     string          `json:"bucket"`
	Pin        string          `json:"pin,omitempty"` // hex digest
	Denials    int             `json:"denials,omitempty"`
	Reported   bool            `json:"reported,omitempty"`
	Halted     bool            `json:"halted,omitempty"`
	Lost       bool            `json:"lost,omitempty"`
	LastUsed   int64           `json:"last_used"` // unix nanoseconds
	Remembered []rememberedDoc `json:"remembered,omitempty"`
}

type rememberedDoc struct {
	Key     string `json:"key"`
	Epoch   string `json:"epoch"`
	Expires int64  `json:"expires"`
}

// callDoc is a decided call as the file (and Redis) keep it.
type callDoc struct {
	Call
	Reported bool   `json:"reported,omitempty"`
	Seq      uint64 `json:"seq"`
}

func sessionKeyBytes(k Key) []byte {
	return []byte(k.Workspace + "\x00" + k.Agent + "\x00" + k.Session)
}

// noteSession queues a session's new state. Called under the sessions'
// lock, so the order of writes is the order of changes.
func (f *File) noteSession(ss *session, gone bool) {
	key := sessionKeyBytes(ss.key)
	if gone {
		f.enqueue(fileOp{bucket: sessionsBucket, key: key})
		return
	}
	doc := sessionDoc{Workspace: ss.key.Workspace, Agent: ss.key.Agent, Session: ss.key.Session, Bucket: ss.bucket,
		Denials: ss.denials, Reported: ss.reported, Halted: ss.halted, Lost: ss.lost, LastUsed: ss.lastUsed.UnixNano()}
	var pinOp *fileOp
	if ss.pin != nil {
		doc.Pin = hex.EncodeToString(ss.pin.Digest[:])
		f.mu.Lock()
		if !f.pinsSeen[ss.pin.Digest] && ss.pin.Body != nil {
			f.pinsSeen[ss.pin.Digest] = true
			pinOp = &fileOp{bucket: pinsBucket, key: ss.pin.Digest[:], value: ss.pin.Body}
		}
		f.mu.Unlock()
	}
	for k, r := range ss.remembered {
		doc.Remembered = append(doc.Remembered, rememberedDoc{Key: hex.EncodeToString(k[:]), Epoch: r.epoch, Expires: r.expires.UnixNano()})
	}
	raw, _ := json.Marshal(doc) // plain strings and numbers: cannot fail
	if pinOp != nil {
		f.enqueue(*pinOp)
	}
	f.enqueue(fileOp{bucket: sessionsBucket, key: key, value: raw})
}

// noteCall queues a decided call's new state, under the pending lock.
func (f *File) noteCall(a *Call, gone bool) {
	key := []byte(a.DecisionID)
	if gone {
		f.enqueue(fileOp{bucket: callsBucket, key: key})
		return
	}
	raw, err := json.Marshal(callDoc{Call: *a, Reported: a.reported, Seq: a.seq})
	if err != nil {
		return
	}
	f.enqueue(fileOp{bucket: callsBucket, key: key, value: raw})
}

func (f *File) enqueue(op fileOp) {
	f.mu.Lock()
	f.queue = append(f.queue, op)
	f.queued++
	f.cond.Broadcast()
	f.mu.Unlock()
}

// writer commits what is queued, everything queued meanwhile in one
// transaction: concurrent calls share a commit. A batch that fails is
// kept and tried again, ahead of what was queued after it, so that what
// is on disk is always a prefix of the changes in order: nothing later
// is counted as written while something before it is not.
func (f *File) writer() {
	defer close(f.stopped)
	var held []fileOp // a batch that failed, tried again first
	backoff := 10 * time.Millisecond
	for {
		f.mu.Lock()
		for len(f.queue) == 0 && len(held) == 0 && !f.closed {
			f.cond.Wait()
		}
		if len(f.queue) == 0 && len(held) == 0 && f.closed {
			f.mu.Unlock()
			return
		}
		batch, to := append(held, f.queue...), f.queued
		f.queue = nil
		closing := f.closed
		f.mu.Unlock()
		err := f.commit(batch)
		f.mu.Lock()
		if err == nil {
			f.written, f.failed.err, held = to, nil, nil
			backoff = 10 * time.Millisecond
		} else {
			f.failed.err = err
			held = latestOps(batch)
		}
		f.cond.Broadcast()
		f.mu.Unlock()
		if err != nil {
			if closing {
				return // what was not written is lost with the process, as a crash would lose it
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
		}
	}
}

// commit writes a batch in one transaction, synced to disk.
func (f *File) commit(batch []fileOp) error {
	return f.db.Update(func(tx *bolt.Tx) error {
		for _, op := range batch {
			b, err := tx.CreateBucketIfNotExists(op.bucket)
			if err != nil {
				return err
			}
			if op.value == nil {
				err = b.Delete(op.key)
			} else {
				err = b.Put(op.key, op.value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// latestOps keeps the last op of each record, in the order of those last
// ops: a batch held after a failure does not grow with every retry.
func latestOps(batch []fileOp) []fileOp {
	last := map[string]int{}
	for i, op := range batch {
		last[string(op.bucket)+"\x00"+string(op.key)] = i
	}
	out := make([]fileOp, 0, len(last))
	for i, op := range batch {
		if last[string(op.bucket)+"\x00"+string(op.key)] == i {
			out = append(out, op)
		}
	}
	return out
}

// sync waits until every change made before it is on disk. While the
// disk refuses a write it fails at once (the writer keeps trying): what
// a caller would read or answer is not yet durable, so it must not be
// told.
func (f *File) sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost != nil {
		return f.lost
	}
	mine := f.queued
	for f.written < mine {
		if f.failed.err != nil {
			return fmt.Errorf("%w: writing %s: %v", ErrUnavailable, f.path, f.failed.err)
		}
		f.cond.Wait()
	}
	return nil
}

// Begin does not wait for the disk: what it changed is written before the
// call's Decided returns (writes are committed in order), and a call that
// never gets there was never answered.
func (f *File) Begin(ctx context.Context, k Key, current *Pin, now time.Time) (Begun, error) {
	b, _ := f.Memory.Begin(ctx, k, current, now)
	return b, f.Ping(ctx)
}

func (f *File) Decided(ctx context.Context, c *Call, now time.Time) (bool, error) {
	halt, _ := f.Memory.Decided(ctx, c, now)
	return halt, f.sync()
}

func (f *File) Remember(ctx context.Context, k Key, key RememberKey, epoch string, expires, now time.Time) error {
	_ = f.Memory.Remember(ctx, k, key, epoch, expires, now)
	return f.sync()
}

func (f *File) Answer(ctx context.Context, id, workspace string, answer func(*Call), now time.Time) (*Call, Lookup, bool, error) {
	c, found, answered, _ := f.Memory.Answer(ctx, id, workspace, answer, now)
	return c, found, answered, f.sync()
}

// The reads wait for the disk too: a change is seen by nobody — a waiter,
// a second Confirm, a list — before it is durable, so that a crash
// leaves either no answer or the one everybody was told.

func (f *File) Get(ctx context.Context, id, workspace string, now time.Time) (Call, Lookup, error) {
	c, found, _ := f.Memory.Get(ctx, id, workspace, now)
	if err := f.sync(); err != nil {
		return Call{}, NotFound, err
	}
	return c, found, nil
}

func (f *File) Wait(ctx context.Context, id, workspace string, now func() time.Time) (Call, Lookup, error) {
	c, found, _ := f.Memory.Wait(ctx, id, workspace, now)
	if err := f.sync(); err != nil {
		return Call{}, NotFound, err
	}
	return c, found, nil
}

func (f *File) Page(ctx context.Context, workspace, agentID string, after uint64, limit int, now time.Time) ([]Call, uint64, error) {
	calls, next, _ := f.Memory.Page(ctx, workspace, agentID, after, limit, now)
	if err := f.sync(); err != nil {
		return nil, 0, err
	}
	return calls, next, nil
}

func (f *File) ByCallID(ctx context.Context, workspace, agentID, sessionID, callID string) (string, bool, error) {
	id, ambiguous, _ := f.Memory.ByCallID(ctx, workspace, agentID, sessionID, callID)
	if err := f.sync(); err != nil {
		return "", false, err
	}
	return id, ambiguous, nil
}

func (f *File) Remembered(ctx context.Context, k Key, key RememberKey, epoch string, now time.Time) (bool, error) {
	held, _ := f.Memory.Remembered(ctx, k, key, epoch, now)
	if err := f.sync(); err != nil {
		return false, err
	}
	return held, nil
}

func (f *File) Report(ctx context.Context, id, workspace string, isError bool, now time.Time) (*Call, Lookup, bool, bool, error) {
	c, found, marked, halt, _ := f.Memory.Report(ctx, id, workspace, isError, now)
	return c, found, marked, halt, f.sync()
}

func (f *File) End(ctx context.Context, k Key) (bool, error) {
	found, _ := f.Memory.End(ctx, k)
	return found, f.sync()
}

func (f *File) Sweep(ctx context.Context, now time.Time) {
	f.Memory.Sweep(ctx, now)
	_ = f.sync()
}

// Activate keeps the file's epoch at the first activation of a process
// when the policy's content is the one it names.
func (f *File) Activate(ctx context.Context, digest string) (string, error) {
	f.Memory.mu.Lock()
	defer f.Memory.mu.Unlock()
	if !f.activated && f.Memory.digest == digest && f.Memory.epoch != "" {
		f.activated = true
		return f.Memory.epoch, nil
	}
	f.activated = true
	f.Memory.digest, f.Memory.epoch = digest, newEpoch(digest)
	f.enqueue(fileOp{bucket: metaBucket, key: policyKey, value: []byte(digest + "\n" + f.Memory.epoch)})
	epoch := f.Memory.epoch
	return epoch, f.sync()
}

// Ping reports whether the last write to the file failed, and whether
// the path still names the file this process opened: one removed or
// replaced under it (a volume wiped, a file restored from elsewhere)
// keeps nothing written from then on, so the store counts as lost until
// the process restarts and opens the file the path names.
func (f *File) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost == nil {
		if now, err := os.Stat(f.path); err != nil || !os.SameFile(now, f.opened) {
			f.lost = fmt.Errorf("%w: the state file %s was removed or replaced while this process had it open (epoch %s)", ErrStateLost, f.path, f.storeEpoch)
		}
	}
	if f.lost != nil {
		return f.lost
	}
	if f.failed.err != nil {
		return fmt.Errorf("%w: writing %s: %v", ErrUnavailable, f.path, f.failed.err)
	}
	return nil
}

// Close writes what is queued and closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	f.closed = true
	f.cond.Broadcast()
	f.mu.Unlock()
	<-f.stopped
	return f.db.Close()
}

// load reads the file into memory: sessions in the order they were used,
// calls in the order they were decided; what is idle or expired past its
// timeout, and pins no session names, are deleted.
func (f *File) load(now time.Time) error {
	return f.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{sessionsBucket, callsBucket, pinsBucket, metaBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(metaBucket)
		if v := meta.Get(epochKey); v != nil {
			f.storeEpoch = string(v)
		} else {
			f.storeEpoch = newStoreEpoch()
			if err := meta.Put(epochKey, []byte(f.storeEpoch)); err != nil {
				return err
			}
		}
		if v := tx.Bucket(metaBucket).Get(policyKey); v != nil {
			if d, e, ok := strings.Cut(string(v), "\n"); ok {
				f.Memory.digest, f.Memory.epoch = d, e
			}
		}
		pins := map[[sha256.Size]byte]*Pin{}
		if err := tx.Bucket(pinsBucket).ForEach(func(k, v []byte) error {
			var d [sha256.Size]byte
			if len(k) == len(d) && sha256.Sum256(v) == [sha256.Size]byte(k) {
				copy(d[:], k)
				pins[d] = &Pin{Digest: d, Body: slices.Clone(v)}
			}
			return nil
		}); err != nil {
			return err
		}
		var docs []sessionDoc
		var stale, staleCalls [][]byte
		sb := tx.Bucket(sessionsBucket)
		if err := sb.ForEach(func(k, v []byte) error {
			var d sessionDoc
			if json.Unmarshal(v, &d) != nil || now.Sub(time.Unix(0, d.LastUsed)) > f.sessions.idle {
				stale = append(stale, slices.Clone(k))
				return nil
			}
			docs = append(docs, d)
			return nil
		}); err != nil {
			return err
		}
		slices.SortFunc(docs, func(a, b sessionDoc) int { return cmp.Compare(a.LastUsed, b.LastUsed) })
		used := map[[sha256.Size]byte]bool{}
		for _, d := range docs {
			ss := &session{key: Key{d.Workspace, d.Agent, d.Session}, bucket: d.Bucket, denials: d.Denials, reported: d.Reported,
				lost: d.Lost, lastUsed: time.Unix(0, d.LastUsed)}
			if d.Pin != "" {
				var dg [sha256.Size]byte
				if raw, err := hex.DecodeString(d.Pin); err == nil && len(raw) == len(dg) {
					copy(dg[:], raw)
				}
				ss.pin = pins[dg]
				if ss.pin == nil { // its definition is gone: the session cannot go on as it was
					ss.lost = true
				} else {
					used[dg] = true
				}
			}
			for _, r := range d.Remembered {
				var rk RememberKey
				if raw, err := hex.DecodeString(r.Key); err == nil && len(raw) == len(rk) {
					copy(rk[:], raw)
					if ss.remembered == nil {
						ss.remembered = map[RememberKey]remembered{}
					}
					ss.remembered[rk] = remembered{epoch: r.Epoch, expires: time.Unix(0, r.Expires)}
				}
			}
			f.sessions.restore(ss, d.Halted)
		}
		for d := range pins {
			if used[d] {
				f.pinsSeen[d] = true
			} else if err := tx.Bucket(pinsBucket).Delete(d[:]); err != nil {
				return err
			}
		}
		var calls []callDoc
		cb := tx.Bucket(callsBucket)
		if err := cb.ForEach(func(k, v []byte) error {
			var d callDoc
			if json.Unmarshal(v, &d) != nil {
				staleCalls = append(staleCalls, slices.Clone(k))
				return nil
			}
			calls = append(calls, d)
			return nil
		}); err != nil {
			return err
		}
		slices.SortFunc(calls, func(a, b callDoc) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, d := range calls {
			c := d.Call
			c.reported = d.Reported
			f.pending.restore(&c, now)
		}
		for _, k := range stale {
			if err := sb.Delete(k); err != nil {
				return err
			}
		}
		for _, k := range staleCalls {
			if err := cb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// AcceptReset: a file store that was lost is opened anew by a restart,
// which loads the file the path names as it is.
func (f *File) AcceptReset(ctx context.Context, by string) (string, string, error) {
	if err := f.Ping(ctx); err == nil {
		return "", f.storeEpoch, nil
	}
	return "", "", fmt.Errorf("the state file %s was removed or replaced under this process: restart toolpdp, which opens the file the path names now", f.path)
}
