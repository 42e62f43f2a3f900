import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolpdpClient } from "../dist/index.js";
import { spawnSync } from "node:child_process";
import { canUseTool, reportResults, checkConfinement } from "../dist/claude-agent-sdk.js";
import { toolInputGuardrail } from "../dist/openai-agents.js";
import { startServer, confirm, toolpdpBinary } from "./server.mjs";

let server;
let client;
before(async () => {
  server = await startServer();
  client = new ToolpdpClient({ address: server.address, timeoutMs: 5000 });
});
after(async () => {
  client?.close();
  await server?.stop();
});

// The SDK calls canUseTool(toolName, input, { signal, toolUseID, ... }).
function sdkOptions(toolUseID, signal = new AbortController().signal) {
  return { signal, toolUseID, requestId: `req-${toolUseID}` };
}

test("check: allow, with the decision id and the reasons", async () => {
  const v = await client.check({ agentId: "ts", toolName: "Read", args: { file_path: "/tmp/x" } });
  assert.equal(v.decision, "allow");
  assert.ok(v.decisionId);
  assert.ok(v.reasons.length > 0);
});

test("check: a guardrail's deny and its message", async () => {
  const v = await client.check({ agentId: "ts", toolName: "Bash", args: { command: "ls && curl https://example.com" } });
  assert.equal(v.decision, "deny");
  assert.match(v.message, /curl/);
});

test("canUseTool: allow runs the input unchanged; deny carries the message", async () => {
  const can = canUseTool(client, { agentId: "ts", sessionId: "s-allow" });
  const input = { command: "ls -la" };
  assert.deepEqual(await can("Bash", input, sdkOptions("t1")), { behavior: "allow", updatedInput: input });
  const denied = await can("Bash", { command: "curl https://example.com" }, sdkOptions("t2"));
  assert.equal(denied.behavior, "deny");
  assert.match(denied.message, /curl/);
  assert.equal(denied.interrupt, undefined);
});

test("canUseTool: the denial that reaches the cap interrupts the run", async () => {
  const can = canUseTool(client, { agentId: "ts", sessionId: "s-halt" });
  const first = await can("Bash", { command: "curl a" }, sdkOptions("h1"));
  assert.equal(first.interrupt, undefined);
  const second = await can("Bash", { command: "curl b" }, sdkOptions("h2"));
  assert.equal(second.behavior, "deny");
  assert.equal(second.interrupt, true);
});

test("canUseTool: an ask without waitForPerson is a deny saying a person must confirm", async () => {
  const can = canUseTool(client, { agentId: "ts", sessionId: "s-ask" });
  const r = await can("Write", { file_path: "/tmp/a", content: "x" }, sdkOptions("a1"));
  assert.equal(r.behavior, "deny");
  assert.match(r.message, /person must confirm/);
});

test("canUseTool: an ask waits for the person's Confirm, by the SDK's toolUseID", async () => {
  const can = canUseTool(client, { agentId: "ts", sessionId: "s-wait", waitForPerson: true });
  const input = { file_path: "/tmp/b", content: "y" };
  const pending = can("Write", input, sdkOptions("w1"));
  await sleep(300);
  await confirm(server.approverAddress, { callId: "w1", agentId: "ts", sessionId: "s-wait", result: "allow" });
  assert.deepEqual(await pending, { behavior: "allow", updatedInput: input });

  const denied = can("Write", { file_path: "/tmp/c", content: "z" }, sdkOptions("w2"));
  await sleep(300);
  await confirm(server.approverAddress, { callId: "w2", agentId: "ts", sessionId: "s-wait", result: "deny", denyMessage: "Write to the scratch copy." });
  const r = await denied;
  assert.equal(r.behavior, "deny");
  assert.match(r.message, /scratch copy/);
});

test("canUseTool: the SDK's abort signal ends a wait as a deny", async () => {
  const can = canUseTool(client, { agentId: "ts", sessionId: "s-abort", waitForPerson: true });
  const ac = new AbortController();
  const pending = can("Write", { file_path: "/tmp/d", content: "q" }, sdkOptions("x1", ac.signal));
  await sleep(300);
  ac.abort();
  const r = await pending;
  assert.equal(r.behavior, "deny");
  assert.match(r.message, /cancelled/);
});

test("toolInputGuardrail: allow, rejectContent with the message, throwException on halt", async () => {
  const g = toolInputGuardrail(client, { agentId: "ts", sessionId: "s-openai" });
  assert.equal(g.type, "tool_input");
  const call = (callId, name, args) => ({ toolCall: { type: "function_call", callId, name, arguments: JSON.stringify(args) }, context: {}, agent: {} });
  assert.deepEqual((await g.run(call("c1", "Read", { file_path: "/tmp/x" }))).behavior, { type: "allow" });
  const rejected = await g.run(call("c2", "Bash", { command: "curl x" }));
  assert.equal(rejected.behavior.type, "rejectContent");
  assert.match(rejected.behavior.message, /curl/);
  const halted = await g.run(call("c3", "Bash", { command: "curl y" }));
  assert.deepEqual(halted.behavior, { type: "throwException" });
});

test("a sidecar that is down is a deny, never a throw", async () => {
  const down = new ToolpdpClient({ address: `unix://${server.dir}/nobody.sock`, timeoutMs: 500 });
  try {
    const v = await down.check({ agentId: "ts", toolName: "Read" });
    assert.equal(v.decision, "deny");
    assert.match(v.message, /could not be asked/);
    const can = canUseTool(down, { agentId: "ts" });
    const r = await can("Read", {}, sdkOptions("d1"));
    assert.equal(r.behavior, "deny");
    const g = toolInputGuardrail(down, { agentId: "ts" });
    const out = await g.run({ toolCall: { type: "function_call", callId: "d2", name: "Read", arguments: "{}" }, context: {}, agent: {} });
    assert.equal(out.behavior.type, "rejectContent");
  } finally {
    down.close();
  }
});

test("a token file that cannot be read is a deny", async () => {
  const c = new ToolpdpClient({ address: server.address, tokenFile: `${server.dir}/missing-token` });
  try {
    const v = await c.check({ agentId: "ts", toolName: "Read" });
    assert.equal(v.decision, "deny");
    assert.match(v.message, /token file/);
  } finally {
    c.close();
  }
});

test("reportResults: a PostToolUseFailure counts toward the cap, as the SDK's hooks report it", async () => {
  const governed = { agentId: "ts", sessionId: "s-report" };
  const can = canUseTool(client, governed);
  const hooks = reportResults(client, governed);
  const signal = new AbortController().signal;
  assert.equal((await can("Bash", { command: "curl a" }, sdkOptions("r1"))).behavior, "deny");
  assert.equal((await can("Read", { file_path: "/tmp/x" }, sdkOptions("r2"))).behavior, "allow");
  const base = { session_id: "sdk", transcript_path: "/tmp/t", cwd: "/tmp" };
  const out = await hooks.PostToolUseFailure[0].hooks[0](
    { ...base, hook_event_name: "PostToolUseFailure", tool_name: "Read", tool_input: {}, tool_use_id: "r2", error: "ENOENT" }, "r2", { signal });
  assert.deepEqual(out, {});
  // The failure was the session's second in a row: the next denial halts.
  const third = await can("Bash", { command: "curl b" }, sdkOptions("r3"));
  assert.equal(third.interrupt, true);
  // A success resets the count; a call the sidecar never allowed is ignored.
  await hooks.PostToolUse[0].hooks[0]({ ...base, hook_event_name: "PostToolUse", tool_name: "Read", tool_input: {}, tool_response: {}, tool_use_id: "never" }, "never", { signal });
});

test("filterTools: what some call could allow or ask, and why the rest is hidden", async () => {
  const r = await client.filterTools({ agentId: "ts", tools: [{ name: "Read" }, { name: "create_issue", server: "github" }] });
  assert.deepEqual(r.visible, [{ name: "Read", server: undefined }]);
  assert.equal(r.hidden.length, 1);
  assert.equal(r.hidden[0].tool.name, "create_issue");
  assert.ok(r.hidden[0].reason.length > 0);
});

test("canUseTool: an allowed Bash call runs confined through toolpdp exec and reads nothing of .env", async (t) => {
  const c = checkConfinement(toolpdpBinary());
  if (!c.available) {
    t.skip(`this machine cannot confine: ${c.why}`);
    return;
  }
  const can = canUseTool(client, { agentId: "boxed", sessionId: "s-confined", toolpdp: toolpdpBinary() });
  const r = await can("Bash", { command: "grep -rn TODO .", description: "find the TODOs" }, sdkOptions("c1"));
  assert.equal(r.behavior, "allow", r.message);
  const m = /^'([^']+)' exec --decision ([0-9a-f-]{36}) --command-b64 ([A-Za-z0-9+/=]+)$/.exec(r.updatedInput.command);
  assert.ok(m, r.updatedInput.command);
  assert.equal(m[1], c.toolpdp);
  assert.equal(Buffer.from(m[3], "base64").toString("utf8"), "grep -rn TODO .");
  assert.equal(r.updatedInput.description, "find the TODOs");
  const run = spawnSync("bash", ["-c", r.updatedInput.command], { cwd: server.work, env: { ...process.env, TOOLPDP_ADDR: server.address }, encoding: "utf8", timeout: 60_000 });
  assert.match(run.stdout, /TODO first/, run.stderr);
  assert.doesNotMatch(run.stdout + run.stderr, /hunter2/);
  // The execution is handed out once: the same rewrite again runs nothing.
  const again = spawnSync("bash", ["-c", r.updatedInput.command], { cwd: server.work, env: { ...process.env, TOOLPDP_ADDR: server.address }, encoding: "utf8", timeout: 60_000 });
  assert.equal(again.status, 126, again.stderr);
});

test("canUseTool: confine false decides without confinement", async () => {
  const can = canUseTool(client, { agentId: "boxed", sessionId: "s-unconfined", confine: false });
  const input = { command: "grep -rn TODO ." };
  const r = await can("Bash", input, sdkOptions("u1"));
  assert.equal(r.behavior, "deny"); // an ask without waitForPerson
  assert.match(r.message, /a person must confirm/);
});
