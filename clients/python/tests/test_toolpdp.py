"""The toolpdp package against a real toolpdp server (started by ../run).

TOOLPDP_TEST_ADDR: the server; TOOLPDP_TEST_CWD: the cwd the test bundle's
"py" agent pins. Run: ../run (it builds and starts the server)."""
import asyncio
import json
import os
import threading
import subprocess
import sys
import time
import unittest
import uuid
from types import SimpleNamespace

import toolpdp
from toolpdp import Client, PolicyDenied, pb
from toolpdp.aio import AsyncClient
from toolpdp.callback import Decision, PermissionGate, SyncPermissionGate

ADDR = os.environ.get("TOOLPDP_TEST_ADDR", "")
CWD = os.environ.get("TOOLPDP_TEST_CWD", "")
BIN = os.environ.get("TOOLPDP_TEST_BIN", "")
BUNDLE = os.environ.get("TOOLPDP_TEST_BUNDLE", "")  # the server's bundle directory, watched: editing it reloads
DOWN = "unix:///nonexistent/toolpdp.sock"


def session():
    return "py-" + uuid.uuid4().hex


@unittest.skipUnless(ADDR, "TOOLPDP_TEST_ADDR is not set: run clients/python/run")
class ClientTest(unittest.TestCase):
    def client(self, **kw):
        c = Client(ADDR, agent_id="py", session_id=kw.pop("session_id", session()), **kw)
        self.addCleanup(c.close)
        return c

    def test_allow_deny_ask(self):
        c = self.client()
        v = c.check("Read", {"file_path": os.path.join(CWD, "README.md")})
        self.assertTrue(v.allowed, v)
        self.assertTrue(v.decision_id and v.policy_revision)
        v = c.check("create_issue", {"title": "x"}, server="github")
        self.assertTrue(v.denied, v)
        self.assertIn("github", v.message)
        v = c.check("Write", {"file_path": os.path.join(CWD, "notes.md"), "content": "hi"})
        self.assertTrue(v.asked, v)

    def test_confirm_remember(self):
        c = self.client()
        args = {"file_path": os.path.join(CWD, "notes.md"), "content": "hi"}
        v = c.check("Write", args)
        self.assertTrue(v.asked, v)
        self.assertEqual(c.confirm(v.decision_id, True, remember=True).decision, pb.DECISION_ALLOW)
        again = c.check("Write", dict(reversed(list(args.items()))))
        self.assertTrue(again.allowed, again)
        self.assertIn("remembered_approval", [r.rule for r in again.reasons])
        other = c.check("Write", dict(args, content="bye"))
        self.assertTrue(other.asked, other)
        with self.assertRaises(ValueError):
            c.confirm(other.decision_id, False, remember=True)
        denied = c.confirm(other.decision_id, False, deny_message="use notes.txt")
        self.assertEqual(denied.decision, pb.DECISION_DENY)

    def test_check_waits_for_the_answer(self):
        c = self.client()
        answerer = self.client(session_id=c.session_id)

        def answer(result, message=""):
            time.sleep(0.3)
            ask = [a for a in answerer._stub.ListPending(pb.ListPendingRequest(agent_id="py")).asks if a.session_id == c.session_id][0]
            answerer.confirm(ask.decision_id, result, deny_message=message)

        t = threading.Thread(target=answer, args=(False, "write notes.txt instead"))
        t.start()
        v = c.check("Write", {"file_path": os.path.join(CWD, "a.md"), "content": "x"}, wait=True, wait_timeout=20)
        t.join()
        self.assertTrue(v.denied, v)
        self.assertEqual(v.message, "write notes.txt instead")
        t = threading.Thread(target=answer, args=(True,))
        t.start()
        v = c.check("Write", {"file_path": os.path.join(CWD, "b.md"), "content": "x"}, wait=True, wait_timeout=20)
        t.join()
        self.assertTrue(v.allowed, v)
        # Cancelled: a deny, at once.
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        start = time.monotonic()
        v = c.check("Write", {"file_path": os.path.join(CWD, "c.md"), "content": "x"}, wait=True, cancel=cancel)
        self.assertTrue(v.denied and "cancelled" in v.message, v)
        self.assertLess(time.monotonic() - start, 5)

    def test_execution_env_and_cwd_applied(self):
        c = self.client()
        base = dict(os.environ, TOOLPDP_KEEP="kept", TOOLPDP_DROP="secret")
        v = c.check("Bash", {"command": "env"}, env=base)
        self.assertTrue(v.allowed, v)
        self.assertTrue(v.execution is not None and v.execution.env_enforced, v.response)
        out = v.run(["env"], env=base, capture_output=True, text=True, check=True).stdout
        self.assertIn("TOOLPDP_KEEP=kept", out)
        self.assertNotIn("TOOLPDP_DROP", out)
        self.assertEqual(v.env(base), dict(v.execution.env))  # exactly that env, nothing added
        pwd = v.run(["pwd"], capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(os.path.realpath(pwd), os.path.realpath(CWD))
        # The default env sent for a shell tool is this process's.
        os.environ["TOOLPDP_KEEP"] = "from-process"
        try:
            v = c.check("Bash", {"command": "env"})
        finally:
            del os.environ["TOOLPDP_KEEP"]
        self.assertEqual(v.execution.env.get("TOOLPDP_KEEP"), "from-process")

    @unittest.skipUnless(BIN, "TOOLPDP_TEST_BIN is not set: run clients/python/run")
    def test_confined_run(self):
        c = self.client()
        outside = os.path.dirname(os.path.realpath(CWD))
        policy = pb.ExecutionPolicy(cwd=CWD, read_paths=pb.PathList(paths=[CWD]), write_paths=pb.PathList(paths=[CWD]),
                                    network="none", env=pb.EnvSpec(mode="allowlist", names=["PATH"]))
        v = c.check("Bash", {"command": "touch inside"}, execution_policy=policy)
        self.assertTrue(v.allowed, v)
        self.assertEqual(v.execution.network, "none")
        script = "echo in > inside.txt; echo out > %s/outside.txt; echo done" % outside
        done = v.run(["bash", "-c", script], confine=True, toolpdp=BIN, capture_output=True, text=True)
        self.assertIn("done", done.stdout, done.stderr)
        self.assertTrue(os.path.exists(os.path.join(CWD, "inside.txt")))
        self.assertFalse(os.path.exists(os.path.join(outside, "outside.txt")), done.stderr)
        self.assertIn("toolpdp exec: writes: enforced", done.stderr)
        # Popen, with the command reading its own stdin.
        p = v.popen(["cat"], confine=True, toolpdp=BIN, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, text=True)
        self.assertEqual(p.communicate("through stdin", timeout=30)[0], "through stdin")
        # Asked to confine and unable to: nothing runs.
        with self.assertRaises(toolpdp.ConfinementUnavailable):
            v.run(["touch", os.path.join(CWD, "unconfined")], confine=True, toolpdp="/nonexistent/toolpdp")
        self.assertFalse(os.path.exists(os.path.join(CWD, "unconfined")))

    def test_run_refuses_what_is_not_allowed(self):
        c = self.client()
        v = c.check("Bash", {"command": "curl https://example.com"})
        self.assertTrue(v.denied, v)
        with self.assertRaises(PolicyDenied):
            v.run(["true"])
        with self.assertRaises(PolicyDenied):
            toolpdp.Verdict.fail_closed("down").popen(["true"])

    def test_halt_after_consecutive_failures(self):
        c = self.client()
        # max_consecutive_denials is 3 in the test bundle; errors count too.
        v = c.check("Read", {"file_path": os.path.join(CWD, "a")})
        self.assertFalse(c.report_result(v.decision_id, FileNotFoundError("a")))
        self.assertFalse(c.check("create_issue", server="github").halt)
        v = c.check("Read", {"file_path": os.path.join(CWD, "b")}, call_id="toolu_b")
        self.assertTrue(c.report_result(call_id="toolu_b", error="b: no such file"))
        self.assertTrue(c.check("create_issue", server="github").halt)
        self.assertTrue(c.end_session())
        self.assertFalse(c.check("create_issue", server="github").halt)

    def test_success_resets(self):
        c = self.client()
        c.check("create_issue", server="github")
        c.check("create_issue", server="github")
        v = c.check("Read", {"file_path": os.path.join(CWD, "a")})
        self.assertFalse(c.report_result(v.decision_id))
        c.check("create_issue", server="github")
        self.assertFalse(c.check("create_issue", server="github").halt)


class FailClosedTest(unittest.TestCase):
    def test_unreachable_is_deny(self):
        with Client(DOWN, timeout=0.5) as c:
            v = c.check("Read", {"file_path": "README.md"})
            self.assertTrue(v.denied, v)
            self.assertIn("could not be asked", v.message)
            self.assertEqual(v.reasons[0].rule, "fail_closed")
            self.assertTrue(c.report_result("some-id"), "a report that cannot be made halts")

    def test_unencodable_args_are_deny(self):
        with Client(DOWN, timeout=0.5) as c:
            v = c.check("Read", {"file_path": object()})
            self.assertTrue(v.denied, v)

    def test_command_env(self):
        ex = pb.Execution(env={"PATH": "/bin"}, env_enforced=True)
        self.assertEqual(toolpdp.command_env(ex, {"HOME": "/root"}), {"PATH": "/bin"})
        self.assertEqual(toolpdp.command_env(pb.Execution(env_enforced=True), {"HOME": "/root"}), {})
        self.assertEqual(toolpdp.command_env(pb.Execution(), {"HOME": "/root"}), {"HOME": "/root"})
        self.assertEqual(toolpdp.command_env(None, {"A": "1"}), {"A": "1"})


def call(tool, args=None, server=""):
    return SimpleNamespace(tool_name=tool, args=args or {}, server=server, category=pb.CATEGORY_UNSPECIFIED)


@unittest.skipUnless(ADDR, "TOOLPDP_TEST_ADDR is not set: run clients/python/run")
class PermissionGateTest(unittest.TestCase):
    def test_seed_000_callback(self):
        asyncio.run(self._callback())

    async def _callback(self):
        asked = []

        async def ask_user(ctx, message):
            asked.append(ctx.tool_name)
            if ctx.args.get("content") == "boom":
                raise RuntimeError("the UI crashed")
            if ctx.tool_name == "Write":
                return Decision.allow(remember=True)
            return Decision.deny("user said no")

        async with AsyncClient(ADDR, agent_id="py", session_id=session()) as pdp:
            gate = PermissionGate(pdp, ask_user)
            write = {"file_path": os.path.join(CWD, "n.md"), "content": "hi"}
            self.assertTrue((await gate(call("Read", {"file_path": os.path.join(CWD, "a")}))).allowed)
            self.assertFalse(await gate.report_result())
            d = await gate(call("create_issue", server="github"))
            self.assertFalse(d.allowed)
            self.assertIn("github", d.message)
            self.assertTrue((await gate(call("Write", write))).allowed)
            self.assertEqual(asked, ["Write"])
            self.assertTrue((await gate(call("Write", write))).allowed, "remembered")
            self.assertEqual(asked, ["Write"], "nobody asked again")
            d = await gate(call("Write", dict(write, content="boom")))
            self.assertFalse(d.allowed, "an exception in ask_user fails closed")
        async with AsyncClient(DOWN, timeout=0.5) as down:
            self.assertFalse((await PermissionGate(down, ask_user)(call("Read"))).allowed)


def write_agents(text):
    """Replace the bundle's agents atomically (the server reloads on it)."""
    path = os.path.join(BUNDLE, "agents", "data.json")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def wait_until(cond, what, seconds=15):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("not within %ss: %s" % (seconds, what))
        time.sleep(0.05)


@unittest.skipUnless(ADDR and BUNDLE, "TOOLPDP_TEST_ADDR or TOOLPDP_TEST_BUNDLE is not set: run clients/python/run")
class GateNeverAllowsWhatTheSidecarDenied(unittest.TestCase):
    """A person allows an ask while a hot reload removes the agent: Confirm
    answers deny (the agent was removed), and the gate, sync or async,
    returns that deny, never the person's allow."""

    def setUp(self):
        path = os.path.join(BUNDLE, "agents", "data.json")
        with open(path) as f:
            self.original = f.read()
        self.addCleanup(self.restore)

    def probe(self):
        """Whether a fresh session of py-reload is decided for (its agent is loaded)."""
        with Client(ADDR, agent_id="py-reload", session_id=session()) as c:
            return "unknown_agent" not in [r.rule for r in c.check("Read", {"file_path": os.path.join(CWD, "a")}).reasons]

    def restore(self):
        write_agents(self.original)
        wait_until(self.probe, "the agent py-reload is back")

    def remove_agent(self, ctx, message):
        self.assertIn("Write", message + ctx.tool_name)
        agents = json.loads(self.original)
        del agents["py-reload"]
        write_agents(json.dumps(agents))
        wait_until(lambda: not self.probe(), "the reload that removes py-reload")
        return Decision.allow()

    def test_sync_gate(self):
        with Client(ADDR, agent_id="py-reload", session_id=session()) as pdp:
            gate = SyncPermissionGate(pdp, self.remove_agent)
            self.assertTrue(gate(call("Read", {"file_path": os.path.join(CWD, "a")})).allowed)
            d = gate(call("Write", {"file_path": os.path.join(CWD, "n.md"), "content": "hi"}))
        self.assertFalse(d.allowed, d)
        self.assertIn("removed", d.message)
        self.assertEqual(d.verdict.decision, pb.DECISION_ASK)

    def test_async_gate(self):
        async def ask_user(ctx, message):
            return await asyncio.get_running_loop().run_in_executor(None, self.remove_agent, ctx, message)

        async def run():
            async with AsyncClient(ADDR, agent_id="py-reload", session_id=session()) as pdp:
                gate = PermissionGate(pdp, ask_user)
                self.assertTrue((await gate(call("Read", {"file_path": os.path.join(CWD, "a")}))).allowed)
                return await gate(call("Write", {"file_path": os.path.join(CWD, "n.md"), "content": "hi"}))
        d = asyncio.run(run())
        self.assertFalse(d.allowed, d)
        self.assertIn("removed", d.message)

    def test_a_confirm_answer_that_is_not_allow_is_a_deny(self):
        """The class, without a reload: whatever Confirm answers that is not
        allow (a deny, no decision at all) is a deny."""
        class Sidecar:
            def __init__(self, decision):
                self.decision = decision

            def check(self, tool_name, args=None, **kw):
                return toolpdp.Verdict(pb.DecideResponse(decision=pb.DECISION_ASK, decision_id="d", message="ask"))

            def confirm(self, decision_id, allow, **kw):
                return pb.ConfirmResponse(decision=self.decision)
        for decision in (pb.DECISION_DENY, pb.DECISION_UNSPECIFIED, pb.DECISION_ASK):
            d = SyncPermissionGate(Sidecar(decision), lambda ctx, m: Decision.allow())(call("Write"))
            self.assertFalse(d.allowed, pb.Decision.Name(decision))
        d = SyncPermissionGate(Sidecar(pb.DECISION_ALLOW), lambda ctx, m: Decision.allow())(call("Write"))
        self.assertTrue(d.allowed)


if __name__ == "__main__":
    sys.exit(unittest.main())
