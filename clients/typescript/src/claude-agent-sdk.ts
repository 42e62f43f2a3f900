// Adapters for the Claude Agent SDK: canUseTool asks toolpdp before every
// tool call; reportResults tells it how each allowed call ended, so tool
// errors share the session's consecutive cap with denials.
import type { CanUseTool, HookCallback, HookCallbackMatcher, HookEvent, PermissionResult } from "@anthropic-ai/claude-agent-sdk";
import type { ToolpdpClient } from "./client.js";

export interface ClaudeAdapterOptions {
  /** The agent definition toolpdp decides for. */
  agentId: string;
  /** The toolpdp session (e.g. the SDK's session id); "" or absent for none. */
  sessionId?: string;
  /** On an ask, wait for a person's answer (given with `toolpdp confirm`, the console or a chat bot) instead of denying. */
  waitForPerson?: boolean;
}

/**
 * Returns the SDK's canUseTool callback. allow runs the tool with its input
 * unchanged; deny returns toolpdp's message to the model and interrupts the
 * run when the session reached its cap (halt); ask waits for a person when
 * waitForPerson is set (honouring the SDK's abort signal), and is otherwise
 * a deny saying a person must confirm. Never allows on failure.
 */
export function canUseTool(client: ToolpdpClient, opts: ClaudeAdapterOptions): CanUseTool {
  return async (toolName, input, options): Promise<PermissionResult> => {
    const verdict = await client.check(
      { agentId: opts.agentId, sessionId: opts.sessionId, toolName, args: input, callId: options.toolUseID || undefined },
      { waitForPerson: opts.waitForPerson, signal: options.signal },
    );
    switch (verdict.decision) {
      case "allow":
        return { behavior: "allow", updatedInput: input };
      case "ask":
        return {
          behavior: "deny",
          message: `a person must confirm this call before it runs (toolpdp decision ${verdict.decisionId}): ${verdict.message}`,
        };
      default:
        return verdict.halt ? { behavior: "deny", message: verdict.message, interrupt: true } : { behavior: "deny", message: verdict.message };
    }
  };
}

/**
 * Hooks that report each call's outcome to toolpdp by its tool_use_id
 * (the callId canUseTool sent): a PostToolUse is a success, a
 * PostToolUseFailure an error. Pass as the SDK's `hooks` option, or merge
 * with your own. A report the sidecar refuses (a call it never allowed) is
 * ignored: reporting never changes what ran.
 */
export function reportResults(client: ToolpdpClient, opts: Pick<ClaudeAdapterOptions, "agentId" | "sessionId">): Partial<Record<HookEvent, HookCallbackMatcher[]>> {
  const report =
    (isError: boolean): HookCallback =>
    async (input) => {
      const callId = "tool_use_id" in input && typeof input.tool_use_id === "string" ? input.tool_use_id : "";
      if (callId !== "") {
        const error = isError && "error" in input && typeof input.error === "string" ? input.error : undefined;
        try {
          await client.reportResult({ callId, agentId: opts.agentId, sessionId: opts.sessionId ?? "" }, { isError, error });
        } catch {
          // Not an allowed call of this session (or the sidecar is away): nothing to report.
        }
      }
      return {};
    };
  return {
    PostToolUse: [{ hooks: [report(false)] }],
    PostToolUseFailure: [{ hooks: [report(true)] }],
  };
}
