// Package console is the approvers' web console: pending asks appear as
// they arrive, each call shown in full (every character visible, secrets
// masked until a person asks to see them), answered allow, allow and
// remember, or deny with a message, beside the session's recent
// decisions. Pages and a JSON API under /api/, html/template and one small
// embedded script, no build step. Every request is authenticated by an
// approver token — an Authorization: Bearer header, or an HttpOnly cookie
// a login form exchanges the token for — unless the console is served on
// a unix socket alone (Open).
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolpdp/toolpdp/internal/strictjson"
	"github.com/toolpdp/toolpdp/pdp"
	"github.com/toolpdp/toolpdp/pdp/approver"
	"github.com/toolpdp/toolpdp/pdp/askview"
	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

//go:embed static
var static embed.FS

var pages = template.Must(template.ParseFS(static, "static/*.html"))

// Bounds of what the console holds.
const (
	MaxSessions    = 1000             // login sessions; the oldest go first
	SessionTTL     = 12 * time.Hour   // a login lasts this long
	MaxStreams     = 100              // live-update streams open at once
	keepAlive      = 15 * time.Second // a comment on each stream, so proxies keep it open
	recentPerAsk   = 10               // a session's decisions shown beside an ask
	cookieName     = "toolpdp_console"
	maxConfirmBody = 16 << 10
)

// Config shapes a console.
type Config struct {
	Engine    *pdp.Engine
	Tokens    *approver.Tokens // who may answer; nil or empty: only with Open
	Open      bool             // no token needed: served on a unix socket only, in a directory agents do not mount
	Workspace bool             // workspace binding is on: an approver sees its token's workspace
	Logger    *slog.Logger
}

// Console is the console's HTTP handler.
type Console struct {
	cfg  Config
	mux  *http.ServeMux
	mu   sync.Mutex
	logs map[string]login // cookie value -> who logged in

	streams chan struct{} // one slot per open stream
	subMu   sync.Mutex
	subs    map[chan struct{}]string // stream -> its workspace
}

type login struct {
	name, workspace string
	expires         time.Time
}

// approverOf is who a request authenticated as.
type approverOf struct{ name, workspace string }

// New builds a console; it registers on the engine to hear of asks.
func New(c Config) (*Console, error) {
	if !c.Open && !c.Tokens.Enabled() {
		return nil, errors.New("the console needs approver tokens (--approver-token-file), or a unix socket alone")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Console{cfg: c, mux: http.NewServeMux(), logs: map[string]login{}, streams: make(chan struct{}, MaxStreams), subs: map[chan struct{}]string{}}
	s.mux.Handle("GET /static/", http.FileServerFS(static))
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /api/pending", s.authed(s.pending))
	s.mux.HandleFunc("GET /api/ask", s.authed(s.ask))
	s.mux.HandleFunc("POST /api/confirm", s.authed(s.confirm))
	s.mux.HandleFunc("GET /api/events", s.authed(s.events))
	c.Engine.OnAsk(s.changed)
	return s, nil
}

func (s *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY") // a framed console could be clicked through
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// who is the approver a request authenticated as: a bearer token, or a
// login cookie.
func (s *Console) who(r *http.Request) (approverOf, bool) {
	if s.cfg.Open {
		return approverOf{name: "console (unix socket)"}, true
	}
	if tok, ok := s.cfg.Tokens.Identify(approver.Bearer(r.Header.Get("Authorization"))); ok {
		return s.bound(tok.Name, tok.Workspace), true
	}
	if c, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		l, ok := s.logs[c.Value]
		s.mu.Unlock()
		if ok && time.Now().Before(l.expires) {
			return approverOf{name: l.name, workspace: l.workspace}, true
		}
	}
	return approverOf{}, false
}

func (s *Console) bound(name, ws string) approverOf {
	if !s.cfg.Workspace {
		ws = ""
	}
	return approverOf{name: name + " (console)", workspace: ws}
}

// authed serves h to authenticated requests only; a request that changes
// something and came with a cookie must also carry the console's own
// header, which a page of another site cannot send.
func (s *Console) authed(h func(http.ResponseWriter, *http.Request, approverOf)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.who(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolpdp console"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "an approver token is required: Authorization: Bearer TOKEN, or log in at /"})
			return
		}
		if r.Method != http.MethodGet && r.Header.Get("Authorization") == "" && r.Header.Get("X-Toolpdp-Console") != "1" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "a cookie-authenticated change needs the X-Toolpdp-Console header the console's page sends"})
			return
		}
		h(w, r, who)
	}
}

func (s *Console) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if _, ok := s.who(r); !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_ = pages.ExecuteTemplate(w, "login.html", map[string]any{"Failed": r.URL.Query().Get("failed") != ""})
		return
	}
	_ = pages.ExecuteTemplate(w, "console.html", nil)
}

func (s *Console) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Open {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	tok, ok := s.cfg.Tokens.Identify(r.PostFormValue("token"))
	if !ok {
		http.Redirect(w, r, "/?failed=1", http.StatusSeeOther)
		return
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	id := hex.EncodeToString(raw)
	who := s.bound(tok.Name, tok.Workspace)
	s.mu.Lock()
	now := time.Now()
	for k, l := range s.logs {
		if now.After(l.expires) || len(s.logs) >= MaxSessions {
			delete(s.logs, k)
		}
	}
	s.logs[id] = login{name: who.name, workspace: who.workspace, expires: now.Add(SessionTTL)}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
		MaxAge: int(SessionTTL.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Console) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.logs, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

var askJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// shown is an ask with the session's recent decisions beside it.
type shown struct {
	Ask    json.RawMessage `json:"ask"`
	Recent []recent        `json:"recent"`
}

type recent struct {
	DecisionID string `json:"decision_id"`
	ToolName   string `json:"tool_name"`
	Decision   string `json:"decision"`
	Answer     string `json:"answer,omitempty"`
	Message    string `json:"message,omitempty"`
	AgeMillis  int64  `json:"age_millis"`
}

func (s *Console) show(a *pb.PendingAsk, ws string) shown {
	raw, _ := askJSON.Marshal(a)
	out := shown{Ask: raw, Recent: []recent{}}
	c, ok := s.cfg.Engine.Ask(context.Background(), ws, a.DecisionId)
	if !ok {
		return out
	}
	now := time.Now()
	for _, d := range s.cfg.Engine.RecentDecisions(ws, c.AgentID, c.SessionID, recentPerAsk+1) {
		if d.DecisionID == c.DecisionID {
			continue
		}
		r := recent{DecisionID: d.DecisionID, ToolName: askview.Visible(d.ToolName), Decision: policy.EffectName(d.Decision), Message: askview.Visible(d.Message),
			AgeMillis: max(now.Sub(d.Created).Milliseconds(), 0)}
		if d.Answer != pb.Decision_DECISION_UNSPECIFIED {
			r.Answer = policy.EffectName(d.Answer)
		}
		out.Recent = append(out.Recent, r)
	}
	if len(out.Recent) > recentPerAsk {
		out.Recent = out.Recent[:recentPerAsk]
	}
	return out
}

func (s *Console) pending(w http.ResponseWriter, r *http.Request, who approverOf) {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("page_size"))
	asks, next, err := s.cfg.Engine.ShowPending(r.Context(), who.workspace, &pb.ListPendingRequest{AgentId: q.Get("agent_id"), PageSize: int32(min(max(size, 0), pdp.MaxPageSize)),
		PageToken: q.Get("page_token"), Reveal: q.Get("reveal") == "1"})
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Asks []shown `json:"asks"`
		Next string  `json:"next_page_token"`
		Who  string  `json:"approver"`
	}{Asks: []shown{}, Next: next, Who: askview.Visible(who.name)}
	for _, a := range asks {
		out.Asks = append(out.Asks, s.show(a, who.workspace))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Console) ask(w http.ResponseWriter, r *http.Request, who approverOf) {
	q := r.URL.Query()
	c, ok := s.cfg.Engine.Ask(r.Context(), who.workspace, q.Get("id"))
	if !ok || c.Decision != pb.Decision_DECISION_ASK || c.Answer != pb.Decision_DECISION_UNSPECIFIED {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no pending ask with that id"})
		return
	}
	bound, _ := strconv.Atoi(q.Get("max_argument_bytes"))
	writeJSON(w, http.StatusOK, s.show(s.cfg.Engine.ShowAsk(c, askview.Options{Reveal: q.Get("reveal") == "1", Bound: bound}), who.workspace))
}

func (s *Console) confirm(w http.ResponseWriter, r *http.Request, who approverOf) {
	var in struct {
		DecisionID  string `json:"decision_id"`
		Result      string `json:"result"`
		DenyMessage string `json:"deny_message"`
		Remember    bool   `json:"remember"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfirmBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body could not be read: " + err.Error()})
		return
	}
	// Read strictly: a "result" and a "RESULT" must not be one answer to
	// this reader and another to the next.
	if err := strictjson.Check(body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body is not a confirmation: " + err.Error()})
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body is not a confirmation: " + err.Error()})
		return
	}
	if len(in.DecisionID) > 256 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decision_id: too long"})
		return
	}
	resp, err := s.cfg.Engine.Confirm(r.Context(), who.workspace, who.name, &pb.ConfirmRequest{DecisionId: in.DecisionID, Result: in.Result,
		DenyMessage: in.DenyMessage, Remember: in.Remember})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"decision": policy.EffectName(resp.Decision), "halt": resp.Halt})
}

// events streams a line whenever an ask of the approver's workspace
// arrives or is answered (server-sent events); the page then reloads the
// list. Streams are bounded; the page falls back to polling.
func (s *Console) events(w http.ResponseWriter, r *http.Request, who approverOf) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "too many live consoles; this page polls instead"})
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "streaming unsupported"})
		return
	}
	ch := make(chan struct{}, 1)
	s.subMu.Lock()
	s.subs[ch] = who.workspace
	s.subMu.Unlock()
	defer func() {
		s.subMu.Lock()
		delete(s.subs, ch)
		s.subMu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "retry: 2000\n\n")
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ch:
			_, _ = io.WriteString(w, "data: change\n\n")
		case <-tick.C:
			_, _ = io.WriteString(w, ": keep-alive\n\n")
		}
		fl.Flush()
	}
}

// changed wakes every stream of the event's workspace; it never blocks.
func (s *Console) changed(ev pdp.AskEvent) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for ch, ws := range s.subs {
		if ws == ev.Call.Workspace {
			select {
			case ch <- struct{}{}:
			default: // a change is already signalled
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var e *pdp.Error
	if errors.As(err, &e) {
		code = map[pdp.Code]int{pdp.InvalidArgument: http.StatusBadRequest, pdp.NotFound: http.StatusNotFound, pdp.FailedPrecondition: http.StatusConflict, pdp.PermissionDenied: http.StatusForbidden}[e.Code]
		if code == 0 {
			code = http.StatusInternalServerError
		}
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
