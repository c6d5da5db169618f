"""Unit tests of reports/: records, the pytest plugin, rendering, merging and dissection.

They need no OVS. The dissection test needs tshark and is skipped without it.
"""
from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from markupsafe import escape

from harness.records import CaseRecord, Command, RunRecord, Step
from reports import dissect as dissect_module
from reports.dissect import DissectError, dissect, write_pcap
from reports.failures import dissect_failures
from reports.merge import main as merge_main
from reports.render import render

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

# Ethernet / IPv4 / UDP 1 -> 2 with payload "hi"; IP checksum correct (0x7ccc), UDP checksum 0x0000.
GOOD_UDP = ("ffffffffffff000000000001" "0800"
            "4500001e000100004011" "7ccc" "7f0000017f000001" "0001000200" "0a" "0000" "6869")


def _case(nodeid: str, outcome: str, **kwargs: object) -> CaseRecord:
    return CaseRecord(nodeid=nodeid, outcome=outcome, **kwargs)  # type: ignore[arg-type]


def _run(cases: list[CaseRecord], **kwargs: object) -> RunRecord:
    fields: dict[str, object] = {"started": "2025-01-01T00:00:00+00:00", "duration": 1.5, "host": "box",
                                 "backend": "dummy", "versions": {"ovs": "4.0.0"}}
    fields.update(kwargs)
    return RunRecord(cases=cases, **fields)  # type: ignore[arg-type]


def _failed_case() -> CaseRecord:
    step = Step(
        title="forward into vxlan", rx_port="p1", tx_port="p2",
        sent=["00112233"], expected=["0011223344"], captured=["0011ff33"], ok=False,
        diff=["outer UDP.chksum: expected 0x454d, got <script>alert(1)</script>"],
        csum_state=[{"IP": "good", "TCP": "stale"}], notes=["rewrite nw_ttl"],
    )
    return _case(
        "cases/test_vxlan.py::test_fwd[csum_on]", "failed", duration=0.25,
        params={"csum": "True"}, upstream="dpif-netdev - vxlan", longrepr="E   AssertionError: mismatch",
        steps=[step], commands=[Command(["ovs-vsctl", "add-br", "br0"], 1, "", "no bridge", 0.01)],
        log_excerpt=["2025-01-01T00:00:00Z|00001|dpif_netdev|WARN|bad thing"],
        artifacts={"reproducer": "repro/fwd.sh"},
    )


def test_record_json_round_trip(tmp_path: Path) -> None:
    run = _run([_failed_case(), _case("t.py::ok", "passed")], argv=["-k", "x"])
    path = tmp_path / "results.json"
    run.dump(str(path))
    loaded = RunRecord.load(str(path))
    assert loaded == run
    assert json.loads(path.read_text())["format"] == 2


def test_record_from_json_ignores_unknown_keys() -> None:
    data = _failed_case().to_json()
    data["future_field"] = 1
    data["steps"][0]["future_step_field"] = 2
    assert CaseRecord.from_json(data) == _failed_case()


def test_load_rejects_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"format": 1, "cases": []}))
    with pytest.raises(ValueError, match="malformed"):
        RunRecord.load(str(path))


INNER_TESTS = '''
import pytest

upstream = "module title"

@pytest.fixture
def broken():
    raise RuntimeError("setup exploded")

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown exploded")

def test_pass():
    pass

def test_fail():
    assert 1 == 2, "numbers differ"

def test_skip():
    pytest.skip("no dpdk here")

@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False

@pytest.mark.xfail(reason="maybe fixed")
def test_xpass():
    pass

@pytest.mark.xfail(reason="must fail", strict=True)
def test_xpass_strict():
    pass

@pytest.mark.xfail(run=False, reason="would hang")
def test_xfail_not_run():
    pass

def test_setup_error(broken):
    pass

def test_teardown_error(bad_teardown):
    pass

@pytest.mark.parametrize("csum", [False, True], ids=["off", "on"])
def test_evidence(case_record, record_property, csum):
    record_property("upstream", "dpif-netdev - evidence")
    record_property("upstream_file", "evidence.at")
    case_record.commands.append(Command(["ovs-appctl", "version"], 0, "4.0.0", "", 0.001))
    case_record.steps.append(Step("s", "p1", "p2", ["00"], ["00"], ["00"], True))
    case_record.log_excerpt.append("log line")

from harness.records import Command, Step
'''


def _outcomes(results: Path) -> dict[str, CaseRecord]:
    run = RunRecord.load(str(results))
    return {case.nodeid.split("::")[-1]: case for case in run.cases}


def test_plugin_records_every_outcome(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest("-p", "reports.plugin", "-p", "no:cacheprovider")
    out_dir = pytester.path / "reports" / "out"
    cases = _outcomes(out_dir / "results.json")
    assert {name: case.outcome for name, case in cases.items()} == {
        "test_pass": "passed", "test_fail": "failed", "test_skip": "skipped",
        "test_xfail": "xfailed", "test_xpass": "xpassed", "test_setup_error": "error",
        "test_xpass_strict": "failed", "test_xfail_not_run": "xfailed",
        "test_teardown_error": "error", "test_evidence[off]": "passed", "test_evidence[on]": "passed",
    }
    assert "numbers differ" in cases["test_fail"].longrepr
    assert cases["test_skip"].longrepr == "no dpdk here"
    assert "known bug" in cases["test_xfail"].longrepr
    assert "would hang" in cases["test_xfail_not_run"].longrepr
    assert "XPASS(strict)" in cases["test_xpass_strict"].longrepr
    assert "setup exploded" in cases["test_setup_error"].longrepr
    assert "teardown exploded" in cases["test_teardown_error"].longrepr
    evidence = cases["test_evidence[on]"]
    assert evidence.params == {"csum": "True"}
    assert evidence.upstream == "dpif-netdev - evidence"
    assert cases["test_pass"].upstream == "module title"
    assert evidence.upstream_file == "evidence.at"
    assert cases["test_pass"].upstream_file == "dpif-netdev.at"
    assert cases["test_fail"].upstream_file == "dpif-netdev.at"
    # A passed case keeps a summary: its steps' outcome, not its commands, log or frames.
    assert evidence.compacted and evidence.commands == [] and evidence.log_excerpt == []
    assert evidence.steps[0].title == "s" and evidence.steps[0].ok
    assert evidence.steps[0].captured == [] and evidence.steps[0].expected == []
    assert all(case.duration > 0 for case in cases.values())
    html = (out_dir / "index.html").read_text()
    assert "test_setup_error" in html and "numbers differ" in html
    pages = {p.name.split("-")[0] for p in (out_dir / "case").iterdir()}
    assert pages == {"test_fail", "test_setup_error", "test_teardown_error", "test_xfail",
                     "test_xfail_not_run", "test_xpass_strict"}
    junit = (out_dir / "junit.xml").read_text()
    assert junit.count("<testcase") == 11
    assert any(line.strip("- ").startswith("OVS report:") for line in result.outlines)


def test_record_frames_all_keeps_what_a_build_comparison_diffs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER_TESTS)
    pytester.runpytest("-p", "reports.plugin", "-p", "no:cacheprovider", "--record-frames=all",
                       "-k", "evidence")
    evidence = _outcomes(pytester.path / "reports" / "out" / "results.json")["test_evidence[on]"]
    assert evidence.compacted and evidence.commands == []
    assert (evidence.steps[0].sent, evidence.steps[0].captured) == (["00"], ["00"])


def test_plugin_out_dir_and_user_junitxml(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_ok():\n    pass\n")
    pytester.runpytest("-p", "reports.plugin", "-p", "no:cacheprovider",
                       "--out-dir", "custom", "--junitxml", "mine.xml", "--report-all-cases")
    assert (pytester.path / "custom" / "results.json").is_file()
    assert (pytester.path / "custom" / "index.html").is_file()
    assert [p.name.split("-")[0] for p in (pytester.path / "custom" / "case").iterdir()] == ["test_ok"]
    assert (pytester.path / "mine.xml").is_file()
    assert not (pytester.path / "custom" / "junit.xml").exists()


def test_plugin_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest('''
import pytest
from reports.plugin import set_run_info

@pytest.fixture(autouse=True, scope="session")
def _probe(request):
    set_run_info(request.config, "dummy", {"ovs": "9.9.9"})
''')
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "reports.plugin", "-p", "no:cacheprovider",
                                           "-p", "xdist", "-p", "fixtures.shard",
                                           "-p", "fixtures.schedule", "-n", "2",
                                           "--report-all-cases")
    results = pytester.path / "reports" / "out" / "results.json"
    run = RunRecord.load(str(results))
    nodeids = [case.nodeid for case in run.cases]
    assert len(nodeids) == 11 and len(set(nodeids)) == 11, nodeids
    # Listed in the collection's order, whichever worker finished first; each
    # case says where and when it ran.
    collected = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider").outlines
    assert nodeids == [line for line in collected if "::" in line]
    assert all(c.worker in ("gw0", "gw1") and c.started > 0 for c in run.cases)
    # fixtures/schedule.py's units: no id was timed, so six (of UNTIMED_SECONDS
    # each) make a unit, and a unit runs on one worker.
    workers = [c.worker for c in run.cases]
    assert len(set(workers[:6])) == 1 and len(set(workers[6:])) == 1
    cases = _outcomes(results)
    assert cases["test_fail"].outcome == "failed" and cases["test_xfail"].outcome == "xfailed"
    assert cases["test_evidence[off]"].commands[0].stdout == "4.0.0"  # all cases kept whole
    assert not cases["test_evidence[off]"].compacted
    assert run.backend == "dummy" and run.versions == {"ovs": "9.9.9"}
    assert cases["test_pass"].backend == "dummy"
    assert (pytester.path / "reports" / "out" / "index.html").is_file()
    assert (pytester.path / "reports" / "out" / "junit.xml").is_file()
    assert result.ret == 1


def test_render_puts_failures_first_and_escapes(tmp_path: Path) -> None:
    cases = [_case("t.py::test_passing", "passed"), _case("t.py::test_xf", "xfailed", longrepr="XFAIL: bug"),
             _failed_case(), _case("t.py::test_broken_setup", "error", longrepr="E   RuntimeError: boom")]
    known = [{"key": "gre-csum-at-push", "status": "present", "present": 1, "absent": 0,
              "seen_in": "4.0.0", "title": "t", "where": "w", "cls": "bug",
              "severity": "corrupts data on the wire", "root_cause": "gre-csum-at-push",
              "real_ports": "veth", "why": ""}]
    html = Path(render(_run(cases, known_bugs=known), str(tmp_path))).read_text()
    # Red first: the failures come before the matrix, and the matrix before the known bugs.
    assert html.index('id="failures"') < html.index('id="matrix-section"') < html.index('id="known-bugs"')
    failures = html[html.index('id="failure-list"'):html.index('id="matrix-section"')]
    assert failures.index("test_fwd[csum_on]") < failures.index("test_broken_setup")
    # The first case the page links to is the failed one: nothing is listed before it.
    first = re.search(r'href="(case/[^"]+)"', html)
    assert first is not None and first.group(1).startswith("case/test_fwd_csum_on")
    assert "test_passing" not in failures and "test_xf" not in failures
    assert "1 failed" in html and "1 error" in html and "4.0.0" in html
    assert "<script>alert(1)" not in html
    pages = sorted(p.name for p in (tmp_path / "case").iterdir())
    assert len(pages) == 3 and not any("test_passing" in p for p in pages)  # failed, error, xfailed
    page = next((tmp_path / "case").glob("test_fwd*.html")).read_text()
    assert "got &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert '<span class="d">ff</span>' in page  # byte that differs from the expected frame
    assert "IP good, TCP stale" in page and "rewrite nw_ttl" in page
    assert 'href="../repro/fwd.sh"' in page and "no bridge" in page and "bad thing" in page


def test_render_lists_bugs_apart_from_latent_and_by_design_entries(tmp_path: Path) -> None:
    from datapath.model import bugs
    known = [{**b.summary(), "status": "present", "present": 1, "absent": 0} for b in bugs.ALL]
    html = Path(render(_run([], known_bugs=known), str(tmp_path))).read_text()
    real = html[html.index('id="known-bugs"'):html.index('id="known-other"')]
    other = html[html.index('id="known-other"'):]
    for bug in bugs.ALL:
        assert (f">{bug.key}<" in real) is (bug.cls == "bug")
        assert (f">{bug.key}<" in other) is (bug.cls != "bug")
        # One line on the index; the long facts moved to the entry's own page.
        assert f'href="bugs/{bug.key}.html"' in html
        page = (tmp_path / "bugs" / f"{bug.key}.html").read_text()
        assert escape(bug.where) in page and escape(bug.title) in page
        assert escape(bug.why) in page and escape(bug.root_cause) in page
        assert all(escape(port.how) in page for port in bug.real_ports)
        assert escape(bug.where) not in html
    assert "<th>severity</th><th>ids</th>" in real and "real ports" not in real
    assert ">latent<" in other and ">by-design<" in other


def test_render_survives_empty_and_sparse_records(tmp_path: Path) -> None:
    html = Path(render(_run([], versions={}, backend=""), str(tmp_path / "empty"))).read_text()
    assert "no cases were run" in html
    sparse = _case("t.py::test_sparse", "failed", steps=[
        Step("", "", "", [], [], ["zz"], False, dissection=[{"layers": [{"name": "ip"}]}, "junk"]),
    ])
    html = Path(render(_run([sparse, _case("t.py::odd", "weird")]), str(tmp_path / "sparse"))).read_text()
    assert "weird" in html
    page = next((tmp_path / "sparse" / "case").glob("test_sparse*.html")).read_text()
    assert "not hex: zz" in page and "expected 0 frame(s), captured 1" in page


def _write_run(path: Path, run: RunRecord) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    run.dump(str(path))
    return str(path)


def test_merge_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _write_run(tmp_path / "shard-a" / "results.json",
                       _run([_failed_case(), _case("t.py::test_same", "passed")], versions={"ovs": "3.1.0"}))
    second = _write_run(tmp_path / "shard-b" / "results.json",
                        _run([_case("t.py::test_same", "failed", longrepr="E  flaky")], backend="tap",
                             versions={"ovs": "4.0.0", "dpdk": "25.11.4"}))
    out = tmp_path / "merged"
    assert merge_main([first, str(Path(second).parent), "-o", str(out)]) == 0  # a directory: its results.json
    merged = RunRecord.load(str(out / "results.json"))
    assert [(c.nodeid, c.run) for c in merged.cases if c.nodeid == "t.py::test_same"] == [
        ("t.py::test_same", "shard-a"), ("t.py::test_same", "shard-b")]
    assert len(merged.cases) == 3
    assert merged.versions == {"ovs": "3.1.0, 4.0.0", "dpdk": "25.11.4"}
    assert merged.backend == "dummy, tap" and merged.duration == 3.0
    assert [r["label"] for r in merged.runs] == ["shard-a", "shard-b"]
    assert merged.cases[0].artifacts["reproducer"] == "../shard-a/repro/fwd.sh"
    html = (out / "index.html").read_text()
    assert "shard-b" in html and "Merged runs" in html
    # The same id failed in shard b only: one page for it, named after its run.
    pages = [p.read_text() for p in (out / "case").glob("test_same*.html")]
    assert len(pages) == 1 and "shard-b" in pages[0] and "flaky" in pages[0]
    data = json.loads(html.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert {"name": "run", "values": ["shard-a", "shard-b"]} in data["axes"]
    assert len(list((out / "repro").iterdir())) == 1  # the reproducer of the failure, rebuilt here
    assert (out / "upstream.html").is_file()
    assert "merged 2 runs, 3 cases" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 1, "started": "x", "cases": "no"}),
                                     json.dumps({"format": 1, "started": 1, "duration": "1", "host": "",
                                                 "backend": "", "versions": {}, "cases": []})],
                         ids=["not-json", "bad-cases", "bad-types"])
def test_merge_malformed_file_exits_2(tmp_path: Path, content: str) -> None:
    good = _write_run(tmp_path / "good" / "results.json", _run([]))
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "reports.merge", good, str(bad), "-o", str(tmp_path / "o")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "results.json").exists()


def test_write_pcap_format(tmp_path: Path) -> None:
    path = tmp_path / "f.pcap"
    write_pcap([GOOD_UDP, "0011"], str(path))
    data = path.read_bytes()
    magic, major, minor, _, _, snaplen, linktype = struct.unpack("<IHHiIII", data[:24])
    assert (magic, major, minor, linktype) == (0xA1B2C3D4, 2, 4, 1) and snaplen >= 65535
    incl, orig = struct.unpack("<II", data[32:40])
    assert incl == orig == len(GOOD_UDP) // 2
    assert data[40:40 + incl] == bytes.fromhex(GOOD_UDP)
    assert data[-2:] == b"\x00\x11"
    with pytest.raises(DissectError, match="frame 1"):
        write_pcap([GOOD_UDP, "xyz"], str(path))


def test_dissect_without_tshark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dissect_module.shutil, "which", lambda name: None)
    with pytest.raises(DissectError, match="tshark not found"):
        dissect([GOOD_UDP], str(tmp_path / "x.pcap"))
    assert (tmp_path / "x.pcap").is_file()
    case = _failed_case()
    dissect_failures([case, _case("t.py::ok", "passed", steps=[Step("s", "", "", [], [], ["00"], False)])],
                     tmp_path)
    assert case.steps[0].dissection_error == "no dissection: tshark not found"
    assert (tmp_path / case.artifacts["step 1 captured.pcap"]).is_file()
    assert "step 1 expected.pcap" in case.artifacts


def test_dissect_reports_a_broken_tshark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyshark")
    fake = tmp_path / "bin" / "tshark"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'tshark: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(dissect_module.shutil, "which", lambda name: str(fake))
    with pytest.raises(DissectError, match="tshark failed"):
        dissect([GOOD_UDP], str(tmp_path / "x.pcap"))


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_dissect_reports_checksum_verdicts(tmp_path: Path) -> None:
    bad_ip = GOOD_UDP[:48] + "1234" + GOOD_UDP[52:]
    frames = dissect([GOOD_UDP, bad_ip], str(tmp_path / "d.pcap"))
    assert [f["index"] for f in frames] == [0, 1]
    names = [layer["name"] for layer in frames[0]["layers"]]
    assert names[:3] == ["eth", "ip", "udp"]

    def verdicts(frame: dict) -> dict[str, str]:
        return {c["field"]: c["status"] for layer in frame["layers"] for c in layer["checksums"]}

    assert verdicts(frames[0])["ip.checksum"] == "good"
    assert verdicts(frames[1])["ip.checksum"] == "bad"
    assert verdicts(frames[0])["udp.checksum"] in ("not present", "unverified")  # zero UDP csum
    ip_layer = frames[0]["layers"][1]
    assert "src=127.0.0.1" in ip_layer["summary"]

    case = _case("t.py::test_bad", "failed",
                 steps=[Step("s", "p1", "p2", [GOOD_UDP], [GOOD_UDP], [bad_ip], False)])
    dissect_failures([case], tmp_path / "out")
    assert case.steps[0].dissection[0]["layers"][1]["checksums"][0]["status"] == "bad"
    render(_run([case]), str(tmp_path / "out"))
    page = next((tmp_path / "out" / "case").glob("test_bad*.html")).read_text()
    assert "tshark on the captured frames" in page and "(should be 0x7ccc)" in page
    assert 'href="../pcap/' in page and "captured.pcap" in page


def test_an_interrupted_case_is_in_results_as_junit_has_it(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of a case: results.json lists it (error), as junit.xml does."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_inner="def test_first():\n    pass\n\n"
                                   "def test_second():\n    raise KeyboardInterrupt\n\n"
                                   "def test_third():\n    pass\n")
    pytester.runpytest_subprocess("-p", "reports.plugin", "-p", "no:cacheprovider")
    out = pytester.path / "reports" / "out"
    cases = _outcomes(out / "results.json")
    assert cases["test_first"].outcome == "passed"
    assert cases["test_second"].outcome == "error" and "interrupted" in cases["test_second"].longrepr
    assert "test_third" not in cases
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase") == len(cases)


def test_large_evidence_is_packed_and_round_trips(tmp_path: Path) -> None:
    """A TSO case's evidence (many near-identical frames) is stored packed and comes
    back as it was; a damaged packed text is one clear error."""
    frames = ["00" * 1500 + f"{i:04x}" for i in range(64)]
    case = _case("t.py::test_tso", "xfailed", steps=[Step("s", "p1", "p2", frames[:1], frames,
                                                          frames, False)])
    data = case.to_json()
    assert data["steps"] == [] and data["evidence_z"].startswith("z:")
    assert len(json.dumps(data)) < len("".join(frames)) / 20
    assert CaseRecord.from_json(data) == case
    small = _case("t.py::ok", "passed").to_json()
    assert "evidence_z" not in small
    data["evidence_z"] = "z:not base64 of zlib"
    with pytest.raises(ValueError, match="damaged"):
        CaseRecord.from_json(data)
