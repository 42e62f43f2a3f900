package pdp

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/decisionlog"
	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	"github.com/toolpdp/toolpdp/pdp/tooldef"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// An MCP server can change what its tools say after a person trusted them
// (tool poisoning, a "rug pull"): a description that now tells the model
// to read a key file, a schema that now takes a command. A gateway passes
// each tool's definition as the server listed it; the engine keeps the
// digest of the first it saw per agent and server (or, where the agent's
// definition pins the server's tools, the pins), hides a tool whose
// definition differs, and turns a call of it into an ask of its own — about
// the definition, not the call — whose allow keeps the new definition.
// A pinned tool that changed, and an unpinned tool of a pinned server, are
// denied: pins change only with the policy.

// toolVerdict is what the kept definitions say of one MCP tool.
type toolVerdict struct {
	rule, message string                   // a deny; "" when none
	change        *pb.ToolDefinitionChange // the definition changed since it was trusted: ask
	storeErr      error                    // the store failed: fail closed
}

// Rules of the definition check (reason axis "guardrail": it holds
// whatever the permission policy says).
const (
	ruleToolChanged    = "tool_definition_changed"
	ruleToolNotPinned  = "tool_not_pinned"
	ruleToolDefinition = "tool_definition_invalid"
)

// checkTool compares tool (of server) as the gateway saw it listed —
// rawDef, "" when it has not — with what is pinned in current, the
// agent's newest definition (a pin updated in the policy holds at once,
// as guardrails do), or else with what the store keeps for the agent. A
// definition seen is kept when it is the first; listing: a caller's
// FilterTools.
func (e *Engine) checkTool(ctx context.Context, ws string, current *policy.Agent, server, tool, rawDef string) toolVerdict {
	var seen *tooldef.Tool
	if rawDef != "" {
		t, err := tooldef.Of([]byte(rawDef))
		switch {
		case err != nil:
			return toolVerdict{rule: ruleToolDefinition, message: fmt.Sprintf("the definition server '%s' lists for tool '%s' cannot be read, so the tool is refused: %v", server, tool, err)}
		case t.Name != tool:
			return toolVerdict{rule: ruleToolDefinition, message: fmt.Sprintf("server '%s' listed a definition named '%s' for tool '%s', so the tool is refused", server, clipName(t.Name), tool)}
		}
		seen = &t
	}
	if pins, pinned := current.ToolPins(server); pinned {
		pin, ok := pins[tool]
		switch {
		case !ok:
			return toolVerdict{rule: ruleToolNotPinned, message: fmt.Sprintf("server '%s' has pinned tool definitions (mcp_servers[].tools of agent '%s') and tool '%s' is not among them, so it is refused; pin it with toolpdp mcp pin once it is trusted", server, current.ID, tool)}
		case seen != nil && seen.Digest != pin:
			return toolVerdict{rule: ruleToolChanged, message: fmt.Sprintf("the definition of tool '%s' on server '%s' (%s) is not the one pinned for agent '%s' (%s): the server changed it, so it is refused until the pin is updated (toolpdp mcp pin)", tool, server, seen.Digest, current.ID, pin)}
		}
		return toolVerdict{}
	}
	store, ok := e.state.store.(session.ToolDigests)
	if !ok {
		if seen == nil {
			return toolVerdict{}
		}
		return toolVerdict{storeErr: errors.New("this state store keeps no tool definitions")}
	}
	k := session.ToolKey{Workspace: ws, Agent: current.ID, Server: server, Tool: tool}
	var rec session.ToolRecord
	var err error
	if seen != nil {
		rec, err = store.SeeTool(ctx, k, seen.Digest, seen.Canonical)
		if errors.Is(err, session.ErrTooManyTools) {
			return toolVerdict{rule: ruleToolDefinition, message: fmt.Sprintf("tool '%s' is refused: %v (server '%s')", tool, err, server)}
		}
	} else {
		var found bool
		rec, found, err = store.ToolRecord(ctx, k)
		if err == nil && !found {
			return toolVerdict{}
		}
	}
	if e.state.result(ctx, "tool_digest", err) != nil {
		return toolVerdict{storeErr: err}
	}
	if !rec.Changed() {
		return toolVerdict{}
	}
	return toolVerdict{change: &pb.ToolDefinitionChange{Server: server, Tool: tool,
		KeptDigest: rec.Digest, KeptDefinition: string(rec.Definition), NewDigest: rec.SeenDigest, NewDefinition: string(rec.Seen)}}
}

// gateTool applies the definition check to a call the policy did not deny:
// a deny replaces the decision; a changed definition makes the call an ask
// about the definition alone (its request is the one stored for the
// person, without the call's arguments). Calls of tools that are not an
// MCP server's, and calls without a defined agent, pass unchanged.
func (e *Engine) gateTool(ctx context.Context, a *active, ws string, current *policy.Agent, req *pb.DecideRequest, resp *pb.DecideResponse) (*pb.DecideResponse, *pb.DecideRequest) {
	if resp.GetDecision() == pb.Decision_DECISION_DENY || current == nil {
		return resp, nil
	}
	server, tool, ok := a.snap.CanonicalTool(ctx, req.GetToolName(), req.GetServer())
	if !ok || server == "" {
		if req.GetToolDefinition() != "" {
			return policy.Deny(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, "guardrail", ruleToolDefinition,
				"the call carries an MCP tool definition but names no MCP server's tool, so it is refused"), nil
		}
		return resp, nil
	}
	v := e.checkTool(ctx, ws, current, server, tool, req.GetToolDefinition())
	switch {
	case v.storeErr != nil:
		e.log.Error("the state store failed; the call is denied", "agent_id", current.ID, "error", v.storeErr.Error())
		return unavailable(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, v.storeErr), nil
	case v.rule != "":
		out := policy.Deny(&pb.DecideResponse{PolicyRevision: a.snap.Revision}, "guardrail", v.rule, v.message)
		policy.BoundMessages(out)
		return out, nil
	case v.change == nil:
		return resp, nil
	}
	msg := fmt.Sprintf("the definition of tool '%s' on server '%s' changed since it was trusted (%s, now %s): a person must allow the new definition before the tool is called; compare the two before answering",
		tool, server, v.change.KeptDigest, v.change.NewDigest)
	out := &pb.DecideResponse{Decision: pb.Decision_DECISION_ASK, PolicyRevision: a.snap.Revision, Message: msg, DefinitionChange: v.change,
		Reasons: []*pb.Reason{{Axis: "guardrail", Rule: ruleToolChanged, Effect: pb.Decision_DECISION_ASK, Message: msg}}}
	policy.BoundMessages(out)
	asked := &pb.DecideRequest{AgentId: req.GetAgentId(), SessionId: req.GetSessionId(), ToolName: req.GetToolName(), Server: req.GetServer()}
	return out, asked
}

// listTool is FilterTools' check of a tool some call could allow or ask:
// the reason it is hidden, "" when it is listed.
func (e *Engine) listTool(ctx context.Context, a *active, ws string, current *policy.Agent, t *pb.ToolRef) string {
	if current == nil {
		return ""
	}
	server, tool, ok := a.snap.CanonicalTool(ctx, t.GetName(), t.GetServer())
	if !ok || server == "" {
		if t.GetDefinition() != "" {
			return "a tool definition was given for a tool of no MCP server"
		}
		return ""
	}
	v := e.checkTool(ctx, ws, current, server, tool, t.GetDefinition())
	switch {
	case v.storeErr != nil:
		return "the state store cannot keep the tool's definition, so it is not listed: " + clipError(v.storeErr)
	case v.rule != "":
		return v.message
	case v.change != nil:
		return fmt.Sprintf("its definition changed since it was trusted (%s, now %s): a call of it asks a person to allow the new definition", v.change.KeptDigest, v.change.NewDigest)
	}
	return ""
}

// keepDefinition is a person's allow of an ask about a changed definition:
// the new definition is kept for the agent and server, unless the policy
// in force now pins the server's tools (the pins decide) or no longer
// defines the agent. An error is the store's: the ask stays unanswered.
func (e *Engine) keepDefinition(ctx context.Context, ask *session.Call, change *pb.ToolDefinitionChange) (*pb.DecideResponse, error) {
	a := e.current.Load()
	if a == nil {
		return policy.Deny(&pb.DecideResponse{}, "policy", "no_policy", "no policy is loaded: a person's allow cannot stand"), nil
	}
	current := a.snap.Agent(ask.AgentID)
	if current == nil {
		return policy.Deny(&pb.DecideResponse{}, "session", "agent_removed", fmt.Sprintf("agent '%s' was removed from the policy: a person's allow cannot stand", ask.AgentID)), nil
	}
	if _, pinned := current.ToolPins(change.GetServer()); pinned {
		return policy.Deny(&pb.DecideResponse{}, "guardrail", ruleToolChanged, fmt.Sprintf("a person allowed the new definition of tool '%s', but the policy in force now pins the tools of server '%s': the pins decide", change.GetTool(), change.GetServer())), nil
	}
	store, ok := e.state.store.(session.ToolDigests)
	if !ok {
		return nil, errors.New("this state store keeps no tool definitions")
	}
	k := session.ToolKey{Workspace: ask.Workspace, Agent: ask.AgentID, Server: change.GetServer(), Tool: change.GetTool()}
	err := store.KeepTool(ctx, k, change.GetNewDigest(), []byte(change.GetNewDefinition()))
	if e.state.result(ctx, "tool_digest", err) != nil {
		return nil, err
	}
	e.log.Info("a person allowed a changed tool definition", "agent_id", ask.AgentID, "server", change.GetServer(), "tool", change.GetTool(), "digest", change.GetNewDigest())
	return &pb.DecideResponse{Decision: pb.Decision_DECISION_ALLOW}, nil
}

func clipName(s string) string {
	if len(s) <= 100 {
		return s
	}
	n := 100
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// definitionChange is the changed definition an ask is about; nil for an
// ask about a call.
func definitionChange(ask *session.Call) *pb.ToolDefinitionChange {
	var resp pb.DecideResponse
	if proto.Unmarshal(ask.Response, &resp) != nil {
		return nil
	}
	return resp.GetDefinitionChange()
}

// noteDefinitionAsk keeps a new ask about a changed definition beside the
// record, so that one person's answer answers every ask about the same
// change (several sessions, several replicas). Best effort: an ask not
// noted is answered on its own.
func (e *Engine) noteDefinitionAsk(ctx context.Context, ws, agentID string, resp *pb.DecideResponse) {
	change := resp.GetDefinitionChange()
	store, ok := e.state.store.(session.ToolDigests)
	if change == nil || !ok || resp.GetDecision() != pb.Decision_DECISION_ASK {
		return
	}
	k := session.ToolKey{Workspace: ws, Agent: agentID, Server: change.GetServer(), Tool: change.GetTool()}
	if err := store.AskTool(ctx, k, change.GetNewDigest(), resp.GetDecisionId()); e.state.result(ctx, "tool_digest", err) != nil {
		e.log.Warn("an ask about a changed tool definition was not noted; it is answered on its own", "decision_id", resp.GetDecisionId(), "error", err.Error())
	}
}

// definitionSiblings are the other asks about the same changed definition
// as ask, still noted beside its record.
func (e *Engine) definitionSiblings(ctx context.Context, ask *session.Call, change *pb.ToolDefinitionChange) []string {
	store, ok := e.state.store.(session.ToolDigests)
	if !ok {
		return nil
	}
	k := session.ToolKey{Workspace: ask.Workspace, Agent: ask.AgentID, Server: change.GetServer(), Tool: change.GetTool()}
	rec, found, err := store.ToolRecord(ctx, k)
	if e.state.result(ctx, "tool_digest", err) != nil || !found || rec.SeenDigest != change.GetNewDigest() {
		return nil
	}
	var out []string
	for _, id := range rec.Asks {
		if id != ask.DecisionID {
			out = append(out, id)
		}
	}
	return out
}

// answerSiblings gives the asks about the same changed definition the
// answer one of them got, each recorded in the decision log; those
// answered meanwhile, expired or forgotten are left as they are.
func (e *Engine) answerSiblings(ctx context.Context, ws, by string, req *pb.ConfirmRequest, siblings []string, final *pb.DecideResponse, now time.Time) {
	for _, id := range siblings {
		got, found, answered, err := e.state.store.Answer(ctx, id, ws, func(c *session.Call) {
			c.Answer, c.AnsweredBy = final.Decision, by
			if final.Decision == pb.Decision_DECISION_DENY {
				c.AnswerMessage = final.Message
			}
		}, now)
		if e.state.result(ctx, "answer", err) != nil || found != session.Found || !answered || got == nil {
			continue
		}
		one := &pb.ConfirmRequest{DecisionId: id, Result: req.GetResult(), DenyMessage: req.GetDenyMessage()}
		e.dlog.Record(decisionlog.Entry{Kind: decisionlog.Confirmation, At: now, Confirm: one, Call: logCall(got), Halt: got.Halt,
			AnsweredBy: by, Outcome: policy.EffectName(final.Decision)})
		e.tell(AskEvent{Answered: true, Call: *got})
	}
}
