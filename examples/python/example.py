"""toolpdp as an agent's permission_callback, with the toolpdp package
(clients/python), against a real toolpdp server; checks what it answers.

    pdp = AsyncClient("unix:///var/run/toolpdp/toolpdp.sock", agent_id="coder", session_id=run_id)
    agent = AgentCore(bindings, permission_callback=PermissionGate(pdp, ask_user))

usage: PYTHONPATH=clients/python /usr/bin/python3 example.py TARGET
"""
import asyncio
import subprocess
import sys
from types import SimpleNamespace

from toolpdp import pb
from toolpdp.aio import AsyncClient
from toolpdp.callback import Decision, PermissionGate


asked = []


async def ask_user(ctx, message):
    # A person in a real UI; here, a person who refuses shell access and
    # approves a write once and for all ("don't ask me again for this").
    asked.append(ctx.tool_name)
    if ctx.tool_name == "Write":
        print("  asked a person: %s -> yes, and don't ask again for this" % message)
        return Decision.allow(remember=True)
    print("  asked a person: %s -> no" % message)
    return Decision.deny("user said no: use the Read tool instead")


def call(tool, args=None, server=""):
    return SimpleNamespace(tool_name=tool, args=args or {}, server=server, category=pb.CATEGORY_UNSPECIFIED)


async def main(target):
    pdp = AsyncClient(target, agent_id="default", session_id="py-1")
    gate = callback = PermissionGate(pdp, ask_user)
    checks = [
        ("Read runs", await callback(call("Read", {"file_path": "README.md"})), True),
        ("Bash asks a person, who says no", await callback(call("Bash", {"command": "rm -rf build"})), False),
        ("an undeclared MCP server is refused", await callback(call("create_issue", server="github")), False),
        ("Write asks a person, who approves and says remember", await callback(call("Write", {"file_path": "notes.md", "content": "hi"})), True),
    ]
    before = len(asked)
    checks.append(("the same Write again runs without asking", await callback(call("Write", {"content": "hi", "file_path": "notes.md"})), True))
    checks.append(("... and nobody was asked", Decision(len(asked) == before), True))
    checks.append(("another Write asks again", await callback(call("Write", {"file_path": "notes.md", "content": "bye"})), True))
    checks.append(("... and a person was asked", Decision(len(asked) == before + 1), True))
    # Errors share the consecutive cap (5 on the default agent): the loop stops.
    halts = []
    for _ in range(5):
        await callback(call("Read", {"file_path": "missing.txt"}))
        halts.append(await gate.report_result(FileNotFoundError("missing.txt")))
    print("  five failed Reads reported: halt %s" % halts)
    checks.append(("the fifth reported error halts the loop", Decision(halts == [False, False, False, False, True]), True))
    # The agent loop honours halt: it stops at once and asks the user.
    steps = 0
    for _ in range(3):
        steps += 1
        d = await callback(call("Read", {"file_path": "missing.txt"}))
        if d.halt or await gate.report_result(FileNotFoundError("missing.txt")):
            print("  halt: stop and ask the user how to proceed (after %d more steps)" % steps)
            break
    checks.append(("the loop stops at the first halt", Decision(steps == 1), True))
    # A shell tool runs under the answer's execution: the constructed env
    # (an allowlist drops the secret) and the pinned cwd, never the agent's own.
    policy = pb.ExecutionPolicy(env=pb.EnvSpec(mode="allowlist", names=["PATH"]), cwd="/")
    shell = AsyncClient(target, agent_id="default", session_id="py-2")
    verdict = await shell.check("Bash", {"command": "env; pwd"}, env={"PATH": "/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY": "x"},
                                execution_policy=policy)
    confirmed = await shell.confirm(verdict.response.decision_id, allow=True)  # a person said yes
    await shell.close()
    ex = verdict.execution
    checks.append(("Bash under a call-site policy asks", Decision(verdict.response.decision == pb.DECISION_ASK), True))
    checks.append(("... and its execution keeps only PATH, pinned to /",
                   Decision(ex is not None and dict(ex.env) == {"PATH": "/usr/bin:/bin"} and ex.env_enforced and ex.cwd == "/"), True))
    checks.append(("... and a person confirmed it", Decision(confirmed.decision == pb.DECISION_ALLOW), True))
    proc = subprocess.run(["/bin/sh", "-c", "env; pwd"], env=verdict.env(), cwd=verdict.cwd(), capture_output=True, text=True)
    checks.append(("... and the command runs with exactly that env and cwd",
                   Decision("AWS_SECRET_ACCESS_KEY" not in proc.stdout and proc.stdout.rstrip().endswith("\n/")), True))
    await pdp.close()
    down = AsyncClient("unix:///nonexistent/toolpdp.sock", timeout=0.5)
    checks.append(("an unreachable sidecar fails closed", await PermissionGate(down, ask_user)(call("Read")), False))
    await down.close()
    failed = 0
    for name, got, want in checks:
        ok = got.allowed == want
        failed += not ok
        print("%s %s: %r" % ("ok  " if ok else "FAIL", name, got))
    print("python example: %d checks, %d failed" % (len(checks), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
