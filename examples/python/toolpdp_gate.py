"""toolpdp as seed 000's permission_callback, from Python.

    gate = PolicyGate("unix:///var/run/toolpdp/toolpdp.sock", agent_id="coder", session_id=run_id)
    agent = AgentCore(bindings, permission_callback=gate.permission_callback(ask_user))

The gate asks the sidecar before every tool call. ALLOW runs the tool, DENY
returns the sidecar's message to the model, ASK hands the call to
`ask_user` (your UI) and records the person's answer with Confirm — with
`remember` when the person said "don't ask me again for this": later calls
of the session that are exactly this call are then allowed. It fails
closed: an unreachable or failing sidecar is a deny, never an allow.

After the tool ran, `report_result(error)` tells the sidecar how it ended:
errors share the session's consecutive cap with denials (seed 000), and
`halt` (from a decision or a report) means: stop the loop, ask the user.

Stubs: generate them with Debian's protoc and grpc_python_plugin (see ./run).
"""
import grpc
from google.protobuf import struct_pb2

from toolpdp.v1 import toolpdp_pb2 as pb
from toolpdp.v1 import toolpdp_pb2_grpc as pb_grpc


class Decision:
    """What the permission callback answers: allow, or deny with a message."""

    def __init__(self, allowed, message="", remember=False, halt=False):
        self.allowed, self.message, self.remember, self.halt = allowed, message, remember, halt

    @classmethod
    def allow(cls, remember=False):
        """remember: the person does not want to be asked again for exactly this call."""
        return cls(True, remember=remember)

    @classmethod
    def deny(cls, message):
        return cls(False, message)

    def __repr__(self):
        return "allow" if self.allowed else "deny(%r)" % self.message


class PolicyGate:
    def __init__(self, target, agent_id="", session_id="", timeout=2.0):
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = pb_grpc.DecisionServiceStub(self._channel)
        self.agent_id, self.session_id, self.timeout = agent_id, session_id, timeout
        self.last_decision_id = ""  # the allowed call report_result reports on

    async def close(self):
        await self._channel.close()

    async def decide(self, tool_name, args=None, server="", category=pb.CATEGORY_UNSPECIFIED, env=None):
        """The sidecar's DecideResponse; on any failure a DENY explaining why."""
        request = pb.DecideRequest(agent_id=self.agent_id, session_id=self.session_id, tool_name=tool_name,
                                   server=server, category=category, env=env or {})
        if args:
            s = struct_pb2.Struct()
            s.update(args)
            request.args.CopyFrom(s)
        try:
            response = await self._stub.Decide(request, timeout=self.timeout)
        except Exception as e:  # grpc.aio.AioRpcError, timeouts, anything: fail closed
            detail = e.details() if isinstance(e, grpc.aio.AioRpcError) else repr(e)
            return pb.DecideResponse(decision=pb.DECISION_DENY,
                                     message="the policy sidecar could not be asked (%s), so %s is denied" % (detail, tool_name))
        if response.decision == pb.DECISION_UNSPECIFIED:
            return pb.DecideResponse(decision=pb.DECISION_DENY, message="the policy sidecar gave no decision")
        return response

    def permission_callback(self, ask_user):
        """An async callback of seed 000's shape: ctx has tool_name, args, server, category."""

        async def callback(ctx):
            response = await self.decide(ctx.tool_name, ctx.args, ctx.server, ctx.category)
            self.last_decision_id = response.decision_id
            if response.decision == pb.DECISION_ALLOW:
                return Decision(True, halt=response.halt)
            if response.decision == pb.DECISION_ASK:
                answer = await ask_user(ctx, response.message)
                try:
                    confirmed = await self._stub.Confirm(pb.ConfirmRequest(
                        decision_id=response.decision_id, result="allow" if answer.allowed else "deny",
                        deny_message="" if answer.allowed else answer.message,
                        remember=answer.allowed and answer.remember), timeout=self.timeout)
                    answer.halt = confirmed.halt
                except grpc.aio.AioRpcError:
                    pass  # the answer stands; the audit record is best effort
                return answer
            return Decision(False, response.message, halt=response.halt)

        return callback

    async def report_result(self, error=None, decision_id=""):
        """Report how the last allowed call (or decision_id) ended; returns halt.

        A failure to report is not a reason to run more: it returns halt True."""
        request = pb.ReportResultRequest(decision_id=decision_id or self.last_decision_id,
                                         is_error=error is not None, error=str(error)[:4096] if error is not None else "")
        try:
            response = await self._stub.ReportResult(request, timeout=self.timeout)
        except grpc.aio.AioRpcError:
            return True
        return response.halt
