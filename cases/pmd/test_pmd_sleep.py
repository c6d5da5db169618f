"""PMD load-based sleep and revalidation of overlapping megaflows: pmd.at 1158-1160.

pmd-sleep-max sets a default and per-core maximum sleep; after each change the
log must name the new values (waited for from a noted log position, as upstream
does from a noted line) and pmd-sleep-show must list them exactly.
"""
from __future__ import annotations

import re

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import send_and_expect
from datapath.model.actions import output
from datapath.offloads import TxOffloads
from evidence.tshark import Tshark
from fixtures.frames import L7
from harness.control import check
from harness.dpflows import installed, wait_retranslated
from harness.filters import bre, strip_xout_keep_actions
from harness.ovslog import START, LogMark
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface, set_open_vswitch
from harness.wait import wait_until

PMD_AT = {"file": "pmd.at"}
THREE_NUMAS = "0,0,0,1,1,8,8"
FIRST_PMDS = ((0, 0), (1, 3), (8, 5))  # (numa, core) of the PMD each NUMA node starts with
ALL_PMDS = ((0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (8, 5), (8, 6))


def sleep_show(default: int, per_pmd: dict[tuple[int, int], int]) -> str:
    """pmd-sleep-show as upstream expects it."""
    return f"Default max sleep: {default:>4} us\n" + "".join(
        f"pmd thread numa_id {numa} core_id {core}:\n  max sleep: {us:>4} us\n"
        for (numa, core), us in per_pmd.items())


def expect_sleeps(sb: Sandbox, since: LogMark, default: int | None,
                  per_pmd: dict[tuple[int, int], int], *, shown_default: int | None = None,
                  logged: list[tuple[int, int]] | None = None) -> None:
    """CHECK_DP_SLEEP_MAX and CHECK_PMD_SLEEP_MAX for the `logged` PMDs (all by
    default) after `since`, then pmd-sleep-show exactly."""
    if default is not None:
        sb.log.wait(bre(f"Default PMD thread max sleep: *{default} us."), after=since)
    for numa, core in per_pmd if logged is None else logged:
        us = per_pmd[(numa, core)]
        sb.log.wait(bre(f"PMD thread on numa_id: *{numa}, core id: *{core}, max sleep: *{us} us."),
                    after=since)
    shown = default if shown_default is None else shown_default
    check(sb.appctl("dpif-netdev/pmd-sleep-show"), stdout=sleep_show(shown or 0, per_pmd))


def set_sleep(sb: Sandbox, value: str | None) -> LogMark:
    since = sb.log.mark()
    if value is None:
        sb.vsctl("remove", "Open_vSwitch", ".", "other_config", "pmd-sleep-max")
    else:
        sb.vsctl(*set_open_vswitch(other_config={"pmd-sleep-max": value}))
    return since


def start_three_numas(sb: Sandbox) -> None:
    sb.add_of_br("br0", *add_port("br0", "p0", type="dummy-pmd", options={"n_rxq": 8, "numa_id": 1}))


@pytest.mark.upstream("PMD - pmd sleep", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=THREE_NUMAS)
def test_pmd_sleep(sandbox: Sandbox) -> None:
    """One global pmd-sleep-max applies to every PMD; above 10000 us it is capped
    at 10000; odd values are kept as given."""
    start_three_numas(sandbox)
    expect_sleeps(sandbox, START, 0, {pmd: 0 for pmd in FIRST_PMDS})
    for given, applied in (("1", 1), ("10000", 10000), ("0", 0), ("10001", 10000),
                           ("490", 490), ("499", 499)):
        since = set_sleep(sandbox, given)
        expect_sleeps(sandbox, since, applied, {pmd: applied for pmd in FIRST_PMDS})


@pytest.mark.upstream("PMD - per PMD sleep", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=THREE_NUMAS)
def test_per_pmd_sleep(sandbox: Sandbox) -> None:
    """Per-core values ('core:us') override the default; cores without a PMD yet
    keep theirs until their PMD exists; an invalid value counts as 0 (a bad
    global one) or is ignored (a bad per-core one)."""
    start_three_numas(sandbox)
    expect_sleeps(sandbox, START, 0, {pmd: 0 for pmd in FIRST_PMDS})
    steps: list[tuple[str | None, int, dict[tuple[int, int], int]]] = [
        ("3:300,0:100,5:400", 0, {(0, 0): 100, (1, 3): 300, (8, 5): 400}),
        ("50,3:300,0:100,5:200", 50, {(0, 0): 100, (1, 3): 300, (8, 5): 200}),
        ("50,3:300", 50, {(0, 0): 50, (1, 3): 300, (8, 5): 50}),
        ("3:400,200", 200, {(0, 0): 200, (1, 3): 400, (8, 5): 200}),
        ("2:600,50,3:300,0:100,6:400,5:200", 50, {(0, 0): 100, (1, 3): 300, (8, 5): 200}),
    ]
    for value, default, per_pmd in steps:
        since = set_sleep(sandbox, value)
        # Upstream checks the log of 8/5 twice there and 1/3 only in the listing.
        logged = [(0, 0), (8, 5), (8, 5)] if value == "50,3:300,0:100,5:200" else None
        expect_sleeps(sandbox, since, default, per_pmd, logged=logged)
    # Add more cores: the new PMDs pick up 2:600 and 6:400, the others the default.
    since = sandbox.log.mark()
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": "7f"}))
    expect_sleeps(sandbox, since, None, {
        (0, 0): 100, (0, 1): 50, (0, 2): 600, (1, 3): 300, (1, 4): 50, (8, 5): 200,
        (8, 6): 400}, shown_default=50, logged=[(0, 1), (0, 2), (1, 4), (8, 6)])
    for value, default, per_pmd in (
            ("90", 90, {pmd: 90 for pmd in ALL_PMDS}),  # back to just a global value
            ("qwe", 0, {pmd: 0 for pmd in ALL_PMDS}),  # an invalid value
            ("50,1:qwe,2:0", 50, {pmd: 0 if pmd == (0, 2) else 50 for pmd in ALL_PMDS}),
            (None, 0, {pmd: 0 for pmd in ALL_PMDS})):  # config removed
        since = set_sleep(sandbox, value)
        expect_sleeps(sandbox, since, default, per_pmd)


OVERLAP_FLOW = "ipv4(src=10.0.0.1,dst={dst},proto=6),tcp(src=1,dst=2)"


def dump(sb: Sandbox) -> str:
    """dpctl/dump-flows | sed 's/.*core: [0-9]*//'."""
    text = sb.appctl("dpctl/dump-flows").stdout
    return "".join(re.sub(r".*core: [0-9]*", "", ln, count=1) + "\n" for ln in text.splitlines())


def megaflow(dst: str, plen: int, used: str, actions: str) -> str:
    mask = "255.255.255.0" if plen == 24 else "255.255.0.0"
    return (f"recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),"
            f"ipv4(dst={dst}/{mask},frag=no), packets:0, bytes:0, used:{used}, "
            f"actions:{actions}\n")


@pytest.mark.upstream("PMD - revalidator modify overlapping flows", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="0,0,0,0")
def test_revalidator_modify_overlapping_flows(sandbox: Sandbox, case_record: CaseRecord,
                                              second_opinion: Tshark | None) -> None:
    """Two megaflows of different masks (a /24 and a /16) that overlap: after the
    /16 subtable moved ahead of the /24 in the lookup order, revalidation must
    still modify both.  p2 is captured (tx_pcap, capture only): exactly the two
    packets the first rule forwards leave there, unchanged."""
    sandbox.add_of_br("br0",
                      *chain(["add-port", "br0", "p1"], ["set", "bridge", "br0", "datapath-type=dummy"],
                             set_interface("p1", type="dummy-pmd"), add_port("br0", "p2", type="dummy-pmd")))
    p1 = DummyPort.existing(sandbox, "p1", 1)
    p2 = DummyPort.existing(sandbox, "p2", 2, tx_pcap=True)
    # Add one OpenFlow rule and generate a megaflow.
    sandbox.ofctl("add-flow", "br0", "table=0,in_port=p1,ip,nw_dst=10.1.2.0/24,actions=p2")
    frame = bytes(Ether(src="00:00:00:00:00:00", dst="00:00:00:00:00:00")
                  / IP(src="10.0.0.1", dst="10.1.2.2", ttl=0, id=0, flags=0)
                  / TCP(sport=1, dport=2, flags=0, seq=0, ack=0, window=0) / Raw(L7))
    flow = OVERLAP_FLOW.format(dst="10.1.2.2")

    def receive(text: str) -> None:
        sandbox.appctl("netdev-dummy/receive", "p1", text)
    expected = model.forward(frame, [output("p2")], TxOffloads())
    send_and_expect(p1, [frame], p2, expected, title="10.1.2.2 (upcall)",
                    send=lambda _: receive(flow), steps=case_record.steps,
                    second_opinion=second_opinion)
    want = "\n" + megaflow("10.1.2.2", 24, "never", "2")
    wait_until(lambda: dump(sandbox) == want, 10, what="the /24 megaflow",
               describe=lambda: dump(sandbox))
    send_and_expect(p1, [frame], p2, expected, title="10.1.2.2 (megaflow)",
                    send=lambda _: receive(flow), steps=case_record.steps,
                    second_opinion=second_opinion)
    replace_flows(sandbox, "table=0,in_port=p1,ip,nw_dst=10.1.0.0/16 actions=ct(commit)")
    sandbox.appctl("revalidator/wait")
    sandbox.appctl("time/stop")  # prevent flows from expiring
    wide = OVERLAP_FLOW.format(dst="10.1.0.2")
    receive(wide)
    want = megaflow("10.1.0.2", 16, "never", "ct(commit)") + megaflow("10.1.2.2", 24, "0.0s",
                                                                        "ct(commit)")
    wait_until(lambda: strip_xout_keep_actions(dump(sandbox)) == "\n" + want, 10,
               what="the /16 megaflow next to the modified /24 one",
               describe=lambda: strip_xout_keep_actions(dump(sandbox)))
    # Send more 10.1.0.2 to put the /16 subtable ahead of the /24 one.
    taken = p1.rx_count()
    for i in range(257):
        receive(wide)
        if i % 50 == 49:  # never more than 50 waiting: an rx queue holds 100
            wait_until(lambda n=taken + i + 1: p1.rx_count() >= n, 10, what="p1 to keep up")
    wait_until(lambda: p1.rx_count() >= taken + 257, 10, what="p1 to take all 257 packets")
    sandbox.appctl("time/warp", "500", "2000")  # enough to optimize the subtables
    before = installed(sandbox)
    replace_flows(sandbox, "table=0,in_port=p1,ip,nw_dst=10.1.0.0/16 actions=p2")
    sandbox.appctl("revalidator/wait")
    # That one revalidator/wait (upstream's) may end with a round begun before
    # the bundle replaced the rules; both flows must have followed before the
    # check (harness/dpflows.py).
    wait_retranslated(sandbox, before, affected=lambda actions: actions == "ct(commit)",
                      what="the rule's new actions=p2")
    assert strip_xout_keep_actions(dump(sandbox)) == "\n" + megaflow(
        "10.1.0.2", 16, "0.0s", "2") + megaflow("10.1.2.2", 24, "0.0s", "2")
    assert p2.read_tx() == []  # nothing left p2 after the first two packets


def replace_flows(sb: Sandbox, flow: str) -> None:
    """Replace br0's flows with FLOW in one bundle: `echo FLOW | ovs-ofctl --bundle replace-flows br0 -`."""
    path = sb.rundir / "replace-flows.txt"
    path.write_text(flow + "\n")
    sb.ofctl("--bundle", "replace-flows", "br0", str(path))
