package mcpproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/protobuf/proto"
)

func TestDecodeCallRefuses(t *testing.T) {
	for _, c := range []struct {
		method, params string
		code           int64
		want           string
	}{
		{"tools/call", `{"name":"get-env","NAME":"echo","arguments":{}}`, jsonrpcInvalidRequest, `params: NAME: the key "NAME" equals the key "name" ignoring case`},
		{"tools/call", `{"name":"echo","arguments":{"message":"benign"},"ARGUMENTS":{"message":"real"}}`, jsonrpcInvalidRequest, "params: ARGUMENTS"},
		{"tools/call", `{"name":"echo","arguments":{"message":"a","Message":"b"}}`, jsonrpcInvalidRequest, "params: arguments.Message"},
		{"resources/read", `{"uri":"demo://resource/static/document/architecture.md","URI":"file:///etc/passwd"}`, jsonrpcInvalidRequest, "params: URI"},
		{"prompts/get", `{"name":"simple-prompt","Name":"x"}`, jsonrpcInvalidRequest, "params: Name"},
		{"tools/call", "{\"name\":\"echo\",\"arguments\":{\"message\":\"\xc3\"}}", jsonrpcInvalidRequest, "not valid UTF-8"},
		{"tools/call", `{"name":"echo","inputResponses":{}}`, jsonrpcInvalidParams, "params.inputResponses: not a parameter"},
		{"tools/call", `{"arguments":{}}`, jsonrpcInvalidParams, "params.name: required"},
		{"tools/call", `{"name":"echo","arguments":[1]}`, jsonrpcInvalidParams, "params.arguments: not an object"},
		{"tools/call", `{"name":"echo","arguments":{"n":1e999}}`, jsonrpcInvalidParams, "arguments.n: the number 1e999"},
		{"resources/read", `{}`, jsonrpcInvalidParams, "params.uri: required"},
		{"tools/call", `{"name":"get-sum","arguments":{"a":9007199254740993,"b":1}}`, jsonrpcInvalidParams, "arguments.a: the number 9007199254740993 cannot be decided exactly"},
		{"tools/call", `{"name":"get-sum","arguments":{"a":[12345678901234567890123]}}`, jsonrpcInvalidParams, "cannot be decided exactly"},
	} {
		call, err := decodeCall(c.method, json.RawMessage(c.params))
		if err == nil {
			_, _, err = call.decided()
		}
		pe, ok := err.(*paramsError)
		if !ok || pe.code != c.code || !strings.Contains(pe.msg, c.want) {
			t.Errorf("%s %q: %v: want code %d and %q", c.method, c.params, err, c.code, c.want)
		}
	}
}

func TestParamsEncodedAnew(t *testing.T) {
	c, err := decodeCall("tools/call", json.RawMessage(`{"_meta":{"progressToken":7},"name":"get-sum","arguments":{"a":12345678901234567890123,"b":0.1000000000000000055511151231257827}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"progressToken":7},"arguments":{"a":12345678901234567890123,"b":0.1000000000000000055511151231257827},"name":"get-sum"}`
	if got := string(c.params()); got != want {
		t.Fatalf("forwarded %s\nwant      %s", got, want)
	}
}

// FuzzForwarded checks that what is forwarded is what was decided: params
// the gateway accepts re-encode to bytes that read back, strictly, as the
// same values; readers of the client's own bytes — encoding/json into a
// map (exact keys) and into a struct (keys matched ignoring case, as the
// gateway once read them) — see the name, uri and arguments decided; and
// the policy's view of the arguments is the same from either.
func FuzzForwarded(f *testing.F) {
	for _, seed := range []string{
		`{"name":"echo","arguments":{"message":"hi"}}`,
		`{"name":"get-env","NAME":"echo","arguments":{}}`,
		`{"name":"echo","arguments":{"message":"benign"},"ARGUMENTS":{"message":"real"}}`,
		`{"uri":"demo://resource/static/document/architecture.md","URI":"file:///etc/passwd"}`,
		`{"_meta":{"progressToken":"p"},"uri":"demo://x"}`,
		`{"name":"get-sum","arguments":{"a":1e2,"b":-0.0,"c":[1,{"k":"\u212a"}],"d":null,"e":true}}`,
		`{"name":"n\u0000\ud83d\ude00","arguments":{"ſ":1,"s":2}}`,
		`{"name":"echo"} x`,
	} {
		for m := range 3 {
			f.Add(uint8(m), []byte(seed))
		}
	}
	methods := []string{"tools/call", "resources/read", "prompts/get"}
	f.Fuzz(func(t *testing.T, which uint8, params []byte) {
		method := methods[int(which)%len(methods)]
		c, err := decodeCall(method, params)
		if err != nil {
			return
		}
		fwd := c.params()
		again, err := decodeCall(method, fwd)
		if err != nil {
			t.Fatalf("the forwarded params %s do not read back: %v", fwd, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("decided %#v\nforwarded %s, which reads as %#v", c, fwd, again)
		}
		tool, args, derr := c.decided()
		tool2, args2, derr2 := again.decided()
		if (derr == nil) != (derr2 == nil) || tool != tool2 || !proto.Equal(args, args2) {
			t.Fatalf("the policy's view differs: %q %v %v / %q %v %v", tool, args, derr, tool2, args2, derr2)
		}

		// A plain reader of the client's bytes, exact keys.
		var exact map[string]any
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.UseNumber()
		if len(bytes.TrimSpace(params)) > 0 && string(bytes.TrimSpace(params)) != "null" {
			if err := dec.Decode(&exact); err != nil {
				t.Fatalf("accepted params encoding/json cannot read: %v", err)
			}
		}
		if method == "resources/read" {
			if exact["uri"] != c.uri {
				t.Fatalf("the client's bytes name the uri %v, the gateway decided %q", exact["uri"], c.uri)
			}
		} else {
			if exact["name"] != c.name {
				t.Fatalf("the client's bytes name %v, the gateway decided %q", exact["name"], c.name)
			}
			if a, _ := exact["arguments"].(map[string]any); !reflect.DeepEqual(a, c.arguments) {
				t.Fatalf("the client's bytes carry the arguments %#v, the gateway decided %#v", a, c.arguments)
			}
		}
		// A reader matching keys ignoring case.
		var folded struct {
			Name      string          `json:"name"`
			URI       string          `json:"uri"`
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.Unmarshal(params, &folded)
		if folded.Name != c.name || folded.URI != c.uri {
			t.Fatalf("a case-insensitive reader sees name %q uri %q, the gateway decided %q %q", folded.Name, folded.URI, c.name, c.uri)
		}
	})
}

func TestReadClientRefusals(t *testing.T) {
	for _, c := range []struct {
		in                    string
		asError, refusedUnder string // "" none, "-" without an id
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","NAME":"b"}}`, "", "3"},
		{`{"jsonrpc":"2.0","id":3,"ID":4,"method":"ping"}`, "", "-"},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"REQUESTID":2}}`, "", ""},
		{`{"jsonrpc":"2.0","id":"e1","result":{"action":"accept","ACTION":"decline"}}`, "e1", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "-"},
		// Ids that would be read as another id, and null.
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "", "-"},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, "", "-"},
		{`{"jsonrpc":"2.0","id":1e0,"method":"ping"}`, "", "-"},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}`, "", "-"},
	} {
		m, refusal, err := readClient([]byte(c.in))
		if err == nil {
			t.Errorf("%s: accepted", c.in)
			continue
		}
		switch {
		case c.refusedUnder == "" && refusal != nil, c.refusedUnder == "-" && (refusal == nil || refusal.ID.IsValid()),
			c.refusedUnder != "" && c.refusedUnder != "-" && (refusal == nil || fmt.Sprint(refusal.ID.Raw()) != c.refusedUnder):
			t.Errorf("%s: refusal %+v, want under %q", c.in, refusal, c.refusedUnder)
		}
		r, _ := m.(*jsonrpc.Response)
		if (c.asError == "") != (m == nil) || (r != nil && (fmt.Sprint(r.ID.Raw()) != c.asError || r.Error == nil)) {
			t.Errorf("%s: passed on %+v, want an error response under %q", c.in, m, c.asError)
		}
	}
}

func TestScreenServer(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(2))
	pass, reply, err := screenServer(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[{"name":"get-env","NAME":"echo"}]}`)})
	r, _ := pass.(*jsonrpc.Response)
	if err == nil || reply != nil || r == nil || r.ID != id || r.Error == nil || !strings.Contains(r.Error.Error(), "result: tools[0].NAME") {
		t.Errorf("an ambiguous answer: %+v %+v %v", pass, reply, err)
	}
	pass, reply, err = screenServer(&jsonrpc.Request{ID: id, Method: "elicitation/create", Params: json.RawMessage(`{"message":"a","MESSAGE":"b"}`)})
	if err == nil || pass != nil || reply == nil || reply.ID != id {
		t.Errorf("an ambiguous request: %+v %+v %v", pass, reply, err)
	}
	ok := &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[]}`)}
	if pass, reply, err := screenServer(ok); pass != ok || reply != nil || err != nil {
		t.Errorf("a plain answer: %+v %+v %v", pass, reply, err)
	}
}
