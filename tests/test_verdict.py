"""The one verdict path (datapath/verdict.py): the step recorder, the verdict a
step returns, the known-bug collector's decision, and a check that nothing
else records steps or decides an xfail."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from datapath import verdict
from datapath.model import Expected, deviation
from datapath.model.bugs import GRE_CSUM_AT_PUSH, TSO_SHORT_TUNNEL_ASSERT
from fixtures.frames import compose
from harness.compare import FrameMismatch
from harness.records import Step

ROOT = Path(__file__).resolve().parent.parent
GOOD = compose("udp", 4)
BAD = GOOD[:-1] + bytes([GOOD[-1] ^ 0xFF])  # the last payload byte changed
OTHER = compose("udp", 4, sport=1)


def known_deviation() -> Expected:
    """GOOD is right; OVS is known to send BAD instead (gre-csum-at-push)."""
    return deviation(Expected(frames=[GOOD], csum_state=[{}]),
                     Expected(frames=[BAD], csum_state=[{}]), GRE_CSUM_AT_PUSH)


def judge(expected: Expected, captured: list[bytes], steps: list[Step],
          extra: tuple[str, ...] = ()) -> verdict.Verdict:
    return verdict.conclude(steps, expected, captured, title="t", rx_port="p1", tx_port="p2",
                            sent=[GOOD], extra=extra)


def test_record_step_is_the_step_the_report_reads() -> None:
    steps: list[Step] = []
    step = verdict.record_step(steps, "fwd", "p1", "p2", sent=[GOOD], captured=[BAD],
                               expected=Expected(frames=[GOOD], csum_state=[{"IP": "good"}],
                                                 notes=["model"]),
                               diff=["IP.chksum: expected 0x1, got 0x2"], notes=["mine"])
    assert steps == [step]
    assert (step.sent, step.expected, step.captured) == ([GOOD.hex()], [GOOD.hex()], [BAD.hex()])
    assert not step.ok and step.diff == ["IP.chksum: expected 0x1, got 0x2"]
    assert step.csum_state == [{"IP": "good"}] and step.notes == ["model", "mine"]
    assert verdict.record_step(None, "x", "", "", sent=[], captured=[]).ok


def test_a_match_passes_and_is_no_sighting() -> None:
    steps: list[Step] = []
    v = judge(Expected(frames=[GOOD]), [GOOD], steps)
    assert (v.status, v.check(), steps[0].ok, steps[0].bugs) == ("match", [GOOD], True, {})
    verdict.finish(steps)  # nothing to decide: the case passes


def test_a_known_deviation_is_returned_recorded_and_decided_at_the_end() -> None:
    steps: list[Step] = []
    v = judge(known_deviation(), [BAD], steps)
    assert v.known and v.check() == [BAD]  # not raised: later steps still run
    assert steps[0].bugs == {"gre-csum-at-push": "present"} and not steps[0].ok
    assert verdict.sightings(steps) == steps
    judge(Expected(frames=[GOOD]), [GOOD], steps)  # a later step, judged and recorded
    with pytest.raises(pytest.xfail.Exception, match=r"t: known OVS bug\(s\) gre-csum-at-push"):
        verdict.finish(steps)


def test_an_unexplained_deviation_fails() -> None:
    steps: list[Step] = []
    v = judge(known_deviation(), [OTHER], steps)  # not what the bug sends
    assert v.status == "mismatch" and steps[0].bugs == {} and not verdict.sightings(steps)
    with pytest.raises(FrameMismatch):
        v.check()


def test_a_known_deviation_beside_another_problem_is_a_mismatch() -> None:
    steps: list[Step] = []
    v = judge(known_deviation(), [BAD], steps, extra=("1 frame(s) before this step",))
    assert v.status == "mismatch" and not verdict.sightings(steps)
    with pytest.raises(FrameMismatch):
        v.check()


def test_a_known_bug_that_no_longer_shows_fails() -> None:
    """With xfail_strict, an absent bug must not xpass quietly: the step fails."""
    steps: list[Step] = []
    v = judge(known_deviation(), [GOOD], steps)
    assert v.status == "gone" and steps[0].bugs == {"gre-csum-at-push": "absent"}
    with pytest.raises(FrameMismatch, match="no longer reproduces"):
        v.check()


def test_a_crash_that_did_not_happen_fails() -> None:
    steps: list[Step] = []
    expected = Expected(frames=[GOOD], bugs=[TSO_SHORT_TUNNEL_ASSERT])
    v = judge(expected, [GOOD], steps)
    assert v.status == "gone" and steps[0].bugs == {"tso-short-tunnel-assert": "absent"}
    with pytest.raises(FrameMismatch):
        v.check()


def test_a_known_crash_is_a_sighting_that_ends_the_case() -> None:
    steps: list[Step] = []
    crash = verdict.crashed(steps, TSO_SHORT_TUNNEL_ASSERT, title="t", rx_port="p1",
                            tx_port="p2", sent=[GOOD], evidence="assertion failed\n")
    assert isinstance(crash, verdict.KnownCrash) and verdict.sightings(steps) == steps
    with pytest.raises(pytest.xfail.Exception, match="tso-short-tunnel-assert"):
        verdict.stop(crash)


def test_the_reason_quotes_a_bounded_diff() -> None:
    step = verdict.record_step(None, "t", "", "", sent=[], captured=[],
                               diff=[f"line {i}" for i in range(30)], bugs={"k": "present"})
    text = verdict.reason([step], max_lines=3)
    assert "line 2" in text and "line 3" not in text and "27 more lines" in text


# -- one verdict path ----------------------------------------------------------------

COLLECTOR = Path("datapath/verdict.py")
SCANNED = ("harness", "datapath", "fixtures", "cases", "reports", "export", "bench", "perf")


def verdict_bypasses(tree: ast.AST) -> list[str]:
    """What in a module decides an xfail or builds a step record itself:
    pytest.xfail(...), a catch of pytest.xfail.Exception, or Step(...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "xfail" and \
                isinstance(node.value, ast.Name) and node.value.id == "pytest":
            found.append(f"line {node.lineno}: pytest.xfail")
        elif isinstance(node, ast.Call) and (
                isinstance(node.func, ast.Name) and node.func.id == "Step"
                or isinstance(node.func, ast.Attribute) and node.func.attr == "Step"):
            found.append(f"line {node.lineno}: Step(...)")
    return found


def test_the_scan_finds_each_way_around_the_verdict_path() -> None:
    source = ("import pytest\n"
              "def f(steps):\n"
              "    try:\n"
              "        pytest.xfail('known')\n"
              "    except pytest.xfail.Exception:\n"
              "        steps.append(records.Step('t', 'p1', 'p2', [], [], [], True))\n"
              "        steps.append(Step('t', 'p1', 'p2', [], [], [], True))\n")
    assert verdict_bypasses(ast.parse(source)) == [
        "line 4: pytest.xfail", "line 5: pytest.xfail", "line 6: Step(...)",
        "line 7: Step(...)"]
    marker = "@pytest.mark.xfail(reason='x')\ndef test(): pass\n"
    assert verdict_bypasses(ast.parse(marker)) == []  # a declared xfail marker is no verdict


def test_one_verdict_path() -> None:
    """Only the collector decides an xfail, and steps are recorded only by its
    recorder (the framework's own tests build records freely)."""
    bypasses = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel == COLLECTOR:
                continue
            bypasses += [f"{rel} {hit}" for hit in
                         verdict_bypasses(ast.parse(path.read_text(encoding="utf-8")))]
    assert not bypasses, "around the one verdict path (datapath/verdict.py):\n" + \
        "\n".join(bypasses)
