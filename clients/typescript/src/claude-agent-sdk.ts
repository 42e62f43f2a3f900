// Adapters for the Claude Agent SDK: canUseTool asks toolpdp before every
// tool call; reportResults tells it how each allowed call ended, so tool
// errors share the session's consecutive cap with denials.
import { execFileSync } from "node:child_process";
import { accessSync, constants, realpathSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import type { CanUseTool, HookCallback, HookCallbackMatcher, HookEvent, PermissionResult } from "@anthropic-ai/claude-agent-sdk";
import type { ToolpdpClient } from "./client.js";

export interface ClaudeAdapterOptions {
  /** The agent definition toolpdp decides for. */
  agentId: string;
  /** The toolpdp session (e.g. the SDK's session id); "" or absent for none. */
  sessionId?: string;
  /** On an ask, wait for a person's answer (given with `toolpdp confirm`, the console or a chat bot) instead of denying. */
  waitForPerson?: boolean;
  /**
   * Run every allowed Bash call confined (default true): decided with
   * `confined`, and answered with an updatedInput whose command runs it
   * through `toolpdp exec --decision`. false decides without confinement.
   */
  confine?: boolean;
  /** The toolpdp binary a confined Bash call runs through; default TOOLPDP_EXEC, else `toolpdp` on PATH. */
  toolpdp?: string;
}

/** Whether this machine can confine, as `toolpdp exec --check` says; why not when it cannot. */
export interface Confinement {
  available: boolean;
  toolpdp: string;
  why: string;
}

/**
 * Checks once whether a Bash call can run confined here: the toolpdp
 * binary by its absolute path, and `toolpdp exec --check` saying this
 * kernel and node can confine.
 */
export function checkConfinement(toolpdp?: string): Confinement {
  const path = resolveToolpdp(toolpdp);
  if (path === "") {
    return { available: false, toolpdp: "", why: "no toolpdp binary found (set TOOLPDP_EXEC or the toolpdp option)" };
  }
  try {
    const out = execFileSync(path, ["exec", "--check", "--format", "json"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
    const c = JSON.parse(out) as { available?: boolean; error?: string };
    return c.available === true ? { available: true, toolpdp: path, why: "" } : { available: false, toolpdp: path, why: c.error ?? "toolpdp exec --check says no" };
  } catch (err) {
    const stdout = (err as { stdout?: string }).stdout ?? "";
    try {
      const c = JSON.parse(stdout) as { error?: string };
      return { available: false, toolpdp: path, why: c.error ?? String(err) };
    } catch {
      return { available: false, toolpdp: path, why: err instanceof Error ? err.message : String(err) };
    }
  }
}

function resolveToolpdp(given?: string): string {
  const name = given ?? process.env.TOOLPDP_EXEC ?? "toolpdp";
  const candidates = isAbsolute(name) ? [name] : name.includes("/") ? [] : (process.env.PATH ?? "").split(delimiter).filter((d) => isAbsolute(d)).map((d) => join(d, name));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return realpathSync(c);
    } catch {
      // not here
    }
  }
  return "";
}

/**
 * The shell command that runs command confined under the allow decisionId:
 * exactly 'TOOLPDP' exec --decision ID --command-b64 BASE64, the binary by
 * its absolute path, single-quoted, so no function, alias or PATH entry
 * can stand in for it, and the command as base64, so no quoting stands
 * between what was decided and what runs.
 */
export function confinedCommand(toolpdp: string, decisionId: string, command: string): string {
  return `'${toolpdp.replaceAll("'", `'\\''`)}' exec --decision ${decisionId} --command-b64 ${Buffer.from(command, "utf8").toString("base64")}`;
}

/**
 * Returns the SDK's canUseTool callback. allow runs the tool with its input
 * unchanged — except an allowed Bash call, which (unless confine is false,
 * or this machine cannot confine: said once on stderr) is decided
 * confined and runs through `toolpdp exec --decision`; deny returns toolpdp's message to the model and interrupts the
 * run when the session reached its cap (halt); ask waits for a person when
 * waitForPerson is set (honouring the SDK's abort signal), and is otherwise
 * a deny saying a person must confirm. Never allows on failure.
 */
export function canUseTool(client: ToolpdpClient, opts: ClaudeAdapterOptions): CanUseTool {
  let confinement: Confinement = { available: false, toolpdp: "", why: "confine is false" };
  if (opts.confine !== false) {
    confinement = checkConfinement(opts.toolpdp);
    if (!confinement.available) {
      console.warn(`toolpdp: this machine cannot confine shell commands (${confinement.why}): Bash is decided without confinement and runs unconfined`);
    }
  }
  return async (toolName, input, options): Promise<PermissionResult> => {
    const bash = toolName === "Bash" && typeof input.command === "string";
    const confined = bash && confinement.available;
    const verdict = await client.check(
      { agentId: opts.agentId, sessionId: opts.sessionId, toolName, args: input, callId: options.toolUseID || undefined, confined },
      { waitForPerson: opts.waitForPerson, signal: options.signal },
    );
    switch (verdict.decision) {
      case "allow":
        if (confined && verdict.execution !== undefined) {
          // The command the model wrote runs, exactly, through toolpdp exec
          // with the execution of this very decision.
          return { behavior: "allow", updatedInput: { ...input, command: confinedCommand(confinement.toolpdp, verdict.decisionId, input.command as string) } };
        }
        if (bash && verdict.execution?.confinementRequired) {
          return { behavior: "deny", message: `toolpdp allowed ${toolName} only to run confined, and this machine cannot confine it (${confinement.why}), so it is denied` };
        }
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
