// Package mcpproxy puts toolpdp in front of an MCP server: every tools/call
// and resources/read a client sends is decided by the sidecar first,
// tools/list answers are filtered to what some call could allow or ask, an
// ask is held until a person answers it, and what the proxy cannot ask
// about fails closed. It works at the JSON-RPC level (the official Go SDK's
// jsonrpc codec), since it must hold, answer and forward messages by their
// ids; the transports (stdio wrapping a command, streamable HTTP in front of
// a URL) only move messages.
package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/grpc/status"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DefaultTimeout bounds one call to the sidecar.
const DefaultTimeout = 5 * time.Second

// askPoll is how long one AwaitDecision waits before the proxy sends a
// progress notification and waits again.
const askPoll = 5 * time.Second

// Config says who the proxy asks for and as whom.
type Config struct {
	Sidecar    pb.DecisionServiceClient
	AgentID    string // the agent definition the calls are decided for (required)
	ServerName string // the MCP server's name in that definition (required)
	Timeout    time.Duration
	Log        *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// A session is one client connection: one toolpdp session, the calls it has
// forwarded and the server's requests it relayed, by id.
type session struct {
	cfg Config
	id  string // the toolpdp session id

	toClient func(jsonrpc.Message) error
	toServer func(jsonrpc.Message) error
	end      func(reason string) // the session is over (a halt): close the connection
	// halting is set before the answer that halts is sent: a call the
	// client sends on reading it is neither decided nor forwarded.
	halting atomic.Bool

	mu          sync.Mutex
	forwarded   map[jsonrpc.ID]forwardedCall          // client requests sent on to the server
	relayed     map[jsonrpc.ID]jsonrpc.ID             // proxy id → the server's id, for its requests to the client
	own         map[jsonrpc.ID]chan *jsonrpc.Response // the proxy's own requests to the client
	held        map[jsonrpc.ID]context.CancelFunc     // calls waiting for a person
	outstanding map[jsonrpc.ID]bool                   // client requests not yet answered
	elicitation bool                                  // the client can be asked (it declared elicitation)

	defs definitions // the tools' definitions as listed, and the proxy's own requests to the server (pins.go)
}

type forwardedCall struct {
	method     string
	decisionID string // the allow being carried out, "" when there is nothing to report
}

func newSession(cfg Config, id string) *session {
	return &session{cfg: cfg.withDefaults(), id: id,
		forwarded: map[jsonrpc.ID]forwardedCall{}, relayed: map[jsonrpc.ID]jsonrpc.ID{},
		own: map[jsonrpc.ID]chan *jsonrpc.Response{}, held: map[jsonrpc.ID]context.CancelFunc{}, outstanding: map[jsonrpc.ID]bool{}}
}

// fromClient handles one message the client sent. Calls that need a
// decision are decided on their own goroutine, so a held ask never blocks
// the rest of the connection.
func (s *session) fromClient(ctx context.Context, m jsonrpc.Message) {
	switch m := m.(type) {
	case *jsonrpc.Request:
		if s.halting.Load() {
			return // the session is over; the connection closes
		}
		if !m.IsCall() {
			s.clientNotification(m)
			return
		}
		if !s.claim(m.ID) {
			// Answering it would match one answer to two requests: the
			// server's answer to a tools/list could reach the client as the
			// answer to a ping, unfiltered.
			s.send(s.toClient, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest,
				Message: fmt.Sprintf("the request id %v is still outstanding (a request under it has not been answered); it was refused and not forwarded", m.ID.Raw())}})
			return
		}
		switch m.Method {
		case "initialize":
			var p struct {
				Capabilities struct {
					Elicitation json.RawMessage `json:"elicitation"`
				} `json:"capabilities"`
			}
			_ = json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			s.elicitation = len(p.Capabilities.Elicitation) > 0 && string(p.Capabilities.Elicitation) != "null"
			s.mu.Unlock()
			s.forward(m, forwardedCall{method: m.Method})
		case "prompts/get":
			// Not decided, but forwarded only as read, like a call.
			c, err := decodeCall(m.Method, m.Params)
			if err != nil {
				s.answerError(m.ID, err)
				return
			}
			s.forward(&jsonrpc.Request{ID: m.ID, Method: m.Method, Params: c.params()}, forwardedCall{method: m.Method})
		case "tools/call", "resources/read":
			ctx, cancel := context.WithCancel(ctx)
			s.mu.Lock()
			s.held[m.ID] = cancel
			s.mu.Unlock()
			go func() {
				defer func() {
					s.mu.Lock()
					delete(s.held, m.ID)
					s.mu.Unlock()
					cancel()
				}()
				s.decideCall(ctx, m)
			}()
		default:
			s.forward(m, forwardedCall{method: m.Method})
		}
	case *jsonrpc.Response:
		s.mu.Lock()
		ch, own := s.own[m.ID]
		orig, relayed := s.relayed[m.ID]
		delete(s.own, m.ID)
		delete(s.relayed, m.ID)
		s.mu.Unlock()
		switch {
		case own:
			ch <- m
		case relayed:
			m.ID = orig
			s.send(s.toServer, m)
		default:
			s.cfg.Log.Warn("a response from the client to no request the proxy relayed; dropped", "id", m.ID.Raw())
		}
	}
}

// clientNotification forwards a notification; a cancellation of a call the
// proxy holds ends its wait.
func (s *session) clientNotification(m *jsonrpc.Request) {
	if !strings.HasPrefix(m.Method, "notifications/") {
		// A call without an id (tools/call as a notification, "id": null)
		// would reach the server undecided, and a server may run it.
		s.cfg.Log.Warn("a request without an id was dropped: only notifications/* pass without one, and a call must carry an id to be decided", "method", clip(m.Method, 100))
		return
	}
	if m.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				s.mu.Lock()
				cancel := s.held[id]
				s.mu.Unlock()
				if cancel != nil {
					cancel()
				}
			}
		}
	}
	s.send(s.toServer, m)
}

// claim marks a client request's id outstanding until it is answered;
// false when it is already.
func (s *session) claim(id jsonrpc.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outstanding[id] {
		return false
	}
	s.outstanding[id] = true
	return true
}

// answer sends the response to a client request, whose id is then free.
func (s *session) answer(r *jsonrpc.Response) {
	s.mu.Lock()
	delete(s.outstanding, r.ID)
	s.mu.Unlock()
	s.send(s.toClient, r)
}

// answerError answers a request whose params were refused.
func (s *session) answerError(id jsonrpc.ID, err error) {
	code, msg := int64(jsonrpcInvalidParams), err.Error()
	if pe, ok := err.(*paramsError); ok {
		code = pe.code
	}
	s.cfg.Log.Warn("a request was refused and not forwarded", "id", id.Raw(), "error", msg)
	s.answer(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
}

func (s *session) forward(m *jsonrpc.Request, f forwardedCall) {
	s.mu.Lock()
	s.forwarded[m.ID] = f
	s.mu.Unlock()
	s.send(s.toServer, m)
}

// fromServer handles one message the server sent.
func (s *session) fromServer(ctx context.Context, m jsonrpc.Message) {
	switch m := m.(type) {
	case *jsonrpc.Response:
		if s.ownReply(m) {
			return
		}
		s.mu.Lock()
		f, ok := s.forwarded[m.ID]
		delete(s.forwarded, m.ID)
		s.mu.Unlock()
		if !ok {
			s.cfg.Log.Warn("a response from the server to no request the proxy forwarded; dropped", "id", m.ID.Raw())
			return
		}
		switch {
		case f.method == "tools/list" && m.Error == nil:
			m = s.filterTools(ctx, m)
		case f.decisionID != "":
			s.report(ctx, f.decisionID, m)
		}
		s.answer(m)
	case *jsonrpc.Request:
		if !m.IsCall() {
			s.send(s.toClient, m)
			return
		}
		if m.Method == "sampling/createMessage" {
			flags, err := s.flags(ctx)
			if err != nil || !flags.GetAllowSampling() {
				why := "the agent's policy does not let this server sample the client's model (allow_sampling is not true)"
				if err != nil {
					why = fmt.Sprintf("the policy sidecar could not be asked whether this server may sample the client's model (%v), so it may not", describe(err))
				}
				s.send(s.toServer, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: codeRefused, Message: why}})
				return
			}
		}
		// Relay under an id of the proxy's, so the server's ids never meet
		// the proxy's own requests to the client.
		pid := newID()
		s.mu.Lock()
		s.relayed[pid] = m.ID
		s.mu.Unlock()
		s.send(s.toClient, &jsonrpc.Request{ID: pid, Method: m.Method, Params: m.Params})
	}
}

// codeRefused is the JSON-RPC error code of a request the policy refused.
const codeRefused = -32001

func (s *session) send(to func(jsonrpc.Message) error, m jsonrpc.Message) {
	if err := to(m); err != nil {
		s.cfg.Log.Debug("send failed", "error", err)
	}
}

// decideCall decides a tools/call or resources/read and forwards it,
// answers it with the refusal, or holds it until a person answers.
func (s *session) decideCall(ctx context.Context, m *jsonrpc.Request) {
	c, err := decodeCall(m.Method, m.Params)
	if err != nil {
		s.answerError(m.ID, err)
		return
	}
	tool, args, err := c.decided()
	if err != nil {
		s.answerError(m.ID, err)
		return
	}
	meta := c.progressToken()
	req := &pb.DecideRequest{AgentId: s.cfg.AgentID, SessionId: s.id, ToolName: tool, Server: s.cfg.ServerName,
		Args: args, CallId: "mcp-" + uuid.NewString()}
	if m.Method == "tools/call" {
		if req.ToolDefinition, err = s.toolDefinition(ctx, tool); err != nil {
			s.refuse(m, fmt.Sprintf("%s was not run: its definition could not be checked (%v)", what(m, tool), err), false)
			return
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	resp, err := s.cfg.Sidecar.Decide(callCtx, req)
	cancel()
	if err == nil {
		resp, err = s.definitionAsks(ctx, m, tool, req, resp, meta)
	}
	if err != nil {
		s.refuse(m, fmt.Sprintf("the policy sidecar could not be asked (%s), so %s was not run", describe(err), what(m, tool)), false)
		return
	}
	decision, message, halt := resp.GetDecision(), resp.GetMessage(), resp.GetHalt()
	reportID := resp.GetDecisionId()
	if decision == pb.Decision_DECISION_ASK {
		decision, message, halt, reportID = s.ask(ctx, m, tool, resp, meta)
	}
	switch decision {
	case pb.Decision_DECISION_ALLOW:
		if s.halting.Load() {
			return // decided while a halt was being answered: never forwarded
		}
		// What goes upstream is encoded from what was decided, never the
		// client's bytes; the log ties it to the decision.
		params := c.params()
		s.cfg.Log.Info("call forwarded", "method", m.Method, "tool", tool, "decision_id", resp.GetDecisionId(), "params", clip(string(params), 2048))
		s.forward(&jsonrpc.Request{ID: m.ID, Method: m.Method, Params: params}, forwardedCall{method: m.Method, decisionID: reportID})
	default:
		if message == "" {
			message = fmt.Sprintf("%s was denied by policy", what(m, tool))
		}
		s.refuse(m, message, halt)
	}
}

// ask holds a call the policy asks about: at the client through
// elicitation where the definition allows it, else until a person answers
// through toolpdp (AwaitDecision), with progress notifications while it
// waits. Whatever is not an answered allow is a deny. reportID is the
// decision to report the call's outcome against ("" when the sidecar holds
// no allow for it: an answer given at the client).
func (s *session) ask(ctx context.Context, m *jsonrpc.Request, tool string, resp *pb.DecideResponse, progressToken any) (decision pb.Decision, message string, halt bool, reportID string) {
	s.mu.Lock()
	canElicit := s.elicitation
	s.mu.Unlock()
	if canElicit && resp.GetDefinitionChange() == nil { // a definition change is asked through toolpdp only
		if flags, err := s.flags(ctx); err == nil && flags.GetAsksViaClient() {
			if s.elicit(ctx, tool, resp) {
				return pb.Decision_DECISION_ALLOW, "", false, ""
			}
			return pb.Decision_DECISION_DENY, fmt.Sprintf("the person declined %s at the client", what(m, tool)), false, ""
		}
	}
	for n := 1; ; n++ {
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+askPoll)
		a, err := s.cfg.Sidecar.AwaitDecision(callCtx, &pb.AwaitDecisionRequest{DecisionId: resp.GetDecisionId(), WaitSeconds: int32(askPoll / time.Second)})
		cancel()
		switch {
		case ctx.Err() != nil:
			return pb.Decision_DECISION_DENY, fmt.Sprintf("%s was cancelled while a person was asked", what(m, tool)), false, ""
		case err != nil:
			return pb.Decision_DECISION_DENY, fmt.Sprintf("the policy sidecar could not be asked for the person's answer (%s), so %s was not run", describe(err), what(m, tool)), false, ""
		case a.GetState() == pb.AskState_ASK_STATE_ANSWERED && a.GetDecision() == pb.Decision_DECISION_ALLOW:
			return pb.Decision_DECISION_ALLOW, "", false, resp.GetDecisionId()
		case a.GetState() == pb.AskState_ASK_STATE_ANSWERED:
			return pb.Decision_DECISION_DENY, a.GetMessage(), a.GetHalt(), ""
		case a.GetState() == pb.AskState_ASK_STATE_EXPIRED:
			return pb.Decision_DECISION_DENY, fmt.Sprintf("nobody answered the ask for %s in time, so it was not run", what(m, tool)), false, ""
		}
		if progressToken != nil {
			p := &jsonrpc.Request{Method: "notifications/progress", Params: raw(map[string]any{
				"progressToken": progressToken, "progress": n,
				"message": fmt.Sprintf("waiting for a person to confirm %s (toolpdp decision %s): %s", what(m, tool), resp.GetDecisionId(), clip(resp.GetMessage(), 300)),
			})}
			s.send(s.toClient, p)
		}
	}
}

// elicit asks the person at the client; only an accept is a yes.
func (s *session) elicit(ctx context.Context, tool string, resp *pb.DecideResponse) bool {
	id := newID()
	ch := make(chan *jsonrpc.Response, 1)
	s.mu.Lock()
	s.own[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.own, id)
		s.mu.Unlock()
	}()
	req := &jsonrpc.Request{ID: id, Method: "elicitation/create", Params: raw(map[string]any{
		"message":         fmt.Sprintf("Allow %s on %s? %s", tool, s.cfg.ServerName, clip(resp.GetMessage(), 500)),
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
	})}
	if s.toClient(req) != nil {
		return false
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return false
		}
		var res struct {
			Action string `json:"action"`
		}
		return json.Unmarshal(r.Result, &res) == nil && res.Action == "accept"
	case <-ctx.Done():
		return false
	}
}

// refuse answers a held call: a tools/call with a tool result whose text is
// the message and isError true, so the model reads why; a resources/read
// with an error. A halt ends the session after the answer.
func (s *session) refuse(m *jsonrpc.Request, message string, halt bool) {
	var r *jsonrpc.Response
	if m.Method == "tools/call" {
		r = &jsonrpc.Response{ID: m.ID, Result: raw(map[string]any{
			"content": []map[string]any{{"type": "text", "text": message}}, "isError": true,
		})}
	} else {
		r = &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: codeRefused, Message: message}}
	}
	if halt {
		s.halting.Store(true)
	}
	s.answer(r)
	if halt {
		s.end(message)
	}
}

// filterTools keeps the tools of a tools/list answer that some call could
// allow or ask. A list that cannot be filtered is not passed on.
func (s *session) filterTools(ctx context.Context, m *jsonrpc.Response) *jsonrpc.Response {
	var result map[string]json.RawMessage
	var tools []json.RawMessage
	if err := json.Unmarshal(m.Result, &result); err != nil {
		return s.listError(m, "the server's tools/list answer is not an object")
	}
	if err := json.Unmarshal(result["tools"], &tools); err != nil && len(result["tools"]) > 0 {
		return s.listError(m, "the server's tools/list answer has no list of tools")
	}
	refs := make([]*pb.ToolRef, 0, len(tools))
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) != nil || named.Name == "" {
			return s.listError(m, "the server listed a tool with no name")
		}
		refs = append(refs, &pb.ToolRef{Name: named.Name, Server: s.cfg.ServerName, Definition: string(t)})
		s.defs.note(named.Name, t)
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	resp, err := s.cfg.Sidecar.FilterTools(callCtx, &pb.FilterToolsRequest{AgentId: s.cfg.AgentID, SessionId: s.id, Tools: refs})
	if err != nil {
		return s.listError(m, fmt.Sprintf("the policy sidecar could not be asked which tools to list (%s)", describe(err)))
	}
	visible := map[string]bool{}
	for _, v := range resp.GetVisible() {
		visible[v.GetName()] = true
	}
	kept := make([]json.RawMessage, 0, len(tools))
	for i, t := range tools {
		if visible[refs[i].GetName()] {
			kept = append(kept, t)
		}
	}
	for _, h := range resp.GetHidden() {
		s.cfg.Log.Info("tool hidden", "tool", h.GetTool().GetName(), "reason", h.GetReason())
	}
	result["tools"], _ = json.Marshal(kept)
	out, _ := json.Marshal(result)
	return &jsonrpc.Response{ID: m.ID, Result: out}
}

func (s *session) listError(m *jsonrpc.Response, why string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: why + "; no tools are listed"}}
}

// flags asks the sidecar what the definition lets the proxy do.
func (s *session) flags(ctx context.Context) (*pb.FilterToolsResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.cfg.Sidecar.FilterTools(callCtx, &pb.FilterToolsRequest{AgentId: s.cfg.AgentID, SessionId: s.id})
}

// report tells the sidecar how an allowed call ended: a JSON-RPC error or
// a tool result with isError counts toward the session's cap.
func (s *session) report(ctx context.Context, decisionID string, m *jsonrpc.Response) {
	isErr, text := m.Error != nil, ""
	if isErr {
		text = m.Error.Error()
	} else {
		var res struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(m.Result, &res) == nil && res.IsError {
			isErr, text = true, "the tool reported an error"
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	r, err := s.cfg.Sidecar.ReportResult(callCtx, &pb.ReportResultRequest{DecisionId: decisionID, IsError: isErr, Error: clip(text, 1024)})
	if err != nil {
		s.cfg.Log.Warn("the call's result could not be reported", "decision_id", decisionID, "error", err)
		return
	}
	if r.GetHalt() {
		s.cfg.Log.Warn("the session reached its cap of consecutive failures", "session", s.id)
	}
}

func what(m *jsonrpc.Request, tool string) string {
	if m.Method == "resources/read" {
		return "the resource read"
	}
	return fmt.Sprintf("the tool %q", clip(tool, 100))
}

func describe(err error) string {
	if st, ok := status.FromError(err); ok {
		return clip(fmt.Sprintf("%s: %s", st.Code(), st.Message()), 300)
	}
	return clip(err.Error(), 300)
}

// raw is v as JSON; v is always a map of JSON values here.
func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func newID() jsonrpc.ID {
	id, _ := jsonrpc.MakeID("toolpdp-" + uuid.NewString())
	return id
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
