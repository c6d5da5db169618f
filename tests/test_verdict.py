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
from evidence.compare import FrameMismatch
from fixtures.frames import compose
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


# -- several ports, order-free, whole-list deviations ------------------------------

def ports(expected_a: Expected, got_a: list[bytes], expected_b: Expected, got_b: list[bytes],
          instead_a: Expected | None = None) -> list[verdict.PortFrames]:
    return [verdict.PortFrames("pa", expected_a, got_a, [GOOD], "pin", known_instead=instead_a),
            verdict.PortFrames("pb", expected_b, got_b, [GOOD], "pin")]


def test_align_pairs_what_each_place_permits_and_keeps_the_rest_in_order() -> None:
    expected = Expected(frames=[GOOD, OTHER])
    assert verdict.align(expected, [OTHER, GOOD]) == [GOOD, OTHER]
    assert verdict.align(expected, [BAD, GOOD]) == [GOOD, BAD]  # BAD stands in OTHER's place
    assert verdict.align(expected, [OTHER, GOOD, BAD]) == [GOOD, OTHER, BAD]  # surplus last
    assert verdict.align(known_deviation(), [BAD]) == [BAD]  # what OVS is known to send


def test_every_port_is_recorded_and_an_order_free_match_passes() -> None:
    steps: list[Step] = []
    v = verdict.conclude_ports(steps, ports(Expected(frames=[GOOD, OTHER]), [OTHER, GOOD],
                                            Expected(frames=[]), []),
                               title="t", ordered=False)
    assert v.status == "match" and v.check() == 2
    assert [(s.rx_port, s.tx_port, s.ok) for s in steps] == [("pin", "pa", True),
                                                              ("pin", "pb", True)]


def test_order_matters_unless_the_judge_says_it_does_not() -> None:
    v = verdict.conclude_ports([], ports(Expected(frames=[GOOD, OTHER]), [OTHER, GOOD],
                                         Expected(frames=[]), []), title="t")
    assert v.status == "mismatch" and any("order" in line for line in v.lines)
    with pytest.raises(FrameMismatch):
        v.check()


def test_one_ports_surprise_fails_the_whole_and_names_the_port() -> None:
    v = verdict.conclude_ports([], ports(Expected(frames=[GOOD]), [GOOD],
                                         Expected(frames=[]), [OTHER]), title="t")
    assert v.status == "mismatch" and v.lines and all(ln.startswith("pb: ") for ln in v.lines)


def test_a_known_per_frame_deviation_on_one_port_is_a_sighting() -> None:
    steps: list[Step] = []
    v = verdict.conclude_ports(steps, ports(known_deviation(), [BAD], Expected(frames=[GOOD]),
                                            [GOOD]), title="t")
    assert v.status == "known" and v.check() == 2
    assert [s.bugs for s in steps] == [{GRE_CSUM_AT_PUSH.key: verdict.PRESENT}, {}]


def test_a_whole_list_deviation_is_a_sighting_only_where_every_port_shows_it() -> None:
    instead = Expected(frames=[GOOD, OTHER], bugs=[GRE_CSUM_AT_PUSH])  # OVS sends one more
    steps: list[Step] = []
    seen = verdict.conclude_ports(steps, ports(Expected(frames=[GOOD]), [GOOD, OTHER],
                                               Expected(frames=[GOOD]), [GOOD], instead),
                                  title="t")
    assert seen.status == "known" and steps[0].bugs == {GRE_CSUM_AT_PUSH.key: verdict.PRESENT}
    gone = verdict.conclude_ports([], ports(Expected(frames=[GOOD]), [GOOD],
                                            Expected(frames=[GOOD]), [GOOD], instead), title="t")
    assert gone.status == "gone" and any("no longer" in ln or "gone" in ln.lower()
                                         for ln in gone.lines)
    other = verdict.conclude_ports([], ports(Expected(frames=[GOOD]), [GOOD, OTHER],
                                             Expected(frames=[GOOD]), [], instead), title="t")
    assert other.status == "mismatch"


def test_extra_problems_make_any_verdict_a_mismatch() -> None:
    v = verdict.conclude_ports([], ports(known_deviation(), [BAD], Expected(frames=[]), []),
                               title="t", extra=["no frame went in"])
    assert v.status == "mismatch" and v.lines[-1] == "no frame went in"


def test_settle_rereads_until_the_captures_agree() -> None:
    arrived: list[bytes] = []
    reads = []

    def read() -> list[verdict.PortFrames]:
        reads.append(1)
        if len(reads) == 3:
            arrived.append(GOOD)  # the frame was on its way out
        return [verdict.PortFrames("pa", Expected(frames=[GOOD]), list(arrived), [GOOD], "pin")]
    steps: list[Step] = []
    v = verdict.settle(steps, read, title="t", timeout=5)
    assert v.status == "match" and len(reads) >= 3 and len(steps) == 1


def test_a_sighting_without_a_frame_is_decided_at_the_end() -> None:
    steps: list[Step] = []
    step = verdict.observed(steps, TSO_SHORT_TUNNEL_ASSERT, title="hang", what="no answer")
    assert steps == [step] and step.bugs == {TSO_SHORT_TUNNEL_ASSERT.key: "present"}
    assert step.diff == ["no answer"] and step.notes == [TSO_SHORT_TUNNEL_ASSERT.reason()]
    with pytest.raises(pytest.xfail.Exception, match=r"hang: known OVS bug\(s\) "):
        verdict.finish(steps)


def test_a_judgement_by_content_fails_on_any_problem_and_records_the_frames() -> None:
    steps: list[Step] = []
    ok = verdict.conclude_content(steps, [GOOD], [], title="t", rx_port="p1", tx_port="p2",
                                  sent=[GOOD])
    assert ok.status == "match" and ok.check() == [GOOD] and steps[0].ok
    bad = verdict.conclude_content(steps, [GOOD, OTHER], ["2 frames, 1 expected"], title="t",
                                   rx_port="p1", tx_port="p2", sent=[GOOD])
    assert bad.unexplained and steps[1].captured == [GOOD.hex(), OTHER.hex()]
    with pytest.raises(FrameMismatch, match="2 frames, 1 expected"):
        bad.check()
    assert not verdict.sightings(steps)


# -- one judge: frames are compared only here ----------------------------------------

JUDGES = {Path("datapath/verdict.py"), Path("datapath/model/__init__.py"),
          Path("evidence/compare.py")}  # the verdict path, Expected.judge, the field diff
COMPARERS = ("compare_frames", "match_frames", "record_step", "FrameMismatch")


def frame_comparisons(tree: ast.AST) -> list[str]:
    """Where a module compares frames or records a step itself: a call of the
    frame differ, a multiset matcher, the step recorder, or a FrameMismatch."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name in COMPARERS:
                found.append((node.lineno, node.col_offset, f"line {node.lineno}: {name}(...)"))
    return [text for _, _, text in sorted(found)]


def test_the_judge_scan_finds_each_comparison() -> None:
    source = ("def f(steps, a, b):\n"
              "    lines = compare.compare_frames(a, b) + match_frames(a, b)\n"
              "    record_step(steps, 't', 'p1', 'p2', sent=[], captured=b, diff=lines)\n"
              "    raise FrameMismatch(a, b, lines)\n")
    assert frame_comparisons(ast.parse(source)) == [
        "line 2: compare_frames(...)", "line 2: match_frames(...)",
        "line 3: record_step(...)", "line 4: FrameMismatch(...)"]


def test_every_frame_comparison_goes_through_the_verdict_path() -> None:
    hits: dict[str, list[str]] = {}
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in JUDGES:
                continue
            found = frame_comparisons(ast.parse(path.read_text(encoding="utf-8")))
            if found:
                hits[str(rel)] = found
    assert not hits, "frames compared outside datapath/verdict.py:\n" + "\n".join(
        f"{m} {h}" for m, hs in hits.items() for h in hs)
