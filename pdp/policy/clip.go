package policy

import (
	"unicode/utf8"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// MaxMessageBytes bounds every message a decision carries (its message and
// each reason's). The library already quotes at most a few hundred bytes of
// the caller's input (toolpdp.text.clip); this is the backstop for messages
// of a bundle's own guardrails and of errors, which may quote anything.
const MaxMessageBytes = 1024

// Clip returns s cut to at most n bytes, on a character boundary, with "…"
// (3 bytes, counted in n) marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// clipMiddle returns s cut to at most n bytes by dropping its middle: a
// message's end often says what to do ("do not run it"), so it is kept.
func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = " … "
	head := (n - len(ellipsis)) * 2 / 3
	tail := n - len(ellipsis) - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + ellipsis + s[start:]
}

// BoundMessages applies MaxMessageBytes to a response's messages.
func BoundMessages(resp *pb.DecideResponse) {
	resp.Message = clipMiddle(resp.Message, MaxMessageBytes)
	for _, r := range resp.Reasons {
		r.Message = clipMiddle(r.Message, MaxMessageBytes)
	}
}

// JoinMessages appends more to a message ("; " between them), keeping the
// result within MaxMessageBytes by clipping the first part, not the second.
func JoinMessages(msg, more string) string {
	if msg == "" {
		return more
	}
	return clipMiddle(msg, max(MaxMessageBytes-len(more)-2, 64)) + "; " + more
}
