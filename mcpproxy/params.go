package mcpproxy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/strictjson"
)

// A call is what the gateway read from a tools/call, resources/read or
// prompts/get: the values it decides on and the only ones it forwards.
// The params the server receives are encoded anew from these (params), so
// no part of the client's bytes that the gateway did not read can reach
// the server.
type call struct {
	method    string
	name      string         // tools/call and prompts/get
	uri       string         // resources/read
	arguments map[string]any // strict values (json.Number as written); nil when absent
	meta      map[string]any // _meta; nil when absent
}

// paramKeys are the params each method may carry: what the gateway
// decides or passes on knowingly. Any other key is refused, not dropped
// and not passed through unseen.
var paramKeys = map[string][]string{
	"tools/call":     {"name", "arguments", "_meta"},
	"prompts/get":    {"name", "arguments", "_meta"},
	"resources/read": {"uri", "_meta"},
}

// paramsError is a refusal of a request's params, with its JSON-RPC code.
type paramsError struct {
	code int64
	msg  string
}

func (e *paramsError) Error() string { return e.msg }

// decodeCall reads a request's params strictly.
func decodeCall(method string, params json.RawMessage) (*call, error) {
	allowed, ok := paramKeys[method]
	if !ok {
		return nil, &paramsError{jsonrpcInvalidParams, fmt.Sprintf("%s is not a request the gateway decodes", method)}
	}
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	v, err := strictjson.Decode(params)
	if err != nil {
		return nil, &paramsError{jsonrpcInvalidRequest, fmt.Sprintf("the %s request was refused: params: %v", method, err)}
	}
	p, ok := v.(map[string]any)
	if !ok {
		return nil, &paramsError{jsonrpcInvalidParams, fmt.Sprintf("the %s request was refused: params: not an object", method)}
	}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !slices.Contains(allowed, k) {
			return nil, &paramsError{jsonrpcInvalidParams, fmt.Sprintf("the %s request was refused: params.%s: not a parameter the gateway decides or forwards (it takes %s)",
				method, strictjson.Join("", k), strings.Join(allowed, ", "))}
		}
	}
	c := &call{method: method}
	bad := func(key, why string) error {
		return &paramsError{jsonrpcInvalidParams, fmt.Sprintf("the %s request was refused: params.%s: %s", method, key, why)}
	}
	if m, present := p["_meta"]; present && m != nil {
		if c.meta, ok = m.(map[string]any); !ok {
			return nil, bad("_meta", "not an object")
		}
	}
	switch method {
	case "resources/read":
		if c.uri, ok = p["uri"].(string); !ok {
			return nil, bad("uri", "required, a string")
		}
	default:
		if c.name, ok = p["name"].(string); !ok || c.name == "" {
			return nil, bad("name", "required, a non-empty string")
		}
		if a, present := p["arguments"]; present && a != nil {
			if c.arguments, ok = a.(map[string]any); !ok {
				return nil, bad("arguments", "not an object")
			}
		}
	}
	return c, nil
}

// params is the call encoded anew: exactly the values decided.
func (c *call) params() json.RawMessage {
	p := map[string]any{}
	if c.meta != nil {
		p["_meta"] = c.meta
	}
	if c.method == "resources/read" {
		p["uri"] = c.uri
	} else {
		p["name"] = c.name
		if c.arguments != nil {
			p["arguments"] = c.arguments
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		// Strict values always encode; a failure here is a bug, and the
		// call is not forwarded with something else.
		panic(fmt.Sprintf("mcpproxy: re-encoding decided params: %v", err))
	}
	return b
}

// decided is the tool the call is decided as, and args its arguments as
// the policy reads them.
func (c *call) decided() (tool string, args *structpb.Struct, err error) {
	if c.method == "resources/read" {
		return "resources/read", &structpb.Struct{Fields: map[string]*structpb.Value{"uri": structpb.NewStringValue(c.uri)}}, nil
	}
	s, err := toStruct(c.arguments, "arguments")
	if err != nil {
		return "", nil, &paramsError{jsonrpcInvalidParams, fmt.Sprintf("the %s request was refused: params.%v", c.method, err)}
	}
	return c.name, s, nil
}

// progressToken is the client's, as written (a json.Number encodes as
// it came).
func (c *call) progressToken() any {
	if c.meta == nil {
		return nil
	}
	return c.meta["progressToken"]
}

// toStruct converts strict values for the policy, which reads numbers as
// float64. An integer float64 cannot hold exactly is refused rather than
// rounded: a server reading integers exactly (Python's int) would act on
// another value than the one decided (2^53+1 decided as 2^53).
func toStruct(m map[string]any, path string) (*structpb.Struct, error) {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m))}
	for k, v := range m {
		pv, err := toValue(v, strictjson.Join(path, k))
		if err != nil {
			return nil, err
		}
		s.Fields[k] = pv
	}
	return s, nil
}

func toValue(v any, path string) (*structpb.Value, error) {
	switch v := v.(type) {
	case nil:
		return structpb.NewNullValue(), nil
	case bool:
		return structpb.NewBoolValue(v), nil
	case string:
		return structpb.NewStringValue(v), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s: the number %s is beyond what the policy can read", path, clip(string(v), 40))
		}
		if !exactFloat(string(v), f) {
			return nil, fmt.Errorf("%s: the number %s cannot be decided exactly (it is not a 64-bit float's value): send it as a string, or round it", path, clip(string(v), 40))
		}
		return structpb.NewNumberValue(f), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(v))}
		for i, e := range v {
			pv, err := toValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l.Values[i] = pv
		}
		return structpb.NewListValue(l), nil
	case map[string]any:
		s, err := toStruct(v, path)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	}
	return nil, fmt.Errorf("%s: a value of type %T", path, v)
}

const (
	jsonrpcInvalidRequest = -32600
	jsonrpcInvalidParams  = -32602
)

// exactFloat reports whether an integer literal is exactly f: servers
// read integers exactly (Python's int, Go's int64), while a literal with a
// fraction or an exponent is read as the same float64 by servers that
// read floats. (A server reading decimals exactly may still see more
// digits than were decided.)
func exactFloat(literal string, f float64) bool {
	if strings.ContainsAny(literal, ".eE") {
		return true
	}
	if len(literal) > 400 {
		return false
	}
	want, ok := new(big.Int).SetString(literal, 10)
	if !ok {
		return false
	}
	got, acc := big.NewFloat(f).Int(nil)
	return acc == big.Exact && want.Cmp(got) == 0
}
