// Package claudecode puts toolpdp in front of Claude Code through its hooks:
// one hook event (JSON on stdin) in, one answer (JSON on stdout and an exit
// code) out. PreToolUse becomes a Decide, PostToolUse and
// PostToolUseFailure a ReportResult, SessionEnd an EndSession.
//
// It fails closed. Claude Code runs a tool when a PreToolUse hook exits 0
// without a decision or exits with any code but 2 ("non-blocking error"), so
// every failure here is either a JSON deny (exit 0) or exit 2 with the
// reason on stderr — never a plain error exit that Claude Code would ignore.
//
// The hook contract this follows (Claude Code's hooks reference,
// https://code.claude.com/docs/en/hooks, and docs/INTEGRATIONS.md):
//   - input on stdin: session_id, transcript_path, cwd, permission_mode,
//     hook_event_name, and per event tool_name, tool_input, tool_use_id
//     (PreToolUse, PostToolUse, PostToolUseFailure), tool_response
//     (PostToolUse), error and is_interrupt (PostToolUseFailure), reason
//     (SessionEnd);
//   - PreToolUse output: {"hookSpecificOutput": {"hookEventName":
//     "PreToolUse", "permissionDecision": "allow"|"deny"|"ask",
//     "permissionDecisionReason": ...}}; the common fields "continue": false
//     and "stopReason" stop Claude after the hook;
//   - exit 2: a blocking error, stderr fed back to Claude (PreToolUse: the
//     call is blocked).
package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/toolpdp/toolpdp/internal/strictjson"
)

// Event names this package handles, as Claude Code writes them.
const (
	PreToolUse         = "PreToolUse"
	PostToolUse        = "PostToolUse"
	PostToolUseFailure = "PostToolUseFailure"
	SessionEnd         = "SessionEnd"
)

// MaxEventBytes bounds what is read from stdin. A Write of a large file
// carries the whole content in tool_input; the sidecar refuses args over
// its --max-args-bytes (1 MiB by default) anyway, so more than this is
// never going to be allowed and is not worth holding in memory.
const MaxEventBytes = 8 << 20

// Event is one hook event as Claude Code sends it. Fields a given event
// does not carry are zero.
type Event struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permission_mode"`
	HookEventName  string `json:"hook_event_name"`

	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`

	ToolResponse json.RawMessage `json:"tool_response"` // PostToolUse
	Error        string          `json:"error"`         // PostToolUseFailure
	IsInterrupt  bool            `json:"is_interrupt"`  // PostToolUseFailure
	Reason       string          `json:"reason"`        // SessionEnd: clear, logout, prompt_input_exit, other
}

// ParseEvent reads exactly one JSON object from r and checks that it has
// what its event needs. Anything else — not JSON, trailing data, a missing
// field, more than MaxEventBytes — is an error: the caller denies.
func ParseEvent(r io.Reader) (*Event, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxEventBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the hook event: %w", err)
	}
	if len(raw) > MaxEventBytes {
		return nil, fmt.Errorf("the hook event is larger than %d bytes", MaxEventBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("no hook event on stdin (expected one JSON object)")
	}
	// Read strictly: Go matches keys ignoring case, the last duplicate
	// winning, so a tool_input with "command" and "COMMAND" would be
	// decided on one and run with the other.
	if err := strictjson.Check(raw); err != nil {
		return nil, fmt.Errorf("the hook event is not a JSON object of Claude Code's shape: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var ev Event
	if err := dec.Decode(&ev); err != nil {
		return nil, fmt.Errorf("the hook event is not a JSON object of Claude Code's shape: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the hook event has data after its JSON object")
	}
	return &ev, ev.check()
}

// check names the first field the event lacks.
func (ev *Event) check() error {
	missing := func(field string) error {
		return fmt.Errorf("%s event: %s: required", ev.HookEventName, field)
	}
	switch ev.HookEventName {
	case "":
		return errors.New("hook_event_name: required")
	case PreToolUse, PostToolUse, PostToolUseFailure:
		switch {
		case ev.SessionID == "":
			return missing("session_id")
		case ev.ToolName == "":
			return missing("tool_name")
		case ev.ToolUseID == "":
			return missing("tool_use_id")
		}
		if ev.HookEventName == PreToolUse {
			return ev.checkToolInput()
		}
	case SessionEnd:
		if ev.SessionID == "" {
			return missing("session_id")
		}
	default:
		return fmt.Errorf("hook_event_name: %q is not handled (PreToolUse, PostToolUse, PostToolUseFailure or SessionEnd)", ev.HookEventName)
	}
	return nil
}

// checkToolInput: tool arguments are an object, or absent for a tool
// without any.
func (ev *Event) checkToolInput() error {
	in := bytes.TrimSpace(ev.ToolInput)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) || in[0] == '{' {
		return nil
	}
	return fmt.Errorf("%s event: tool_input: not a JSON object", ev.HookEventName)
}
