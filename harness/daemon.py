"""One OVS daemon as a child process: started (never --detach, so it is reaped
with waitpid), watched (a death names its exit status and the log's last
lines, with the crash's backtrace), reached over its unixctl socket with a
deadline per call, and stopped (exit --cleanup, then SIGKILL)."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from harness import teardown_trace
from harness.crash import crash_report
from harness.unixctl import UnixctlClient, UnixctlError, UnixctlTimeout
from harness.wait import WaitTimeout, wait_until


class SandboxError(AssertionError):
    """The sandbox could not start, or a daemon misbehaved; the message has the evidence."""


class DaemonDied(SandboxError):
    """The message has the tails of the log and stderr; `evidence` has them whole
    (the lines near a crash can be pushed out of a tail by the backtrace)."""

    def __init__(self, message: str, evidence: str = "") -> None:
        super().__init__(message)
        self.evidence = evidence


def _tail(path: Path, n: int = 25) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path.name} unreadable)"
    return "\n".join(lines[-n:])


def _die_with_parent() -> None:
    """In a daemon's child process before exec: SIGKILL it when pytest dies, so
    that a killed run outside the sealed runtime leaves no daemon behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _line_end(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


class Daemon:
    """One OVS daemon run as our child, with its unixctl connection."""

    def __init__(self, name: str, argv: list[str], rundir: Path, env: dict[str, str], *,
                 executable: str | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        """`executable` runs a differently named binary as argv[0] (OVS names its
        pid, log and control files after argv[0]); `preexec_fn` runs in the child
        before exec (e.g. to enter a network namespace)."""
        self.name = name
        self.rundir = rundir
        self.log = rundir / f"{name}.log"
        self.stderr_path = rundir / f"{name}.stderr"
        def child_setup() -> None:
            _die_with_parent()
            if preexec_fn is not None:
                preexec_fn()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, executable=executable, cwd=rundir, env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, start_new_session=True,
                                         preexec_fn=child_setup)
        self._client: UnixctlClient | None = None

    @property
    def ctl_path(self) -> Path:
        return self.rundir / f"{self.name}.{self.proc.pid}.ctl"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def assert_alive(self, doing: str) -> None:
        if not self.alive():
            evidence = "\n".join(_tail(p, 2000) for p in (self.log, self.stderr_path))
            report = self.crash_report()
            raise DaemonDied(f"{self.name} died (exit status {self.proc.returncode}) {doing}\n"
                             + (f"--- crash ---\n{report}\n" if report else "")
                             + f"--- tail of {self.log.name} ---\n{_tail(self.log)}\n"
                             f"--- {self.stderr_path.name} ---\n{_tail(self.stderr_path)}",
                             evidence)

    def crash_report(self) -> str:
        """Why it died and its backtrace (symbolized where the binary allows), or ""."""
        if self.alive():
            return ""
        return crash_report([_tail(p, 2000) for p in (self.log, self.stderr_path)])

    def wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            self.assert_alive("while starting")
            return self.ctl_path.exists()
        try:
            wait_until(ready, timeout, what=f"{self.name} control socket")
        except WaitTimeout as exc:
            raise SandboxError(f"{exc}\n--- tail of {self.log.name} ---\n{_tail(self.log)}") from None

    def client(self) -> UnixctlClient:
        if self._client is None:
            try:
                self._client = UnixctlClient(self.ctl_path)
            except UnixctlError as exc:
                self.assert_alive("(control socket refused)")
                raise SandboxError(f"{self.name}: {exc}") from None
        return self._client

    def transact(self, command: str, args: list[str],
                 timeout: float | None = None) -> tuple[int, str, str]:
        """(rc, stdout, stderr) as ovs-appctl would give them."""
        try:
            result, error = self.client().transact(command, args, timeout)
        except UnixctlTimeout as exc:
            self._drop_client()
            raise SandboxError(f"{self.name} (pid {self.proc.pid}) hangs: unixctl {exc}") from None
        except UnixctlError as exc:
            self._drop_client()
            try:  # a daemon that hung up on us is usually dying: let it finish
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            self.assert_alive(f"during '{command}'")
            raise SandboxError(f"unixctl to {self.name}: {exc}") from None
        # Like ovs-appctl: a non-empty reply always ends with a newline.
        if error is not None:
            return 2, "", _line_end(error)
        return 0, _line_end(result or ""), ""

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def stop(self, command: list[str], timeout: float) -> None:
        """Ask the daemon to exit and reap it, within `timeout` seconds in all; kill
        it if it has not exited by then, and at once if the request cannot reach
        it (no control connection: nothing will make it exit, so waiting for
        that would only use up the time)."""
        deadline = time.monotonic() + timeout
        why = ""
        if self.alive():
            try:
                self.client()
            except SandboxError as exc:  # dead meanwhile (reaped below), or unreachable
                if self.alive():
                    self.kill()
                    raise SandboxError(f"{self.name} could not be asked to "
                                       f"'{' '.join(command)}' ({str(exc).splitlines()[0]}); "
                                       "killed it") from None
            else:
                try:
                    with teardown_trace.step(f"{self.name}: unixctl {' '.join(command)}"):
                        self.transact(command[0], command[1:],
                                      timeout=max(0.0, deadline - time.monotonic()))
                except SandboxError as exc:  # a daemon that exits may hang up first
                    why = f" ({str(exc).splitlines()[0]})"
        self._drop_client()
        try:
            with teardown_trace.step(f"{self.name}: reap"):
                self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise SandboxError(f"{self.name} did not exit within {timeout} s of "
                               f"'{' '.join(command)}'{why}; killed it") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
