// The packed tarball, installed into an empty project and imported by its
// package name, decides against a real server: what a user of the published
// package gets.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startServer } from "./server.mjs";

const pkg = resolve(import.meta.dirname, "..");
let server;
let work;
before(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), "toolpdp-pack-"));
});
after(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

test("npm pack, installed into an empty project, imports by name and decides", () => {
  const out = execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", work], { cwd: pkg, encoding: "utf8" });
  const tarball = join(work, out.trim().split("\n").pop());
  const project = join(work, "project");
  execFileSync("mkdir", ["-p", project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--omit=peer", tarball], { cwd: project, stdio: "pipe" });
  writeFileSync(
    join(project, "main.js"),
    `import { ToolpdpClient } from "@toolpdp/client";
     import { canUseTool } from "@toolpdp/client/claude-agent-sdk";
     import { toolInputGuardrail } from "@toolpdp/client/openai-agents";
     const client = new ToolpdpClient({ address: process.argv[2] });
     const v = await client.check({ agentId: "ts", toolName: "Read" });
     const can = await canUseTool(client, { agentId: "ts" })("Bash", { command: "curl x" }, { signal: new AbortController().signal, toolUseID: "p1", requestId: "r" });
     const g = await toolInputGuardrail(client, { agentId: "ts" }).run({ toolCall: { type: "function_call", callId: "p2", name: "Read", arguments: "{}" } });
     client.close();
     console.log(JSON.stringify({ decision: v.decision, can: can.behavior, guardrail: g.behavior.type }));`,
  );
  const result = JSON.parse(execFileSync("node", ["main.js", server.address], { cwd: project, encoding: "utf8" }));
  assert.deepEqual(result, { decision: "allow", can: "deny", guardrail: "allow" });
});
