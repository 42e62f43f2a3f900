"""What a check answers, and how a command runs under it."""
import os
import subprocess

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

    def run(self, args, *, env=None, cwd=None, **kwargs):
        """subprocess.run(args) under the policy: its env and pinned cwd.

        Fails closed: raises PolicyDenied unless the verdict is an allow (an
        ask must be confirmed first: see Client.confirm). env and cwd are what
        the command gets when the policy sets none; an enforced env replaces
        env entirely."""
        self._require_allowed()
        return subprocess.run(args, env=self.env(env), cwd=self.cwd(cwd), **kwargs)

    def popen(self, args, *, env=None, cwd=None, **kwargs):
        """subprocess.Popen(args) under the policy, as run()."""
        self._require_allowed()
        return subprocess.Popen(args, env=self.env(env), cwd=self.cwd(cwd), **kwargs)

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
