package policy

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Decide answers one call with this snapshot alone: it keeps no state and
// logs nothing. agent is the definition to decide with — a session's
// pinned one — or nil for this snapshot's own definition of the request's
// agent. It fails closed: on any error the response is a deny, and the
// error is returned beside it for the caller to log. ctx bounds building
// the input (resolving paths, parsing the command) and evaluating alike.
func (s *Snapshot) Decide(ctx context.Context, req *pb.DecideRequest, agent *Agent) (*pb.DecideResponse, error) {
	resp, _, err := s.DecideMemo(ctx, req, agent, nil)
	return resp, err
}

// DecideMemo is Decide answering from memo when it holds the decision, and
// keeping the decision there otherwise (memo.go says when). hit reports
// whether it did. A nil memo, or a snapshot whose decisions may not be
// memoized, is Decide.
func (s *Snapshot) DecideMemo(ctx context.Context, req *pb.DecideRequest, agent *Agent, memo *Memo) (resp *pb.DecideResponse, hit bool, err error) {
	if IsNetworkCall(req) {
		// A connection is decided only with the allow it belongs to, which
		// only the engine can look up: alone, the snapshot refuses it.
		resp, err = s.DecideNetwork(ctx, req, agent, nil)
		return resp, false, err
	}
	id := AgentID(req.GetAgentId())
	if agent == nil {
		agent = s.agents[id]
	}
	resp = &pb.DecideResponse{PolicyRevision: s.Revision}
	f, err := gather(ctx, s, id, agent, req)
	var key memoKey
	keyed := false
	if err != nil {
		Deny(resp, "session", "pinned_guardrails", err.Error())
		BoundMessages(resp)
		return resp, false, err
	}
	if err = ctx.Err(); err != nil {
		err = fmt.Errorf("the request's deadline passed while its paths and command were examined: %w", err)
	} else {
		if memo != nil && s.memoOff == "" {
			key, keyed = s.key(f), true
			if kept, ok := memo.get(key); ok {
				copyResponse(resp, kept)
				return resp, true, nil
			}
		}
		err = s.evaluate(ctx, f.input(s, false), resp)
		if ex := resp.GetExecution(); err == nil && ex != nil && ex.Network == NetworkRules && f.policy != nil {
			// The rules as the policy resolved them: what a confined run's
			// proxy decides each new host by.
			ex.NetworkRules = f.policy.NetRules.Proto()
		}
	}
	if err != nil {
		Deny(resp, "policy", "evaluation_error", fmt.Sprintf("the policy could not be evaluated, so the call is denied: %v", err))
	}
	BoundMessages(resp)
	if keyed && err == nil {
		kept := &pb.DecideResponse{}
		copyResponse(kept, resp)
		memo.put(key, kept)
	}
	return resp, false, err
}

func (s *Snapshot) evaluate(ctx context.Context, input ast.Value, resp *pb.DecideResponse) error {
	rs, err := eval(ctx, s.query, input)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// OPA notices cancellation only now and then; a result that arrives
		// after the deadline is not trusted.
		return fmt.Errorf("evaluation exceeded its deadline: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return errors.New("the library's decision is undefined")
	}
	doc, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return fmt.Errorf("the decision is %T, not an object", rs[0].Expressions[0].Value)
	}
	return mapResult(doc, resp)
}

// mapResult copies the library's decision document into the response.
func mapResult(doc map[string]any, resp *pb.DecideResponse) error {
	d, ok := effects[fmt.Sprint(doc["decision"])]
	if !ok {
		return fmt.Errorf("decision %q is not allow, ask or deny", doc["decision"])
	}
	resp.Decision = d
	resp.Message, _ = doc["message"].(string)
	reasons, _ := doc["reasons"].([]any)
	for _, r := range reasons {
		m, _ := r.(map[string]any)
		effect, ok := effects[fmt.Sprint(m["effect"])]
		if !ok {
			return fmt.Errorf("reason %v has no valid effect", r)
		}
		resp.Reasons = append(resp.Reasons, &pb.Reason{Axis: str(m["axis"]), Rule: str(m["rule"]), Effect: effect, Message: str(m["message"])})
	}
	if ex, ok := doc["execution"].(map[string]any); ok && len(ex) > 0 {
		enforced, _ := ex["env_enforced"].(bool)
		out := &pb.Execution{Cwd: str(ex["cwd"]), Env: map[string]string{}, EnvEnforced: enforced, Network: str(ex["network"])}
		env, _ := ex["env"].(map[string]any)
		for k, v := range env {
			out.Env[k] = str(v)
		}
		out.ReadPaths = pathList(ex["read_paths"])
		out.WritePaths = pathList(ex["write_paths"])
		out.ReadOnlyNames = strs(ex["read_only_names"])
		out.UnreadableNames = strs(ex["unreadable_names"])
		out.ConfinementRequired, _ = ex["confinement_required"].(bool)
		resp.Execution = out
	}
	return nil
}

var effects = map[string]pb.Decision{"allow": pb.Decision_DECISION_ALLOW, "ask": pb.Decision_DECISION_ASK, "deny": pb.Decision_DECISION_DENY}

// EffectName is a decision as the library names it: allow, ask or deny.
func EffectName(d pb.Decision) string {
	switch d {
	case pb.Decision_DECISION_ALLOW:
		return "allow"
	case pb.Decision_DECISION_ASK:
		return "ask"
	}
	return "deny"
}

// pathList is a scope of the decision document: absent (not enforced) stays
// nil, an empty list stays an empty list (nothing allowed).
func pathList(v any) *pb.PathList {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	return &pb.PathList{Paths: strs(list)}
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, str(s))
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Deny turns resp into a deny with one reason, dropping any other.
func Deny(resp *pb.DecideResponse, axis, rule, msg string) *pb.DecideResponse {
	resp.Decision = pb.Decision_DECISION_DENY
	resp.Message = msg
	resp.Reasons = []*pb.Reason{{Axis: axis, Rule: rule, Effect: pb.Decision_DECISION_DENY, Message: msg}}
	resp.Execution = nil
	return resp
}
