"""PMD threads and rx queue distribution: pmd.at tests 1141-1147.

Each case runs upstream's sequence in one ovs-vswitchd started with upstream's
--dummy-numa layout: the cores it names need not exist (netdev-dummy fakes the
NUMA topology and PMD threads are not pinned), so the same layouts work on a
2-core machine.  Outputs are compared exactly after upstream's filters; where
upstream waits on a log line from a noted line number, the case waits on that
line after a noted log position.
"""
from __future__ import annotations

import re

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import send_and_expect
from datapath.model.actions import output
from datapath.offloads import TxOffloads
from evidence.tshark import Tshark
from fixtures.pmd.macros import (
    DUMMY_NUMA,
    assignment,
    check_cpu_discovered,
    check_pmd_threads_created,
    icmp_frame,
    one_pmd,
    rxq_groups,
    rxq_lines,
    rxq_show,
    rxq_show_cleared,
    set_other_config,
)
from harness.control import check
from harness.filters import bre, filter_flow_install, sed_numa_core, strip_xout
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface, set_open_vswitch
from harness.wait import wait_until

PMD_AT = {"file": "pmd.at"}


def dpif_show(port: str, n_rxq: int, numa: int = 0, ofport: int = 1) -> str:
    return ("dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
            f"    {port} {ofport}/1: (dummy-pmd: n_rxq={n_rxq}, n_txq=1, numa_id={numa})\n")


@pytest.mark.upstream("PMD - creating a thread/add-port", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_creating_a_thread(sandbox: Sandbox) -> None:
    """A dummy-pmd port gets a PMD thread polling its one queue."""
    sandbox.add_of_br("br0", *add_port("br0", "p0", type="dummy-pmd"))
    check_cpu_discovered(sandbox)
    check_pmd_threads_created(sandbox)
    assert rxq_show_cleared(sandbox) == one_pmd(range(1))
    check(sandbox.appctl("dpif/show"), stdout=dpif_show("p0", 1))


@pytest.mark.upstream("PMD - multiqueue support", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_multiqueue_support(sandbox: Sandbox) -> None:
    """n_rxq=8 gives eight queues, all polled by the one PMD thread."""
    sandbox.add_of_br("br0", *add_port("br0", "p0", type="dummy-pmd"))
    check_cpu_discovered(sandbox)
    check_pmd_threads_created(sandbox)
    sandbox.vsctl(*set_interface("p0", options={"n_rxq": 8}))
    check(sandbox.appctl("dpif/show"), stdout=dpif_show("p0", 8))
    assert rxq_show_cleared(sandbox) == one_pmd(range(8))


SPLIT_RR = "port: p0 queue-id: 0 2 4 6\nport: p0 queue-id: 1 3 5 7\n"
SPLIT_CYCLES = "port: p0 queue-id: 0 3 4 7\nport: p0 queue-id: 1 2 5 6\n"


@pytest.mark.upstream("PMD - pmd-cpu-mask/distribution of rx queues", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_pmd_cpu_mask_distribution(sandbox: Sandbox) -> None:
    """Two PMDs share eight queues: alternately (roundrobin, group) or in cycles
    order; back to one PMD, it polls all eight."""
    sandbox.add_of_br("br0", *add_port("br0", "p0", type="dummy-pmd", options={"n_rxq": 8}))
    check_cpu_discovered(sandbox, 2)
    check_pmd_threads_created(sandbox)
    check(sandbox.appctl("dpif/show"), stdout=dpif_show("p0", 8))
    assert rxq_show_cleared(sandbox) == one_pmd(range(8))
    since = set_other_config(sandbox, "pmd-rxq-assign", "roundrobin")
    sandbox.log.wait(assignment("roundrobin"), after=since)
    since = set_other_config(sandbox, "pmd-cpu-mask", "0x3")
    check_pmd_threads_created(sandbox, 2, since=since)
    assert rxq_groups(sandbox) == SPLIT_RR
    since = set_other_config(sandbox, "pmd-rxq-assign", "cycles")
    sandbox.log.wait(assignment("cycles"), after=since)
    assert rxq_groups(sandbox) == SPLIT_CYCLES
    since = set_other_config(sandbox, "pmd-rxq-assign", "group")
    sandbox.log.wait(assignment("group"), after=since)
    assert rxq_groups(sandbox) == SPLIT_RR
    since = set_other_config(sandbox, "pmd-cpu-mask", "0x1")
    check_pmd_threads_created(sandbox, 1, since=since)
    assert rxq_show_cleared(sandbox) == one_pmd(range(8))


CROSS_NUMA = bre("There's no available (non-isolated) pmd thread on numa node 1. Port 'p0' rx "
              "queue 7 will be assigned to a pmd on numa node 0. This may lead to reduced "
              "performance.")


def two_pmds_numa_1_and_0(core_1: int) -> str:
    """Exact pmd-rxq-show: numa 1 (core `core_1`) polls p0's eight queues, numa 0 core 2 none."""
    return ("Displaying last 60 seconds pmd usage %\n"
            f"pmd thread numa_id 1 core_id {core_1}:\n  isolated : false\n"
            + rxq_lines(range(8))
            + "  overhead: NOT AVAIL\npmd thread numa_id 0 core_id 2:\n  isolated : false\n")


@pytest.mark.upstream("PMD - pmd-cpu-mask - dual NUMA", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="1,1,0,0")
def test_pmd_cpu_mask_dual_numa(sandbox: Sandbox) -> None:
    """A port on NUMA 1: with PMDs only on NUMA 0 its queues are polled across
    NUMA (with a warning per queue); with PMDs on both, only the local one polls."""
    sandbox.add_of_br("br0",
                      *chain(add_port("br0", "p0", type="dummy-pmd", options={"n_rxq": 8, "numa_id": 1}),
                             set_open_vswitch(other_config={"pmd-cpu-mask": 1})))
    check_cpu_discovered(sandbox, 4)
    check_pmd_threads_created(sandbox)
    check(sandbox.appctl("dpif/show"), stdout=dpif_show("p0", 8, numa=1))
    assert rxq_show_cleared(sandbox) == one_pmd(range(8))
    # Force cross-numa polling.
    since = set_other_config(sandbox, "pmd-cpu-mask", "0xc")
    check_pmd_threads_created(sandbox, 2, "0", since)
    sandbox.log.wait(assignment("cycles"), after=since)
    sandbox.log.wait(CROSS_NUMA, after=since)
    assert rxq_groups(sandbox) == SPLIT_CYCLES
    for algorithm in ("roundrobin", "group"):  # other assignment types, cross-numa
        since = set_other_config(sandbox, "pmd-rxq-assign", algorithm)
        sandbox.log.wait(assignment(algorithm), after=since)
        sandbox.log.wait(CROSS_NUMA, after=since)
        assert rxq_groups(sandbox) == SPLIT_RR
    # Switch back to same numa.
    since = set_other_config(sandbox, "pmd-cpu-mask", "0x3")
    check_pmd_threads_created(sandbox, 2, "1", since)
    sandbox.log.wait(assignment("group"), after=since)
    assert rxq_groups(sandbox) == SPLIT_RR
    # Check local numa is only used if available.
    since = set_other_config(sandbox, "pmd-cpu-mask", "0x6")
    check_pmd_threads_created(sandbox, 1, "0", since)
    check_pmd_threads_created(sandbox, 1, "1", since)
    sandbox.log.wait(assignment("group"), after=since)
    assert rxq_show(sandbox) == two_pmds_numa_1_and_0(1)
    for algorithm in ("roundrobin", "cycles"):  # other assignment types
        since = set_other_config(sandbox, "pmd-rxq-assign", algorithm)
        sandbox.log.wait(assignment(algorithm), after=since)
        assert rxq_show(sandbox) == two_pmds_numa_1_and_0(1)
    # Switch back from mixed numa to single numa.
    since = set_other_config(sandbox, "pmd-cpu-mask", "0x1")
    check_pmd_threads_created(sandbox, 1, "1", since)
    assert rxq_show(sandbox) == ("Displaying last 60 seconds pmd usage %\n"
                                 "pmd thread numa_id 1 core_id 0:\n  isolated : false\n"
                                 + rxq_lines(range(8)) + "  overhead: NOT AVAIL\n")


@pytest.mark.upstream("PMD - pmd-cpu-mask - multi NUMA", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="1,2,1,2")
def test_pmd_cpu_mask_multi_numa(sandbox: Sandbox) -> None:
    """A port on NUMA 0, which has no PMD: every algorithm spreads its four queues
    over all four PMDs of the two other NUMA nodes."""
    sandbox.add_of_br("br0",
                      *chain(add_port("br0", "p0", type="dummy-pmd", options={"n_rxq": 4}),
                             set_interface("p0", options={"numa_id": 0}),
                             set_open_vswitch(other_config={"pmd-cpu-mask": "0xf"}),
                             ["set", "open_vswitch", ".", "other_config:pmd-rxq-assign=cycles"]))
    for algorithm in ("group", "cycles", "roundrobin"):
        since = set_other_config(sandbox, "pmd-rxq-assign", algorithm)
        sandbox.log.wait(assignment(algorithm), after=since)
        sandbox.log.wait(bre("There's no available (non-isolated) pmd thread on numa node 0."),
                         after=since)
        groups = rxq_groups(sandbox)
        assert groups.count("\n") == 4, groups  # every pmd of both non-local numas has one


PERF_HEAD = "pmd thread numa_id <cleared> core_id <cleared>:\n\n"


def perf_show(sandbox, after: int) -> str:
    """pmd-perf-show | sed SED_NUMA_CORE_PATTERN | sed '/cycles/d' | sed '/[Ii]teration/d'
    (| the rate filters) | grep pmd -A AFTER."""
    text = sed_numa_core(sandbox.appctl("dpif-netdev/pmd-perf-show").stdout)
    lines = [ln for ln in text.splitlines() if "cycles" not in ln and not
             re.search("[Ii]teration", ln)]
    lines = [re.sub(r"[0-9]* Kpps", "<cleared> Kpps", re.sub(r", .* us", ", <cleared> us", ln))
             for ln in lines]
    start = next(i for i, ln in enumerate(lines) if "pmd" in ln)
    return "".join(f"{ln}\n" for ln in lines[start:start + after + 1])


STATS_FLOW = ("in_port(7),eth(src=50:54:00:00:00:77,dst=50:54:00:00:01:78),eth_type(0x0800),"
              "ipv4(src=10.0.0.2,dst=10.0.0.1,proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)")


@pytest.mark.upstream("PMD - stats", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_pmd_stats(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """20 packets of one flow: the first is an upcall, the other 19 hit the EMC
    (every miss inserts: emc-insert-inv-prob=1), each in a batch of its own.

    Upstream's counts assume each packet is polled alone; upstream gets that
    from a forked ovs-appctl per packet.  Here each packet is sent once the PMD
    took the previous one (its rx counter), which makes it so by construction.
    The frames flooded to br0 are captured (tx_pcap, capture only) and checked
    against the model: NORMAL forwarding leaves them unchanged."""
    sandbox.add_of_br("br0", *add_port("br0", "p0", ofport_request=7, type="dummy-pmd", options={"n_rxq": 4}))
    check_cpu_discovered(sandbox)
    check_pmd_threads_created(sandbox)
    sandbox.appctl("vlog/set", "dpif_netdev:dbg")
    sandbox.ofctl("add-flow", "br0", "action=normal")
    sandbox.vsctl(*set_open_vswitch(other_config={"emc-insert-inv-prob": 1}))
    sandbox.vsctl(*set_open_vswitch(other_config={"smc-enable": True}))
    check(sandbox.appctl("dpif/show"), stdout=dpif_show("p0", 4, ofport=7))
    assert perf_show(sandbox, 3) == PERF_HEAD + "  Rx packets:                    0\n" \
                                                "  Tx packets:                    0\n"
    p0 = DummyPort.existing(sandbox, "p0", 7, tx_pcap=False)
    br0 = DummyPort.existing(sandbox, "br0", 65534, tx_pcap=True)
    sandbox.appctl("time/stop")
    sandbox.appctl("time/warp", "100")
    frame = icmp_frame("50:54:00:00:00:77", "50:54:00:00:01:78")
    for i in range(20):
        def send(_frames: list[bytes]) -> None:
            sandbox.appctl("netdev-dummy/receive", "p0", STATS_FLOW)
        send_and_expect(p0, [frame], br0, model.forward(frame, [output("br0")], TxOffloads()),
                        title=f"packet {i + 1}", send=send, steps=case_record.steps,
                        second_opinion=second_opinion)
    sandbox.appctl("time/warp", "100")
    lines = sandbox.log.lines()
    after = [lines[i + 1] for i, ln in enumerate(lines[:-1]) if "miss upcall" in ln]
    assert after[-1] == ("recirc_id(0),dp_hash(0),skb_priority(0),in_port(1),skb_mark(0),"
                         "ct_state(0),ct_zone(0),ct_mark(0),ct_label(0),packet_type(ns=0,id=0),"
                         "eth(src=50:54:00:00:00:77,dst=50:54:00:00:01:78),eth_type(0x0800),"
                         "ipv4(src=10.0.0.2,dst=10.0.0.1,proto=1,tos=0,ttl=64,frag=no),"
                         "icmp(type=8,code=0)")
    assert strip_xout(filter_flow_install("\n".join(lines))) == (
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:77,"
        "dst=50:54:00:00:01:78),eth_type(0x0800),ipv4(frag=no), actions: <del>\n")
    want = PERF_HEAD + (
        "  Datapath passes:              20  (1.00 passes/pkt)\n"
        "  - PHWOL hits:                  0  (  0.0 %)\n"
        "  - Simple Match hits:           0  (  0.0 %)\n"
        "  - EMC hits:                   19  ( 95.0 %)\n"
        "  - SMC hits:                    0  (  0.0 %)\n"
        "  - Megaflow hits:               0  (  0.0 %, 0.00 subtbl lookups/hit)\n"
        "  - Upcalls:                     1  (  5.0 %, <cleared> us/upcall)\n"
        "  - Lost upcalls:                0  (  0.0 %)\n"
        "  Tx packets:                   20  (<cleared> Kpps)\n"
        "  Tx batches:                   20  (1.00 pkts/batch)\n")
    # The PMD publishes its counters once per polling iteration: wait for the 20th send.
    wait_until(lambda: "Tx packets:                   20" in perf_show(sandbox, 11), 10,
               what="the PMD's stats to count 20 packets sent",
               describe=lambda: perf_show(sandbox, 11))
    assert perf_show(sandbox, 11) == want


@pytest.mark.upstream("PMD - pmd-rxq-show pmd usage time", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_pmd_rxq_show_usage_time(sandbox: Sandbox) -> None:
    """-secs is rounded up to the 5-second intervals kept, within 5..60 s; 0, negative
    or nothing means 60."""
    sandbox.add_of_br("br0", *add_port("br0", "p0", type="dummy-pmd"))
    for args, shown in (((), 60), (("-secs", "-1"), 60), (("-secs", "0"), 60),
                        (("-secs", "1"), 5), (("-secs", "5"), 5), (("-secs", "6"), 10),
                        (("-secs", "51"), 55), (("-secs", "55"), 55), (("-secs", "56"), 60),
                        (("-secs", "60"), 60), (("-secs", "61"), 60)):
        head = [ln for ln in rxq_show(sandbox, *args).splitlines() if "Displaying" in ln]
        assert head == [f"Displaying last {shown} seconds pmd usage %"], args
