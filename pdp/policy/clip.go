package policy

import (
	"github.com/toolpdp/toolpdp/internal/clip"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// MaxMessageBytes bounds every message a decision carries (its message and
// each reason's). The library already quotes at most a few hundred bytes of
// the caller's input (toolpdp.text.clip); this is the backstop for messages
// of a bundle's own guardrails and of errors, which may quote anything.
const MaxMessageBytes = 1024

// BoundMessages applies MaxMessageBytes to a response's messages.
func BoundMessages(resp *pb.DecideResponse) {
	resp.Message = clip.Middle(resp.Message, MaxMessageBytes)
	for _, r := range resp.Reasons {
		r.Message = clip.Middle(r.Message, MaxMessageBytes)
	}
}

// JoinMessages appends more to a message ("; " between them), keeping the
// result within MaxMessageBytes by clipping the first part, not the second.
func JoinMessages(msg, more string) string {
	if msg == "" {
		return more
	}
	return clip.Middle(msg, max(MaxMessageBytes-len(more)-2, 64)) + "; " + more
}
