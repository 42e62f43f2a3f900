package pdp

import (
	"context"
	"fmt"

	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// FilterTools says which of req's tools some call could allow or ask for
// the agent (in the session's pinned definition, when a session is named),
// as a gateway lists only what the model may try: a tool is hidden when the
// permission axis denies every call of it — disabled, its server
// undeclared, its toolset off, its agent unknown or removed — whatever the
// arguments; a deny that depends on the arguments (a scope, a guardrail)
// leaves it listed, and Decide still decides every call. A tool given with
// its definition (by an MCP gateway) is hidden when the definition differs
// from the one kept or pinned (tooldefs.go); the first one seen is kept.
// Nothing else is counted, kept or logged: listing tools is not a call.
func (e *Engine) FilterTools(ctx context.Context, ws string, req *pb.FilterToolsRequest) (*pb.FilterToolsResponse, error) {
	resp := &pb.FilterToolsResponse{}
	hideAll := func(reason string) (*pb.FilterToolsResponse, error) {
		for _, t := range req.GetTools() {
			resp.Hidden = append(resp.Hidden, &pb.HiddenTool{Tool: t, Reason: reason})
		}
		return resp, nil
	}
	a := e.current.Load()
	if a == nil {
		return hideAll("no policy is loaded yet: every tool call is denied until a bundle loads")
	}
	agentID := policy.AgentID(req.GetAgentId())
	current := a.snap.Agent(agentID)
	if ws != "" && current != nil && current.Workspace != "" && current.Workspace != ws {
		return nil, &Error{Code: PermissionDenied, Message: fmt.Sprintf("agent_id: agent '%s' belongs to another workspace than this caller's (%s)", agentID, ws)}
	}
	agent, refused := e.pin(ctx, a, session.Key{Workspace: ws, Agent: agentID, Session: req.GetSessionId()}, current)
	if refused != nil {
		return hideAll(refused.Message)
	}
	if agent != nil && current == nil {
		return hideAll(fmt.Sprintf("agent '%s' was removed from the policy: every call of its running sessions is denied", agentID))
	}
	if agent != nil {
		resp.AsksViaClient, resp.AllowSampling = agent.AsksViaClient, agent.AllowSampling
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.EvalTimeout*4)
	defer cancel()
	for _, t := range req.GetTools() {
		if t.GetName() == policy.NetworkTool && t.GetServer() == "" {
			// The proxy's own tool: never one a model may call.
			resp.Hidden = append(resp.Hidden, &pb.HiddenTool{Tool: t, Reason: "Network is the reserved tool a confined run's connections are decided by; no model calls it"})
			continue
		}
		probe := &pb.DecideRequest{AgentId: req.GetAgentId(), SessionId: req.GetSessionId(), ToolName: t.GetName(), Server: t.GetServer()}
		d, err := a.snap.Decide(ctx, probe, agent)
		if err != nil {
			e.log.Error("evaluation failed while filtering tools", "agent_id", agentID, "tool_name", t.GetName(), "error", err)
		}
		reason, hidden := everyCallDenied(d)
		if !hidden {
			reason = e.listTool(ctx, a, ws, current, t)
			hidden = reason != ""
		}
		t := &pb.ToolRef{Name: t.GetName(), Server: t.GetServer()} // a definition is never sent back
		if hidden {
			resp.Hidden = append(resp.Hidden, &pb.HiddenTool{Tool: t, Reason: reason})
		} else {
			resp.Visible = append(resp.Visible, t)
		}
	}
	return resp, nil
}

// everyCallDenied reports whether a decision for a call with no arguments
// denies every call of that tool: a deny of the permission axis (or of the
// policy itself, an evaluation that failed) does not depend on arguments.
func everyCallDenied(d *pb.DecideResponse) (string, bool) {
	if d.GetDecision() != pb.Decision_DECISION_DENY {
		return "", false
	}
	for _, r := range d.GetReasons() {
		if r.GetEffect() == pb.Decision_DECISION_DENY && (r.GetAxis() == "permission" || r.GetAxis() == "policy") {
			return r.GetMessage(), true
		}
	}
	return "", false
}
