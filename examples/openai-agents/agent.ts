// An OpenAI Agents SDK agent whose function tools are governed by toolpdp:
// the tool input guardrail asks the sidecar before each call runs; a deny's
// message goes back to the model; a halt ends the run.
//
//   TOOLPDP_ADDR=unix:///var/run/toolpdp/agent.sock node agent.js "what changed today?"
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { randomUUID } from "node:crypto";
import { Agent, run, tool } from "@openai/agents";
import { z } from "zod";
import { ToolpdpClient } from "@toolpdp/client";
import { toolInputGuardrail } from "@toolpdp/client/openai-agents";

const toolpdp = new ToolpdpClient({ address: process.env.TOOLPDP_ADDR ?? "127.0.0.1:8787" });
const sessionId = randomUUID();
const guardrail = toolInputGuardrail(toolpdp, { agentId: "coder", sessionId, waitForPerson: true });

const bash = tool({
  name: "Bash",
  description: "Run a shell command in the project directory and return its output.",
  parameters: z.object({ command: z.string() }),
  inputGuardrails: [guardrail],
  execute: async ({ command }) => {
    const { stdout, stderr } = await promisify(execFile)("bash", ["-c", command], { timeout: 60_000 });
    return stdout + stderr;
  },
});

const agent = new Agent({ name: "coder", instructions: "You are a careful coding assistant.", tools: [bash] });
try {
  const result = await run(agent, process.argv[2] ?? "List the files in this directory.");
  console.log(result.finalOutput);
} finally {
  await toolpdp.endSession("coder", sessionId).catch(() => undefined);
  toolpdp.close();
}
