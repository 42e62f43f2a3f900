// An adapter for the OpenAI Agents SDK: a tool input guardrail that asks
// toolpdp before every function tool call runs.
import type { ToolGuardrailFunctionOutput, ToolInputGuardrailDefinition } from "@openai/agents";
import type { ToolpdpClient } from "./client.js";

export interface OpenAIAdapterOptions {
  agentId: string;
  sessionId?: string;
  /** On an ask, wait for a person's answer instead of rejecting the call. */
  waitForPerson?: boolean;
  /** The guardrail's name in traces (default "toolpdp"). */
  name?: string;
}

/**
 * Returns a ToolInputGuardrailDefinition: allow lets the call run; deny
 * (and an ask nobody may wait for) rejects its content with toolpdp's
 * message, so the model reads why; halt throws, ending the run. The call's
 * arguments are the model's JSON string, parsed; arguments that are not a
 * JSON object are sent as {"arguments": "<the text>"} so the policy still
 * sees them. Never allows on failure.
 */
export function toolInputGuardrail(client: ToolpdpClient, opts: OpenAIAdapterOptions): ToolInputGuardrailDefinition {
  return {
    type: "tool_input",
    name: opts.name ?? "toolpdp",
    run: async ({ toolCall }): Promise<ToolGuardrailFunctionOutput> => {
      const verdict = await client.check(
        { agentId: opts.agentId, sessionId: opts.sessionId, toolName: toolCall.name, args: parseArguments(toolCall.arguments), callId: toolCall.callId || undefined },
        { waitForPerson: opts.waitForPerson },
      );
      const outputInfo = { decision: verdict.decision, decisionId: verdict.decisionId, reasons: verdict.reasons };
      if (verdict.decision === "allow") {
        return { behavior: { type: "allow" }, outputInfo };
      }
      if (verdict.halt) {
        return { behavior: { type: "throwException" }, outputInfo: { ...outputInfo, message: verdict.message } };
      }
      const message =
        verdict.decision === "ask"
          ? `a person must confirm this call before it runs (toolpdp decision ${verdict.decisionId}): ${verdict.message}`
          : verdict.message;
      return { behavior: { type: "rejectContent", message }, outputInfo };
    },
  };
}

function parseArguments(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      return v as Record<string, unknown>;
    }
  } catch {
    // fall through: the policy still sees the raw text
  }
  return { arguments: text };
}
