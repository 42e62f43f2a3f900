"""The blocking client."""
import grpc

from . import _requests as rq
import threading
import time

from ._verdict import Verdict, answered_verdict
from .v1 import toolpdp_pb2 as pb
from .v1 import toolpdp_pb2_grpc as pb_grpc


class Client:
    """A session's client of a toolpdp sidecar.

    target: "unix:///path" or "host:port" (plaintext, as a sidecar on
    loopback or a shared socket); pass channel_credentials for TLS and
    metadata (e.g. [("authorization", "Bearer ...")]) for a workspace token.
    timeout bounds each call, in seconds."""

    def __init__(self, target, agent_id="", session_id="", timeout=2.0, channel_credentials=None, metadata=None):
        self._channel = (grpc.secure_channel(target, channel_credentials) if channel_credentials
                         else grpc.insecure_channel(target))
        self._stub = pb_grpc.DecisionServiceStub(self._channel)
        self.agent_id, self.session_id, self.timeout = agent_id, session_id, timeout
        self._metadata = metadata

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check(self, tool_name, args=None, *, server="", category=pb.CATEGORY_UNSPECIFIED, env=None, call_id="",
              execution_policy=None, wait=False, wait_timeout=None, cancel=None):
        """Decide one tool call. Never raises and never fails open: any failure
        (unreachable, timeout, a malformed request, no decision) is a deny
        whose message says why.

        wait=True: an ask is waited for until a person answers it (the
        console, toolpdp confirm, a chat bot — on the approver's side) and
        the answer is returned: allow, or deny with the person's message.
        wait_timeout bounds the whole wait in seconds (None: until the ask
        expires on the server); cancel, a threading.Event, ends it early. A
        wait that ends without an answer is a deny.

        env: the environment the tool would get; for a shell tool it defaults
        to this process's, from which the sidecar builds the filtered one
        (pass {} to send none)."""
        try:
            req = rq.decide_request(self.agent_id, self.session_id, tool_name, args, server, category, env, call_id,
                                    execution_policy)
            response = self._stub.Decide(req, timeout=self.timeout, metadata=self._metadata)
        except Exception as e:  # grpc.RpcError, bad args, anything: fail closed
            return Verdict.fail_closed("the policy sidecar could not be asked (%s), so %s is denied"
                                       % (rq.failure_text(e), tool_name))
        if response.decision == pb.DECISION_UNSPECIFIED:
            return Verdict.fail_closed("the policy sidecar gave no decision, so %s is denied" % tool_name)
        if wait and response.decision == pb.DECISION_ASK:
            return self.wait(response, wait_timeout, cancel)
        return Verdict(response)

    def await_decision(self, decision_id="", *, call_id="", wait_seconds=60):
        """One AwaitDecision: how the ask stands after waiting up to
        wait_seconds (the server caps a wait at 60) — PENDING, ANSWERED or
        EXPIRED. Raises grpc.RpcError (NOT_FOUND: no such ask)."""
        req = pb.AwaitDecisionRequest(decision_id=decision_id, wait_seconds=wait_seconds)
        if call_id:
            req = pb.AwaitDecisionRequest(call_id=call_id, agent_id=self.agent_id, session_id=self.session_id,
                                          wait_seconds=wait_seconds)
        return self._stub.AwaitDecision(req, timeout=wait_seconds + self.timeout, metadata=self._metadata)

    def wait(self, ask, wait_timeout=None, cancel=None):
        """Wait for a person's answer to ask (a DecideResponse or Verdict that
        asked) and return the Verdict it ended in; see check(wait=True)."""
        ask = getattr(ask, "response", ask)
        cancel = cancel or threading.Event()
        deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
        while True:
            left = 60 if deadline is None else min(60, deadline - time.monotonic())
            if left <= 0 or cancel.is_set():
                return Verdict.fail_closed("no answer to the ask came while waiting, so the call is denied")
            req = pb.AwaitDecisionRequest(decision_id=ask.decision_id, wait_seconds=max(int(left), 1))
            call = self._stub.AwaitDecision.future(req, timeout=max(int(left), 1) + self.timeout, metadata=self._metadata)
            while not call.done():
                if cancel.wait(0.1):
                    call.cancel()
                    return Verdict.fail_closed("the wait for a person's answer was cancelled, so the call is denied")
            try:
                response = call.result()
            except grpc.RpcError as e:
                return Verdict.fail_closed("the ask could not be awaited (%s), so the call is denied" % rq.failure_text(e))
            if response.state != pb.ASK_STATE_PENDING:
                return answered_verdict(ask, response)

    def report_result(self, decision_id="", error=None, *, call_id=""):
        """Report how an allowed call ended (error None: success). Returns halt:
        the session is at its consecutive cap, stop the loop. A report that
        cannot be made returns True too: uncounted errors are no reason to go on."""
        try:
            req = rq.report_request(self.agent_id, self.session_id, decision_id, error, call_id)
            return self._stub.ReportResult(req, timeout=self.timeout, metadata=self._metadata).halt
        except grpc.RpcError:
            return True

    def confirm(self, decision_id="", allow=True, *, deny_message="", remember=False, call_id=""):
        """Record a person's answer to an ask; returns the ConfirmResponse
        (its halt: a confirmed deny reached the cap). remember=True with an
        allow: later calls of this session that are exactly this call are
        allowed without asking. Raises grpc.RpcError when it cannot be
        recorded (the caller decides; treat the call as not allowed)."""
        req = rq.confirm_request(self.agent_id, self.session_id, decision_id, allow, deny_message, remember, call_id)
        return self._stub.Confirm(req, timeout=self.timeout, metadata=self._metadata)

    def end_session(self):
        """Release this session's state in the sidecar; whether there was any."""
        req = pb.EndSessionRequest(agent_id=self.agent_id, session_id=self.session_id)
        return self._stub.EndSession(req, timeout=self.timeout, metadata=self._metadata).found
