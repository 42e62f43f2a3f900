package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A server may change what a tool says after a person trusted it. The
// proxy passes every tool's definition as the server listed it — with
// FilterTools when it lists, with Decide when the tool is called — and the
// sidecar compares it with the one it keeps (or the pin): a changed tool is
// hidden, and its call is an ask about the definition, answered only
// through toolpdp (never at the client: the client is the governed agent),
// after which the call itself is decided as usual.

// maxDefinitionAsks bounds the definition asks one call waits through: a
// server that changes the tool again while a person answers is asked about
// again, a few times, not forever.
const maxDefinitionAsks = 3

// maxOwnListPages bounds the pages of the proxy's own tools/list.
const maxOwnListPages = 20

// definitions are the tools' definitions as the server last listed them
// in this connection, and the proxy's own requests to the server.
type definitions struct {
	mu     sync.Mutex
	tools  map[string]json.RawMessage
	own    map[jsonrpc.ID]chan *jsonrpc.Response
	listed bool // the proxy listed the tools itself once: a tool still missing is not listed
}

func (d *definitions) note(name string, raw json.RawMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tools == nil {
		d.tools = map[string]json.RawMessage{}
	}
	d.tools[name] = raw
}

func (d *definitions) get(name string) (json.RawMessage, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	raw, ok := d.tools[name]
	return raw, ok
}

// ownReply takes a response to one of the proxy's own requests to the
// server; false for every other message.
func (s *session) ownReply(m *jsonrpc.Response) bool {
	s.defs.mu.Lock()
	ch, ok := s.defs.own[m.ID]
	delete(s.defs.own, m.ID)
	s.defs.mu.Unlock()
	if ok {
		ch <- m
	}
	return ok
}

// toolDefinition is the definition of the called tool to decide with: as
// last listed in this connection, else as the server lists it now (the
// proxy asks it), so that a client that calls without listing is checked
// all the same. "" when the server does not list the tool: the sidecar
// then goes by what it last saw. The proxy lists once per connection; a
// tool the server adds later is known from the client's next listing.
func (s *session) toolDefinition(ctx context.Context, tool string) (string, error) {
	raw, ok := s.defs.get(tool)
	s.defs.mu.Lock()
	listed := s.defs.listed
	s.defs.mu.Unlock()
	if ok || listed {
		return string(raw), nil
	}
	if err := s.listOwn(ctx); err != nil {
		return "", err
	}
	s.defs.mu.Lock()
	s.defs.listed = true
	s.defs.mu.Unlock()
	raw, _ = s.defs.get(tool)
	return string(raw), nil
}

// listOwn lists the server's tools itself, every page, noting each
// definition.
func (s *session) listOwn(ctx context.Context) error {
	var cursor string
	for range maxOwnListPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		id := newID()
		ch := make(chan *jsonrpc.Response, 1)
		s.defs.mu.Lock()
		if s.defs.own == nil {
			s.defs.own = map[jsonrpc.ID]chan *jsonrpc.Response{}
		}
		s.defs.own[id] = ch
		s.defs.mu.Unlock()
		forget := func() {
			s.defs.mu.Lock()
			delete(s.defs.own, id)
			s.defs.mu.Unlock()
		}
		if err := s.toServer(&jsonrpc.Request{ID: id, Method: "tools/list", Params: raw(params)}); err != nil {
			forget()
			return fmt.Errorf("the server's tools could not be listed: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		var r *jsonrpc.Response
		select {
		case r = <-ch:
		case <-ctx.Done():
		}
		cancel()
		if r == nil {
			forget()
			return fmt.Errorf("the server did not list its tools within %s", s.cfg.Timeout)
		}
		if r.Error != nil {
			return fmt.Errorf("the server refused to list its tools: %v", r.Error)
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(r.Result, &page); err != nil {
			return fmt.Errorf("the server's tools/list answer could not be read: %v", err)
		}
		for _, t := range page.Tools {
			var named struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(t, &named) == nil && named.Name != "" {
				s.defs.note(named.Name, t)
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
	return nil
}

// definitionAsks waits through the asks about a changed definition that
// the sidecar answers a call with: each is answered by a person through
// toolpdp (s.ask never elicits for one); an allow keeps the new definition
// and the call is decided again, as usual. What is not an allow is a deny.
func (s *session) definitionAsks(ctx context.Context, m *jsonrpc.Request, tool string, req *pb.DecideRequest, resp *pb.DecideResponse, progressToken any) (*pb.DecideResponse, error) {
	for n := 0; n < maxDefinitionAsks && resp.GetDecision() == pb.Decision_DECISION_ASK && resp.GetDefinitionChange() != nil; n++ {
		s.cfg.Log.Info("the tool's definition changed; a person is asked", "tool", tool, "decision_id", resp.GetDecisionId(),
			"kept", resp.GetDefinitionChange().GetKeptDigest(), "new", resp.GetDefinitionChange().GetNewDigest())
		decision, message, halt, _ := s.ask(ctx, m, tool, resp, progressToken)
		if decision != pb.Decision_DECISION_ALLOW {
			return &pb.DecideResponse{Decision: pb.Decision_DECISION_DENY, Message: message, Halt: halt}, nil
		}
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		var err error
		resp, err = s.cfg.Sidecar.Decide(callCtx, req)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if resp.GetDefinitionChange() != nil && resp.GetDecision() == pb.Decision_DECISION_ASK {
		return &pb.DecideResponse{Decision: pb.Decision_DECISION_DENY,
			Message: fmt.Sprintf("the definition of %s kept changing while people were asked about it, so it was not run", what(m, tool))}, nil
	}
	return resp, nil
}
