package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/envguard/netrules"
	"github.com/toolpdp/toolpdp/internal/clip"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// NetworkTool is the reserved tool a confined run's proxy decides each new
// host:port by. It is decided by the network rules of the allow it names
// (for_decision), then the guardrails: never by the toolsets, so no
// definition can enable, disable or ask about it, and none may define it.
const NetworkTool = "Network"

// Network values of an execution policy.
const (
	NetworkNone  = "none"
	NetworkAny   = "any"
	NetworkRules = "rules"
)

// IsNetworkCall reports whether req is a decision of the reserved Network
// tool (a built-in name: an MCP server's tool called Network is another).
func IsNetworkCall(req *pb.DecideRequest) bool {
	return req.GetToolName() == NetworkTool && req.GetServer() == ""
}

// NetRules are an execution policy's network rules, each entry in
// canonical form once decoded. Private are the allow and ask name entries
// a definition marked {"host": NAME, "private": true}.
type NetRules struct {
	Allow     []string `json:"allow"`
	Ask       []string `json:"ask"`
	Deny      []string `json:"deny"`
	Otherwise string   `json:"otherwise"`
	Private   []string `json:"private,omitempty"`
}

// networkRuleKeys are the keys of a rules object, in the order errors list them.
var networkRuleKeys = []string{"allow", "ask", "deny", "otherwise"}

// resolve parses the rules and returns them in canonical form.
func (r *NetRules) resolve() (*NetRules, *netrules.Rules, error) {
	parsed, err := netrules.Parse(r.Allow, r.Ask, r.Deny, r.Otherwise, r.Private...)
	if err != nil {
		return nil, nil, err
	}
	out := &NetRules{Private: parsed.Private()}
	out.Allow, out.Ask, out.Deny, out.Otherwise = parsed.Resolved()
	return out, parsed, nil
}

// Proto is the rules on the wire.
func (r *NetRules) Proto() *pb.NetworkRules {
	if r == nil {
		return nil
	}
	return &pb.NetworkRules{Allow: slices.Clone(r.Allow), Ask: slices.Clone(r.Ask), Deny: slices.Clone(r.Deny), Otherwise: r.Otherwise,
		Private: slices.Clone(r.Private)}
}

// netRulesFromProto reads the wire's rules, resolved; nil and an error
// when they do not parse.
func netRulesFromProto(p *pb.NetworkRules) (*NetRules, error) {
	r := &NetRules{Allow: p.GetAllow(), Ask: p.GetAsk(), Deny: p.GetDeny(), Otherwise: p.GetOtherwise(), Private: p.GetPrivate()}
	out, _, err := r.resolve()
	return out, err
}

// CheckNetwork says what is wrong with a wire execution policy's network
// and network_rules: network is "none", "any", "rules" or "", and the rules
// are set exactly when it is "rules", every entry parsing.
func CheckNetwork(p *pb.ExecutionPolicy) error {
	switch p.GetNetwork() {
	case "", NetworkNone, NetworkAny:
		if p.GetNetworkRules() != nil {
			return fmt.Errorf("execution_policy.network_rules: set, but network is %q and not \"rules\"", p.GetNetwork())
		}
		return nil
	case NetworkRules:
		if p.GetNetworkRules() == nil {
			return errors.New("execution_policy.network_rules: required when network is \"rules\"")
		}
		if _, err := netRulesFromProto(p.GetNetworkRules()); err != nil {
			return fmt.Errorf("execution_policy.network_rules.%w", err)
		}
		return nil
	}
	return fmt.Errorf("execution_policy.network: %q is not \"none\", \"any\", \"rules\" or empty", p.GetNetwork())
}

// plainPolicy is ExecutionPolicy without its JSON methods.
type plainPolicy ExecutionPolicy

// MarshalJSON writes the policy in the definition's shape: network is a
// word, or the rules object itself.
func (p ExecutionPolicy) MarshalJSON() ([]byte, error) {
	doc := struct {
		plainPolicy
		Network any `json:"network,omitempty"`
	}{plainPolicy: plainPolicy(p)}
	switch {
	case p.Network == NetworkRules && p.NetRules != nil:
		doc.Network = p.NetRules
	case p.Network != "":
		doc.Network = p.Network
	}
	return json.Marshal(doc)
}

// UnmarshalJSON reads the definition's shape: network "none", "any", ""
// or a rules object, whose entries are made canonical here.
func (p *ExecutionPolicy) UnmarshalJSON(b []byte) error {
	var doc struct {
		plainPolicy
		Network json.RawMessage `json:"network,omitempty"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	*p = ExecutionPolicy(doc.plainPolicy)
	raw := bytes.TrimSpace(doc.Network)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &p.Network); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		if p.Network != "" && p.Network != NetworkNone && p.Network != NetworkAny {
			return fmt.Errorf("network: %q is not \"none\", \"any\" or a rules object", p.Network)
		}
		return nil
	}
	r, err := decodeNetRules(raw)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	resolved, _, err := r.resolve()
	if err != nil {
		return fmt.Errorf("network.%w", err)
	}
	p.Network, p.NetRules = NetworkRules, resolved
	return nil
}

// decodeNetRules reads a rules object: allow and ask entries are strings
// or {"host": NAME, "private": true}; a "private" list (as a pinned
// definition writes them) is read too.
func decodeNetRules(raw []byte) (*NetRules, error) {
	var doc struct {
		Allow     []json.RawMessage `json:"allow"`
		Ask       []json.RawMessage `json:"ask"`
		Deny      []string          `json:"deny"`
		Otherwise string            `json:"otherwise"`
		Private   []string          `json:"private"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	r := &NetRules{Deny: doc.Deny, Otherwise: doc.Otherwise, Private: doc.Private}
	for _, l := range []struct {
		in  []json.RawMessage
		out *[]string
	}{{doc.Allow, &r.Allow}, {doc.Ask, &r.Ask}} {
		for _, e := range l.in {
			var s string
			if json.Unmarshal(e, &s) == nil {
				*l.out = append(*l.out, s)
				continue
			}
			var o struct {
				Host    string `json:"host"`
				Private bool   `json:"private"`
			}
			d := json.NewDecoder(bytes.NewReader(e))
			d.DisallowUnknownFields()
			if err := d.Decode(&o); err != nil {
				return nil, err
			}
			*l.out = append(*l.out, o.Host)
			if o.Private {
				r.Private = append(r.Private, o.Host)
			}
		}
	}
	return r, nil
}

// networkPolicy checks an execution policy's network in a definition:
// "none", "any", "" or a rules object of known keys whose every entry
// parses.
func (a *agentIssues) networkPolicy(field string, v any) {
	if s, ok := v.(string); ok {
		if s != "" && s != NetworkNone && s != NetworkAny {
			a.errorf(field, "%q is not \"none\", \"any\" or a rules object {\"allow\", \"ask\", \"deny\", \"otherwise\"}", s)
		}
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		a.errorf(field, "must be \"none\", \"any\" or a rules object, got %s", typeName(v))
		return
	}
	a.onlyKeys(field, m, networkRuleKeys...)
	var r NetRules
	for _, k := range []string{"allow", "ask", "deny"} {
		l, ok := m[k]
		if !ok {
			continue
		}
		var list []string
		if k == "deny" {
			if list, ok = a.strings(field+"."+k, l); !ok {
				return
			}
		} else if list, ok = a.hostEntries(field+"."+k, l, &r.Private); !ok {
			return
		}
		switch k {
		case "allow":
			r.Allow = list
		case "ask":
			r.Ask = list
		case "deny":
			r.Deny = list
		}
	}
	if o, ok := m["otherwise"]; ok {
		if r.Otherwise, ok = a.str(field+".otherwise", o); !ok {
			return
		}
	}
	if _, err := netrules.Parse(r.Allow, r.Ask, r.Deny, r.Otherwise, r.Private...); err != nil {
		for _, e := range unjoin(err) {
			a.errorf(field, "%v", e)
		}
	}
}

// hostEntries checks an allow or ask list: strings first, or objects
// {"host": NAME, "private": BOOL} for a name that may reach the refused
// address ranges; the private ones are added to private.
func (a *agentIssues) hostEntries(field string, v any, private *[]string) ([]string, bool) {
	list, ok := a.array(field, v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch e := e.(type) {
		case string:
			out = append(out, e)
		case map[string]any:
			a.onlyKeys(f, e, "host", "private")
			host, ok := a.requiredString(f+".host", e["host"])
			if !ok {
				return nil, false
			}
			out = append(out, host)
			if p, ok := e["private"]; ok {
				a.boolean(f+".private", p)
				if p == true {
					*private = append(*private, host)
				}
			}
		default:
			a.errorf(f, "must be a host entry (a string) or {\"host\", \"private\"}, got %s", typeName(e))
			return nil, false
		}
	}
	return out, true
}

// unjoin is the errors errors.Join joined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// NetworkGrant is what a Network decision is decided by: the execution of
// the allow its for_decision names, as stored with that decision.
type NetworkGrant struct {
	DecisionID string
	Execution  *pb.Execution
}

// networkFact is a Network call's host:port as the rules decided it.
type networkFact struct {
	host, scheme, command string
	port                  int
	effect, rule, message string
}

func (n *networkFact) value() ast.Value {
	return ast.NewObject(
		item("host", ast.String(n.host)),
		item("port", ast.Number(fmt.Sprint(n.port))),
		item("scheme", ast.String(n.scheme)),
		item("effect", ast.String(n.effect)),
		item("rule", ast.String(n.rule)),
		item("message", ast.String(n.message)),
	)
}

// networkArgs are a Network call's arguments, checked: host a URL host,
// port 1-65535, scheme https, http or tcp, for_decision present.
type networkArgs struct {
	host                   netrules.Host
	port                   int
	scheme, command, forID string
}

// NetworkDecisionID is the decision a Network call's for_decision names
// ("" when it names none).
func NetworkDecisionID(req *pb.DecideRequest) string {
	return req.GetArgs().GetFields()["for_decision"].GetStringValue()
}

func readNetworkArgs(args *structpb.Struct) (networkArgs, error) {
	f := args.GetFields()
	for k := range f {
		if !slices.Contains([]string{"host", "port", "scheme", "command", "for_decision"}, k) {
			return networkArgs{}, fmt.Errorf("args.%s: unknown argument; a Network call has host, port, scheme, command and for_decision", k)
		}
	}
	var out networkArgs
	hs, ok := f["host"].GetKind().(*structpb.Value_StringValue)
	if !ok {
		return out, errors.New("args.host: required, a string")
	}
	h, err := netrules.ParseHost(hs.StringValue)
	if err != nil {
		return out, fmt.Errorf("args.host: %w", err)
	}
	out.host = h
	switch p := f["port"].GetKind().(type) {
	case *structpb.Value_NumberValue:
		if p.NumberValue != math.Trunc(p.NumberValue) || p.NumberValue < 1 || p.NumberValue > 65535 {
			return out, fmt.Errorf("args.port: %v is not a port from 1 to 65535", p.NumberValue)
		}
		out.port = int(p.NumberValue)
	case *structpb.Value_StringValue:
		if out.port, err = netrules.ParsePort(p.StringValue); err != nil {
			return out, fmt.Errorf("args.port: %w", err)
		}
	default:
		return out, errors.New("args.port: required, a number")
	}
	out.scheme = f["scheme"].GetStringValue()
	if !slices.Contains([]string{"https", "http", "tcp"}, out.scheme) {
		return out, fmt.Errorf("args.scheme: %q is not https, http or tcp", out.scheme)
	}
	out.command = f["command"].GetStringValue()
	if out.forID = f["for_decision"].GetStringValue(); out.forID == "" {
		return out, errors.New("args.for_decision: required: the id of the allow whose run connects")
	}
	return out, nil
}

// DecideNetwork answers a Network call: the host:port decided by the rules
// of grant's execution (nil: for_decision names no allow this call may
// use), then the guardrails, through the library; never the permission
// chain. The request's own execution policy is not read.
func (s *Snapshot) DecideNetwork(ctx context.Context, req *pb.DecideRequest, agent *Agent, grant *NetworkGrant) (*pb.DecideResponse, error) {
	id := AgentID(req.GetAgentId())
	if agent == nil {
		agent = s.agents[id]
	}
	resp := &pb.DecideResponse{PolicyRevision: s.Revision}
	deny := func(rule, msg string) (*pb.DecideResponse, error) {
		Deny(resp, "scope", rule, msg)
		BoundMessages(resp)
		return resp, nil
	}
	args, err := readNetworkArgs(req.GetArgs())
	if err != nil {
		return deny("network.args", "a Network call's arguments are not valid, so the connection is refused: "+err.Error())
	}
	if agent == nil {
		return deny("unknown_agent", fmt.Sprintf("unknown agent '%s': no agent definition with that id is loaded", id))
	}
	if grant == nil || grant.Execution == nil {
		return deny("network.for_decision", fmt.Sprintf("for_decision %q names no allowed call of agent '%s' in this session that is still kept: a connection is decided only for a run the policy allowed", args.forID, id))
	}
	fact := &networkFact{host: args.host.String(), port: args.port, scheme: args.scheme, command: args.command}
	hostport := fmt.Sprintf("%s:%d", fact.host, args.port)
	switch ex := grant.Execution; ex.GetNetwork() {
	case NetworkAny:
		fact.effect, fact.rule, fact.message = "allow", "network", fmt.Sprintf("%s: the run's network is \"any\"", hostport)
	case NetworkRules:
		nr := ex.GetNetworkRules()
		rules, err := netrules.Parse(nr.GetAllow(), nr.GetAsk(), nr.GetDeny(), nr.GetOtherwise(), nr.GetPrivate()...)
		if err != nil {
			return deny("network_rules", "the run's network rules do not parse, so the connection is refused: "+err.Error())
		}
		m := rules.Decide(args.host, args.port)
		fact.effect, fact.rule = m.Effect, "network."+m.Rule
		switch {
		case m.Entry != "":
			fact.message = fmt.Sprintf("%s matches network %s entry %q", hostport, m.Rule, m.Entry)
		default:
			fact.message = fmt.Sprintf("%s matches no network rule: otherwise %s", hostport, m.Effect)
		}
		if m.Effect == "deny" {
			fact.message += ": the connection is refused"
		}
		if m.Effect == "ask" {
			fact.message = fmt.Sprintf("connect to %s (%s) for command %q? %s", hostport, args.scheme, clip.Middle(args.command, 200), fact.message)
		}
	default:
		fact.effect, fact.rule, fact.message = "deny", "network", fmt.Sprintf("%s: the run's network is %q, so no connection is made", hostport, ex.GetNetwork())
	}
	guardrails, _, err := s.guardrailsFor(id, agent)
	if err != nil {
		return deny("pinned_guardrails", err.Error())
	}
	// The host as the rules compared it: a guardrail reads one spelling.
	call := &pb.DecideRequest{AgentId: req.GetAgentId(), SessionId: req.GetSessionId(), ToolName: NetworkTool, Args: canonicalNetworkArgs(req.GetArgs(), fact.host)}
	f := &facts{agentID: id, agent: agent, req: call, guardrails: guardrails, network: fact}
	if err := ctx.Err(); err != nil {
		return deny("evaluation_error", "the request's deadline passed: "+err.Error())
	}
	if err := s.evaluate(ctx, f.input(s, true), resp); err != nil {
		Deny(resp, "policy", "evaluation_error", fmt.Sprintf("the policy could not be evaluated, so the connection is denied: %v", err))
		BoundMessages(resp)
		return resp, err
	}
	resp.Execution = nil
	BoundMessages(resp)
	return resp, nil
}

// canonicalNetworkArgs is args with host in its canonical form.
func canonicalNetworkArgs(args *structpb.Struct, host string) *structpb.Struct {
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(args.GetFields()))}
	for k, v := range args.GetFields() {
		out.Fields[k] = v
	}
	out.Fields["host"] = structpb.NewStringValue(host)
	return out
}
