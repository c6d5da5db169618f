"""The OVS sandbox: OVS_VSWITCHD_START / OVS_VSWITCHD_STOP as a Python object.

A sandbox owns one run directory (all OVS_*DIR point at it), an ovsdb-server
and an ovs-vswitchd started as children (never --detach, so they are reaped
with waitpid), and the control channel to both.  Stopping scans the logs for
unexpected WARN/ERR/EMER lines with upstream's allowlist plus the case's own.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable, Iterable, TypedDict

from harness import teardown_trace
from harness.control import Result, Transcript, expect_rc, run_tool
from harness.daemon import Daemon, DaemonDied, SandboxError
from harness.install import OvsInstall
from harness.logscan import scan_lines, scan_log, startup_stderr_problems
from harness.ovslog import Log
from harness.wait import wait_until

VSCTL_TIMEOUT = 10  # seconds; an unbounded ovs-vsctl hangs forever if vswitchd died


class SandboxOptions(TypedDict, total=False):
    """Keyword options of :class:`Sandbox` that a backend chooses (see __init__)."""

    dummy_numa: str | None
    enable_dummy: str
    vswitchd_args: Iterable[str]
    log_allow: Iterable[str]
    vswitchd_exe: str | None
    other_config: dict[str, str] | None
    vswitchd_preexec: Callable[[], None] | None
    stderr_allow: Iterable[str]
    system_route: bool
    extra_env: dict[str, str] | None
    vsctl_timeout: float


class Sandbox:
    """A running ovsdb-server + ovs-vswitchd pair in a private run directory."""

    def __init__(self, install: OvsInstall, rundir: Path, transcript: Transcript | None = None,
                 *, dummy_numa: str | None = None, enable_dummy: str = "",
                 vswitchd_args: Iterable[str] = (), log_allow: Iterable[str] = (),
                 vswitchd_exe: str | None = None, other_config: dict[str, str] | None = None,
                 vswitchd_preexec: Callable[[], None] | None = None,
                 stderr_allow: Iterable[str] = (), system_route: bool = False,
                 extra_env: dict[str, str] | None = None,
                 vsctl_timeout: float = VSCTL_TIMEOUT) -> None:
        """The keyword arguments after log_allow serve the real-port backends:
        `vswitchd_exe` runs another ovs-vswitchd binary (the DPDK build) under
        the usual name; `other_config` is written before vswitchd starts (for
        settings read only at start: dpdk-init, userspace-tso-enable);
        `vswitchd_preexec` runs in the vswitchd child before exec (entering a
        network namespace); `stderr_allow` adds regexes of expected start-up
        stderr lines; `extra_env` adds variables to the daemons' environment;
        `vsctl_timeout` bounds each ovs-vsctl call (a DPDK port add may spend
        seconds filling a mempool on a loaded machine)."""
        self.install = install
        self.rundir = rundir
        self.transcript = transcript or Transcript()
        self.dummy_numa = dummy_numa
        self.enable_dummy = enable_dummy
        self.vswitchd_args = list(vswitchd_args)
        self.log_allow: list[str] = list(log_allow)
        self.vswitchd_exe = vswitchd_exe
        self.other_config = dict(other_config or {})
        self.vswitchd_preexec = vswitchd_preexec
        self.stderr_allow = list(stderr_allow)
        self.system_route = system_route
        self.env = {**os.environ, **install.env, **{f"OVS_{d}DIR": str(rundir)
                                      for d in ("RUN", "LOG", "DB", "SYSCONF")}}
        self.env["OVS_BINDIR"] = str(install.tools["ovs-vsctl"].parent)
        self.env.update(extra_env or {})
        self.vsctl_timeout = vsctl_timeout
        self.ovsdb: Daemon | None = None
        self.vswitchd: Daemon | None = None
        # Set when a case expects ovs-vswitchd to die (a known OVS bug): its death
        # and the abort in the log are then the expected outcome, not an error.
        self.expected_crash: str | None = None
        # OVS_VSWITCHD_STOP's OVS_CHECK_BATCH_GROW(): the dp_packet_batch_grow counter
        # at stop (0 unless a case expects batches to grow; None: not checked).
        self.expected_batch_grow: int | None = 0
        # Set once stop() ran: a case that stops OVS itself (upstream's
        # OVS_TRAFFIC_VSWITCHD_STOP before its last checks) leaves nothing to the
        # fixture's own stop.
        self.stopped = False
        self.log = Log(rundir, lambda: self.vswitchd, self.assert_alive)

    # -- lifecycle ---------------------------------------------------------

    def start(self, timeout: float = 10.0) -> "Sandbox":
        """Start both daemons; if anything fails, nothing is left running."""
        try:
            return self._start(timeout)
        except BaseException:
            self.kill()
            raise

    def _start(self, timeout: float) -> "Sandbox":
        self.rundir.mkdir(parents=True, exist_ok=True)
        db = self.rundir / "conf.db"
        self._tool([self.install.tool("ovsdb-tool"), "create", str(db),
                    str(self.install.schema)])
        self.ovsdb = Daemon("ovsdb-server", [
            self.install.tool("ovsdb-server"), "--no-chdir", "--pidfile", "--log-file",
            f"--remote=punix:{self.rundir / 'db.sock'}", "-vconsole:off", str(db),
        ], self.rundir, self.env)
        self.ovsdb.wait_ready(timeout)
        self.vsctl("--no-wait", "init")
        if self.other_config:
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                       *(f"other_config:{k}={v}" for k, v in self.other_config.items()))
        argv = [self.install.tool("ovs-vswitchd"), f"--enable-dummy={self.enable_dummy}"
                if self.enable_dummy else "--enable-dummy",
                "--disable-system", *([] if self.system_route else ["--disable-system-route"])]
        if self.dummy_numa:
            argv.append(f"--dummy-numa={self.dummy_numa}")
        argv += [*self.vswitchd_args, "--no-chdir", "--pidfile", "--log-file",
                 "-vvconn", "-vofproto_dpif", "-vunixctl", "-vconsole:warn"]
        self.vswitchd = Daemon("ovs-vswitchd", argv, self.rundir, self.env,
                               executable=self.vswitchd_exe, preexec_fn=self.vswitchd_preexec)
        self.vswitchd.wait_ready(timeout)
        # Where `ovs-vswitchd --detach` (upstream's OVS_VSWITCHD_START) would return:
        # the initial configuration committed (iface_types, datapath_types in the
        # database), which it logs its version right after.  The control socket
        # comes earlier; a read of those columns before this finds them empty.
        self.log.wait(r"\|bridge\|INFO\|.*\(Open vSwitch\) ", timeout=timeout)
        problems = startup_stderr_problems(self.vswitchd.stderr_path.read_text(errors="replace"))
        problems = [p for p in problems if not any(re.search(a, p) for a in self.stderr_allow)]
        if problems:
            raise SandboxError("unexpected ovs-vswitchd stderr at start:\n" + "\n".join(problems))
        return self

    def stop(self, scan_logs: bool = True) -> None:
        """OVS_VSWITCHD_STOP: log scan, then exit --cleanup and reap both daemons.
        A second call does nothing."""
        if self.stopped:
            return
        self.stopped = True
        errors: list[str] = []
        vswitchd = self.vswitchd
        died = vswitchd is not None and not vswitchd.alive()
        if died and self.expected_crash:
            pass
        elif died and vswitchd is not None:
            try:
                vswitchd.assert_alive("during the test")
            except DaemonDied as exc:
                errors.append(str(exc))
        if scan_logs and not died:
            with teardown_trace.step("scan the daemon logs"):
                bad = self.log_problems()
            if bad:
                errors.append("unexpected lines in the daemon logs:\n" + "\n".join(bad))
            if self.expected_batch_grow is not None and self.vswitchd is not None:
                # (a daemon the case killed has no counters to read)
                errors += self._batch_grow_problem(self.expected_batch_grow)
        for daemon, cmd in ((self.vswitchd, ["exit", "--cleanup"]), (self.ovsdb, ["exit"])):
            if daemon is None:
                continue
            try:
                with teardown_trace.step(f"stop {daemon.name} ({' '.join(cmd)})"):
                    daemon.stop(cmd, timeout=10)
            except SandboxError as exc:
                errors.append(str(exc))
        self.vswitchd = self.ovsdb = None
        if errors:
            raise SandboxError("\n\n".join(errors))

    def _batch_grow_problem(self, expected: int) -> list[str]:
        """Counters reach the total once a second per thread: move the clock that
        second first (upstream's slow tools give it that time), then read."""
        try:
            self.appctl("time/warp", "1000")
            grow = self.coverage("dp_packet_batch_grow")
        except AssertionError as exc:
            return [f"dp_packet_batch_grow unreadable at stop: {exc}"]
        if grow != expected:
            return [f"OVS_CHECK_BATCH_GROW at stop: dp_packet_batch_grow is {grow}, "
                    f"expected {expected}"]
        return []

    def kill(self) -> None:
        for daemon in (self.vswitchd, self.ovsdb):
            if daemon is not None:
                daemon.kill()
        self.vswitchd = self.ovsdb = None

    def __enter__(self) -> "Sandbox":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.stop()
        else:
            self.kill()

    # -- logs --------------------------------------------------------------

    def log_problems(self) -> list[str]:
        """WARN/ERR/EMER lines of the daemon logs beyond the allowlists; the
        vswitchd log's with every line logged before this call."""
        out = [f"{self.log.path.name}: {line}"
               for line in scan_lines(self.log.lines(), self.log_allow)]
        for log in sorted(self.rundir.glob("*.log")):
            if log != self.log.path:
                out += [f"{log.name}: {line}" for line in scan_log(log, self.log_allow)]
        return out

    def allow_log(self, *patterns: str) -> None:
        """Per-case allowlist: regexes of WARN/ERR lines this case expects."""
        self.log_allow.extend(patterns)

    # -- control -----------------------------------------------------------

    # Each runner raises CommandFailed unless the command exits with `rc`
    # (None: any exit, the caller inspects it); see harness.control.

    def _tool(self, argv: list[str], timeout: float = 30, *, rc: int | None = 0) -> Result:
        return run_tool(argv, self.env, str(self.rundir), timeout, self.transcript, rc=rc)

    def vsctl(self, *args: str, rc: int | None = 0) -> Result:
        return self._tool([self.install.tool("ovs-vsctl"), f"--timeout={self.vsctl_timeout:g}",
                           f"--db=unix:{self.rundir / 'db.sock'}", *args],
                          timeout=self.vsctl_timeout + 5, rc=rc)

    def ofctl(self, *args: str, rc: int | None = 0) -> Result:
        return self._tool([self.install.tool("ovs-ofctl"), *args], rc=rc)

    def appctl(self, command: str, *args: str, target: str = "ovs-vswitchd",
               rc: int | None = 0) -> Result:
        daemon = self.vswitchd if target == "ovs-vswitchd" else self.ovsdb
        if daemon is None:
            raise SandboxError(f"{target} is not running")
        started = time.perf_counter()
        rc, out, err = daemon.transact(command, list(args))
        if rc:  # ovs-appctl's own line after the server's error text
            err += f"ovs-appctl: {target}: server returned an error\n"
        result = Result(["ovs-appctl", *( [] if target == "ovs-vswitchd" else ["-t", target]),
                         command, *args], rc, out, err)
        self.transcript.add(result, time.perf_counter() - started)
        return expect_rc(result, rc)

    def appctl_tool(self, *args: str, rc: int | None = 0) -> Result:
        """A forked ovs-appctl, for what the in-process client cannot say
        (`--format json` is an option of the tool's own connection)."""
        return self._tool([self.install.tool("ovs-appctl"), *args], rc=rc)

    def dpctl(self, command: str, *args: str, rc: int | None = 0) -> Result:
        return self.appctl(f"dpctl/{command}", *args, rc=rc)

    def assert_alive(self) -> None:
        for daemon in (self.ovsdb, self.vswitchd):
            if daemon is not None:
                daemon.assert_alive("during the test")

    def crash_report(self) -> str:
        """Each daemon that died: its exit status, why, and its backtrace."""
        parts = []
        for daemon in (self.vswitchd, self.ovsdb):
            if daemon is not None and not daemon.alive():
                parts.append(f"{daemon.name} (pid {daemon.proc.pid}) exited with status "
                             f"{daemon.proc.returncode}\n{daemon.crash_report()}".rstrip())
        return "\n\n".join(parts)

    # -- topology helpers (add_of_br / add_of_ports) ------------------------

    def add_of_br(self, name: str = "br0", *extra: str) -> Result:
        """Upstream's add_of_br: a dummy-datapath bridge with fixed dpid and hwaddr."""
        return self.vsctl(
            "add-br", name, "--", "set", "bridge", name, "datapath-type=dummy",
            "fail-mode=secure", "other-config:datapath-id=fedcba9876543210",
            "other-config:hwaddr=aa:55:aa:55:00:00",
            "protocols=[OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15]",
            *(["--", *extra] if extra else []))

    # -- counters ------------------------------------------------------------

    def coverage(self, counter: str) -> int:
        res = self.appctl("coverage/read-counter", counter)
        return int(res.stdout.strip())

    def wait_coverage(self, counter: str, value: int, timeout: float = 5.0) -> None:
        """CHECK_COVERAGE with polling: counters from other threads merge once a second."""
        wait_until(lambda: self.coverage(counter) == value, timeout,
                   what=f"coverage counter {counter} == {value}",
                   describe=lambda: f"last value {self.coverage(counter)}")

    def port_stats(self) -> dict[str, dict[str, int]]:
        """Datapath port counters straight from dpctl/show -s (no 5 s DB refresh).

        Parsed from the whole text, not line by line: when OVS cannot read a
        port's stats it prints ", could not retrieve stats (...)" without a line
        break, so the next port's header need not start a line (OVS 4.0.0)."""
        out = self.dpctl("show", "-s").stdout
        stats: dict[str, dict[str, int]] = {}
        heads = list(re.finditer(r"port \d+: (\S+)", out))
        for i, head in enumerate(heads):
            body = out[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(out)]
            entry = stats.setdefault(head.group(1), {})
            for kind in ("RX", "TX"):
                m = re.search(rf"{kind} packets:(\d+)", body)
                if m:
                    entry[f"{kind.lower()}_packets"] = int(m.group(1))
        return stats
