// Starts a real `toolpdp serve` for the tests: built from this repository
// (or TOOLPDP_BIN), a bundle on disk, the agent's socket and the
// approver's socket apart, as the manifests lay them out.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync, existsSync, rmSync, readFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { DecisionService } from "../dist/gen/toolpdp/v1/toolpdp_pb.js";

const repo = resolve(import.meta.dirname, "../../..");

let built;
export function toolpdpBinary() {
  if (process.env.TOOLPDP_BIN) return process.env.TOOLPDP_BIN;
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "toolpdp-bin-"));
    built = join(dir, "toolpdp");
    execFileSync("go", ["build", "-o", built, "./cmd/toolpdp"], { cwd: repo, stdio: "inherit" });
  }
  return built;
}

export const agents = {
  ts: {
    tools: [{ type: "agent_toolset", default_config: { permission_policy: { type: "always_allow" } },
              configs: [{ name: "Write", permission_policy: { type: "always_ask" } }] }],
    guardrails: { deny_commands: ["curl"] },
    max_consecutive_denials: 2,
  },
};

export async function startServer() {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "toolpdp-ts-")));
  mkdirSync(join(dir, "bundle", "agents"), { recursive: true });
  // "boxed" trusts confined calls, over a workspace holding a .env.
  const work = join(dir, "work");
  mkdirSync(join(work, ".git"), { recursive: true });
  writeFileSync(join(work, "a.txt"), "TODO first\n");
  writeFileSync(join(work, ".env"), "SECRET=hunter2-in-dotenv\n");
  writeFileSync(join(work, ".git", "config"), "[core]\n");
  const boxed = {
    tools: [{ type: "agent_toolset", default_config: { permission_policy: { type: "always_allow" } } }],
    execution_policy: { cwd: work, read_paths: [work], write_paths: [work], network: "none", confinement: "trusted" },
    guardrails: { deny_commands: ["curl"], protected_paths: [".env"] },
  };
  writeFileSync(join(dir, "bundle", "agents", "data.json"), JSON.stringify({ ...agents, boxed }));
  const agentSock = join(dir, "agent.sock");
  const approverSock = join(dir, "approver.sock");
  const log = join(dir, "server.log");
  const proc = spawn(toolpdpBinary(), [
    "serve", "--bundle", join(dir, "bundle"),
    "--listen", `unix://${agentSock}`, "--confirm-listen", `unix://${approverSock}`,
    "--metrics-listen", "", "--decision-log", "off",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (b) => { stderr += b; });
  for (let i = 0; i < 200 && !(existsSync(agentSock) && existsSync(approverSock)); i++) {
    if (proc.exitCode !== null) break;
    await sleep(50);
  }
  if (!existsSync(agentSock)) {
    proc.kill("SIGKILL");
    throw new Error(`toolpdp serve did not start:\n${stderr}`);
  }
  return {
    address: `unix://${agentSock}`,
    approverAddress: `unix://${approverSock}`,
    dir,
    work,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        await new Promise((r) => proc.once("exit", r));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// The approver's side, as a console or `toolpdp confirm` would call it:
// Confirm on the approver's socket, with the generated schemas.
export function confirm(approverAddress, req) {
  const client = new grpc.Client(approverAddress, grpc.credentials.createInsecure());
  const m = DecisionService.method.confirm;
  return new Promise((res, rej) => {
    client.makeUnaryRequest(`/${DecisionService.typeName}/${m.name}`,
      (v) => Buffer.from(toBinary(m.input, v)), (b) => fromBinary(m.output, b),
      create(m.input, req), new grpc.Metadata(), { deadline: new Date(Date.now() + 5000) },
      (err, v) => { client.close(); err ? rej(err) : res(v); });
  });
}
