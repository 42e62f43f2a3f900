"""toolpdp: ask the toolpdp sidecar before an AI agent runs a tool.

    from toolpdp import Client

    with Client("unix:///run/toolpdp/toolpdp.sock", agent_id="coder", session_id=run_id) as pdp:
        verdict = pdp.check("Bash", {"command": "make test"})
        if verdict.halt:
            ...                                   # stop the loop, ask the user
        if verdict.allowed:
            proc = verdict.run(["make", "test"])  # under the policy's env and cwd
            pdp.report_result(verdict.decision_id, error=None if proc.returncode == 0 else "exit %d" % proc.returncode)
        else:
            tell_the_model(verdict.message)

Everything fails closed: an unreachable, slow or failing sidecar is a deny
whose message says why, never an allow. `toolpdp.aio.AsyncClient` is the
asyncio twin; `toolpdp.callback` adapts it to an agent's permission_callback.
"""
from ._verdict import SHELL_TOOLS, ConfinementUnavailable, PolicyDenied, Verdict, command_env
from .client import Client
from .v1 import toolpdp_pb2 as pb

__all__ = ["Client", "Verdict", "PolicyDenied", "ConfinementUnavailable", "SHELL_TOOLS", "command_env", "pb"]
