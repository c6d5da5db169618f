"""The harness against a real ovs-vswitchd: failures must be caught and explained."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evidence.tshark import CHECKSUM_PREFS, FIELDS, checksum_verdict, disagreements
from harness.control import CommandFailed, Result, check
from harness.daemon import DaemonDied, SandboxError
from harness.filters import strip_xout, uuidfilt
from harness.install import InstallError, OvsInstall
from harness.logscan import miss_upcall_keys, scan_lines, startup_stderr_problems
from harness.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent


def fake_ovs(tmp_path: Path, version: str) -> Path:
    for tool in ("ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl",
                 "ovs-appctl"):
        exe = tmp_path / tool
        exe.write_text(f"#!/bin/sh\necho '{tool} (Open vSwitch) {version}'\n")
        exe.chmod(0o755)
    return tmp_path


def test_install_too_old_names_the_version(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match=r"Open vSwitch 3\.1\.0; this suite needs >= 3\.7"):
        OvsInstall.locate(str(fake_ovs(tmp_path, "3.1.0")))


def test_install_missing_dir_and_tools(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="no such directory"):
        OvsInstall.locate(str(tmp_path / "nope"))
    with pytest.raises(InstallError, match="no OVS programs there.*missing ovs-vswitchd, ovsdb-server"):
        OvsInstall.locate(str(tmp_path))


@pytest.mark.parametrize("args,message", [
    (["--backend=warp"], "unknown backend warp; available: dummy"),
    (["--ovs-bindir=/nonexistent-ovs"], "--ovs-bindir /nonexistent-ovs: no such directory"),
])
def test_bad_command_line_is_one_clear_line(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--collect-only", "-q", *args, "tests/test_model.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert f"ERROR: {message}" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_check_reports_exit_code_and_diff() -> None:
    res = Result(["ovs-vsctl", "show"], 1, "a\nb\n", "boom")
    with pytest.raises(CommandFailed) as info:
        check(res, rc=0, stdout="a\nc\n")
    text = str(info.value)
    assert "exit code: expected 0, got 1" in text and "-c" in text and "+b" in text


def test_log_scan_uses_upstream_allowlist() -> None:
    lines = ["2026|00001|stream|WARN|connection reset by peer",
             "2026|00002|bridge|WARN|could not open network device p9",
             "2026|00003|bridge|INFO|all fine"]
    assert scan_lines(lines) == [lines[1]]
    assert scan_lines(lines, [r"could not open network device p9"]) == []
    assert startup_stderr_problems("x|vlog|INFO|opened log file /x\nsomething odd\n") == ["something odd"]
    # A busy machine's long first poll interval (DPDK's EAL init): upstream's
    # daemon has detached by then, and check_logs excuses it.
    slow = ("2026|00019|timeval|WARN|Unreasonably long 7992ms poll interval (37ms user, 87ms system)\n"
            "2026|00020|timeval|WARN|faults: 5282 minor, 0 major\n"
            "2026|00022|timeval|WARN|context switches: 4 voluntary, 49 involuntary\n")
    assert startup_stderr_problems(slow + "2026|00023|bridge|WARN|odd\n") == ["2026|00023|bridge|WARN|odd"]


def test_filters() -> None:
    text = ("ufid:1234-ab recirc_id(0),in_port(2) packets:3, bytes:180, used:0.5s, actions:drop\n"
            "ufid:9 recirc_id(0),in_port(1) packets:1, bytes:60, used:1.25s, actions:2\n")
    assert strip_xout(text) == ("recirc_id(0),in_port(1) packets:0, bytes:0, used:0.0s, actions: <del>\n"
                                "recirc_id(0),in_port(2) packets:0, bytes:0, used:0.0s, actions: <del>\n")
    u = "a 01234567-89ab-cdef-0123-456789abcdef b 01234567-89ab-cdef-0123-456789abcdef"
    assert uuidfilt(u) == "a <0> b <0>"


@pytest.fixture
def raw_sandbox(ovs_install: OvsInstall, tmp_path: Path):
    sb = Sandbox(ovs_install, tmp_path / "run")
    sb.start()
    yield sb
    sb.kill()


def test_unexpected_warning_fails_stop_unless_allowed(raw_sandbox: Sandbox) -> None:
    sb = raw_sandbox
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
    sb.vsctl("add-port", "br1", "p9", "--", "set", "interface", "p9", "type=nonexistent",
             rc=65)  # a port vswitchd cannot open: ovs-vsctl says so (65)
    with pytest.raises(SandboxError, match=r"unexpected lines in the daemon logs:\n.*p9"):
        sb.stop()
    assert sb.vswitchd is None and sb.ovsdb is None  # stopped all the same


def test_allowlisted_warning_passes(raw_sandbox: Sandbox) -> None:
    sb = raw_sandbox
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
    sb.vsctl("add-port", "br1", "p9", "--", "set", "interface", "p9", "type=nonexistent",
             rc=65)  # a port vswitchd cannot open: ovs-vsctl says so (65)
    sb.allow_log(r"p9", r"nonexistent")
    sb.stop()


def test_daemon_death_is_detected_with_log_tail(raw_sandbox: Sandbox) -> None:
    sb = raw_sandbox
    assert sb.vswitchd is not None
    pid = sb.vswitchd.proc.pid
    os.kill(pid, signal.SIGKILL)
    sb.vswitchd.proc.wait()
    with pytest.raises(DaemonDied, match=r"ovs-vswitchd died \(exit status -9\)[\s\S]*tail of"):
        sb.appctl("version")
    with pytest.raises(SandboxError, match="died"):
        sb.stop()
    assert sb.ovsdb is None  # ovsdb-server was still stopped


def test_stop_reaps_both_daemons(raw_sandbox: Sandbox) -> None:
    sb = raw_sandbox
    procs = [sb.vswitchd.proc, sb.ovsdb.proc]  # type: ignore[union-attr]
    sb.stop()
    assert [p.returncode for p in procs] == [0, 0]
    assert not list((sb.rundir).glob("*.ctl"))


def test_coverage_counter_wait(raw_sandbox: Sandbox) -> None:
    """CHECK_COVERAGE: counters of other threads merge about once a second, so
    the harness polls; a value that never comes times out naming the counter."""
    from datapath.backends.dummy import DummyPort
    from harness.wait import WaitTimeout
    sb = raw_sandbox
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
    port = DummyPort(sb, "br1", "p1", 1)
    before = sb.coverage("netdev_received")
    port.send([bytes(60)])
    sb.wait_coverage("netdev_received", before + 1, timeout=5)
    with pytest.raises(WaitTimeout, match=r"netdev_received == 99 .*last value 1"):
        sb.wait_coverage("netdev_received", 99, timeout=0.2)
    sb.stop()


def test_miss_upcall_keys_takes_the_line_after_each_miss() -> None:
    """The key is the line after each 'miss upcall' line; a miss whose key
    line is not written yet (the last line) is not counted."""
    lines = ["2026|dpif_netdev(pmd)|DBG|ovs-dummy: miss upcall:", "recirc_id(0),in_port(1)",
             "2026|dpif|DBG|flow_add: ...", "2026|dpif_netdev|DBG|miss upcall:",
             "recirc_id(0),in_port(2)", "2026|dpif_netdev|DBG|miss upcall:"]
    assert miss_upcall_keys(lines) == ["recirc_id(0),in_port(1)", "recirc_id(0),in_port(2)"]
    assert miss_upcall_keys([]) == []
    assert miss_upcall_keys(["no upcall here", "x"]) == []


def test_tshark_checksum_verdicts() -> None:
    """Wireshark's checksum.status values (proto_checksum_enum_e) name one verdict
    each; an unknown value is shown as such, never taken as good or bad."""
    assert [checksum_verdict(str(n)) for n in range(5)] == [
        "bad", "good", "unverified", "not present", "illegal"]
    assert checksum_verdict("7") == "status 7"
    assert set(CHECKSUM_PREFS) == {"ip.check_checksum", "tcp.check_checksum",
                                   "udp.check_checksum"}
    assert disagreements({"IP": "good", "UDP": "none"},
                         {"IP": ["good"], "UDP": [checksum_verdict("3")]}) == []
    assert disagreements({"IP": "good"}, {"IP": [checksum_verdict("0")]}) == [
        "IP.chksum: model says good, tshark says bad"]
    assert disagreements({"outer.UDP": "stale"}, {"UDP": [checksum_verdict("9")]}) == [
        "outer.UDP.chksum: model says stale, tshark says status 9"]
    assert list(FIELDS) == ["IP", "TCP", "UDP", "GRE"]
