"""Request building shared by the blocking and the asyncio client."""
import os

from google.protobuf import struct_pb2

from ._verdict import SHELL_TOOLS
from .v1 import toolpdp_pb2 as pb

MAX_ERROR_BYTES = 4096


def decide_request(agent_id, session_id, tool_name, args, server, category, env, call_id, execution_policy):
    req = pb.DecideRequest(agent_id=agent_id, session_id=session_id, tool_name=tool_name, server=server,
                           category=category, call_id=call_id)
    if args:
        s = struct_pb2.Struct()
        s.update(args)
        req.args.CopyFrom(s)
    if env is None and tool_name in SHELL_TOOLS and not server:
        # The environment the command would get: the sidecar builds the
        # filtered one from it (allowlist: only the named variables).
        env = os.environ
    if env:
        req.env.update(env)
    if execution_policy is not None:
        req.execution_policy.CopyFrom(execution_policy)
    return req


def report_request(agent_id, session_id, decision_id, error, call_id):
    req = pb.ReportResultRequest(decision_id=decision_id, call_id=call_id)
    if call_id:
        req.agent_id, req.session_id = agent_id, session_id
    if error is not None:
        req.is_error = True
        req.error = _truncate(str(error) or type(error).__name__, MAX_ERROR_BYTES)
    return req


def confirm_request(agent_id, session_id, decision_id, allow, deny_message, remember, call_id):
    if remember and not allow:
        raise ValueError("remember applies to an allow only")
    req = pb.ConfirmRequest(decision_id=decision_id, call_id=call_id, result="allow" if allow else "deny",
                            deny_message="" if allow else deny_message, remember=bool(remember))
    if call_id:
        req.agent_id, req.session_id = agent_id, session_id
    return req


def failure_text(err):
    """An RPC error as 'CODE: details'; anything else as its repr."""
    code, details = getattr(err, "code", None), getattr(err, "details", None)
    if callable(code) and callable(details):
        try:
            return "%s: %s" % (code().name, details())
        except Exception:  # a half-built error: fall through
            pass
    return repr(err)


def _truncate(s, n):
    b = s.encode("utf-8")
    return s if len(b) <= n else b[:n].decode("utf-8", "ignore")
