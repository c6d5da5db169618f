"""`ovs-ofctl monitor` as a child of the case: upstream's packet-in observer.

Upstream runs `ovs-ofctl monitor br0 65534 invalid_ttl --detach ... 2> ofctl_monitor.log`,
waits until the log has enough lines, then `ovs-appctl -t ovs-ofctl exit`.  Here the
monitor is our child (never detached, so it is reaped, and killed if a case fails);
it is ready once its control socket exists, which ovs-ofctl creates only after its
OpenFlow connection is set up (the point where --detach would return).
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from harness.control import Result
from harness.sandbox import Sandbox
from harness.unixctl import UnixctlClient, UnixctlError
from harness.wait import wait_until


class OfctlMonitor:
    """One `ovs-ofctl monitor BRIDGE ARGS...` run, its output in `log`."""

    def __init__(self, sandbox: Sandbox, bridge: str, *args: str,
                 log_name: str = "ofctl_monitor.log", timeout: float = 10.0) -> None:
        self.sb = sandbox
        self.log = Path(sandbox.rundir) / log_name
        self.argv = [sandbox.install.tool("ovs-ofctl"), "monitor", bridge, *args]
        started = time.perf_counter()
        with open(self.log, "wb") as err:  # ovs-ofctl monitor prints to stderr
            self.proc = subprocess.Popen(self.argv, cwd=sandbox.rundir, env=sandbox.env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, start_new_session=True)
        self.ctl = Path(sandbox.rundir) / f"ovs-ofctl.{self.proc.pid}.ctl"
        try:
            wait_until(self._ready, timeout, what="ovs-ofctl monitor's control socket")
        except BaseException:
            self.kill()
            raise
        # As upstream runs it (a reproducer replays it so, and stops it with 'exit').
        sandbox.transcript.add(Result(["ovs-ofctl", "monitor", bridge, *args, "--detach",
                                       "--no-chdir", "--pidfile"], 0, "", ""),
                               time.perf_counter() - started)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"ovs-ofctl monitor exited ({self.proc.returncode}):\n"
                                 + self.text())
        return self.ctl.exists()

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def wait_lines(self, n: int, timeout: float = 10.0) -> str:
        """OVS_WAIT_UNTIL([test `wc -l < ofctl_monitor.log` -ge N])."""
        wait_until(lambda: self.text().count("\n") >= n, timeout,
                   what=f"{n} lines from ovs-ofctl monitor", describe=self.text)
        return self.text()

    def exit(self, timeout: float = 10.0) -> str:
        """`ovs-appctl -t ovs-ofctl exit`, then reap it; returns the whole output."""
        started = time.perf_counter()
        try:
            client = UnixctlClient(self.ctl, timeout=timeout)
            try:
                client.transact("exit", [])
            finally:
                client.close()
        except UnixctlError:
            pass  # it may close the connection as it exits; the wait below decides
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("ovs-ofctl monitor did not exit") from None
        self.sb.transcript.add(Result(["ovs-appctl", "-t", "ovs-ofctl", "exit"], 0, "", ""),
                               time.perf_counter() - started)
        return self.text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "OfctlMonitor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
