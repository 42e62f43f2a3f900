package mcpproxy

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the HTTP front.
const (
	maxSessions       = 1024      // MCP sessions held at once
	maxQueued         = 256       // server messages waiting for the client's GET stream
	maxHTTPBodyBytes  = 4 << 20   // one POSTed message
	responseWaitLimit = time.Hour // a held call waits for a person at most this long
)

const sessionHeader = "Mcp-Session-Id"

// HTTP is a streamable HTTP endpoint in front of an MCP server's URL: each
// MCP session of a client is one session upstream (the official SDK's
// client transport) and one toolpdp session. A POSTed request is answered
// with its response as JSON; what the server sends unprompted (notifications,
// its requests to the client, progress while a person is asked) goes to the
// client's GET stream.
type HTTP struct {
	cfg      Config
	upstream string

	mu       sync.Mutex
	sessions map[string]*httpSession
}

type httpSession struct {
	gate     *session
	conn     mcp.Connection // upstream
	cancel   context.CancelFunc
	mu       sync.Mutex
	waiting  map[jsonrpc.ID]chan *jsonrpc.Response // POSTed requests awaiting their response
	queue    []jsonrpc.Message                     // for the GET stream
	notify   chan struct{}
	ended    bool
	endCause string
}

// NewHTTP returns the handler for an upstream streamable HTTP URL.
func NewHTTP(cfg Config, upstream string) (*HTTP, error) {
	if upstream == "" {
		return nil, fmt.Errorf("--upstream-url: required")
	}
	return &HTTP{cfg: cfg.withDefaults(), upstream: upstream, sessions: map[string]*httpSession{}}, nil
}

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.stream(w, r)
	case http.MethodDelete:
		if s := h.lookup(r); s != nil {
			h.close(r.Header.Get(sessionHeader), s)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (h *HTTP) lookup(r *http.Request) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[r.Header.Get(sessionHeader)]
}

func (h *HTTP) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBodyBytes))
	if err != nil {
		http.Error(w, "the message could not be read: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	msg, refusal, err := readClient(body)
	if err != nil {
		h.cfg.Log.Warn("a client message was refused", "error", err)
		// A request refused under its id is answered as JSON-RPC answers
		// it; anything else is a bad request.
		code := http.StatusOK
		if refusal == nil || !refusal.ID.IsValid() {
			code = http.StatusBadRequest
		}
		if refusal == nil {
			refusal = &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}
		}
		if s := h.lookup(r); s != nil && msg != nil {
			s.gate.fromClient(context.Background(), msg) // a refused answer, passed on as an error
		}
		writeResponse(w, code, refusal)
		return
	}
	s := h.lookup(r)
	if s == nil {
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != "initialize" {
			http.Error(w, "unknown or missing Mcp-Session-Id: start with initialize", http.StatusNotFound)
			return
		}
		var id string
		if s, id, err = h.open(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set(sessionHeader, id)
	}
	req, isCall := msg.(*jsonrpc.Request)
	if !isCall || !req.IsCall() {
		s.gate.fromClient(context.Background(), msg)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ch := make(chan *jsonrpc.Response, 1)
	s.mu.Lock()
	_, dup := s.waiting[req.ID]
	if !dup {
		s.waiting[req.ID] = ch
	}
	s.mu.Unlock()
	if dup {
		// The POST waiting under this id keeps it; this one is refused,
		// never matched to the other's answer.
		writeResponse(w, http.StatusOK, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest,
			Message: fmt.Sprintf("the request id %v is still outstanding (a request under it has not been answered); it was refused and not forwarded", req.ID.Raw())}})
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.waiting, req.ID)
		s.mu.Unlock()
	}()
	// The request's context ends the wait when the client goes away.
	s.gate.fromClient(r.Context(), msg)
	select {
	case resp := <-ch:
		writeResponse(w, http.StatusOK, resp)
	case <-r.Context().Done():
	case <-time.After(responseWaitLimit):
		http.Error(w, "no response in time", http.StatusGatewayTimeout)
	}
}

func writeResponse(w http.ResponseWriter, code int, resp *jsonrpc.Response) {
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// open starts a session: the upstream connection and its reader.
func (h *HTTP) open(ctx context.Context) (*httpSession, string, error) {
	h.mu.Lock()
	full := len(h.sessions) >= maxSessions
	h.mu.Unlock()
	if full {
		return nil, "", fmt.Errorf("%d MCP sessions are open already; close one first", maxSessions)
	}
	connCtx, cancel := context.WithCancel(context.Background())
	conn, err := (&mcp.StreamableClientTransport{Endpoint: h.upstream}).Connect(connCtx)
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("the upstream MCP server could not be reached: %w", err)
	}
	id := rand.Text()
	s := &httpSession{conn: conn, cancel: cancel, waiting: map[jsonrpc.ID]chan *jsonrpc.Response{}, notify: make(chan struct{}, 1)}
	s.gate = newSession(h.cfg, "mcp-"+uuid.NewString())
	s.gate.toServer = func(m jsonrpc.Message) error { return conn.Write(connCtx, m) }
	s.gate.toClient = s.deliver
	s.gate.end = func(reason string) {
		s.mu.Lock()
		s.ended, s.endCause = true, reason
		s.mu.Unlock()
		go func() {
			// Let the refusal that reached the cap be delivered first.
			time.Sleep(100 * time.Millisecond)
			h.close(id, s)
		}()
	}
	h.mu.Lock()
	h.sessions[id] = s
	h.mu.Unlock()
	go func() {
		for {
			m, err := conn.Read(connCtx)
			if err != nil {
				h.close(id, s)
				return
			}
			s.gate.fromServerScreened(connCtx, m)
		}
	}()
	return s, id, nil
}

// deliver routes a message for the client: a response to the POST that
// waits for it, anything else to the GET stream's bounded queue.
func (s *httpSession) deliver(m jsonrpc.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := m.(*jsonrpc.Response); ok {
		if ch, ok := s.waiting[r.ID]; ok {
			ch <- r
			return nil
		}
	}
	if len(s.queue) >= maxQueued {
		return fmt.Errorf("the client's stream is %d messages behind; dropped", maxQueued)
	}
	s.queue = append(s.queue, m)
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return nil
}

// stream is the client's GET stream: server-sent events of the messages
// the server sends unprompted.
func (h *HTTP) stream(w http.ResponseWriter, r *http.Request) {
	s := h.lookup(r)
	if s == nil {
		http.Error(w, "unknown or missing Mcp-Session-Id", http.StatusNotFound)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		s.mu.Lock()
		queued := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, m := range queued {
			b, err := jsonrpc.EncodeMessage(m)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", b); err != nil {
				return
			}
		}
		flusher.Flush()
		select {
		case <-s.notify:
		case <-r.Context().Done():
			return
		}
	}
}

func (h *HTTP) close(id string, s *httpSession) {
	h.mu.Lock()
	if h.sessions[id] == s {
		delete(h.sessions, id)
	}
	h.mu.Unlock()
	s.cancel()
	_ = s.conn.Close()
	s.mu.Lock()
	for rid, ch := range s.waiting {
		select {
		case ch <- &jsonrpc.Response{ID: rid, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the MCP session ended: " + s.endCause}}:
		default:
		}
	}
	s.mu.Unlock()
}
