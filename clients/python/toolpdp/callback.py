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
    """An async callable of the permission_callback shape."""

    def __init__(self, client, ask_user):
        self.client, self.ask_user = client, ask_user
        self.last_decision_id = ""  # the call report_result reports on by default

    async def __call__(self, ctx):
        verdict = await self.client.check(ctx.tool_name, getattr(ctx, "args", None) or None,
                                          server=getattr(ctx, "server", "") or "",
                                          category=getattr(ctx, "category", pb.CATEGORY_UNSPECIFIED) or pb.CATEGORY_UNSPECIFIED,
                                          env=getattr(ctx, "env", None))
        self.last_decision_id = verdict.decision_id
        if verdict.allowed:
            return Decision(True, halt=verdict.halt, verdict=verdict)
        if not verdict.asked:
            return Decision(False, verdict.message, halt=verdict.halt, verdict=verdict)
        try:
            answer = await self.ask_user(ctx, verdict.message)
            confirmed = await self.client.confirm(verdict.decision_id, answer.allowed,
                                                  deny_message="" if answer.allowed else answer.message,
                                                  remember=answer.allowed and answer.remember)
        except Exception as e:  # the UI failed, or the answer was not recorded: fail closed
            return Decision(False, "the call was not confirmed (%r), so %s is denied" % (e, ctx.tool_name),
                            verdict=verdict)
        answer.halt, answer.verdict = confirmed.halt, verdict
        return answer

    async def report_result(self, error=None, decision_id=""):
        """Report how the last allowed call (or decision_id) ended; returns halt."""
        return await self.client.report_result(decision_id or self.last_decision_id, error)
