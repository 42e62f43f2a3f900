"""What a check answers, and how a command runs under it."""
import os
import shutil
import subprocess
import threading

from google.protobuf import json_format

from .v1 import toolpdp_pb2 as pb

# The shell tools of the library's table: their checks carry the
# environment the command would get, so the sidecar can construct the
# filtered one.
SHELL_TOOLS = frozenset({"Bash", "Exec", "bash", "exec", "shell", "exec_command", "local_shell", "run_shell_command"})


class PolicyDenied(PermissionError):
    """Raised by Verdict.run when the verdict is not an allow."""

    def __init__(self, verdict):
        super().__init__(verdict.message or "denied by toolpdp")
        self.verdict = verdict


class ConfinementUnavailable(RuntimeError):
    """Raised by Verdict.run(confine=True) when toolpdp exec cannot be found:
    a confined run that was asked for never runs unconfined."""


class Verdict:
    """A DecideResponse, read for an agent loop.

    allowed / denied / asked: the decision. message: for a deny what the model
    is told, for an ask what a person is shown. halt: the session reached its
    consecutive cap — stop the loop. execution: for a shell tool under an
    execution policy, the env and pinned cwd the command must get (run()
    applies them)."""

    def __init__(self, response):
        self.response = response

    @classmethod
    def fail_closed(cls, message):
        """A deny made on the client's side: the sidecar could not answer."""
        return cls(pb.DecideResponse(decision=pb.DECISION_DENY, message=message, reasons=[
            pb.Reason(axis="client", rule="fail_closed", effect=pb.DECISION_DENY, message=message)]))

    decision = property(lambda self: self.response.decision)
    allowed = property(lambda self: self.response.decision == pb.DECISION_ALLOW)
    denied = property(lambda self: self.response.decision == pb.DECISION_DENY)
    asked = property(lambda self: self.response.decision == pb.DECISION_ASK)
    halt = property(lambda self: self.response.halt)
    message = property(lambda self: self.response.message)
    decision_id = property(lambda self: self.response.decision_id)
    policy_revision = property(lambda self: self.response.policy_revision)
    reasons = property(lambda self: list(self.response.reasons))

    @property
    def execution(self):
        """The response's Execution, or None when no execution policy applies."""
        return self.response.execution if self.response.HasField("execution") else None

    def env(self, base=None):
        """The environment the command gets: exactly the constructed env when
        the policy enforces one (an allowlist that kept nothing is {}), else
        base (default: this process's environment)."""
        return command_env(self.execution, base)

    def cwd(self, base=None):
        """The pinned working directory, else base."""
        ex = self.execution
        return ex.cwd if ex is not None and ex.cwd else base

    def run(self, args, *, env=None, cwd=None, confine=False, toolpdp="toolpdp", best_effort=False, report=None,
            **kwargs):
        """subprocess.run(args) under the policy: its env and pinned cwd.

        Fails closed: raises PolicyDenied unless the verdict is an allow (an
        ask must be confirmed first: see Client.confirm). env and cwd are what
        the command gets when the policy sets none; an enforced env replaces
        env entirely.

        confine=True runs it through `toolpdp exec` (the toolpdp binary: a
        path or a name on PATH), which has the kernel confine it to the
        execution's scopes: writes only under write_paths, reads only under
        read_paths, no network when the policy forbids it. Where toolpdp
        cannot be found ConfinementUnavailable is raised; where the kernel
        cannot confine the run, toolpdp exec refuses it with exit code 126
        (best_effort=True runs it anyway, reporting what was left out).
        report: a file for toolpdp exec's JSON report."""
        self._require_allowed()
        if not confine:
            return subprocess.run(args, env=self.env(env), cwd=self.cwd(cwd), **kwargs)
        # toolpdp exec builds the command's env itself: it gets the caller's,
        # never a constructed one that might load code into it.
        with self._confined(args, toolpdp, best_effort, report) as (argv, fds):
            return subprocess.run(argv, env=env, cwd=self.cwd(cwd), pass_fds=fds, **kwargs)

    def popen(self, args, *, env=None, cwd=None, confine=False, toolpdp="toolpdp", best_effort=False, report=None,
              **kwargs):
        """subprocess.Popen(args) under the policy, as run()."""
        self._require_allowed()
        if not confine:
            return subprocess.Popen(args, env=self.env(env), cwd=self.cwd(cwd), **kwargs)
        with self._confined(args, toolpdp, best_effort, report) as (argv, fds):
            return subprocess.Popen(argv, env=env, cwd=self.cwd(cwd), pass_fds=fds, **kwargs)

    def _confined(self, args, toolpdp, best_effort, report):
        """The toolpdp exec command line for args, the execution handed
        over on a pipe of its own (the command keeps its stdin)."""
        binary = shutil.which(toolpdp)
        if binary is None:
            raise ConfinementUnavailable("toolpdp exec is required to confine the command, and %r was not found"
                                         % toolpdp)
        if isinstance(args, (str, bytes)):
            raise TypeError("a confined run takes an argv list, not a shell string")
        execution = self.execution if self.execution is not None else pb.Execution()
        return _ExecutionPipe(binary, json_format.MessageToJson(execution), list(args), best_effort, report)

    def _require_allowed(self):
        if not self.allowed:
            raise PolicyDenied(self)

    def __repr__(self):
        name = pb.Decision.Name(self.decision).replace("DECISION_", "").lower()
        return "Verdict(%s%s%s)" % (name, ", %r" % self.message if self.message else "", ", halt" if self.halt else "")


def command_env(execution, base=None):
    """The env a command gets under an Execution: exactly execution.env when
    env_enforced, else base (default: os.environ)."""
    if execution is not None and execution.env_enforced:
        return dict(execution.env)
    return dict(os.environ if base is None else base)


class _ExecutionPipe:
    """A pipe carrying the execution to toolpdp exec (as /dev/fd/N), written
    by a thread so a large one cannot block the start; closed on exit."""

    def __init__(self, binary, payload, args, best_effort, report):
        self.binary, self.payload, self.args = binary, payload.encode(), args
        self.best_effort, self.report = best_effort, report

    def __enter__(self):
        self.r, w = os.pipe()
        os.set_inheritable(self.r, True)
        self.writer = threading.Thread(target=self._write, args=(w,), daemon=True)
        self.writer.start()
        argv = [self.binary, "exec", "--execution", "/dev/fd/%d" % self.r]
        if self.best_effort:
            argv.append("--best-effort")
        if self.report:
            argv += ["--report", os.fspath(self.report)]
        return argv + ["--"] + self.args, (self.r,)

    def _write(self, w):
        try:
            with os.fdopen(w, "wb") as f:
                f.write(self.payload)
        except OSError:
            pass  # the reader went away: toolpdp exec reports it

    def __exit__(self, *exc):
        os.close(self.r)
        return False


def answered_verdict(ask, response):
    """The Verdict an ask ended in, from its AwaitDecisionResponse: ANSWERED
    is the person's final decision (a deny carries their message), EXPIRED a
    deny. Anything else is not an answer: a deny that says so."""
    if response.state == pb.ASK_STATE_ANSWERED and response.decision in (pb.DECISION_ALLOW, pb.DECISION_DENY):
        out = pb.DecideResponse(decision=response.decision, message=response.message, decision_id=ask.decision_id,
                                policy_revision=ask.policy_revision, halt=response.halt)
        out.reasons.extend(ask.reasons)
        if response.HasField("execution"):
            out.execution.CopyFrom(response.execution)
        return Verdict(out)
    if response.state == pb.ASK_STATE_EXPIRED:
        return Verdict.fail_closed(response.message or "nobody answered the ask in time, so it is denied")
    return Verdict.fail_closed("the ask has no answer (%s), so the call is denied"
                               % pb.AskState.Name(response.state))
