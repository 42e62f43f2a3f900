package mcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolpdp/toolpdp/internal/strictjson"
)

// readClient reads one message the client sent, strictly: the whole
// message — envelope and params at any depth — must be one reading for
// every reader (see strictjson), since the gateway decides on what it read
// and the server acts on what it reads. A message that is not is refused:
// refusal is the JSON-RPC error to answer it with, or nil where nothing can
// be answered (a notification or a response from the client, which is
// dropped). A batch is refused whole: each call must be decided on its own,
// and MCP has had no batches since 2025-06-18.
func readClient(b []byte) (msg jsonrpc.Message, refusal *jsonrpc.Response, err error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = fmt.Errorf("JSON-RPC batches are refused whole: send each message on its own, so that each call is decided on its own")
		return nil, &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}, err
	}
	if serr := strictjson.Check(trimmed); serr != nil {
		err = fmt.Errorf("the message was refused and not forwarded: %w", serr)
		return nil, refuseEnvelope(trimmed, err), err
	}
	msg, derr := jsonrpc.DecodeMessage(trimmed)
	if derr != nil {
		err = fmt.Errorf("not a JSON-RPC message: %v", derr)
		return nil, refuseEnvelope(trimmed, err), err
	}
	return msg, nil, nil
}

// refuseEnvelope is the answer to a refused message: an error under its
// id when it is a request whose id is unambiguous, one without an id when
// the id itself is in doubt, none for a notification or a response.
func refuseEnvelope(b []byte, err error) *jsonrpc.Response {
	id, idKeys, method := envelope(b)
	switch {
	case !method && idKeys <= 1:
		return nil
	case idKeys == 1 && id.IsValid():
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}
	case idKeys == 0:
		return nil
	}
	return &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpcInvalidRequest, Message: err.Error()}}
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
