"""export-at: a case record as an upstream Autotest test, and its report.

The generator is pure, so these tests feed it synthetic records and check the
text: its structure (AT_SETUP..AT_CLEANUP, balanced m4 quotes and
parentheses), that every command of the transcript is replayed in order, that
the expected frames come from the record's model frames (never from what OVS
sent), and the command line's one-line errors.  (bench/export_at_check.sh runs
exported tests in upstream's own testsuite.)
"""
from __future__ import annotations

import re
import subprocess

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from datapath.model import bugs
from export import at, cli, writeup
from export.frames import checksums_valid, layer_chunks
from harness.records import CaseRecord, Command, Step

RUN = "/somewhere/out/cases/test_x-1234abcd"
SENT = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
             IP(src="10.0.0.1", dst="10.0.0.2") / ICMP() / b"payload").hex()
MODEL = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
              IP(src="10.0.0.1", dst="192.168.1.1") / ICMP() / b"payload").hex()
GOT = MODEL[:60] + "dead" + MODEL[64:]  # what OVS "sent": must never be the expectation


def _cmd(*argv: str, rc: int = 0, stdout: str = "") -> Command:
    return Command(list(argv), rc, stdout, "", 0.001)


def _case(bug_key: str = "", outcome: str = "failed") -> CaseRecord:
    vsctl = ["/usr/bin/ovs-vsctl", "--timeout=10", f"--db=unix:{RUN}/db.sock"]
    show = ("ovs-appctl", "dpctl/show", "-s")
    return CaseRecord(
        nodeid="cases/test_x.py::test_fwd[icmp]", outcome=outcome,
        commands=[
            _cmd("/usr/bin/ovsdb-tool", "create", f"{RUN}/conf.db", "/x/vswitch.ovsschema"),
            _cmd(*vsctl, "--no-wait", "init"),
            _cmd(*vsctl, "--no-wait", "set", "Open_vSwitch", ".",
                 "other_config:userspace-tso-enable=true"),
            _cmd(*vsctl, "add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy"),
            _cmd("ovs-appctl", "vlog/set", "netdev_dummy:file:dbg"),
            _cmd(*vsctl, "add-port", "br1", "p1", "--", "set", "Interface", "p1", "type=dummy",
                 f"options:tx_pcap={RUN}/p1-tx.pcap"),
            _cmd(*vsctl, "add-port", "br1", "p2", "--", "set", "Interface", "p2", "type=dummy",
                 f"options:tx_pcap={RUN}/p2-tx.pcap"),
            _cmd("ovs-appctl", "tnl/egress_port_range", "57363", "57363", stdout="OK\n"),
            _cmd("/usr/bin/ovs-ofctl", "add-flow", "br1",
                 "in_port=p1,actions=mod_nw_dst:192.168.1.1,output:p2"),
            _cmd(*vsctl, "set", "Interface", "p1", "options:ol_ip_rx_csum_set_good=true",
                 "external_ids:note=[odd]"),
            _cmd(*show, stdout="dummy@ovs-dummy: ..."),
            _cmd("ovs-appctl", "netdev-dummy/receive", "p1", SENT),
            _cmd(*show, stdout="dummy@ovs-dummy: ..."),
            _cmd(*show, stdout="dummy@ovs-dummy: ..."),
            _cmd(*vsctl, "get", "Interface", "p2", "status", stdout="{a=b}\n"),
            _cmd("ovs-appctl", "bogus/command", rc=2),
        ],
        steps=[Step("rx_ip_good tx_none", "p1", "p2", [SENT], [MODEL], [GOT], False,
                    diff=["IP.chksum: expected 0x1, got 0x2"],
                    bugs={bug_key: "present"} if bug_key else {})],
    )


def unwrapped(text: str) -> str:
    """The text with shell line continuations joined, as the shell reads it."""
    return re.sub(r" *\\\n *", " ", text)


def at_data(text: str) -> dict[str, str]:
    """AT_DATA file name -> its content (the bracketed hex chunks joined)."""
    files = {}
    for match in re.finditer(r"AT_DATA\(\[(\w+)\], m4_join\(\[\],\n(.*?)\n\)\)", text, re.DOTALL):
        lines = [ln for ln in match.group(2).splitlines() if not ln.startswith("dnl ")]
        files[match.group(1)] = "".join(re.findall(r"\[([0-9a-f]*)\]", "\n".join(lines)))
    return files


def balanced(text: str) -> bool:
    """m4 quotes and parentheses nest properly (dnl comments aside)."""
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("dnl "))
    quotes = parens = 0
    for ch in code:
        quotes += {"[": 1, "]": -1}.get(ch, 0)
        if quotes == 0:
            parens += {"(": 1, ")": -1}.get(ch, 0)
        if quotes < 0 or parens < 0:
            return False
    return quotes == 0 and parens == 0


def test_export_is_a_well_formed_at_test() -> None:
    test = at.render(_case(), "dpif-netdev - fwd icmp", ["userspace", "offload"])
    text = test.text
    lines = text.strip().splitlines()
    assert lines[0] == "AT_SETUP([dpif-netdev - fwd icmp])"
    assert lines[1] == "AT_KEYWORDS([userspace offload])"
    assert lines[-2:] == ["OVS_VSWITCHD_STOP", "AT_CLEANUP"]
    assert text.count("AT_SETUP(") == text.count("AT_CLEANUP") == 1
    assert balanced(text)
    assert RUN not in text and "/usr/bin" not in text and "--db=" not in text
    assert "@<:@odd@:>@" in text  # a literal bracket is a quadrigraph, not an m4 quote


def test_every_command_of_the_transcript_is_replayed_in_order() -> None:
    case = _case()
    text = unwrapped(at.render(case, "t", ["k"]).text)
    wanted = [
        "add-br br1 -- set bridge br1 datapath-type=dummy",
        "AT_CHECK([ovs-appctl vlog/set netdev_dummy:file:dbg])",
        "ovs-vsctl add-port br1 p1 -- set Interface p1 type=dummy options:tx_pcap=p1-tx.pcap",
        "ovs-vsctl add-port br1 p2 -- set Interface p2 type=dummy options:tx_pcap=p2-tx.pcap",
        "AT_CHECK([ovs-appctl tnl/egress_port_range 57363 57363], [0], [OK\n])",
        "AT_CHECK([ovs-ofctl add-flow br1 in_port=p1,actions=mod_nw_dst:192.168.1.1,output:p2])",
        "ovs-vsctl set Interface p1 options:ol_ip_rx_csum_set_good=true",
        "AT_CHECK([ovs-appctl netdev-dummy/receive p1 $(cat frame1)])",
        "AT_CHECK([ovs-vsctl get Interface p2 status], [0], [ignore])",
        "AT_CHECK([ovs-appctl bogus/command], [2])",
    ]
    # Settings made before vswitchd started, then the opening ovs-vsctl call,
    # are OVS_VSWITCHD_START's vsctl-args, in that order (as upstream's tso tests).
    start = text.index("OVS_VSWITCHD_START(")
    args = text[start:text.index("])", start)]
    assert args.index("set Open_vSwitch . other_config:userspace-tso-enable=true -- ") < \
        args.index("add-br br1 -- set bridge br1 datapath-type=dummy")
    assert "--no-wait" not in text
    positions = [text.find(w) for w in wanted]
    assert all(p >= 0 for p in positions), [w for w, p in zip(wanted, positions) if p < 0]
    assert positions == sorted(positions)
    assert "dpctl/show" not in text  # the harness's rx-counter polls
    assert text.count("AT_CHECK([ovs-vsctl get Interface p2 status]") == 1


def test_frames_come_from_the_record_and_the_expectation_from_the_model() -> None:
    text = at.render(_case(), "t", ["k"]).text
    files = at_data(text)
    assert files == {"frame1": SENT, "expected1": MODEL}
    assert GOT not in text.replace("\n", "")
    check = text[text.index("AT_CHECK([ovs-appctl netdev-dummy/receive"):]
    assert check.index("OVS_WAIT_UNTIL([test $(ovs-pcap p2-tx.pcap | wc -l) -ge 1])") < \
        check.index("AT_CHECK([awk 1 expected1 > expout])") < \
        check.index("AT_CHECK([tail -n 1 p2-tx.pcap.txt], [0], [expout])")
    assert "dnl IP(" in text and "dnl ICMP(" in text  # each layer under its scapy line


def test_an_abort_bug_checks_that_vswitchd_survives_the_packet() -> None:
    text = at.render(_case(bugs.L4_PARTIAL_NOT_TCP_UDP.key), "t", ["k"]).text
    after = text[text.index("netdev-dummy/receive"):]
    survive = after.index("AT_CHECK([ovs-appctl version], [0], [ignore])")
    assert survive < after.index("OVS_WAIT_UNTIL")
    plain = at.render(_case(bugs.GRE_CSUM_AT_PUSH.key), "t", ["k"]).text
    assert "ovs-appctl version" not in plain


def test_an_unchanged_frame_is_one_file() -> None:
    case = _case()
    case.steps[0].expected = [SENT]
    text = at.render(case, "t", ["k"]).text
    assert at_data(text) == {"frame1": SENT}
    assert "AT_CHECK([awk 1 frame1 > expout])" in text


def test_layer_chunks_cover_every_byte_and_checksums_are_judged() -> None:
    frame = bytes.fromhex(SENT)
    chunks = layer_chunks(frame)
    assert "".join(h for _, h in chunks) == SENT
    assert [t.split("(")[0] for t, _ in chunks] == ["Ether", "IP", "ICMP", "Raw"]
    assert layer_chunks(frame[:20])  # a truncated frame still gives its bytes
    assert "".join(h for _, h in layer_chunks(frame[:20])) == frame[:20].hex()
    assert checksums_valid(frame)
    assert not checksums_valid(bytes.fromhex(GOT))


def test_writeup_names_rule_function_frames_and_how_to_run() -> None:
    bug = bugs.GRE_CSUM_AT_PUSH
    text = writeup.render(_case(bug.key, "xfailed"), "gre.at", "dpif-netdev - x", bug.key,
                          bug, "OVS 4.0.0")
    assert bug.where in text.replace("\n  ", " ")
    assert "RFC 2784" in text and "make check TESTSUITEFLAGS='-k gre-csum-at-push'" in text
    assert SENT[:64] in text and MODEL[:64] in text and GOT[:64] in text
    assert "IP.chksum: expected 0x1, got 0x2" in text


def test_writeup_states_class_severity_and_real_port_trigger() -> None:
    crash = bugs.L4_PARTIAL_NOT_TCP_UDP
    text = writeup.render(_case(crash.key, "xfailed"), "l4.at", "dpif-netdev - x", crash.key,
                          crash, "OVS 4.0.0").replace("\n  ", " ")
    assert "Class and severity" in text and "severity: crash" in text
    assert "Real-port trigger" in text and "vhost-user" in text and "security-relevant" in text
    latent = bugs.GSO_CWR_EVERY_SEGMENT
    text = writeup.render(_case(latent.key, "xfailed"), "cwr.at", "dpif-netdev - x", latent.key,
                          latent, "OVS 4.0.0").replace("\n  ", " ")
    assert "latent" in text and "None: no real port" in text and "security" not in text


def test_writeup_keeps_node_ids_whole() -> None:
    """The case that proves a real-port trigger, and the exported case, each on
    one line: a reader searches for them and copies them."""
    bug = bugs.TSO_SHORT_TUNNEL_ASSERT
    case = _case(bug.key, "xfailed")
    case.nodeid = ("cases/dpif_netdev/test_tso.py::test_tso_edges_tunnel"
                   "[geneve-ul4-csum_on-in4-400B-PA-tx_none]")
    lines = writeup.render(case, "t.at", "dpif-netdev - x", bug.key, bug, "OVS 4.0.0").splitlines()
    ids = [p.node_id for p in bug.real_ports if p.case] + [case.nodeid]
    assert len(ids) == 2 and all(len(i) > writeup.WIDTH - 4 for i in ids)  # longer than a line
    for nodeid in ids:
        assert any(nodeid in line for line in lines), nodeid


def test_minimal_case_is_the_smallest_frame_that_xfails_on_the_bug() -> None:
    key = bugs.GRE_CSUM_AT_PUSH.key

    def case(nodeid: str, size: int, outcome: str = "xfailed", status: str = "present") -> CaseRecord:
        return CaseRecord(nodeid=nodeid, outcome=outcome, commands=[_cmd("ovs-appctl", "x")],
                          steps=[Step("s", "p1", "p2", ["00" * size], [], [], False,
                                      bugs={key: status})])
    cases = [case("a", 300), case("b", 100, outcome="passed"), case("c", 90, status="absent"),
             case("d", 200), case("e", 60, outcome="failed")]
    chosen = cli.minimal(cases, bugs.GRE_CSUM_AT_PUSH)
    assert chosen is not None and chosen.nodeid == "d"
    assert cli.minimal(cases[1:3], bugs.GRE_CSUM_AT_PUSH) is None
    # A smaller frame that also shows another known bug loses: one fix must
    # turn the exported test green.
    both = case("f", 50)
    both.steps[0].bugs[bugs.IPV4_HEADER_ONLY.key] = "present"
    chosen = cli.minimal([*cases, both], bugs.GRE_CSUM_AT_PUSH)
    assert chosen is not None and chosen.nodeid == "d"
    assert cli.minimal([both], bugs.GRE_CSUM_AT_PUSH) is both  # when no other shows it


@pytest.mark.parametrize("given", ["no-such-bug", "cases/test_nothing_here.py::test_x",
                                   "cases/dpif_netdev/test_tso.py"])
def test_unknown_id_is_one_line_and_exit_code_2(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([given, "--out-dir", "/nonexistent/never-written"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"unknown ID {given!r}" in err
    assert "gre-csum-at-push" in err  # it names the keys it knows


def test_a_bug_key_exports_its_minimal_case_from_results(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--results: no run; the xfailed case on the bug is exported as KEY.at and
    KEY.txt; a bug no case showed is exit status 1, naming it."""
    from harness.records import RunRecord
    case = _case(bugs.GRE_CSUM_AT_PUSH.key, "xfailed")
    other = _case(bugs.GRE_CSUM_AT_PUSH.key, "passed")
    other.nodeid = "cases/test_x.py::test_fwd[passed]"
    results = tmp_path / "results.json"
    RunRecord("2026-01-01T00:00:00", 1.0, "host", "dummy", {"ovs": "4.0.0"},
              [other, case]).dump(str(results))
    out = tmp_path / "out"
    assert cli.main(["gre-csum-at-push", "--results", str(results), "--out-dir", str(out)]) == 0
    text = (out / "gre-csum-at-push.at").read_text()
    assert text.startswith("AT_SETUP([dpif-netdev - " + bugs.GRE_CSUM_AT_PUSH.at_title)
    assert "AT_KEYWORDS([userspace offload gre-csum-at-push])" in text
    report = (out / "gre-csum-at-push.txt").read_text()
    assert case.nodeid in report and "OVS 4.0.0" in report
    assert cli.main(["l4-partial-assert", "--results", str(results), "--out-dir", str(out)]) == 1
    assert "l4-partial-assert: no case xfailed on this bug" in capsys.readouterr().err


def test_launcher_runs_export_inside_the_runtime() -> None:
    from tooling.launcher import inner_args
    assert inner_args("export-at", ["gre-csum-at-push"]) == ["-m", "export", "gre-csum-at-push"]


def _bugs_line(text: str) -> list[str]:
    match = re.search(r"^Bugs:(.*)$", text, re.MULTILINE)
    assert match, "a fix without a Bugs: line"
    return match.group(1).split()


def test_every_bug_group_has_one_fix_naming_exactly_its_entries() -> None:
    """export/fixes/GROUP.patch: one per root-cause group that holds a bug, its
    Bugs: line the group's entries, a -p1 diff of OVS's sources and tests."""
    groups: dict[str, set[str]] = {}
    for bug in bugs.ALL:
        groups.setdefault(bug.root_cause, set()).add(bug.key)
    with_bug = {b.root_cause for b in bugs.ALL if b.cls == "bug"}
    patches = {p.stem: p.read_text() for p in writeup.FIXES.glob("*.patch")}
    assert with_bug <= set(patches), with_bug - set(patches)
    assert set(patches) <= set(groups), set(patches) - set(groups)  # no fix of no group
    for group, text in patches.items():
        assert set(_bugs_line(text)) == groups[group], group
        heads = re.findall(r"^(---|\+\+\+) (\S+)(.*)$", text, re.MULTILINE)
        assert heads and all(rest == "" for _, _, rest in heads), group  # no timestamps
        assert {side for side, _, _ in heads} == {"---", "+++"}
        assert all(re.match(r"[ab]/(lib|ofproto|vswitchd|tests)/", path) for _, path, _ in heads)
        assert re.search(r"^@@ ", text, re.MULTILINE)


def test_writeup_carries_its_groups_fix_and_class_severity_group() -> None:
    bug = bugs.TSO_EMPTY_TUNNEL_CSUM
    text = writeup.render(_case(bug.key, "xfailed"), "t.at", "dpif-netdev - x", bug.key, bug,
                          "OVS 4.0.0")
    flat = text.replace("\n  ", " ")
    assert "severity: corrupts data on the wire" in flat and "a bug;" in flat
    assert "root-cause group tso-segsz-unsegmented" in flat
    assert "export/fixes/tso-segsz-unsegmented.patch" in flat
    patch = (writeup.FIXES / "tso-segsz-unsegmented.patch").read_text()
    fix = text[text.index("Proposed fix\n"):]
    assert patch.rstrip() in fix  # verbatim, so that it applies as it is
    assert "A fix could" not in flat
    by_design = bugs.GRE_SEQ_SHARED
    text = writeup.render(_case(by_design.key, "xfailed"), "t.at", "dpif-netdev - x",
                          by_design.key, by_design, "OVS 4.0.0").replace("\n  ", " ")
    assert "Proposed fix" not in text and "A fix could" in text
    assert "may keep by design" in text and "Why: Linux's kernel datapath" in text


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(cli.REPO / "bench" / "export_at_check.sh"), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_export_at_check_bad_input_is_one_line_and_exit_code_2(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The check script, --fixes or not: a bad tree, a copy configured elsewhere, a
    fix that does not apply to the tree given, each one line and exit code 2."""
    for args in (["--fixes"], ["--fixes", str(tmp_path / "none")], [str(tmp_path)],
                 ["--bogus", str(tmp_path)]):
        proc = _script(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
    (tmp_path / "tests").mkdir()
    for name in ("dpif-netdev.at", "testsuite.at"):
        (tmp_path / "tests" / name).write_text("")
    (tmp_path / "Makefile").write_text("abs_top_builddir = /elsewhere\n")
    proc = _script(str(tmp_path))
    assert proc.returncode == 2 and "configured as /elsewhere" in proc.stderr
    (tmp_path / "Makefile").write_text(f"abs_top_builddir = {tmp_path.resolve()}\n")
    exported = tmp_path / "ipv4-header-only-csum.at"
    exported.write_text("AT_SETUP([x])\nAT_CLEANUP\n")
    proc = _script("--fixes", str(tmp_path), str(exported))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "ipv4-header-only-csum.patch does not apply" in proc.stderr


def test_a_bug_whose_step_cannot_be_exported_is_not_exported(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A step whose frames are not in a hex netdev-dummy/receive (e.g. a flow
    string) is left out of the test; when that is the step that shows the bug,
    the test would pass on the buggy OVS: no files, exit status 1, one line."""
    from harness.records import RunRecord
    case = _case(bugs.GRE_CSUM_AT_PUSH.key, "xfailed")
    case.commands = [c for c in case.commands if c.argv[1:2] != ["netdev-dummy/receive"]]
    assert at.render(case, "t", ["k"]).skipped == ["rx_ip_good tx_none"]
    results = tmp_path / "results.json"
    RunRecord("2026-01-01T00:00:00", 1.0, "host", "dummy", {"ovs": "4.0.0"}, [case]).dump(
        str(results))
    out = tmp_path / "out"
    assert cli.main(["gre-csum-at-push", "--results", str(results), "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be exported" in err and "gre-csum-at-push" in err
    assert not (out / "gre-csum-at-push.at").exists()


def test_a_crash_a_guest_triggers_points_to_its_disclosure_note() -> None:
    """The write-up of a bug with a note in export/disclosures/ names it; one without
    does not."""
    text = writeup.trigger(bugs.L4_PARTIAL_NOT_TCP_UDP)
    assert "export/disclosures/l4-partial-assert.md" in text
    assert (writeup.DISCLOSURES / "l4-partial-assert.md").is_file()
    assert "disclosures" not in writeup.trigger(bugs.GRE_CSUM_AT_PUSH)
