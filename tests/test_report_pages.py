"""The report's pages without a browser: index data and matrix axes, case pages, field
tables by layer, and the upstream traceability page."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.records import CaseRecord, Command, RunRecord, Step
from harness.upstream import TITLES, UPSTREAM_TESTS
from reports.index import Entry, embed_json, index_data, message, natural_key
from reports.layers import field_table, frame_layers
from reports.render import layout, render
from reports.trace import trace_rows

# Ethernet / IPv4 / UDP 1 -> 2, payload "hi"; IP checksum 0x7ccc is correct.
GOOD_UDP = ("ffffffffffff000000000001" "0800"
            "4500001e000100004011" "7ccc" "7f0000017f000001" "0001000200" "0a" "0000" "6869")
BAD_IP = GOOD_UDP[:48] + "1234" + GOOD_UDP[52:]
TTL_63 = GOOD_UDP[:44] + "3f" + GOOD_UDP[46:]  # ttl 64 -> 63 (checksum left as is)


def _run(cases: list[CaseRecord]) -> RunRecord:
    return RunRecord(started="2025-01-01T00:00:00+00:00", duration=2.0, host="box", backend="dummy",
                     versions={"ovs": "4.0.0", "dpdk": "25.11.4"}, cases=cases)


def _param_case(fn: str, outcome: str, **params: str) -> CaseRecord:
    ident = "-".join(params.values())
    return CaseRecord(nodeid=f"cases/test_t.py::{fn}[{ident}]", outcome=outcome, params=params,
                      backend="dummy", duration=0.01)


def test_upstream_titles_are_the_48_tests() -> None:
    numbers = [n for n, _ in UPSTREAM_TESTS]
    assert numbers == list(range(1093, 1141))
    assert len(TITLES) == 48
    assert all(title.startswith("dpif-netdev - ") for title in TITLES)
    assert "dpif-netdev - IPv6 vxlan tunnel - IPv6 udp csum offload" in TITLES


def test_field_table_marks_the_differing_field_per_layer() -> None:
    sent, expected, captured = (bytes.fromhex(h) for h in (GOOD_UDP, TTL_63, BAD_IP))
    groups = field_table(sent, expected, captured)
    assert groups is not None
    by_layer = {g["layer"]: g for g in groups}
    assert list(by_layer)[:3] == ["Ether", "IP", "UDP"]
    assert not by_layer["Ether"]["differs"] and by_layer["IP"]["differs"]
    rows = {r["field"]: r for r in by_layer["IP"]["rows"]}
    assert rows["chksum"]["expected"] == "0x7ccc" and rows["chksum"]["captured"] == "0x1234"
    assert rows["chksum"]["differs"] and rows["ttl"]["differs"]
    assert rows["ttl"]["changed"] and not rows["chksum"]["changed"]  # the model changed ttl only
    assert not rows["src"]["differs"]
    missing = field_table(sent, expected, None)
    assert missing is not None and all(r["captured"] == "" for g in missing for r in g["rows"])


def test_layers_of_a_tunnelled_frame_are_named_outer_and_inner() -> None:
    scapy_all = pytest.importorskip("scapy.all")
    frame = bytes(scapy_all.Ether() / scapy_all.IP(dst="1.1.2.92") / scapy_all.UDP(dport=4789)
                  / scapy_all.VXLAN(vni=123) / scapy_all.Ether() / scapy_all.IP() / scapy_all.TCP())
    names = [name for name, _ in frame_layers(frame) or []]
    assert names == ["outer.Ether", "outer.IP", "outer.UDP", "outer.VXLAN",
                     "inner.Ether", "inner.IP", "inner.TCP"]


def test_index_data_is_compact_and_carries_the_axes() -> None:
    cases = [_param_case("test_a", "passed", tx="tx_10", state="good"),
             _param_case("test_a", "failed", tx="tx_2", state="bad"),
             _param_case("test_b", "passed", tx="tx_2"),
             CaseRecord(nodeid="t.py::test_plain", outcome="skipped", longrepr="no dpdk")]
    entries = layout(cases)
    data = index_data(entries)
    axes = {a["name"]: a["values"] for a in data["axes"]}
    assert [a["name"] for a in data["axes"]][:2] == ["test", "backend"]
    assert axes["tx"] == ["tx_2", "tx_10"]  # natural order, not text order
    assert axes["test"] == ["test_a", "test_b", "test_plain"]
    first = data["cases"][0]
    assert data["prefixes"][first[0][0]] + first[0][1] == "cases/test_t.py::test_a[tx_2-bad]"
    assert data["outcomes"][first[1]] == "failed"
    assert first[4] == 3 and first[3] == entries[0].slug  # page and reproducer flags
    names = [a["name"] for a in data["axes"]]
    assert first[7][names.index("tx")] == 0 and first[7][names.index("state")] == 0
    plain = next(c for c in data["cases"] if data["prefixes"][c[0][0]] == "t.py::test_plain")
    assert plain[0][1] == "" and plain[4] == 0 and plain[3] == "" and plain[5] == "no dpdk"
    assert plain[7] == [2]  # test_plain, and no other axis: the trailing -1s are left out
    assert [names[i] for i in data["defaults"]["rows"]] == ["test"]
    assert [names[i] for i in data["defaults"]["cols"]] == ["tx", "state"]


def test_embedded_json_cannot_close_the_script_element() -> None:
    text = embed_json({"id": "t.py::x[</script><script>alert(1)]"})
    assert "</script>" not in text and "<" not in text
    assert json.loads(text) == {"id": "t.py::x[</script><script>alert(1)]"}
    assert natural_key("a2") < natural_key("a10")


def test_message_names_the_differing_field() -> None:
    longrepr = ("def test(): ...\nE   evidence.compare.FrameMismatch: rx_good tx_ip: p1 -> p2\n"
                "E   frame 0:\nE     IP.chksum: expected 0xbd3c, got 0x433c\n")
    text = message(CaseRecord(nodeid="x", outcome="failed", longrepr=longrepr))
    assert text.startswith("FrameMismatch: rx_good tx_ip: p1 -> p2")
    assert "IP.chksum: expected 0xbd3c, got 0x433c" in text
    assert message(CaseRecord(nodeid="x", outcome="passed", longrepr="E  x")) == ""


def _evidence_case(out: Path) -> CaseRecord:
    rundir = "cases/run-of-test"
    (out / rundir).mkdir(parents=True)
    (out / rundir / "ovs-vswitchd.log").write_text("log\n")
    (out / rundir / "ovsdb-server.log").write_text("log\n")
    (out / rundir / "p2-tx.pcap").write_bytes(b"")
    step = Step("rx_good tx_ip", "p1", "p2", [GOOD_UDP], [GOOD_UDP], [BAD_IP], False,
                diff=["frame 0:", "  IP.chksum: expected 0x7ccc, got 0x1234"],
                dissection=[{"index": 0, "layers": [{"name": "ip", "summary": "src=127.0.0.1", "checksums": [
                    {"field": "ip.checksum", "value": "0x1234", "status": "bad", "calculated": "0x7ccc"}]}]}])
    return CaseRecord(
        nodeid="cases/test_t.py::test_ip[tx_ip-rx_good]", outcome="failed", duration=0.2,
        params={"tx": "tx_ip", "state": "good"}, upstream="dpif-netdev - ip csum offload",
        longrepr="    def test_ip():\n>       UNIQUE_LONGREPR_MARKER()\nE   FrameMismatch: p1 -> p2",
        backend="dummy", steps=[step],
        commands=[Command(["ovs-vsctl", "--timeout=10", "--db=unix:/r/db.sock", "add-br", "br1"],
                          0, "", "", 0.01),
                  Command(["ovs-appctl", "netdev-dummy/receive", "p1", GOOD_UDP], 0, "", "", 0.001)],
        log_excerpt=["t|00001|netdev_dummy|DBG|Rx: packet", "t|00002|bridge|WARN|odd thing"],
        metrics={"gbps_tso_on": 9.28},
        artifacts={"run directory": rundir, "step 1 captured.pcap": "pcap/x/step1-captured.pcap",
                   "step 1 sent.pcap": "pcap/x/step1-sent.pcap"},
    )


def test_case_page_explains_a_failure(tmp_path: Path) -> None:
    case = _evidence_case(tmp_path)
    index = Path(render(_run([case, _param_case("test_ip", "passed", tx="tx_none", state="good")]),
                        str(tmp_path))).read_text()
    pages = list((tmp_path / "case").iterdir())
    assert len(pages) == 1
    page = pages[0].read_text()
    assert "UNIQUE_LONGREPR_MARKER" in page and "UNIQUE_LONGREPR_MARKER" not in index  # details are lazy
    assert re.search(r"<td>tx</td><td><code>tx_ip</code></td>", page)
    assert "IP.chksum: expected 0x7ccc, got 0x1234" in page
    # the differing field is highlighted in the layer table, its layer too
    assert re.search(r'<td class="d">0x7ccc</td><td class="d">0x1234</td>', page)
    assert '<tr class="layer-bad"><th class="layer" colspan="4">IP</th>' in page
    assert '<span class="o o-bad">bad</span> (should be 0x7ccc)' in page
    assert "$ ovs-appctl netdev-dummy/receive p1 " + GOOD_UDP in page
    assert '<span class="warn">t|00002|bridge|WARN|odd thing</span>' in page and "1 WARN/ERR" in page
    assert 'href="../pcap/x/step1-captured.pcap"' in page and 'href="../pcap/x/step1-sent.pcap"' in page
    assert re.search(r'<li><a href="../cases/run-of-test/ovs-vswitchd.log">ovs-vswitchd.log</a></li>\s*'
                     r'<li><a href="../cases/run-of-test/ovsdb-server.log">', page)
    repro = re.search(r'href="\.\./(repro/[^"]+\.sh)" id="repro-link"', page)
    assert repro and (tmp_path / repro.group(1)).is_file()
    assert 'href="../index.html"' in page
    assert "<td>gbps_tso_on</td><td><code>9.28</code></td>" in page


def test_case_page_stays_small_for_many_frames(tmp_path: Path) -> None:
    """128 segments with a note each: the page shows the first ones and says how many more."""
    many = [GOOD_UDP] * 128
    step = Step("tso", "p1", "p2", [GOOD_UDP], many, many[:100], False,
                diff=[f"frame {i}: missing" for i in range(100, 128)] * 4,
                csum_state=[{"IP": "good"}] * 128, notes=[f"segment {i}/128" for i in range(128)] * 4,
                dissection=[{"index": i, "layers": []} for i in range(100)])
    render(_run([CaseRecord(nodeid="t.py::test_tso", outcome="failed", steps=[step])]), str(tmp_path))
    page = next((tmp_path / "case").iterdir()).read_text()
    assert len(page) < 200_000
    assert "... 472 more notes" in page and "... 32 more lines" in page and "... 112 more frames" in page
    assert "120 more frames not shown" in page and "84 more frames decoded" in page


def test_all_cases_option_writes_pages_for_passes(tmp_path: Path) -> None:
    cases = [_param_case("test_ip", "passed", tx="tx_none"), _param_case("test_ip", "skipped", tx="tx_ip")]
    render(_run(cases), str(tmp_path / "few"))
    assert not (tmp_path / "few" / "case").exists()
    render(_run(cases), str(tmp_path / "all"), all_pages=True)
    assert len(list((tmp_path / "all" / "case").iterdir())) == 2
    assert not (tmp_path / "all" / "repro").exists()  # reproducers only for failures


def test_traceability_lists_every_upstream_test(tmp_path: Path) -> None:
    cases = [
        CaseRecord(nodeid="c.py::test_ip[a]", outcome="passed", upstream="dpif-netdev - ip csum offload"),
        CaseRecord(nodeid="c.py::test_ip[b]", outcome="failed", upstream="dpif-netdev - ip csum offload",
                   upstream_file="dpif-netdev.at"),
        CaseRecord(nodeid="c.py::test_both", outcome="passed",
                   upstream="dpif-netdev - tcp csum offload; dpif-netdev - udp csum offload"),
        CaseRecord(nodeid="c.py::test_typo", outcome="passed", upstream="dpif-netdev - tcp csum ofload"),
        CaseRecord(nodeid="c.py::test_beyond", outcome="passed"),
        CaseRecord(nodeid="p.py::test_stats", outcome="passed", upstream="PMD - stats",
                   upstream_file="pmd.at"),
        # A pmd.at title under the default file is not a dpif-netdev.at test.
        CaseRecord(nodeid="p.py::test_wrong_file", outcome="passed", upstream="PMD - dpctl"),
    ]
    rows, unknown = trace_rows(layout(cases))
    assert len(rows) == 48
    by_title = {row["title"]: row for row in rows}
    ip = by_title["dpif-netdev - ip csum offload"]
    assert ip["number"] == 1116 and ip["status"] == "failed"
    assert [c["nodeid"] for c in ip["ids"]] == ["c.py::test_ip[b]", "c.py::test_ip[a]"]
    assert by_title["dpif-netdev - udp csum offload"]["status"] == "passed"
    assert by_title["dpif-netdev - meters"]["status"] == "missing"
    assert by_title["dpif-netdev - tso + dual tunnel encap"]["since"] == "4.0"
    assert [row["title"] for row in unknown] == ["PMD - dpctl", "dpif-netdev - tcp csum ofload"]
    pmd_rows, pmd_unknown = trace_rows(layout(cases), "pmd.at")
    assert len(pmd_rows) == 20 and not pmd_unknown
    stats = {row["title"]: row for row in pmd_rows}["PMD - stats"]
    assert stats["number"] == 1146 and stats["status"] == "passed"
    render(_run(cases), str(tmp_path))
    html = (tmp_path / "upstream.html").read_text()
    # One section per testsuite and file: system-traffic.at counts in four.
    from harness.system_userspace import NOT_HERE, NOT_HERE_IN
    from harness.upstream import FILES, TESTSUITES
    titles = [t.title for ts in TESTSUITES for f in ts.files for t in FILES[f]]
    assert len(titles) == 356 + 1 + 3 * 192
    gone = sum(t.title in NOT_HERE or t.title in NOT_HERE_IN.get(ts.target, {})
               for ts in TESTSUITES for f in ts.files for t in FILES[f])
    # system-traffic.at's 16 in each of its four testsuites, the other files' 5 once,
    # CHECK_SYSTEM_TSO's two in the three testsuites without it, and check-system-tso's
    # OVS_CHECK_TUNNEL_TSO skip of the flow-based Geneve bridging title
    assert gone == 16 * 4 + 5 + 2 * 3 + 1
    assert (f"<b>4 of {len(titles)}</b> upstream tests reproduced, 3 passing, "
            f"{len(titles) - 4 - gone} not reproduced yet, {gone} that cannot run in this suite "
            "(the reason is in the row)") in html
    # A title that cannot run here says why, in its row, and is not counted as missing.
    bareudp = html[html.index('<section id="system-layer3-tunnels-at"'):
                   html.index('<section id="system-interface-at"')]
    assert bareudp.count('data-status="not-here"') == 2
    assert "OVS_CHECK_BAREUDP" in bareudp and bareudp.count('data-status="missing"') == 2
    dpif = html[html.index('<section id="dpif-netdev-at"'):html.index('<section id="pmd-at"')]
    assert "<b>3 of 48</b> tests of tests/dpif-netdev.at" in dpif
    assert dpif.count('data-status="missing"') == 45
    assert "tcp csum ofload" in dpif[dpif.index('id="unknown-titles-dpif-netdev-at"'):]
    pmd = html[html.index('<section id="pmd-at"'):html.index('<section id="tunnel-push-pop-at"')]
    assert "<b>1 of 20</b> tests of tests/pmd.at" in pmd and pmd.count('data-status="missing"') == 19
    for file, total in (("tunnel-push-pop.at", 14), ("tunnel-push-pop-ipv6.at", 7),
                        ("alb.at", 8), ("dpctl.at", 4), ("drop-stats.at", 7)):
        anchor = file.replace(".", "-")
        assert (f'<tr data-file="{file}"><td><a href="#{anchor}">{file}</a></td>'
                f'<td>{total}</td>') in html


def test_traceability_has_a_section_per_testsuite_and_flavour(tmp_path: Path) -> None:
    """system-traffic.at's ids count in the testsuite of their flavour; a
    flavour's skip is the reason beside its title; ids without a flavour count
    in the first testsuite that has their file."""
    title = "datapath - ping between two ports"
    cases = [
        CaseRecord(nodeid="t.py::test_ping[userspace]", outcome="passed", upstream=title,
                   upstream_file="system-traffic.at", params={"flavour": "userspace"}),
        CaseRecord(nodeid="t.py::test_ping[afxdp]", outcome="failed", upstream=title,
                   upstream_file="system-traffic.at", params={"flavour": "afxdp"}),
        CaseRecord(nodeid="t.py::test_ping[dpdk]", outcome="skipped", upstream=title,
                   upstream_file="system-traffic.at", params={"flavour": "dpdk"},
                   longrepr="OVS_CHECK_X: system-dpdk-macros.at (check-dpdk) defines it to skip"),
        CaseRecord(nodeid="t.py::test_tap", outcome="passed", upstream_file="system-tap.at",
                   upstream="traffic between namespaces using tap"),
    ]
    entries = layout(cases)
    def row(target: str) -> dict:  # type: ignore[type-arg]
        rows, _ = trace_rows(entries, "system-traffic.at", target)
        return next(r for r in rows if r["title"] == title)
    assert [c["nodeid"] for c in row("check-system-userspace")["ids"]] == \
        ["t.py::test_ping[userspace]"]
    assert row("check-system-tso")["status"] == "missing"
    assert row("check-afxdp")["status"] == "failed"
    dpdk = row("check-dpdk")
    assert dpdk["status"] == "skipped" and "system-dpdk-macros.at" in dpdk["reason"]
    rows, _ = trace_rows(entries, "system-traffic.at", "check-afxdp")
    fallback = next(r for r in rows if r["title"].startswith("datapath - tcp over vxlan tunnel"))
    assert fallback["status"] == "not-here" and "CHECK_SYSTEM_TSO" in fallback["reason"]
    rows, _ = trace_rows(entries, "system-traffic.at", "check-system-tso")
    assert next(r for r in rows if r["title"] == fallback["title"])["status"] == "missing"
    tap_rows, _ = trace_rows(entries, "system-tap.at", "check-system-tso")
    assert tap_rows[0]["status"] == "passed"
    render(_run(cases), str(tmp_path))
    html = (tmp_path / "upstream.html").read_text()
    for anchor in ("system-traffic-at", "tso-system-traffic-at", "afxdp-system-traffic-at",
                   "dpdk-system-traffic-at", "system-tap-at"):
        assert f'<section id="{anchor}"' in html
    afxdp = html[html.index('<section id="afxdp-system-traffic-at"'):]
    assert "make check-afxdp" in afxdp[:300]


def test_upstream_files_are_numbered_as_the_4_0_testsuite() -> None:
    from harness.upstream import FILES, TESTSUITES, find
    # upstream.html's sections are by testsuite: a file none runs would have none
    assert set(FILES) == {f for ts in TESTSUITES for f in ts.files}
    assert [len(tests) for tests in FILES.values()] == [48, 20, 14, 7, 8, 4, 7, 28, 2, 1, 192, 4,
                                                           8, 1, 13]
    # check-system-userspace's 218, numbered as system-userspace-testsuite -l lists them
    assert find("datapath - ping between two ports", "system-traffic.at").number == 1
    assert find("psample - from ct label", "system-traffic.at").number == 192
    assert find("layer3 - ping over VXLAN-GPE", "system-layer3-tunnels.at").number == 193
    assert find("ovs-route - route lookup + rules", "system-route.at").number == 218
    assert find("datapath - ping over vxlan tunnel", "system-traffic.at").number == 11
    assert find("datapath - ping6 over srv6 tunnel", "system-traffic.at").number == 36
    assert find("datapath - truncate and output to gre tunnel", "system-traffic.at").number == 48
    assert [t.number for t in FILES["pmd.at"]] == list(range(1141, 1161))
    assert find("tunnel_push_pop - tunnel drop", "tunnel-push-pop.at").number == 842
    assert find("tunnel_push_pop_ipv6 - Mirror over tunnels", "tunnel-push-pop-ipv6.at").number == 850
    assert [t.number for t in FILES["alb.at"]] == list(range(1161, 1169))
    assert [t.number for t in FILES["dpctl.at"]] == list(range(1169, 1173))
    assert [t.number for t in FILES["drop-stats.at"]] == list(range(2751, 2758))
    assert find("PMD - stats") is None  # dpif-netdev.at is the default file
    new = {(f, t.number) for f, tests in FILES.items() for t in tests if t.since}
    assert new == {("dpif-netdev.at", n) for n in (1109, 1110, 1113, 1138, 1139)} | {
        ("system-dpdk.at", 28)}
    assert find("OVS-DPDK - headroom expansion", "system-dpdk.at").since == "4.0"


def test_records_without_upstream_file_still_load() -> None:
    old = CaseRecord(nodeid="x", upstream="dpif-netdev - meters").to_json()
    del old["upstream_file"]
    assert CaseRecord.from_json(old).upstream_file is None
    assert CaseRecord.from_json({**old, "upstream_file": "pmd.at"}).upstream_file == "pmd.at"


def test_entries_get_unique_files_even_for_repeated_ids() -> None:
    twice = [CaseRecord(nodeid="t.py::x", outcome="failed"), CaseRecord(nodeid="t.py::x", outcome="failed")]
    entries: list[Entry] = layout(twice)
    assert len({e.page for e in entries}) == 2 and all(e.page.startswith("case/") for e in entries)


def test_index_shows_each_exploration_area_and_what_its_examples_came_to(tmp_path: Path) -> None:
    """One row per exploration case (its metrics count `examples`): the area it
    explored, its outcome, the examples and what they came to, what its rig
    counted, and how the replays of its saved regressions ended; a run without
    an exploration has no such section."""
    flows = "cases/exploration/test_explore_openflow.py"
    cases = [
        CaseRecord(nodeid=f"{flows}::test_explore_openflow", outcome="passed",
                   params={"area": "conntrack and NAT (OpenFlow tables)"},
                   metrics={"examples": 150, "as_the_model_says": 140, "known_bug": 10,
                            "packets_in": 738, "frames_out": 327}),
        CaseRecord(nodeid=f"{flows}::test_openflow_regression[cae4c0db3d]", outcome="xfailed"),
        CaseRecord(nodeid=f"{flows}::test_openflow_regression[a96749107d]", outcome="xfailed"),
        CaseRecord(nodeid="cases/exploration/test_explore.py::test_explore", outcome="failed",
                   params={"area": "frames"}, metrics={"examples": 12, "as_the_model_says": 11},
                   longrepr="E   AssertionError: exploration found a deviation"),
        CaseRecord(nodeid="cases/exploration/test_explore.py::test_regression[0a1b2c3d4e]",
                   outcome="passed"),
        CaseRecord(nodeid="cases/throughput/test_t.py::test_gbps", outcome="passed",
                   metrics={"gbps_tso_off": 1.4}),
    ]
    html = Path(render(_run(cases), str(tmp_path))).read_text()
    section = html[html.index('<section id="exploration">'):]
    section = section[:section.index("</section>")]
    rows = [re.sub(r"<[^>]+>", " ", r) for r in section.split("<tr>")[2:]]
    rows = [" ".join(r.split()) for r in rows]
    assert "Exploration (162 examples)" in section
    # Worst outcome first, as every list of the report.
    assert rows == [
        "frames failed 12 11 as the model says 1 passed",
        "conntrack and NAT (OpenFlow tables) passed 150 140 as the model says, 10 known bug "
        "738 packets in, 327 frames out 2 xfailed",
    ], rows
    plain = Path(render(_run(cases[-1:]), str(tmp_path / "plain"))).read_text()
    assert 'id="exploration"' not in plain
