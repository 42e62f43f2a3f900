package netproxy

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Sidecar decides a run's connections with the sidecar: a Decide of the
// tool Network in the agent and session of the command's allow, naming
// that allow, and AwaitDecision for a person's answer.
type Sidecar struct {
	Client      pb.DecisionServiceClient
	AgentID     string
	SessionID   string
	ForDecision string // the allow the run belongs to
	Command     string // what the person is shown beside host and port
}

// Decide is one Decide of Network for t.
func (s *Sidecar) Decide(ctx context.Context, t Target) (Decision, error) {
	args, err := structpb.NewStruct(map[string]any{"host": t.Host.String(), "port": t.Port, "scheme": t.Scheme,
		"command": s.Command, "for_decision": s.ForDecision})
	if err != nil {
		return Decision{}, err
	}
	resp, err := s.Client.Decide(ctx, &pb.DecideRequest{AgentId: s.AgentID, SessionId: s.SessionID, ToolName: "Network", Args: args})
	if err != nil {
		return Decision{}, err
	}
	d := Decision{ID: resp.GetDecisionId(), Message: resp.GetMessage()}
	switch resp.GetDecision() {
	case pb.Decision_DECISION_ALLOW:
		d.Verdict = Allow
	case pb.Decision_DECISION_ASK:
		d.Verdict = Ask
	}
	return d, nil
}

// Await waits for a person's answer to the ask id until ctx ends.
func (s *Sidecar) Await(ctx context.Context, id string) (bool, string, error) {
	for {
		wait := int32(60)
		if dl, ok := ctx.Deadline(); ok {
			wait = int32(min(max(int64(time.Until(dl).Seconds()), 0), 60))
		}
		r, err := s.Client.AwaitDecision(ctx, &pb.AwaitDecisionRequest{DecisionId: id, WaitSeconds: wait})
		if err != nil {
			return false, "", err
		}
		switch r.GetState() {
		case pb.AskState_ASK_STATE_ANSWERED:
			return r.GetDecision() == pb.Decision_DECISION_ALLOW, r.GetMessage(), nil
		case pb.AskState_ASK_STATE_EXPIRED:
			return false, "", fmt.Errorf("the ask %s expired", id)
		}
		if err := ctx.Err(); err != nil {
			return false, "", err
		}
		if wait == 0 {
			// Less than a second is left: wait it out without a busy loop.
			<-ctx.Done()
			return false, "", ctx.Err()
		}
	}
}
