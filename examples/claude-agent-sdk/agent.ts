// A Claude Agent SDK agent governed by toolpdp: every tool call is decided
// by the sidecar before it runs; an ask waits for a person (answered with
// `toolpdp confirm`, the console or a chat bot); each outcome is reported so
// tool errors share the session's consecutive cap with denials.
//
//   TOOLPDP_ADDR=unix:///var/run/toolpdp/agent.sock node agent.js "fix the failing test"
import { randomUUID } from "node:crypto";
import { query } from "@anthropic-ai/claude-agent-sdk";
import { ToolpdpClient } from "@toolpdp/client";
import { canUseTool, reportResults } from "@toolpdp/client/claude-agent-sdk";

const toolpdp = new ToolpdpClient({
  address: process.env.TOOLPDP_ADDR ?? "127.0.0.1:8787",
  tokenFile: process.env.TOOLPDP_TOKEN_FILE,
});
const governed = { agentId: "coder", sessionId: randomUUID() };

try {
  for await (const message of query({
    prompt: process.argv[2] ?? "List the files in this repository.",
    options: {
      // The SDK asks canUseTool for every call its own rules do not settle.
      permissionMode: "default",
      canUseTool: canUseTool(toolpdp, { ...governed, waitForPerson: true }),
      hooks: reportResults(toolpdp, governed),
    },
  })) {
    if (message.type === "result") {
      console.log(message.subtype === "success" ? message.result : `stopped: ${message.subtype}`);
    }
  }
} finally {
  await toolpdp.endSession(governed.agentId, governed.sessionId).catch(() => undefined);
  toolpdp.close();
}
