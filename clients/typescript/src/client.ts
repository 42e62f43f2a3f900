// A fail-closed client of a toolpdp sidecar. check() never throws and never
// allows on failure: an unreachable, slow or failing sidecar, or an answer
// it cannot read, is a deny whose message says why — an agent hook that
// fails open turns an outage into a bypass.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type JsonObject, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { DescMethodUnary } from "@bufbuild/protobuf";
import {
  AskState,
  Decision as WireDecision,
  DecisionService,
  type DecideResponse,
  type Execution as WireExecution,
} from "./gen/toolpdp/v1/toolpdp_pb.js";

/** How long one call may take when the caller gives no bound. */
export const DEFAULT_TIMEOUT_MS = 2000;
/** The server answers one AwaitDecision after at most this long. */
export const MAX_WAIT_SECONDS = 60;

export interface ClientOptions {
  /** "host:port" or "unix:///path/to.sock". */
  address: string;
  /** A file holding the bearer token of a workspace; read again on every call, so a rotated Secret takes effect. */
  tokenFile?: string;
  /** The bound on one call (default 2000 ms). */
  timeoutMs?: number;
  /** Channel credentials; plaintext by default (a sidecar on the pod's loopback or a shared socket). */
  credentials?: grpc.ChannelCredentials;
}

export type DecisionName = "allow" | "deny" | "ask";

export interface Reason {
  axis: string;
  rule: string;
  effect: DecisionName | "unspecified";
  message: string;
}

export interface Execution {
  env: Record<string, string>;
  cwd: string;
  envEnforced: boolean;
  /** The effective scopes for a confined run; undefined when not enforced. */
  readPaths?: string[];
  writePaths?: string[];
  /** "none" when the policy forbids network use. */
  network: string;
  /** The decision relied on the call running confined: never run it otherwise. */
  confinementRequired: boolean;
}

export interface Verdict {
  decision: DecisionName;
  message: string;
  decisionId: string;
  halt: boolean;
  execution?: Execution;
  reasons: Reason[];
  policyRevision: string;
}

export interface CheckRequest {
  agentId: string;
  sessionId?: string;
  toolName: string;
  server?: string;
  args?: Record<string, unknown>;
  env?: Record<string, string>;
  callId?: string;
  /** The caller will run this call through `toolpdp exec` (or not at all); counts as the agent's execution_policy.confinement says. */
  confined?: boolean;
}

export interface CheckOptions {
  /** On an ask, wait for the person's answer (AwaitDecision, again and again) and return it. */
  waitForPerson?: boolean;
  /** Ends a wait for a person: the answer is then a deny saying so. */
  signal?: AbortSignal;
}

export type AskRef = { decisionId: string } | { callId: string; agentId: string; sessionId: string };

export type AskStateName = "pending" | "answered" | "expired";

export interface AskAnswer {
  state: AskStateName;
  /** When answered: allow or deny; when expired: deny. */
  decision?: "allow" | "deny";
  message: string;
  execution?: Execution;
  halt: boolean;
  decisionId: string;
}

export interface ToolRef {
  name: string;
  server?: string;
}

export interface FilteredTools {
  visible: ToolRef[];
  hidden: { tool: ToolRef; reason: string }[];
}

/** An error the sidecar answered with (NOT_FOUND, FAILED_PRECONDITION, …), or a transport failure. */
export class ToolpdpError extends Error {
  constructor(
    message: string,
    readonly code: grpc.status,
  ) {
    super(message);
    this.name = "ToolpdpError";
  }
}

const decisionNames: Record<number, DecisionName | undefined> = {
  [WireDecision.ALLOW]: "allow",
  [WireDecision.DENY]: "deny",
  [WireDecision.ASK]: "ask",
};

export class ToolpdpClient {
  readonly #client: grpc.Client;
  readonly #tokenFile?: string;
  readonly #timeoutMs: number;

  constructor(opts: ClientOptions) {
    // Every method is a unary call made with the generated message schemas,
    // so the client needs no second code generator.
    this.#client = new grpc.Client(opts.address, opts.credentials ?? grpc.credentials.createInsecure());
    this.#tokenFile = opts.tokenFile;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Closes the connection. */
  close(): void {
    this.#client.close();
  }

  /**
   * Asks for a decision. Never throws, never allows on failure: any error
   * comes back as a deny whose message says why, for the model to read.
   */
  async check(req: CheckRequest, opts: CheckOptions = {}): Promise<Verdict> {
    let resp: DecideResponse;
    try {
      resp = await this.#unary(DecisionService.method.decide, {
        agentId: req.agentId,
        sessionId: req.sessionId ?? "",
        toolName: req.toolName,
        server: req.server ?? "",
        args: req.args as JsonObject | undefined,
        env: req.env ?? {},
        callId: req.callId ?? "",
        confined: req.confined ?? false,
      });
    } catch (err) {
      return failClosed(`the policy sidecar could not be asked (${describe(err)}), so ${toolOf(req)} is denied`);
    }
    const decision = decisionNames[resp.decision];
    if (decision === undefined) {
      return failClosed(`the policy sidecar gave no decision, so ${toolOf(req)} is denied`);
    }
    const verdict: Verdict = {
      decision,
      message: resp.message,
      decisionId: resp.decisionId,
      halt: resp.halt,
      execution: execution(resp.execution),
      reasons: resp.reasons.map((r) => ({ axis: r.axis, rule: r.rule, effect: decisionNames[r.effect] ?? "unspecified", message: r.message })),
      policyRevision: resp.policyRevision,
    };
    if (decision !== "ask" || !opts.waitForPerson) {
      return verdict;
    }
    const answer = await this.waitForAnswer({ decisionId: resp.decisionId }, opts.signal);
    return { ...verdict, ...answerVerdict(answer, toolOf(req)) };
  }

  /**
   * Waits for a person's answer to an ask: AwaitDecision again and again
   * until it is answered or expires, or signal aborts. Never throws and
   * never allows on failure: what is not an answered allow is a deny.
   */
  async waitForAnswer(ref: AskRef, signal?: AbortSignal): Promise<AskAnswer> {
    for (;;) {
      if (signal?.aborted) {
        return deniedAnswer(ref, "the wait for a person's answer was cancelled, so the call is denied");
      }
      let answer: AskAnswer;
      try {
        answer = await this.awaitDecision(ref, { waitSeconds: MAX_WAIT_SECONDS, signal });
      } catch (err) {
        if (signal?.aborted) {
          continue;
        }
        return deniedAnswer(ref, `the policy sidecar could not be asked for the person's answer (${describe(err)}), so the call is denied`);
      }
      if (answer.state !== "pending") {
        return answer;
      }
    }
  }

  /** One AwaitDecision: the ask's state now, or after at most waitSeconds (capped at 60 by the server). */
  async awaitDecision(ref: AskRef, opts: { waitSeconds?: number; signal?: AbortSignal } = {}): Promise<AskAnswer> {
    const wait = Math.max(0, Math.min(MAX_WAIT_SECONDS, Math.floor(opts.waitSeconds ?? 0)));
    const resp = await this.#unary(
      DecisionService.method.awaitDecision,
      { ...refFields(ref), waitSeconds: wait },
      { timeoutMs: this.#timeoutMs + wait * 1000, signal: opts.signal },
    );
    const state: AskStateName | undefined = (
      { [AskState.PENDING]: "pending", [AskState.ANSWERED]: "answered", [AskState.EXPIRED]: "expired" } as Record<number, AskStateName>
    )[resp.state];
    if (state === undefined) {
      throw new ToolpdpError("the policy sidecar answered AwaitDecision with no state", grpc.status.UNKNOWN);
    }
    let decision: "allow" | "deny" | undefined;
    if (state === "answered") {
      decision = resp.decision === WireDecision.ALLOW ? "allow" : "deny";
    } else if (state === "expired") {
      decision = "deny";
    }
    return { state, decision, message: resp.message, execution: execution(resp.execution), halt: resp.halt, decisionId: resp.decisionId };
  }

  /** Tells the sidecar how an allowed call ended; returns halt (the session is at its cap: stop the loop). */
  async reportResult(ref: AskRef, result: { isError: boolean; error?: string }): Promise<{ halt: boolean }> {
    const resp = await this.#unary(DecisionService.method.reportResult, {
      ...refFields(ref),
      isError: result.isError,
      error: result.isError ? clip(result.error ?? "", 4096) : "",
    });
    return { halt: resp.halt };
  }

  /** Releases a session's state in the sidecar; found is false when it held none. */
  async endSession(agentId: string, sessionId: string): Promise<{ found: boolean }> {
    const resp = await this.#unary(DecisionService.method.endSession, { agentId, sessionId });
    return { found: resp.found };
  }

  /** Which of these tools some call could allow or ask for the agent, and why each other one is hidden. */
  async filterTools(req: { agentId: string; sessionId?: string; tools: ToolRef[] }): Promise<FilteredTools> {
    const resp = await this.#unary(DecisionService.method.filterTools, {
      agentId: req.agentId,
      sessionId: req.sessionId ?? "",
      tools: req.tools.map((t) => ({ name: t.name, server: t.server ?? "" })),
    });
    const ref = (t?: { name: string; server: string }): ToolRef => ({ name: t?.name ?? "", server: t?.server || undefined });
    return { visible: resp.visible.map(ref), hidden: resp.hidden.map((h) => ({ tool: ref(h.tool), reason: h.reason })) };
  }

  #metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.#tokenFile !== undefined) {
      const token = readFileSync(this.#tokenFile, "utf8").trim();
      md.set("authorization", `Bearer ${token}`);
    }
    return md;
  }

  #unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    req: MessageInitShape<I>,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<MessageShape<O>> {
    return new Promise((resolve, reject) => {
      let md: grpc.Metadata;
      try {
        md = this.#metadata();
      } catch (err) {
        reject(new ToolpdpError(`the token file could not be read: ${describe(err)}`, grpc.status.UNAUTHENTICATED));
        return;
      }
      const deadline = new Date(Date.now() + (opts.timeoutMs ?? this.#timeoutMs));
      const call = this.#client.makeUnaryRequest(
        `/${DecisionService.typeName}/${method.name}`,
        (v: MessageShape<I>) => Buffer.from(toBinary(method.input, v)),
        (b: Buffer) => fromBinary(method.output, b),
        create(method.input, req),
        md,
        { deadline },
        (err: grpc.ServiceError | null, value?: MessageShape<O>) => {
          opts.signal?.removeEventListener("abort", abort);
          if (err) {
            reject(new ToolpdpError(`${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`, err.code));
          } else if (value === undefined) {
            reject(new ToolpdpError("empty answer", grpc.status.UNKNOWN));
          } else {
            resolve(value);
          }
        },
      );
      const abort = () => call.cancel();
      opts.signal?.addEventListener("abort", abort, { once: true });
    });
  }
}

function refFields(ref: AskRef): { decisionId: string; callId: string; agentId: string; sessionId: string } {
  if ("decisionId" in ref) {
    return { decisionId: ref.decisionId, callId: "", agentId: "", sessionId: "" };
  }
  return { decisionId: "", callId: ref.callId, agentId: ref.agentId, sessionId: ref.sessionId };
}

function execution(e?: WireExecution): Execution | undefined {
  if (e === undefined) {
    return undefined;
  }
  return {
    env: { ...e.env },
    cwd: e.cwd,
    envEnforced: e.envEnforced,
    readPaths: e.readPaths ? [...e.readPaths.paths] : undefined,
    writePaths: e.writePaths ? [...e.writePaths.paths] : undefined,
    network: e.network,
    confinementRequired: e.confinementRequired,
  };
}

function answerVerdict(a: AskAnswer, tool: string): Partial<Verdict> {
  if (a.state === "answered" && a.decision === "allow") {
    return { decision: "allow", message: a.message, halt: a.halt, execution: a.execution };
  }
  const why = a.state === "expired" ? `nobody answered the ask in time, so ${tool} is denied` : `a person denied ${tool}`;
  return { decision: "deny", message: a.message || why, halt: a.halt, execution: undefined };
}

function deniedAnswer(ref: AskRef, message: string): AskAnswer {
  return { state: "answered", decision: "deny", message, halt: false, decisionId: "decisionId" in ref ? ref.decisionId : "" };
}

function failClosed(message: string): Verdict {
  return {
    decision: "deny",
    message,
    decisionId: "",
    halt: false,
    reasons: [{ axis: "client", rule: "fail_closed", effect: "deny", message }],
    policyRevision: "",
  };
}

function toolOf(req: { toolName?: string }): string {
  return req.toolName ? `the tool ${JSON.stringify(clip(req.toolName, 200))}` : "the tool call (it names no tool)";
}

function describe(err: unknown): string {
  return clip(err instanceof Error ? err.message : String(err), 300);
}

/** Cuts s to at most n UTF-16 code units without splitting a surrogate pair. */
function clip(s: string, n: number): string {
  if (s.length <= n) {
    return s;
  }
  const end = n > 0 && s.charCodeAt(n - 1) >= 0xd800 && s.charCodeAt(n - 1) <= 0xdbff ? n - 1 : n;
  return s.slice(0, end);
}
