"""The known-bug part of the report without a browser: one line per catalogue entry on
the index, one page per entry with its facts, fix, disclosure note and the ids that
sighted it; and the merge keeping an entry's facts while it counts its status anew."""
from __future__ import annotations

import re
from pathlib import Path

from markupsafe import escape

from datapath.model import bugs
from fixtures.plugin import known_bug_facts
from harness.records import CaseRecord, RunRecord, Step, known_bug_status
from reports.bugpages import export_files
from reports.merge import merge
from reports.render import render

NAT = next(b for b in bugs.ALL if b.key == "ct-nat-untranslated")
GRE = next(b for b in bugs.ALL if b.key == "gre-csum-at-push")
IPV6_EXT = next(b for b in bugs.ALL if b.key == "ipv6-ext-pseudo-header")
NO_FIX = next(b for b in bugs.ALL if b.key == "gre-seq-shared")
SHOWN_BY = next(p for p in NAT.real_ports if p.case).node_id  # a case the catalogue names


def _case(nodeid: str, outcome: str, sighted: dict[str, str], run: str = "") -> CaseRecord:
    step = Step("send", "p1", "p2", [], [], [], outcome != "failed", bugs=dict(sighted))
    return CaseRecord(nodeid=nodeid, outcome=outcome, steps=[step], run=run,
                      longrepr="E   AssertionError: x" if outcome == "failed" else "")


def _run(cases: list[CaseRecord]) -> RunRecord:
    known = known_bug_status([known_bug_facts(b) for b in bugs.ALL], cases)
    return RunRecord(started="2025-01-01T00:00:00+00:00", duration=3.0, host="box", backend="dummy",
                     versions={"ovs": "4.0.0"}, cases=cases, known_bugs=known)


def _line(html: str, key: str) -> str:
    match = re.search(rf'<tr data-status="[^"]*"><td class="mono"><a class="bug-link" '
                      rf'href="bugs/{re.escape(key)}\.html">.*?</tr>', html, re.S)
    assert match, f"no index line for {key}"
    return match.group(0)


def test_each_entry_is_one_line_linking_to_its_page_of_evidence(tmp_path: Path) -> None:
    cases = [_case("cases/t.py::test_nat[exhaustion]", "xfailed", {NAT.key: "present"}),
             _case("cases/t.py::test_nat[zone_limit]", "failed", {NAT.key: "absent"}),
             _case(SHOWN_BY, "xfailed", {NAT.key: "present"}),
             _case("cases/t.py::test_ext[udp]", "failed", {IPV6_EXT.key: "absent"}),
             _case("cases/t.py::test_plain", "passed", {})]
    html = Path(render(_run(cases), str(tmp_path))).read_text()
    for bug in bugs.ALL:  # every line links to a page that exists
        assert (tmp_path / "bugs" / f"{bug.key}.html").is_file()
        line = _line(html, bug.key)
        assert escape(bug.severity) in line and escape(bug.title) in line
        assert line.count("<tr") == 1 and "real ports" not in line and escape(bug.where) not in line

    nat = _line(html, NAT.key)
    assert 'data-status="mixed"' in nat and ">mixed<" in nat
    assert f'<a href="bugs/{NAT.key}.html#ids">3</a>' in nat
    assert ">gone<" in _line(html, IPV6_EXT.key) and '#ids">1</a>' in _line(html, IPV6_EXT.key)
    gre = _line(html, GRE.key)
    assert ">not run<" in gre and '<td class="num">0</td>' in gre and "#ids" not in gre

    page = (tmp_path / "bugs" / f"{NAT.key}.html").read_text()
    for fact in (NAT.cls, NAT.severity, NAT.where, NAT.root_cause, NAT.title):
        assert escape(fact) in page
    assert all(escape(port.how) in page for port in NAT.real_ports)
    for name in (f"export/fixes/{NAT.root_cause}.patch", f"export/disclosures/{NAT.key}.md"):
        text = (Path(__file__).resolve().parent.parent / name).read_text()
        assert f"<code>{name}</code>" in page and escape(text.splitlines()[0]) in page
    ids = page[page.index('id="sightings"'):]
    links = re.findall(r'href="\.\./(case/[^"]+)">([^<]+)</a>', ids)
    assert sorted(nodeid for _, nodeid in links) == sorted(c.nodeid for c in cases[:3])
    assert all((tmp_path / href).is_file() for href, _ in links)
    assert ids.index("test_nat[zone_limit]") < ids.index("test_nat[exhaustion]")  # failed first
    assert ids.count(">present<") == 2 and ids.count(">gone<") == 1
    ports = page[page.index('id="ports"'):page.index('id="fix"')]
    assert ports.count("<tr>") == len(NAT.real_ports) + 1
    shown = re.search(r'href="\.\./(case/[^"]+)">' + re.escape(SHOWN_BY) + "<", ports)
    assert shown and (tmp_path / shown.group(1)).is_file()  # the catalogue's case, run here

    # And back: a case page names the entries its id ran into, linked to their pages.
    back = (tmp_path / links[0][0]).read_text()
    bug_links = re.findall(r'<td id="case-bugs">.*?</td>', back, re.S)
    assert len(bug_links) == 1 and f'href="../bugs/{NAT.key}.html"' in bug_links[0]

    assert escape(GRE.title) in (tmp_path / "bugs" / f"{GRE.key}.html").read_text()
    assert 'id="no-fix"' in (tmp_path / "bugs" / f"{NO_FIX.key}.html").read_text()
    assert 'id="no-fix"' not in page


def test_export_files_are_the_group_fix_and_the_entry_note(tmp_path: Path) -> None:
    (tmp_path / "fixes").mkdir()
    (tmp_path / "disclosures").mkdir()
    for name in ("fixes/group.patch", "fixes/other.patch", "disclosures/k.md",
                 "disclosures/topic-k.md", "disclosures/topic-kk.md", "disclosures/k-other.md"):
        (tmp_path / name).write_text(f"text of {name}\n")
    found = export_files("k", "group", tmp_path)
    assert [(f["what"], f["name"]) for f in found] == [
        ("fix", "export/fixes/group.patch"), ("disclosure note", "export/disclosures/k.md")]
    assert found[0]["text"] == "text of fixes/group.patch\n"
    assert export_files("k", "", tmp_path)[0]["name"] == "export/disclosures/k.md"
    assert export_files("nothing", "none", tmp_path) == []


def test_merge_keeps_the_facts_and_counts_the_status_anew(tmp_path: Path) -> None:
    first = _run([_case("cases/t.py::test_nat[a]", "xfailed", {NAT.key: "present"})])
    second = _run([_case("cases/t.py::test_nat[a]", "failed", {NAT.key: "absent"})])
    assert [b["status"] for b in first.known_bugs if b["key"] == NAT.key] == ["present"]
    merged = merge([("a", str(tmp_path / "a" / "results.json"), first),
                    ("b", str(tmp_path / "b" / "results.json"), second)], str(tmp_path / "m"))
    entry = next(b for b in merged.known_bugs if b["key"] == NAT.key)
    assert entry["status"] == "mixed" and (entry["present"], entry["absent"]) == (1, 1)
    assert entry["ports"] == known_bug_facts(NAT)["ports"] and entry["where"] == NAT.where
    render(merged, str(tmp_path / "m"))
    page = (tmp_path / "m" / "bugs" / f"{NAT.key}.html").read_text()
    ids = page[page.index('id="sightings"'):]
    assert ids.count("test_nat[a]") == 2 and "<td>a</td>" in ids and "<td>b</td>" in ids
