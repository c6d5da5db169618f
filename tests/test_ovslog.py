"""The vswitchd log reader (harness/ovslog.py): marks, slices, waits, and the
marks' type.  The first tests drive a Log over a plain file (no OVS); the
last ones a real ovs-vswitchd, whose log is written asynchronously."""
from __future__ import annotations

import os
import re
import signal
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from harness.daemon import SandboxError
from harness.install import OvsInstall
from harness.ovslog import MARK_TOKEN, START, Log
from harness.sandbox import Sandbox
from harness.wait import WaitTimeout

ROOT = Path(__file__).resolve().parent.parent


def nothing() -> None:
    pass


class Hung:
    """A vswitchd that is alive but answers nothing (SIGSTOPped, or deadlocked)."""

    def alive(self) -> bool:
        return True

    def transact(self, command: str, args: list[str]) -> tuple[int, str, str]:
        raise SandboxError("ovs-vswitchd (pid 1) hangs: unixctl timed out")


def file_log(tmp_path: Path, vswitchd: object = None) -> tuple[Log, Path]:
    log = Log(tmp_path, lambda: vswitchd, nothing)
    log.path.write_text("")
    return log, log.path


def append(path: Path, *lines: str) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def test_a_slice_holds_only_what_came_after_its_mark(tmp_path: Path) -> None:
    log, path = file_log(tmp_path)
    append(path, "a|bridge|WARN|one")
    first = log.mark()
    append(path, "b|bridge|WARN|two")
    second = log.mark()
    append(path, "c|bridge|WARN|three")
    assert log.lines() == ["a|bridge|WARN|one", "b|bridge|WARN|two", "c|bridge|WARN|three"]
    assert log.lines(after=START) == log.lines()
    assert log.lines(after=first) == ["b|bridge|WARN|two", "c|bridge|WARN|three"]
    assert log.lines(after=second) == ["c|bridge|WARN|three"]
    assert log.grep(r"WARN\|t", after=first) == ["b|bridge|WARN|two", "c|bridge|WARN|three"]
    assert log.grep("one", after=first) == []


def test_a_wait_after_a_mark_does_not_see_earlier_lines(tmp_path: Path) -> None:
    log, path = file_log(tmp_path)
    append(path, "x|dpif|INFO|flow_add: before")
    since = log.mark()
    with pytest.raises(WaitTimeout, match="flow_add"):
        log.wait("flow_add", after=since, timeout=0.05)
    assert log.wait("flow_add") == ["x|dpif|INFO|flow_add: before"]  # from the start it is there
    append(path, "y|dpif|INFO|flow_add: after")
    assert log.wait("flow_add", after=since) == ["y|dpif|INFO|flow_add: after"]
    with pytest.raises(WaitTimeout):
        log.wait("flow_add", after=since, count=2, timeout=0.05)


def test_patterns_are_regexes(tmp_path: Path) -> None:
    """One pattern kind: a fixed string with regex characters needs re.escape."""
    log, path = file_log(tmp_path)
    append(path, "z|netdev|WARN|p0: Too big 'n_rxq' (42 > 16).")
    assert log.grep("Too big 'n_rxq' (42 > 16).") == []  # ( ) group: the parentheses unmatched
    assert log.grep(re.escape("Too big 'n_rxq' (42 > 16).")) == [
        "z|netdev|WARN|p0: Too big 'n_rxq' (42 > 16)."]


def test_the_marks_own_request_and_reply_are_in_no_slice(tmp_path: Path) -> None:
    log, path = file_log(tmp_path)
    append(path, "1|unixctl|DBG|received request coverage/read-counter"
           f"[\"{MARK_TOKEN}1-1\"], id=7",
           "2|unixctl|DBG|replying with error, id=7: \"No such counter\"",
           "3|unixctl|DBG|replying with error, id=8: \"someone else's\"")
    assert log.lines() == ["3|unixctl|DBG|replying with error, id=8: \"someone else's\""]


def test_begin_case_moves_the_case_mark(tmp_path: Path) -> None:
    log, path = file_log(tmp_path)
    assert log.case == START
    append(path, "earlier case")
    log.begin_case()
    append(path, "this case")
    assert log.lines(after=log.case) == ["this case"]


def test_a_hung_daemon_still_gives_its_log_but_no_mark(tmp_path: Path) -> None:
    """The evidence must not be lost with the daemon: lines() reads the file
    as it is; a mark cannot be had (it would not be after the lines logged)."""
    log, path = file_log(tmp_path, Hung())
    append(path, "e|ovs_rcu|WARN|blocked 1000 ms waiting for main to quiesce")
    assert log.lines() == ["e|ovs_rcu|WARN|blocked 1000 ms waiting for main to quiesce"]
    with pytest.raises(SandboxError, match="hangs"):
        log.mark()


def test_a_wait_stops_when_a_daemon_died(tmp_path: Path) -> None:
    def dead() -> None:
        raise SandboxError("ovs-vswitchd died (exit status -6)")
    log = Log(tmp_path, lambda: None, dead)
    with pytest.raises(SandboxError, match="died"):
        log.wait("never", timeout=30)  # at once, not after 30 s


MYPY_CASE = """\
from harness.ovslog import START, Log, LogMark

def use(log: Log, at: LogMark) -> None:
    log.wait("x", after=at)
    log.lines(after=log.mark())
    log.grep("x", after=START)
    log.wait("x", after=0)
    log.lines(after=at + 1)
"""


def test_strict_mypy_rejects_a_plain_number_as_a_mark(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark is a LogMark: marks and START pass, a number (even one computed
    from a mark) is an error."""
    api = pytest.importorskip("mypy.api")
    case = tmp_path / "use_log.py"
    case.write_text(MYPY_CASE)
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(["--strict", "--follow-imports=silent", "--no-incremental",
                                "--cache-dir", os.devnull, str(case)])
    errors = [ln.split(": error: ", 1) for ln in out.splitlines() if ": error: " in ln]
    assert status == 1, out + err
    assert [(where.rsplit(":", 1)[-1], what) for where, what in errors] == [
        ("7", 'Argument "after" to "wait" of "Log" has incompatible type "int"; '
              'expected "LogMark"  [arg-type]'),
        ("8", 'Argument "after" to "lines" of "Log" has incompatible type "int"; '
              'expected "LogMark"  [arg-type]'),
    ], out + err


# -- against ovs-vswitchd --------------------------------------------------------


@pytest.fixture
def raw_sandbox(ovs_install: OvsInstall, tmp_path: Path) -> Iterator[Sandbox]:
    sb = Sandbox(ovs_install, tmp_path / "run")
    sb.start()
    yield sb
    sb.kill()


def test_marks_follow_the_daemons_own_log_order(raw_sandbox: Sandbox) -> None:
    """A mark goes through ovs-vswitchd's (asynchronous) log writer: a line it
    logged before the mark is never in the slice after it, one logged after is,
    and the marks' own request and reply are in no reader's lines."""
    sb = raw_sandbox
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
    sb.vsctl("add-port", "br1", "p8", "--", "set", "interface", "p8", "type=nonexistent",
             rc=65)  # a port vswitchd cannot open: ovs-vsctl says so (65)
    since = sb.log.mark()
    assert not sb.log.grep("p8", after=since)
    with pytest.raises(WaitTimeout):
        sb.log.wait("p8", after=since, timeout=0.2)
    sb.vsctl("add-port", "br1", "p9", "--", "set", "interface", "p9", "type=nonexistent",
             rc=65)  # a port vswitchd cannot open: ovs-vsctl says so (65)
    assert any("WARN" in ln for ln in sb.log.wait("p9", after=since))
    assert sb.log.grep("p8")
    later = sb.log.mark()
    assert set(sb.log.lines(after=later)) <= set(sb.log.lines(after=since))
    assert not sb.log.grep("p9", after=later)
    for every in (sb.log.lines(), sb.log.lines(after=since), sb.log.lines(after=later)):
        assert not any(MARK_TOKEN in ln or "replying with error" in ln for ln in every), every
    assert MARK_TOKEN.encode() in sb.log.path.read_bytes()  # they were there
    sb.allow_log(r"p8", r"p9", r"nonexistent")
    sb.stop()


def test_a_dead_daemons_log_is_still_read(raw_sandbox: Sandbox) -> None:
    sb = raw_sandbox
    assert sb.vswitchd is not None
    os.kill(sb.vswitchd.proc.pid, signal.SIGKILL)
    sb.vswitchd.proc.wait()
    assert sb.log.grep(r"\|bridge\|INFO\|.*\(Open vSwitch\) ")
    assert sb.log.lines(after=sb.log.mark()) == []  # the end of the file


# -- one log API ------------------------------------------------------------------

PRODUCT = ("harness", "datapath", "fixtures", "cases", "reports", "perf", "bench", "export")
READER = Path("harness/ovslog.py")
RETIRED = {"wait_log", "mark_log", "sync_log", "log_lines", "lines_since", "log_position",
           "LogWatch"}


def log_api_breaches(source: str, name: str) -> list[str]:
    """What in one module reads the vswitchd log behind Log's back: a definition
    of a retired reader, a path built to ovs-vswitchd.log, or the vswitchd
    Daemon's log path."""
    import ast
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name in RETIRED:
            out.append(f"{where}: defines {node.name}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                and isinstance(node.right, ast.Constant) and node.right.value == "ovs-vswitchd.log":
            out.append(f"{where}: builds the path of ovs-vswitchd.log")
        elif isinstance(node, ast.Attribute) and node.attr == "log" \
                and isinstance(node.value, ast.Attribute) and node.value.attr == "vswitchd":
            out.append(f"{where}: reads the vswitchd Daemon's log file")
    return out


def test_the_breach_finder_finds_breaches() -> None:
    """The negative control of the next test."""
    source = textwrap.dedent("""\
        class LogWatch:
            def wait_log(self, sb):
                return (sb.rundir / "ovs-vswitchd.log").read_text() + sb.vswitchd.log.name
        """)
    found = log_api_breaches(source, "m.py")
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "builds the path of ovs-vswitchd.log", "defines LogWatch", "defines wait_log",
        "reads the vswitchd Daemon's log file"], found
    assert log_api_breaches("log = sb.log.lines(after=sb.log.mark())\n", "m.py") == []


def test_there_is_one_log_api() -> None:
    """Only harness/ovslog.py reads ovs-vswitchd's log; nobody brings back another reader."""
    breaches: list[str] = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel != READER:
                breaches += log_api_breaches(path.read_text(), str(rel))
    assert not breaches, "\n".join(breaches)
