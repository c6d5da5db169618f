"""Commands fail loudly: a runner raises on an exit code its caller did not name.

The rule (harness/control.py): every runner that returns a Result takes
`rc` (0 unless said otherwise; None: the caller inspects the exit), and
check() is left comparing output.  The scan keeps the old wrappers, a bare
check(<call>) that only asserted exit 0, from coming back.
"""
from __future__ import annotations

import ast
import inspect
import os
import shutil
from pathlib import Path

import pytest

from harness.control import CommandFailed, Result, Transcript, check, expect_rc, run_tool
from harness.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("cases", "fixtures", "datapath", "harness", "perf", "bench", "export")
TRUE, FALSE = shutil.which("true"), shutil.which("false")


def run(argv: list[str], transcript: Transcript | None = None, **kw: int | None) -> Result:
    return run_tool(argv, dict(os.environ), str(ROOT), 10, transcript, **kw)


@pytest.mark.skipif(not (TRUE and FALSE), reason="no true/false programs")
def test_a_non_zero_exit_raises_by_default() -> None:
    assert TRUE and FALSE
    assert run([TRUE]).rc == 0
    transcript = Transcript()
    with pytest.raises(CommandFailed) as info:
        run([FALSE], transcript)
    text = str(info.value)
    assert FALSE in text and "exit code: expected 0, got 1" in text
    assert info.value.result is not None and info.value.result.rc == 1
    # the failed command is in the case's transcript before the exception leaves
    assert [(c.argv, c.rc) for c in transcript.commands] == [([FALSE], 1)]


@pytest.mark.skipif(not (TRUE and FALSE), reason="no true/false programs")
def test_rc_names_the_exit_the_caller_expects() -> None:
    assert TRUE and FALSE
    assert run([FALSE], rc=1).rc == 1           # must fail with 1: it does
    assert run([FALSE], rc=None).rc == 1        # any exit: the caller looks
    assert run([TRUE], rc=None).rc == 0
    with pytest.raises(CommandFailed, match="expected 1, got 0"):
        run([TRUE], rc=1)                       # a command that must fail, and did not
    with pytest.raises(CommandFailed, match="expected 2, got 1"):
        run([FALSE], rc=2)


@pytest.mark.skipif(not shutil.which("cat"), reason="no cat program")
def test_stdin_is_the_input_file_or_nothing(tmp_path: Path) -> None:
    cat = shutil.which("cat")
    assert cat
    data = tmp_path / "in.bin"
    data.write_bytes(b"hello\xff\n")  # not UTF-8: kept, replaced
    fed = run_tool([cat], dict(os.environ), str(ROOT), 10, None, input_path=data)
    assert fed.stdout == "hello\ufffd\n"
    assert run([cat]).stdout == ""  # never the runner's own stdin


def test_failure_message_carries_the_evidence() -> None:
    res = Result(["ovs-ofctl", "add-flow", "br0", "bogus"], 1, "", "ovs-ofctl: unknown keyword\n")
    with pytest.raises(CommandFailed) as info:
        expect_rc(res, 0)
    assert str(info.value) == ("$ ovs-ofctl add-flow br0 bogus\nexit code: expected 0, got 1\n"
                               "[stderr]\novs-ofctl: unknown keyword\n")
    assert expect_rc(res, 1) is res and expect_rc(res, None) is res


def test_check_compares_output_and_leaves_the_exit_to_the_runner() -> None:
    failed = Result(["ovs-appctl", "x"], 2, "", "no such command\n")
    assert check(failed, stderr="no such command\n") is failed  # rc: the runner's business
    with pytest.raises(CommandFailed, match="exit code: expected 0, got 2"):
        check(failed, rc=0)  # a Result no runner checked may still be given an rc
    with pytest.raises(CommandFailed, match="stdout differs"):
        check(Result(["echo"], 0, "a\n", ""), stdout="b\n")


@pytest.mark.parametrize("runner", [Sandbox.vsctl, Sandbox.ofctl, Sandbox.appctl,
                                    Sandbox.appctl_tool, Sandbox.dpctl, Sandbox._tool, run_tool])
def test_every_sandbox_runner_raises_by_default(runner: object) -> None:
    param = inspect.signature(runner).parameters.get("rc")  # type: ignore[arg-type]
    assert param is not None and param.default == 0 and param.kind is param.KEYWORD_ONLY


def test_traffic_runner_raises_by_default() -> None:
    from fixtures.system_userspace.system_traffic import Traffic
    from fixtures.upstream_system import run_in
    for runner in (Traffic.run, Traffic.ip, run_in):
        param = inspect.signature(runner).parameters.get("rc")
        assert param is not None and param.default == 0, runner


def bare_checks(source: str) -> list[int]:
    """Lines of check(<call>) with nothing to compare: the wrapper that only
    asserted exit 0, which the runner now does itself."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "check" and node.args and isinstance(node.args[0], ast.Call)
            and not {"rc", "stdout", "stderr"} & {k.arg for k in node.keywords}
            and len(node.args) == 1]


def test_scan_finds_a_bare_wrapper() -> None:
    assert bare_checks("check(sb.vsctl('add-br', 'br0'))\n"
                       "x = check(sb.ofctl('dump-flows', 'br0')).stdout\n"
                       "check(sb.appctl('version'), stdout='x')\n"
                       "verdict.check()\n") == [1, 2]


def test_no_bare_check_wrappers_are_left() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}"
             for top in SCANNED for path in sorted((ROOT / top).rglob("*.py"))
             for line in bare_checks(path.read_text())]
    assert not found, ("check(<command>) with no rc/stdout/stderr: the runner already raises "
                       "on a non-zero exit (say rc= in the call instead):\n" + "\n".join(found))


RUNNERS = {"vsctl", "ofctl", "appctl", "appctl_tool", "dpctl", "run", "ip"}


def dead_rc_reads(source: str) -> list[int]:
    """Lines that read `.rc` of a name bound to a runner call made without
    rc=: the runner raised on any exit but 0, so the read can only see 0 and
    the branch it guards is dead (the call needed rc=None)."""
    found = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        raising = set()
        for node in ast.walk(func):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr in RUNNERS
                    and "rc" not in {k.arg for k in node.value.keywords}):
                raising.add(node.targets[0].id)
        found += [node.lineno for node in ast.walk(func)
                  if isinstance(node, ast.Attribute) and node.attr == "rc"
                  and isinstance(node.value, ast.Name) and node.value.id in raising]
    return sorted(found)


def test_scan_finds_a_dead_rc_read() -> None:
    assert dead_rc_reads("def f(sb):\n"
                         "    a = sb.vsctl('add-port', 'br0', 'p')\n"
                         "    b = sb.vsctl('add-port', 'br0', 'q', rc=None)\n"
                         "    return a.rc, b.rc\n") == [4]


def test_no_exit_code_is_read_after_a_runner_that_raises() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}"
             for top in SCANNED for path in sorted((ROOT / top).rglob("*.py"))
             for line in dead_rc_reads(path.read_text())]
    assert not found, ("`.rc` of a command run without rc=: the runner raised on any other "
                       "exit, so this only ever reads 0 (call it with rc=None):\n"
                       + "\n".join(found))
