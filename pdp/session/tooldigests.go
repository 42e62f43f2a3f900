package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// An MCP gateway keeps, per agent and server, the digest of each tool's
// definition it listed: the first one it saw (trust on first use), or the
// one a person allowed since. A definition that differs from the kept one
// is noted beside it as seen, so that the person asked about the change
// can be shown both. The records live with the rest of the state: they
// survive a restart with a durable store and are one record across
// replicas with a shared one.

// ToolKey names one tool of one server as one agent (of a workspace) sees it.
type ToolKey struct{ Workspace, Agent, Server, Tool string }

// ToolRecord is what the store keeps of a tool's definition: the digest
// and canonical definition kept, a different one seen since (Seen empty:
// none), and the asks a person was given about that one (so that one
// answer answers them all).
type ToolRecord struct {
	Digest     string
	Definition []byte
	SeenDigest string
	Seen       []byte
	Asks       []string // decision ids, oldest first, at most MaxToolAsks
}

// MaxToolAsks bounds the asks about one changed definition that one
// answer also answers; older ones are answered one by one.
const MaxToolAsks = 32

// Changed reports whether the server's latest definition differs from the
// one kept.
func (r ToolRecord) Changed() bool { return r.SeenDigest != "" && r.SeenDigest != r.Digest }

// MaxToolsPerServer bounds the tools kept for one agent and server: a
// server (or a caller of FilterTools) naming ever new tools must not fill
// the store.
const MaxToolsPerServer = 1000

// ErrTooManyTools is SeeTool's answer for a new tool beyond
// MaxToolsPerServer.
var ErrTooManyTools = fmt.Errorf("more than %d tools of one server are kept for one agent", MaxToolsPerServer)

// ToolDigests keeps tool definitions' digests. Every store implements it;
// each change is atomic in the store, whichever process makes it.
type ToolDigests interface {
	// SeeTool records that k's server defines k as def (digest): kept
	// when nothing is kept yet, otherwise noted as seen when it differs
	// from the kept one (and the seen note cleared when it does not). It
	// returns the record as it then stands.
	SeeTool(ctx context.Context, k ToolKey, digest string, def []byte) (ToolRecord, error)
	// ToolRecord is k's record; found is false when nothing is kept.
	ToolRecord(ctx context.Context, k ToolKey) (rec ToolRecord, found bool, err error)
	// KeepTool makes def (digest) the kept definition of k — a person
	// allowed it — and clears the seen note when it is that definition.
	KeepTool(ctx context.Context, k ToolKey, digest string, def []byte) error
	// AskTool notes askID as an ask about k's seen definition, when that
	// is still seenDigest.
	AskTool(ctx context.Context, k ToolKey, seenDigest, askID string) error
}

// A record is written as its five parts joined by newlines — digest,
// definition, seen digest, seen definition, the asks' ids joined by
// commas: a digest or an id has no newline, and neither has canonical JSON
// (it escapes every control character and puts no space between tokens).
func (r ToolRecord) encode() string {
	return r.Digest + "\n" + string(r.Definition) + "\n" + r.SeenDigest + "\n" + string(r.Seen) + "\n" + strings.Join(r.Asks, ",")
}

func decodeToolRecord(s string) (ToolRecord, error) {
	parts := strings.SplitN(s, "\n", 5)
	if len(parts) != 5 || parts[0] == "" {
		return ToolRecord{}, errors.New("a tool record that is not digest, definition, seen digest, seen definition and asks")
	}
	r := ToolRecord{Digest: parts[0], Definition: []byte(parts[1]), SeenDigest: parts[2]}
	if parts[3] != "" {
		r.Seen = []byte(parts[3])
	}
	if parts[4] != "" {
		r.Asks = strings.Split(parts[4], ",")
	}
	return r, nil
}

// serverOf is the agent and server a tool belongs to: what the bound counts.
type serverOf struct{ Workspace, Agent, Server string }

func (k ToolKey) server() serverOf { return serverOf{k.Workspace, k.Agent, k.Server} }

// toolTable is the memory store's records; its zero value is empty.
type toolTable struct {
	mu      sync.Mutex
	records map[ToolKey]ToolRecord
	count   map[serverOf]int

	// changed, when set, learns of every change under mu, in order: the
	// file store writes them through.
	changed func(k ToolKey, r ToolRecord)
}

func (t *toolTable) put(k ToolKey, r ToolRecord) {
	if t.records == nil {
		t.records, t.count = map[ToolKey]ToolRecord{}, map[serverOf]int{}
	}
	if _, ok := t.records[k]; !ok {
		t.count[k.server()]++
	}
	t.records[k] = r
	if t.changed != nil {
		t.changed(k, r)
	}
}

func (t *toolTable) see(k ToolKey, digest string, def []byte) (ToolRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.records[k]
	switch {
	case !ok:
		if t.count[k.server()] >= MaxToolsPerServer {
			return ToolRecord{}, ErrTooManyTools
		}
		cur = ToolRecord{Digest: digest, Definition: def}
	case cur.Digest == digest:
		if cur.SeenDigest == "" {
			return cur, nil
		}
		cur.SeenDigest, cur.Seen, cur.Asks = "", nil, nil
	case cur.SeenDigest == digest:
		return cur, nil
	default:
		cur.SeenDigest, cur.Seen, cur.Asks = digest, def, nil
	}
	t.put(k, cur)
	return cur, nil
}

func (t *toolTable) get(k ToolKey) (ToolRecord, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.records[k]
	return r, ok
}

func (t *toolTable) keep(k ToolKey, digest string, def []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.records[k]
	cur.Digest, cur.Definition = digest, def
	if cur.SeenDigest == digest {
		cur.SeenDigest, cur.Seen, cur.Asks = "", nil, nil
	}
	t.put(k, cur)
}

func (t *toolTable) ask(k ToolKey, seenDigest, askID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.records[k]
	if !ok || cur.SeenDigest != seenDigest {
		return
	}
	cur.Asks = append(append([]string(nil), cur.Asks...), askID)
	if len(cur.Asks) > MaxToolAsks {
		cur.Asks = cur.Asks[len(cur.Asks)-MaxToolAsks:]
	}
	t.put(k, cur)
}

func (m *Memory) SeeTool(_ context.Context, k ToolKey, digest string, def []byte) (ToolRecord, error) {
	return m.tools.see(k, digest, def)
}

func (m *Memory) ToolRecord(_ context.Context, k ToolKey) (ToolRecord, bool, error) {
	r, ok := m.tools.get(k)
	return r, ok, nil
}

func (m *Memory) KeepTool(_ context.Context, k ToolKey, digest string, def []byte) error {
	m.tools.keep(k, digest, def)
	return nil
}

func (m *Memory) AskTool(_ context.Context, k ToolKey, seenDigest, askID string) error {
	m.tools.ask(k, seenDigest, askID)
	return nil
}
