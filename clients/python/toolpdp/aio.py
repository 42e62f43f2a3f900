"""The asyncio client: Client's methods as coroutines, over grpc.aio."""
import grpc

from . import _requests as rq
import asyncio

from ._verdict import Verdict, answered_verdict
from .v1 import toolpdp_pb2 as pb
from .v1 import toolpdp_pb2_grpc as pb_grpc


class AsyncClient:
    """As toolpdp.Client, for asyncio agent loops. Create it inside the
    running event loop."""

    def __init__(self, target, agent_id="", session_id="", timeout=2.0, channel_credentials=None, metadata=None):
        self._channel = (grpc.aio.secure_channel(target, channel_credentials) if channel_credentials
                         else grpc.aio.insecure_channel(target))
        self._stub = pb_grpc.DecisionServiceStub(self._channel)
        self.agent_id, self.session_id, self.timeout = agent_id, session_id, timeout
        self._metadata = metadata

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def check(self, tool_name, args=None, *, server="", category=pb.CATEGORY_UNSPECIFIED, env=None, call_id="",
                    execution_policy=None, wait=False, wait_timeout=None):
        """See Client.check: never raises, never fails open. wait=True waits
        for a person's answer to an ask; cancelling the task ends the wait
        (and the call is not allowed)."""
        try:
            req = rq.decide_request(self.agent_id, self.session_id, tool_name, args, server, category, env, call_id,
                                    execution_policy)
            response = await self._stub.Decide(req, timeout=self.timeout, metadata=self._metadata)
        except Exception as e:  # grpc.aio.AioRpcError, bad args, anything: fail closed
            return Verdict.fail_closed("the policy sidecar could not be asked (%s), so %s is denied"
                                       % (rq.failure_text(e), tool_name))
        if response.decision == pb.DECISION_UNSPECIFIED:
            return Verdict.fail_closed("the policy sidecar gave no decision, so %s is denied" % tool_name)
        if wait and response.decision == pb.DECISION_ASK:
            return await self.wait(response, wait_timeout)
        return Verdict(response)

    async def await_decision(self, decision_id="", *, call_id="", wait_seconds=60):
        """See Client.await_decision."""
        req = pb.AwaitDecisionRequest(decision_id=decision_id, wait_seconds=wait_seconds)
        if call_id:
            req = pb.AwaitDecisionRequest(call_id=call_id, agent_id=self.agent_id, session_id=self.session_id,
                                          wait_seconds=wait_seconds)
        return await self._stub.AwaitDecision(req, timeout=wait_seconds + self.timeout, metadata=self._metadata)

    async def wait(self, ask, wait_timeout=None):
        """See Client.wait; cancel the task to stop waiting."""
        ask = getattr(ask, "response", ask)
        loop = asyncio.get_running_loop()
        deadline = None if wait_timeout is None else loop.time() + wait_timeout
        while True:
            left = 60 if deadline is None else min(60, deadline - loop.time())
            if left <= 0:
                return Verdict.fail_closed("no answer to the ask came while waiting, so the call is denied")
            try:
                response = await self.await_decision(ask.decision_id, wait_seconds=max(int(left), 1))
            except grpc.RpcError as e:
                return Verdict.fail_closed("the ask could not be awaited (%s), so the call is denied" % rq.failure_text(e))
            if response.state != pb.ASK_STATE_PENDING:
                return answered_verdict(ask, response)

    async def report_result(self, decision_id="", error=None, *, call_id=""):
        """See Client.report_result: returns halt, True when it cannot report."""
        try:
            req = rq.report_request(self.agent_id, self.session_id, decision_id, error, call_id)
            return (await self._stub.ReportResult(req, timeout=self.timeout, metadata=self._metadata)).halt
        except grpc.RpcError:
            return True

    async def confirm(self, decision_id="", allow=True, *, deny_message="", remember=False, call_id=""):
        """See Client.confirm."""
        req = rq.confirm_request(self.agent_id, self.session_id, decision_id, allow, deny_message, remember, call_id)
        return await self._stub.Confirm(req, timeout=self.timeout, metadata=self._metadata)

    async def end_session(self):
        req = pb.EndSessionRequest(agent_id=self.agent_id, session_id=self.session_id)
        return (await self._stub.EndSession(req, timeout=self.timeout, metadata=self._metadata)).found
