package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolpdp/toolpdp/internal/strictjson"
)

// readClient reads one message the client sent, strictly: the whole
// message — envelope and params at any depth — must be one reading for
// every reader (see strictjson), since the gateway decides on what it read
// and the server acts on what it reads. A message that is not is refused
// (err says why): refusal is the JSON-RPC error to answer it with, nil
// where nothing can be answered. A refused response to a request of the
// proxy's or the server's still ends that request: msg is then an error
// response under its id, so an elicitation whose answer was refused is a
// decline, not a wait. A batch is refused whole: each call must be decided
// on its own, and MCP has had no batches since 2025-06-18.
func readClient(b []byte) (msg jsonrpc.Message, refusal *jsonrpc.Response, err error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = fmt.Errorf("JSON-RPC batches are refused whole: send each message on its own, so that each call is decided on its own")
		return nil, &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}, err
	}
	if serr := strictjson.Check(trimmed); serr != nil {
		err = fmt.Errorf("the message was refused and not forwarded: %w", serr)
		msg, refusal = refuseEnvelope(trimmed, err)
		return msg, refusal, err
	}
	if why := idProblem(trimmed); why != "" {
		err = fmt.Errorf("the message was refused and not forwarded: id: %s", why)
		return nil, &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}, err
	}
	msg, derr := jsonrpc.DecodeMessage(trimmed)
	if derr != nil {
		err = fmt.Errorf("not a JSON-RPC message: %v", derr)
		msg, refusal = refuseEnvelope(trimmed, err)
		return msg, refusal, err
	}
	return msg, nil, nil
}

// refuseEnvelope is what a refused message becomes: a request whose id
// is unambiguous is answered with an error under it, one whose id is in
// doubt with an error without one; a response whose id is unambiguous
// becomes an error response to pass on; a notification, nothing.
func refuseEnvelope(b []byte, err error) (asError jsonrpc.Message, refusal *jsonrpc.Response) {
	id, idKeys, method := envelope(b)
	e := &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}
	switch {
	case !method && idKeys == 1 && id.IsValid():
		return &jsonrpc.Response{ID: id, Error: e}, nil
	case !method && idKeys <= 1, method && idKeys == 0:
		return nil, nil
	case idKeys == 1 && id.IsValid():
		return nil, &jsonrpc.Response{ID: id, Error: e}
	}
	return nil, &jsonrpc.Response{Error: e}
}

// envelope reads just the top level of a message that failed the strict
// reading: the id under the key "id" (when that is the only key equal to
// it ignoring case), how many such keys there are, and whether a "method"
// key is present (a request, not a response).
func envelope(b []byte) (id jsonrpc.ID, idKeys int, method bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc.ID{}, 0, false
	}
	var exact any
	exactSeen := false
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		switch {
		case strings.EqualFold(key, "id"):
			idKeys++
			if key == "id" {
				exactSeen = json.Unmarshal(v, &exact) == nil
			}
		case strings.EqualFold(key, "method"):
			method = true
		}
	}
	if idKeys == 1 && exactSeen {
		if id, err := jsonrpc.MakeID(exact); err == nil {
			return id, idKeys, method
		}
	}
	return jsonrpc.ID{}, idKeys, method
}

// screenServer reads what the server sends as strictly as what the client
// sends: the proxy decides on a tools/list answer (which tools are
// listed) and relays the server's requests, so an answer whose result,
// or a request whose params, reads two ways is not passed on. A refused
// answer becomes an error answer to the client's request; a refused
// request is answered to the server with an error (reply); a refused
// notification is dropped.
func screenServer(m jsonrpc.Message) (pass jsonrpc.Message, reply *jsonrpc.Response, err error) {
	switch m := m.(type) {
	case *jsonrpc.Response:
		if len(m.Result) == 0 {
			return m, nil, nil
		}
		if serr := strictjson.Check(m.Result); serr != nil {
			err = fmt.Errorf("the MCP server's answer was refused: result: %w", serr)
			return &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}, nil, err
		}
	case *jsonrpc.Request:
		if len(m.Params) == 0 {
			return m, nil, nil
		}
		if serr := strictjson.Check(m.Params); serr != nil {
			err = fmt.Errorf("the MCP server's %s was refused: params: %w", m.Method, serr)
			if m.IsCall() {
				reply = &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}
			}
			return nil, reply, err
		}
	}
	return m, nil, nil
}

// fromServerScreened is fromServer behind screenServer.
func (s *session) fromServerScreened(ctx context.Context, m jsonrpc.Message) {
	pass, reply, err := screenServer(m)
	if err != nil {
		s.cfg.Log.Warn("a server message was refused", "error", err)
	}
	if reply != nil {
		s.send(s.toServer, reply)
	}
	if pass != nil {
		s.fromServer(ctx, pass)
	}
}

// maxExactID bounds a numeric id: beyond 2^53 a reader may round it.
const maxExactID = 1 << 53

// idProblem says why a message's id cannot be kept as written, if it
// cannot: a number that is not an integer within ±2^53 would be read as
// another id (1.5 as 1, 2^53+1 as 2^53), so an answer would be matched to
// another request; null is no id a request can be answered under.
func idProblem(b []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return ""
	}
	raw, ok := top["id"]
	if !ok {
		return ""
	}
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "null":
		if _, isRequest := top["method"]; isRequest {
			return "null: a request needs an id to be answered under, and a notification has none"
		}
		return ""
	case t == "" || t[0] == '"' || t[0] == '{' || t[0] == '[' || t == "true" || t == "false":
		return ""
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || strings.ContainsAny(t, ".eE+") || n > maxExactID || n < -maxExactID {
		return fmt.Sprintf("%s is not an integer within ±2^53: it would be read as another id", clip(t, 40))
	}
	return ""
}
