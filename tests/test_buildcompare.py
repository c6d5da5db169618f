"""Comparing two builds' results, and dealing ids out to CI shards."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from fixtures.shard import deal, load_durations, parse_shard
from harness.records import CaseRecord, RunRecord, Step
from tooling.buildcompare import compare_runs, field_paths, main

pytest_plugins = ["pytester"]


def vxlan(udp_csum: int, ttl: int = 64) -> str:
    inner = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / b"x"
    frame = (Ether(src="aa:55:aa:55:00:00", dst="aa:55:aa:55:00:01")
             / IP(src="1.1.2.88", dst="1.1.2.92", ttl=ttl) / UDP(sport=57363, dport=4789,
                                                                 chksum=udp_csum)
             / VXLAN(vni=123) / inner)
    return bytes(frame).hex()


def case(nodeid: str, outcome: str, captured: list[str], compacted: bool = True) -> CaseRecord:
    step = Step("s", "p1", "p2", sent=["00"], expected=[], captured=captured, ok=True)
    return CaseRecord(nodeid=nodeid, outcome=outcome, steps=[step], compacted=compacted)


def run(cases: list[CaseRecord], ovs: str) -> RunRecord:
    return RunRecord(started="2026-01-01T00:00:00+00:00", duration=1.0, host="h",
                     backend="dummy", versions={"ovs": "4.0.0"}, cases=cases, ovs_source=ovs)


def sides() -> tuple[RunRecord, RunRecord]:
    good, changed, other_ttl = vxlan(0x1234), vxlan(0xFFFF), vxlan(0x1234, ttl=63)
    baseline = run([case("t::same", "passed", [good]),
                    case("t::csum_both_pass", "passed", [good]),
                    case("t::csum_both_xfail", "xfailed", [good], compacted=False),
                    case("t::regress", "passed", [good]),
                    case("t::ttl", "passed", [good, good]),
                    case("t::gone", "passed", [good])], "A")
    candidate = run([case("t::same", "passed", [good]),
                     case("t::csum_both_pass", "passed", [changed]),
                     case("t::csum_both_xfail", "xfailed", [changed], compacted=False),
                     case("t::regress", "failed", [changed], compacted=False),
                     case("t::ttl", "passed", [good, other_ttl]),
                     case("t::new", "skipped", [])], "B")
    return baseline, candidate


def test_frames_are_grouped_by_the_field_that_changed() -> None:
    data = compare_runs(*sides())
    by_field = {f["field"]: f["ids"] for f in data["frame_changes"]}
    assert by_field["outer.UDP.chksum"] == ["t::csum_both_pass", "t::csum_both_xfail",
                                            "t::regress"]
    assert by_field["outer.IP.ttl"] == ["t::ttl"]
    assert "t::same" not in json.dumps(data["frame_changes"])
    assert data["frames_changed_ids"] == 4 and data["ids"]["frames_compared"] == 5
    assert data["regressions"] == ["t::regress"]
    assert data["outcome_changes"] == [{"baseline": "passed", "candidate": "failed",
                                        "ids": ["t::regress"]}]
    assert (data["ids"]["only_baseline"], data["ids"]["only_candidate"]) == (["t::gone"],
                                                                             ["t::new"])
    example = next(f for f in data["frame_changes"] if f["field"] == "outer.UDP.chksum")
    assert "baseline 0x1234, candidate 0xffff" in example["examples"][0]


def test_a_different_number_of_frames_is_a_change() -> None:
    assert field_paths(["00"], ["00", "01"]) == {
        "frame count": "baseline 1 frames, candidate 2"}
    assert field_paths([vxlan(1)], [vxlan(1)]) == {}


def test_main_writes_the_page_and_fails_on_a_regression(tmp_path: Path) -> None:
    baseline, candidate = sides()
    for name, side in (("baseline", baseline), ("candidate", candidate)):
        (tmp_path / name).mkdir()
        side.dump(str(tmp_path / name / "results.json"))
    assert main([str(tmp_path / "baseline"), str(tmp_path / "candidate"),
                 "-o", str(tmp_path)]) == 1
    page = (tmp_path / "compare.html").read_text()
    assert "outer.UDP.chksum differs in 3 ids" in page
    assert "1 id(s) passed on the baseline and fail on the candidate" in page
    assert json.loads((tmp_path / "compare.json").read_text())["regressions"] == ["t::regress"]
    index = (tmp_path / "candidate" / "index.html").read_text()
    assert 'href="../compare.html">build comparison</a>' in index
    # No regression: exit 0; unreadable input: exit 2.
    candidate.cases[3].outcome = "passed"
    candidate.dump(str(tmp_path / "candidate" / "results.json"))
    assert main([str(tmp_path / "baseline"), str(tmp_path / "candidate"), "-o", str(tmp_path)]) == 0
    assert main([str(tmp_path / "nope"), str(tmp_path / "candidate"), "-o", str(tmp_path)]) == 2


def test_shards_are_disjoint_complete_and_balanced() -> None:
    ids = [f"t::{i}" for i in range(40)]
    durations = {n: float(i % 7) for i, n in enumerate(ids)}
    shards = deal(ids, durations, 3)
    assert sorted(n for s in shards for n in s) == sorted(ids)
    loads = [sum(durations[n] for n in s) for s in shards]
    assert max(loads) - min(loads) <= max(durations.values())
    assert deal(list(reversed(ids)), durations, 3) == shards  # order of collection is irrelevant
    # Untimed ids count as the mean of the timed ones.
    assert [len(s) for s in deal(ids, {}, 4)] == [10, 10, 10, 10]


def test_shard_options_reject_bad_input(tmp_path: Path) -> None:
    for text in ("3", "0/2", "3/2", "a/b"):
        with pytest.raises(pytest.UsageError, match="--shard"):
            parse_shard(text)
    (tmp_path / "d.json").write_text('{"t::a": 1.5}')
    assert load_durations(tmp_path / "d.json") == {"t::a": 1.5}
    (tmp_path / "r.json").write_text(json.dumps({"format": 1, "cases": [
        {"nodeid": "t::b", "duration": 2}]}))
    assert load_durations(tmp_path / "r.json") == {"t::b": 2.0}
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(pytest.UsageError, match="neither a results.json"):
        load_durations(tmp_path / "bad.json")


def test_shards_of_a_real_collection_cover_it_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_many="import pytest\n@pytest.mark.parametrize('n', range(9))\n"
                                  "def test_n(n):\n    pass\n")
    seen: list[str] = []
    for i in (1, 2, 3):
        result = pytester.runpytest("-p", "fixtures.shard", "-p", "no:cacheprovider",
                                    "--shard", f"{i}/3", "-v", "--shard-durations",
                                    str(pytester.path / "none.json"))
        assert result.ret == 4  # the durations file does not exist: a usage error
        result = pytester.runpytest("-p", "fixtures.shard", "-p", "no:cacheprovider",
                                    "--shard", f"{i}/3", "-v")
        result.assert_outcomes(passed=3)
        seen += [ln.split(" ")[0] for ln in result.outlines if " PASSED" in ln]
    assert sorted(seen) == sorted(f"test_many.py::test_n[{n}]" for n in range(9))
