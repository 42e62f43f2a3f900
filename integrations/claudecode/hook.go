package claudecode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolpdp/toolpdp/internal/clip"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// DefaultTimeout bounds each call to the sidecar. Claude Code kills a
// command hook after its timeout (600 s unless the settings say otherwise)
// and a killed PreToolUse hook is a non-blocking error: the tool would run.
// A decision takes milliseconds; 5 s leaves the hook time to deny first.
const DefaultTimeout = 5 * time.Second

// BlockExit is the exit code Claude Code reads as "blocking error": for
// PreToolUse the call is blocked and stderr is what Claude is told.
const BlockExit = 2

// Config shapes the hook.
type Config struct {
	AgentID string        // the agent definition; "" means "default"
	Timeout time.Duration // bound on each RPC; DefaultTimeout when 0
	// Exec is the absolute path of the toolpdp binary an allowed Bash call
	// is rewritten to run through (toolpdp exec --decision); "" runs
	// nothing confined. CanConfine says whether this machine can confine
	// (toolpdp exec --check); nil: it cannot.
	Exec       string
	CanConfine func() error
}

// Result is what the hook process does: print Stdout (a JSON answer, or
// nothing), print Stderr, exit with Code.
type Result struct {
	Stdout []byte
	Stderr string
	Code   int
}

// Output is the JSON a hook prints: the common fields and PreToolUse's own.
type Output struct {
	Continue           *bool             `json:"continue,omitempty"` // false: Claude stops after this hook
	StopReason         string            `json:"stopReason,omitempty"`
	HookSpecificOutput *PreToolUseOutput `json:"hookSpecificOutput,omitempty"`
}

// PreToolUseOutput is PreToolUse's decision control.
type PreToolUseOutput struct {
	HookEventName            string `json:"hookEventName"`      // always "PreToolUse"
	PermissionDecision       string `json:"permissionDecision"` // allow, deny or ask
	PermissionDecisionReason string `json:"permissionDecisionReason"`
	// UpdatedInput replaces the tool's input before it runs: an allowed
	// Bash call's command becomes its confined run.
	UpdatedInput map[string]any `json:"updatedInput,omitempty"`
}

// Handle answers one hook event read from in, asking svc. It never returns
// an answer that lets a tool run on a failure: see the package comment.
func Handle(ctx context.Context, svc pb.DecisionServiceClient, cfg Config, in io.Reader) Result {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ev, err := ParseEvent(in)
	if err != nil {
		// We cannot tell what the event was, so answer in the one form every
		// event understands: exit 2 blocks a tool call and shows the reason.
		return Result{Stderr: "toolpdp: " + err.Error() + "; the tool call is denied\n", Code: BlockExit}
	}
	h := handler{svc: svc, cfg: cfg}
	switch ev.HookEventName {
	case PreToolUse:
		return h.preToolUse(ctx, ev)
	case PostToolUse, PostToolUseFailure:
		return h.postToolUse(ctx, ev)
	default: // SessionEnd; ParseEvent refused every other name
		return h.sessionEnd(ctx, ev)
	}
}

type handler struct {
	svc pb.DecisionServiceClient
	cfg Config
}

// preToolUse: Decide, then map the answer. Any failure is a JSON deny.
func (h handler) preToolUse(ctx context.Context, ev *Event) Result {
	req, err := h.decideRequest(ev)
	if err != nil {
		return answer(deny(fmt.Sprintf("toolpdp could not read the arguments of %s (%v), so it is denied", ev.ToolName, err)))
	}
	var note string
	command, shell := bashCommand(ev)
	confined := false
	if shell {
		confined, note = h.confinable()
		req.Confined = confined
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	resp, err := h.svc.Decide(ctx, req)
	switch {
	case err != nil:
		return withNote(answer(deny(fmt.Sprintf("the policy sidecar could not be asked (%s), so %s is denied", statusText(err), ev.ToolName))), note)
	case resp.GetDecision() == pb.Decision_DECISION_UNSPECIFIED:
		return withNote(answer(deny(fmt.Sprintf("the policy sidecar gave no decision, so %s is denied", ev.ToolName))), note)
	}
	out := decisionOutput(resp)
	if shell && resp.GetDecision() == pb.Decision_DECISION_ALLOW {
		switch {
		case confined && resp.GetExecution() != nil:
			// The command the model wrote runs, exactly, through toolpdp
			// exec with the execution of this very decision. (An allow
			// with no execution has no scopes to be confined to.)
			out.HookSpecificOutput.UpdatedInput = confinedInput(ev, h.cfg.Exec, resp.GetDecisionId(), command)
			out.HookSpecificOutput.PermissionDecisionReason += "; it runs confined to the decided scopes (toolpdp exec)"
		case resp.GetExecution().GetConfinementRequired():
			out = deny(fmt.Sprintf("toolpdp allowed %s only to run confined, and this machine cannot confine it (%s), so it is denied", ev.ToolName, note))
		}
	}
	return withNote(answer(out), note)
}

// confinable says whether an allowed Bash call can run confined here, and
// when not, why (for stderr: the call is then decided without confined).
func (h handler) confinable() (bool, string) {
	switch {
	case h.cfg.Exec == "":
		return false, "no toolpdp binary to run it through"
	case h.cfg.CanConfine == nil:
		return false, "confinement is not checked"
	}
	if err := h.cfg.CanConfine(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

func withNote(r Result, note string) Result {
	if note != "" {
		r.Stderr += "toolpdp: this machine cannot confine shell commands (" + note + "): Bash is decided without confinement and runs unconfined\n"
	}
	return r
}

// bashCommand is a Bash call's command, when the event is one.
func bashCommand(ev *Event) (string, bool) {
	if ev.ToolName != "Bash" {
		return "", false
	}
	var in struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(ev.ToolInput, &in) != nil || in.Command == nil {
		return "", false
	}
	return *in.Command, true
}

// confinedInput is the Bash input that runs command through toolpdp exec
// under decision id: every other field kept, the command replaced by
// exactly 'EXEC' exec --decision ID --command-b64 BASE64 — the binary by
// its absolute path, single-quoted, so no function, alias or PATH entry
// can stand in for it, and the command as base64, so no quoting stands
// between what was decided and what runs.
func confinedInput(ev *Event, exec, id, command string) map[string]any {
	in := map[string]any{}
	_ = json.Unmarshal(ev.ToolInput, &in)
	in["command"] = ConfinedCommand(exec, id, command)
	return in
}

// ConfinedCommand is the shell command that runs command confined under
// the allow id, through the toolpdp binary at exec.
func ConfinedCommand(exec, id, command string) string {
	return "'" + strings.ReplaceAll(exec, "'", `'\''`) + "' exec --decision " + id + " --command-b64 " + base64.StdEncoding.EncodeToString([]byte(command))
}

// decideRequest maps the event: the hook's session is toolpdp's session,
// tool_use_id is the call_id (PostToolUse reports by it), and MCP tools
// keep the mcp__server__tool name Claude Code gives them — the sidecar
// splits it into server and tool, so server stays empty.
func (h handler) decideRequest(ev *Event) (*pb.DecideRequest, error) {
	req := &pb.DecideRequest{AgentId: h.cfg.AgentID, SessionId: ev.SessionID, ToolName: ev.ToolName, CallId: ev.ToolUseID}
	var args map[string]any
	if len(ev.ToolInput) > 0 {
		if err := json.Unmarshal(ev.ToolInput, &args); err != nil {
			return nil, err
		}
	}
	if args != nil {
		s, err := structpb.NewStruct(args)
		if err != nil {
			return nil, err
		}
		req.Args = s
	}
	return req, nil
}

// decisionOutput maps a DecideResponse to Claude Code's decision control.
// halt (the session reached its consecutive cap) also stops Claude: the
// loop is flailing and a person should look.
func decisionOutput(resp *pb.DecideResponse) Output {
	var out Output
	switch resp.GetDecision() {
	case pb.Decision_DECISION_ALLOW:
		out = preToolUse("allow", orDefault(resp.GetMessage(), "allowed by toolpdp ("+decidingRule(resp)+", revision "+resp.GetPolicyRevision()+")"))
	case pb.Decision_DECISION_ASK:
		out = preToolUse("ask", orDefault(resp.GetMessage(), "toolpdp asks a person to confirm this call ("+decidingRule(resp)+")"))
	default:
		out = deny(orDefault(resp.GetMessage(), "denied by toolpdp ("+decidingRule(resp)+")"))
	}
	if resp.GetHalt() {
		out = halted(out, "toolpdp: this session reached its cap of consecutive denials and tool errors; stopping so a person can look. Last: "+resp.GetMessage())
	}
	return out
}

// decidingRule is the first reason with the decision's effect: reasons
// come in precedence order.
func decidingRule(resp *pb.DecideResponse) string {
	for _, r := range resp.GetReasons() {
		if r.GetEffect() == resp.GetDecision() {
			return r.GetRule()
		}
	}
	return "no rule named"
}

// postToolUse reports how an allowed call ended, by its tool_use_id.
//   - halt, or a report that could not be made (sidecar down, timeout): stop
//     Claude. Errors share the consecutive cap with denials; a result we
//     cannot count is not a reason to run more.
//   - NOT_FOUND / FAILED_PRECONDITION: the sidecar has no allowed call of
//     that id — the PreToolUse hook did not cover the tool, or the call was
//     an ask that a person approved in Claude Code's own dialog (toolpdp does
//     not hear that answer). Nothing to count; exit 0 with a note.
func (h handler) postToolUse(ctx context.Context, ev *Event) Result {
	isErr, msg := toolFailed(ev)
	req := &pb.ReportResultRequest{CallId: ev.ToolUseID, AgentId: h.cfg.AgentID, SessionId: ev.SessionID, IsError: isErr}
	if isErr {
		req.Error = clip.Head(orDefault(msg, "the tool failed"), 4096)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	resp, err := h.svc.ReportResult(ctx, req)
	switch {
	case err == nil && resp.GetHalt():
		return answer(halted(Output{}, fmt.Sprintf("toolpdp: %s failed and this session reached its cap of consecutive denials and tool errors; stopping so a person can look", ev.ToolName)))
	case err == nil:
		return Result{}
	case status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition:
		return Result{Stderr: fmt.Sprintf("toolpdp: the result of %s (%s) was not counted: %s\n", ev.ToolName, ev.ToolUseID, statusText(err))}
	}
	return answer(halted(Output{}, fmt.Sprintf("toolpdp: the result of %s could not be reported (%s); stopping, since tool errors can no longer be counted", ev.ToolName, statusText(err))))
}

// toolFailed says whether the event reports a failed tool, and why.
// PostToolUseFailure always does. A PostToolUse response says so itself in
// the shapes tools use: {"is_error": true} (tool results), {"isError": true}
// (MCP's CallToolResult), {"success": false}, or a non-empty "error".
func toolFailed(ev *Event) (bool, string) {
	if ev.HookEventName == PostToolUseFailure {
		if ev.IsInterrupt {
			return true, orDefault(ev.Error, "interrupted by the user")
		}
		return true, ev.Error
	}
	var resp map[string]json.RawMessage
	if json.Unmarshal(ev.ToolResponse, &resp) != nil {
		return false, "" // a string, a list: content, not a status
	}
	flag := func(key string) (bool, bool) {
		var b bool
		err := json.Unmarshal(resp[key], &b)
		return b, err == nil && resp[key] != nil
	}
	var errText string
	_ = json.Unmarshal(resp["error"], &errText)
	if b, ok := flag("is_error"); ok && b {
		return true, orDefault(errText, contentText(resp["content"]))
	}
	if b, ok := flag("isError"); ok && b {
		return true, orDefault(errText, contentText(resp["content"]))
	}
	if b, ok := flag("success"); ok && !b {
		return true, errText
	}
	return errText != "", errText
}

// contentText is the text of an MCP result's content, for the decision log.
func contentText(raw json.RawMessage) string {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	_ = json.Unmarshal(raw, &parts)
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// sessionEnd releases the session's pin, count and remembered approvals.
// Claude Code cannot be stopped from ending a session; a failure is only
// reported (exit 1: shown, non-blocking) — the sidecar's idle timeout
// releases the session anyway.
func (h handler) sessionEnd(ctx context.Context, ev *Event) Result {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	if _, err := h.svc.EndSession(ctx, &pb.EndSessionRequest{AgentId: h.cfg.AgentID, SessionId: ev.SessionID}); err != nil {
		return Result{Stderr: fmt.Sprintf("toolpdp: could not end session %s (%s); the sidecar releases it when idle\n", ev.SessionID, statusText(err)), Code: 1}
	}
	return Result{}
}

func preToolUse(decision, reason string) Output {
	return Output{HookSpecificOutput: &PreToolUseOutput{HookEventName: PreToolUse, PermissionDecision: decision, PermissionDecisionReason: reason}}
}

func deny(reason string) Output { return preToolUse("deny", reason) }

func halted(out Output, reason string) Output {
	stop := false
	out.Continue, out.StopReason = &stop, reason
	return out
}

// answer prints out as JSON and exits 0. Marshalling these types cannot
// fail; if it ever did, exit 2 still blocks.
func answer(out Output) Result {
	b, err := json.Marshal(out)
	if err != nil {
		return Result{Stderr: "toolpdp: " + err.Error() + "; the tool call is denied\n", Code: BlockExit}
	}
	return Result{Stdout: append(b, '\n')}
}

// statusText is a gRPC error as "CODE: message", short enough for a reason.
func statusText(err error) string {
	s := status.Convert(err)
	return clip.Head(s.Code().String()+": "+s.Message(), 512)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
