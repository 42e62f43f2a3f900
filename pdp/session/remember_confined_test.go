package session

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// A call sent confined and the same call unconfined are two calls: an
// approval of one is no approval of the other, and a call id retried with
// the other flag names another call.
func TestConfinedIsPartOfACallsIdentity(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"command": "grep -rn TODO ."})
	if err != nil {
		t.Fatal(err)
	}
	plain := &pb.DecideRequest{ToolName: "Bash", Args: args}
	confined := &pb.DecideRequest{ToolName: "Bash", Args: args, Confined: true}
	resp := &pb.DecideResponse{Reasons: []*pb.Reason{{Axis: "guardrail", Rule: "protected_paths", Effect: pb.Decision_DECISION_ASK}}}
	a, okA := KeyOf("", "Bash", plain, resp)
	b, okB := KeyOf("", "Bash", confined, resp)
	if !okA || !okB || a == b {
		t.Errorf("remember keys: plain %x (%v), confined %x (%v): want two different keys", a, okA, b, okB)
	}
	if CallSignature(plain) == CallSignature(confined) {
		t.Error("call signatures of the plain and the confined call are equal")
	}
}
