package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Memory is the store of a bare serve: everything in this process, gone
// with it. The file store keeps the same state and writes it through.
type Memory struct {
	sessions *Sessions
	pending  *Pending
	tools    toolTable // MCP tools' definition digests (tooldigests.go)

	mu     sync.Mutex // guards digest and epoch
	digest string
	epoch  string
}

// NewMemory is an empty store with the bounds b.
func NewMemory(b Bounds) *Memory {
	m := &Memory{sessions: NewSessions(b.MaxSessions, b.SessionIdle), pending: NewPending(b.MaxPending, b.PendingTTL)}
	m.sessions.SetMaxBytes(b.MaxSessionBytes)
	m.sessions.SetMaxPerAgent(b.MaxSessionsPerAgent)
	m.pending.SetMaxBytes(b.MaxPendingBytes)
	return m
}

func (m *Memory) Begin(_ context.Context, k Key, current *Pin, now time.Time) (Begun, error) {
	return m.sessions.Pin(k, current, now), nil
}

func (m *Memory) PinBody(_ context.Context, digest [sha256.Size]byte) ([]byte, error) {
	m.sessions.mu.Lock()
	defer m.sessions.mu.Unlock()
	for _, ss := range m.sessions.byKey {
		if ss.pin != nil && ss.pin.Digest == digest {
			return ss.pin.Body, nil
		}
	}
	return nil, nil
}

func (m *Memory) Decided(_ context.Context, c *Call, now time.Time) (bool, error) {
	halt := m.sessions.Record(c.Key(), c.countedAs(c.Decision), c.MaxDenials, now)
	m.pending.Add(c)
	return halt, nil
}

func (m *Memory) Remember(_ context.Context, k Key, key RememberKey, epoch string, expires, now time.Time) error {
	m.sessions.Remember(k, key, epoch, expires, now)
	return nil
}

func (m *Memory) Remembered(_ context.Context, k Key, key RememberKey, epoch string, now time.Time) (bool, error) {
	return m.sessions.Remembered(k, key, epoch, now), nil
}

func (m *Memory) ByCallID(_ context.Context, workspace, agentID, sessionID, callID string) (string, bool, error) {
	id, ambiguous := m.pending.ByCallID(workspace, agentID, sessionID, callID)
	return id, ambiguous, nil
}

func (m *Memory) Get(_ context.Context, id, workspace string, now time.Time) (Call, Lookup, error) {
	c, found := m.pending.Get(id, workspace, now)
	return c, found, nil
}

func (m *Memory) Answer(_ context.Context, id, workspace string, answer func(*Call), now time.Time) (*Call, Lookup, bool, error) {
	c, found, answered := m.pending.Answer(id, workspace, func(c *Call) {
		answer(c)
		c.Halt = m.sessions.Record(c.Key(), c.countedAs(c.Answer), c.MaxDenials, now)
	}, now)
	return copyCall(c), found, answered, nil
}

func (m *Memory) Wait(ctx context.Context, id, workspace string, now func() time.Time) (Call, Lookup, error) {
	c, found := m.pending.Wait(ctx, id, workspace, now)
	return c, found, nil
}

func (m *Memory) Report(_ context.Context, id, workspace string, isError bool, now time.Time) (*Call, Lookup, bool, bool, error) {
	c, found, marked := m.pending.Report(id, workspace)
	if !marked {
		return copyCall(c), found, false, false, nil
	}
	halt := m.sessions.Report(c.Key(), isError, c.MaxDenials, now)
	return copyCall(c), found, true, halt, nil
}

func (m *Memory) Page(_ context.Context, workspace, agentID string, after uint64, limit int, now time.Time) ([]Call, uint64, error) {
	calls, next := m.pending.Page(workspace, agentID, after, limit, now)
	return calls, next, nil
}

func (m *Memory) End(_ context.Context, k Key) (bool, error) {
	m.pending.DropSession(k.Workspace, k.Agent, k.Session)
	return m.sessions.End(k), nil
}

func (m *Memory) Activate(_ context.Context, digest string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.digest, m.epoch = digest, newEpoch(digest)
	return m.epoch, nil
}

func (m *Memory) Sweep(_ context.Context, now time.Time) { m.sessions.Sweep(now) }

func (m *Memory) Collectors() []prometheus.Collector {
	return append(m.sessions.Collectors(), m.pending.Collectors()...)
}

func (m *Memory) Close() error { return nil }

func (m *Memory) Ping(context.Context) error { return nil }

// Key is the session a decided call belongs to.
func (c *Call) Key() Key { return Key{c.Workspace, c.AgentID, c.SessionID} }

// copyCall is a copy the caller may keep without the store's lock.
func copyCall(c *Call) *Call {
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// newEpoch names one activation of a policy: its content and a random part,
// so that a reload of the same content is a new epoch all the same.
func newEpoch(digest string) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	if len(digest) > 16 {
		digest = digest[:16]
	}
	return digest + "." + hex.EncodeToString(r[:])
}

// Recent is up to limit of the decisions held for workspace's session,
// newest first: what a person answering an ask sees of the session.
func (m *Memory) Recent(workspace, agentID, sessionID string, limit int) []Call {
	return m.pending.Recent(workspace, agentID, sessionID, limit)
}
