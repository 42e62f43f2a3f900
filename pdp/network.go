package pdp

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/toolpdp/toolpdp/pdp/policy"
	"github.com/toolpdp/toolpdp/pdp/session"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// decideNetwork decides a confined run's connection (the reserved tool
// Network) by the network rules kept with the allow its for_decision
// names, under --eval-timeout.
func (e *Engine) decideNetwork(ctx context.Context, a *active, ws, agentID string, agent *policy.Agent, req *pb.DecideRequest) *pb.DecideResponse {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.EvalTimeout)
	defer cancel()
	grant := e.networkGrant(ctx, ws, agentID, req, e.cfg.Now())
	resp, err := a.snap.DecideNetwork(ctx, req, agent, grant)
	if err != nil {
		e.log.Error("evaluation failed", "agent_id", agentID, "tool_name", req.GetToolName(), "revision", a.snap.Revision, "error", err)
	}
	return resp
}

// networkGrant is the execution kept with the allow a Network call's
// for_decision names, or nil when it names none this call may use: the
// decision must be of the same workspace, agent and session, an allow (by
// Decide or by a person's answer) of a call other than Network, kept by
// the store and younger than --pending-ttl.
func (e *Engine) networkGrant(ctx context.Context, ws, agentID string, req *pb.DecideRequest, now time.Time) *policy.NetworkGrant {
	id := policy.NetworkDecisionID(req)
	if id == "" {
		return nil
	}
	c, found, err := e.state.store.Get(ctx, id, ws, now)
	if e.state.result(ctx, "get", err) != nil || found != session.Found {
		return nil
	}
	allowed := c.Decision == pb.Decision_DECISION_ALLOW ||
		c.Decision == pb.Decision_DECISION_ASK && c.Answer == pb.Decision_DECISION_ALLOW
	switch {
	case c.AgentID != agentID, c.SessionID != req.GetSessionId(), c.ToolName == policy.NetworkTool,
		!allowed, len(c.Execution) == 0, now.Sub(c.Created) > e.cfg.PendingTTL:
		return nil
	}
	var ex pb.Execution
	if proto.Unmarshal(c.Execution, &ex) != nil {
		return nil
	}
	return &policy.NetworkGrant{DecisionID: id, Execution: &ex}
}

// networkPart is what an allow keeps with its decision for its run's
// connections — its network and network rules, not the whole execution
// (the store's bytes are bounded) — or nil when its run has no rules.
func networkPart(resp *pb.DecideResponse) *pb.Execution {
	ex := resp.GetExecution()
	if resp.Decision != pb.Decision_DECISION_ALLOW || ex.GetNetworkRules() == nil {
		return nil
	}
	return &pb.Execution{Network: ex.GetNetwork(), NetworkRules: ex.GetNetworkRules()}
}
