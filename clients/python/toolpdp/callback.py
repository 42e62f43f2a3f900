"""toolpdp as an agent's permission_callback.

    pdp = AsyncClient("unix:///run/toolpdp/toolpdp.sock", agent_id="coder", session_id=run_id)
    gate = PermissionGate(pdp, ask_user)
    agent = AgentCore(bindings, permission_callback=gate)   # gate(ctx) -> Decision

ctx carries tool_name, args, server, category (and env when the framework
has it). ALLOW runs the tool; DENY returns the sidecar's message to the
model; ASK hands the call to ask_user(ctx, message) — your UI — and records
the person's answer with Confirm, with remember when the person said "don't
ask me again for this". Fails closed: an unreachable sidecar, an exception
in ask_user or a Confirm that cannot be recorded is a deny.

Where the person answers elsewhere — the console (serve --console-listen),
`toolpdp confirm`, a chat bot told by a notification — pass ask_user=None:
the gate then waits for that answer with AwaitDecision (Confirm is served
only on the approver's address, which the agent's side does not reach)
and returns it: the allow with its execution, or the deny with the
person's message. Cancelling the task (or the wait_timeout) ends the wait
with a deny.
"""
from .v1 import toolpdp_pb2 as pb


class Decision:
    """What the callback answers: allow, or deny with a message for the model.
    halt: stop the loop (the session reached its consecutive cap)."""

    def __init__(self, allowed, message="", remember=False, halt=False, verdict=None):
        self.allowed, self.message, self.remember, self.halt = allowed, message, remember, halt
        self.verdict = verdict  # the sidecar's Verdict: its execution, its decision_id

    @classmethod
    def allow(cls, remember=False):
        """remember: the person does not want to be asked again for exactly this call."""
        return cls(True, remember=remember)

    @classmethod
    def deny(cls, message):
        return cls(False, message)

    def __repr__(self):
        return ("allow" if self.allowed else "deny(%r)" % self.message) + (", halt" if self.halt else "")


class PermissionGate:
    """An async callable of the permission_callback shape, over an AsyncClient.

    It never allows what the sidecar did not allow: a person's allow counts
    only when Confirm answers allow (the policy decides the call again when
    the person answers: a reload that now denies it, or an agent removed
    while the ask was on screen, turns the allow into a deny)."""

    def __init__(self, client, ask_user=None, wait_timeout=None):
        self.client, self.ask_user, self.wait_timeout = client, ask_user, wait_timeout
        self.last_decision_id = ""  # the call report_result reports on by default

    async def __call__(self, ctx):
        verdict = await self.client.check(ctx.tool_name, getattr(ctx, "args", None) or None, **_check_options(ctx))
        self.last_decision_id = verdict.decision_id
        if verdict.asked and self.ask_user is None:  # answered on the approver's side
            verdict = await self.client.wait(verdict, self.wait_timeout)
        if not verdict.asked:
            return _decided(verdict)
        try:
            answer = await self.ask_user(ctx, verdict.message)
            confirmed = await self.client.confirm(verdict.decision_id, answer.allowed,
                                                  deny_message="" if answer.allowed else answer.message,
                                                  remember=answer.allowed and answer.remember)
            return _answered(ctx, verdict, answer, confirmed)
        except Exception as e:  # the UI failed, or the answer was not recorded: fail closed
            return _unconfirmed(ctx, verdict, e)

    async def report_result(self, error=None, decision_id=""):
        """Report how the last allowed call (or decision_id) ended; returns halt."""
        return await self.client.report_result(decision_id or self.last_decision_id, error)


class SyncPermissionGate:
    """PermissionGate for a synchronous loop, over a Client: ask_user(ctx,
    message) returns a Decision. The same rule: only the sidecar's allow
    allows."""

    def __init__(self, client, ask_user=None, wait_timeout=None, cancel=None):
        self.client, self.ask_user, self.wait_timeout, self.cancel = client, ask_user, wait_timeout, cancel
        self.last_decision_id = ""

    def __call__(self, ctx):
        verdict = self.client.check(ctx.tool_name, getattr(ctx, "args", None) or None, **_check_options(ctx))
        self.last_decision_id = verdict.decision_id
        if verdict.asked and self.ask_user is None:  # answered on the approver's side
            verdict = self.client.wait(verdict, self.wait_timeout, self.cancel)
        if not verdict.asked:
            return _decided(verdict)
        try:
            answer = self.ask_user(ctx, verdict.message)
            confirmed = self.client.confirm(verdict.decision_id, answer.allowed,
                                            deny_message="" if answer.allowed else answer.message,
                                            remember=answer.allowed and answer.remember)
            return _answered(ctx, verdict, answer, confirmed)
        except Exception as e:
            return _unconfirmed(ctx, verdict, e)

    def report_result(self, error=None, decision_id=""):
        return self.client.report_result(decision_id or self.last_decision_id, error)


def _check_options(ctx):
    return {"server": getattr(ctx, "server", "") or "",
            "category": getattr(ctx, "category", pb.CATEGORY_UNSPECIFIED) or pb.CATEGORY_UNSPECIFIED,
            "env": getattr(ctx, "env", None)}


def _decided(verdict):
    """A verdict that is not an ask: allow only when the sidecar allowed."""
    if verdict.allowed:
        return Decision(True, halt=verdict.halt, verdict=verdict)
    return Decision(False, verdict.message or "toolpdp did not allow this call", halt=verdict.halt, verdict=verdict)


def _answered(ctx, verdict, answer, confirmed):
    """The person's answer as the sidecar recorded it: their allow stands
    only when Confirm answers allow; anything else is a deny with the
    sidecar's message (the person's deny_message, or the rule that now
    denies the call)."""
    if answer.allowed and confirmed.decision == pb.DECISION_ALLOW:
        return Decision(True, remember=answer.remember, halt=confirmed.halt, verdict=verdict)
    message = confirmed.message or (answer.message if not answer.allowed else "") or (
        "the person allowed %s, but toolpdp denied it when recording the answer (the policy changed while it was "
        "asked); do not retry it" % ctx.tool_name)
    return Decision(False, message, halt=confirmed.halt, verdict=verdict)


def _unconfirmed(ctx, verdict, e):
    return Decision(False, "the call was not confirmed (%r), so %s is denied" % (e, ctx.tool_name), verdict=verdict)
