package askview

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Bounds of the rendered arguments of one ask.
const (
	DefaultArgumentBytes = 16 << 10
	MaxArgumentBytes     = 1 << 20
)

// Ask is what is known of an ask to show it.
type Ask struct {
	DecisionID, CallID, AgentID, SessionID string
	Created                                time.Time
	Req                                    *pb.DecideRequest
	Resp                                   *pb.DecideResponse
	// The args and env as the decision log would write them (masked).
	MaskedArgs, MaskedEnv any
}

// Options choose what a rendering shows.
type Options struct {
	Reveal bool      // show secrets instead of masking them
	Bound  int       // bytes of arguments shown; 0: DefaultArgumentBytes
	Now    time.Time // for the age
}

// Render is the ask as a person is shown it.
func Render(a Ask, o Options) *pb.PendingAsk {
	bound := o.Bound
	switch {
	case bound <= 0:
		bound = DefaultArgumentBytes
	case bound > MaxArgumentBytes:
		bound = MaxArgumentBytes
	}
	out := &pb.PendingAsk{
		DecisionId: Visible(a.DecisionID), CallId: Visible(a.CallID), AgentId: Visible(a.AgentID), SessionId: Visible(a.SessionID),
		ToolName: Visible(a.Req.GetToolName()), Server: Visible(a.Req.GetServer()), Message: Visible(a.Resp.GetMessage()),
		CreatedUnixNanos: a.Created.UnixNano(), AgeMillis: max(o.Now.Sub(a.Created).Milliseconds(), 0), Revealed: o.Reveal,
	}
	for _, r := range a.Resp.GetReasons() {
		out.Reasons = append(out.Reasons, &pb.Reason{Axis: Visible(r.Axis), Rule: Visible(r.Rule), Effect: r.Effect, Message: Visible(r.Message)})
	}
	rawArgs := any(map[string]any{})
	if a.Req.GetArgs() != nil {
		rawArgs = a.Req.GetArgs().AsMap()
	}
	rawEnv := map[string]any{}
	for k, v := range a.Req.GetEnv() {
		rawEnv[k] = v
	}
	var secrets []string
	findSecrets(rawArgs, a.MaskedArgs, "args", &secrets)
	if len(rawEnv) > 0 {
		findSecrets(rawEnv, a.MaskedEnv, "env", &secrets)
	}
	sort.Strings(secrets)
	out.Secrets = secrets
	args, env := a.MaskedArgs, a.MaskedEnv
	if o.Reveal {
		args, env = rawArgs, rawEnv
	}
	if args == nil {
		args = map[string]any{}
	}
	text := JSON(args)
	out.ArgumentsBytes = int64(len(text))
	out.Arguments, out.ArgumentsTruncated = Cut(text, bound)
	if len(rawEnv) > 0 {
		out.Env = map[string]string{}
		shown, _ := env.(map[string]any)
		for k := range rawEnv {
			v, ok := shown[k].(string)
			if !ok {
				v = "[REDACTED]"
			}
			out.Env[Visible(k)] = Visible(v)
		}
		if m, ok := env.(string); ok { // the whole env masked
			for k := range out.Env {
				out.Env[k] = m
			}
		}
	}
	out.DefinitionChange = definitionChange(a.Resp.GetDefinitionChange())
	if ep := a.Req.GetExecutionPolicy(); ep != nil {
		if raw, err := protojson.Marshal(ep); err == nil {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				out.ExecutionPolicy = JSON(v)
			}
		}
	}
	return out
}

// findSecrets lists where masked differs from raw: the values, and the
// keys, that the decision log would mask.
func findSecrets(raw, masked any, path string, out *[]string) {
	switch r := raw.(type) {
	case map[string]any:
		m, ok := masked.(map[string]any)
		if !ok {
			*out = append(*out, path)
			return
		}
		for k, v := range r {
			mv, ok := m[k]
			if !ok { // the key itself was masked
				*out = append(*out, path+"."+Visible(k))
				continue
			}
			findSecrets(v, mv, path+"."+Visible(k), out)
		}
	case []any:
		m, ok := masked.([]any)
		if !ok || len(m) != len(r) {
			*out = append(*out, path)
			return
		}
		for i, v := range r {
			findSecrets(v, m[i], path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		if !reflect.DeepEqual(raw, masked) {
			*out = append(*out, path)
		}
	}
}
