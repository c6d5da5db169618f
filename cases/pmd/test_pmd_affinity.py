"""Rx queue pinning and datapath control: pmd.at tests 1153-1157.

pmd-rxq-affinity pins queues to cores (isolating them, or not with
pmd-rxq-isolate=false and the group algorithm), across NUMA nodes too; the
listings are compared exactly after upstream's parse_pmd_rxq_show.
"""
from __future__ import annotations

import pytest

from fixtures.pmd.macros import assignment, rxq_parsed, rxq_show, set_other_config
from harness.control import check
from harness.filters import bre, parse_pmd_rxq_show
from harness.sandbox import Sandbox
from harness.vsctl import add_port, set_interface, set_open_vswitch

PMD_AT = {"file": "pmd.at"}
NINE_CORES = "0,0,0,0,0,0,0,0,0"
PINNED = "p1 0 0 3\np1 1 0 7\np1 2 0 2\np1 3 0 8\n"


def pinned_port(sb: Sandbox) -> None:
    """Controller flow, eight PMDs (cores 1-8), p1 with four queues pinned to 3, 7, 2, 8."""
    sb.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    sb.ofctl("add-flow", "br0", "actions=controller")
    sb.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": "0x1fe"}))
    sb.vsctl(*add_port("br0", "p1", type="dummy-pmd", ofport_request=1, options={"n_rxq": 4},
                       other_config={"pmd-rxq-affinity": "0:3,1:7,2:2,3:8"}))
    assert rxq_parsed(sb) == PINNED  # the rxqs are on the requested cores


def columns(text: str, n: int) -> str:
    """cut -f 1..n -d ' '."""
    return "".join(" ".join(ln.split(" ")[:n]) + "\n" for ln in text.splitlines())


@pytest.mark.upstream("PMD - rxq affinity", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=NINE_CORES)
def test_rxq_affinity(sandbox: Sandbox) -> None:
    """Pinned queues follow their cores; a queue whose core left the mask goes to
    a remaining non-isolated PMD; a pinned core is isolated."""
    sandbox.allow_log("cannot be pinned with port")
    sandbox.add_of_br("br0")
    pinned_port(sandbox)
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": 6}))
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 1\np1 2 0 2\np1 3 0 1\n"
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": "0x1fe"}))
    assert rxq_parsed(sandbox) == PINNED  # pinned again once their pmds are back
    sandbox.vsctl("remove", "Interface", "p1", "other_config", "pmd-rxq-affinity")
    assert "".join(sorted(columns(rxq_parsed(sandbox), 2).splitlines(True))) == \
        "p1 0\np1 1\np1 2\np1 3\n"  # every rxq polled again
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": 6}))
    sandbox.vsctl(*set_interface("p1", other_config={"pmd-rxq-affinity": "0:1"}))
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 2\np1 2 0 2\np1 3 0 2\n"


@pytest.mark.upstream("PMD - rxq affinity - non-isolate", **PMD_AT)
@pytest.mark.sandbox(dummy_numa=NINE_CORES)
def test_rxq_affinity_non_isolate(sandbox: Sandbox) -> None:
    """With pmd-rxq-isolate=false (group algorithm only) a pinned core also polls
    other queues; switching to cycles isolates it again, with a warning."""
    sandbox.allow_log("cannot be pinned with port",
                      "pmd-rxq-isolate can only be set false when using pmd-rxq-assign=group")
    sandbox.add_of_br("br0")
    pinned_port(sandbox)
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-rxq-assign": "group"}))
    assert rxq_parsed(sandbox) == PINNED
    since = set_other_config(sandbox, "pmd-rxq-isolate", "false")  # pin and non-isolate
    sandbox.log.wait(bre("pmd-rxq-affinity does not isolate PMD core"), after=since)
    assert rxq_parsed(sandbox) == PINNED  # no impact: all rxqs are still pinned
    sandbox.vsctl("remove", "Interface", "p1", "other_config", "pmd-rxq-affinity")
    sandbox.vsctl(*set_interface("p1", other_config={"pmd-rxq-affinity": "0:1"}))
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": 6}))
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 2\np1 2 0 1\np1 3 0 2\n"
    since = set_other_config(sandbox, "pmd-rxq-assign", "cycles")
    sandbox.log.wait(bre("pmd-rxq-isolate can only be set false when using "
                         "pmd-rxq-assign=group"), after=since)
    sandbox.log.wait(bre("pmd-rxq-affinity isolates PMD core"), after=since)
    sandbox.log.wait(assignment("cycles"), after=since)
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 2\np1 2 0 2\np1 3 0 2\n"
    since = set_other_config(sandbox, "pmd-rxq-assign", "group")
    sandbox.log.wait(bre("pmd-rxq-affinity does not isolate PMD core"), after=since)
    sandbox.log.wait(assignment("group"), after=since)
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 2\np1 2 0 1\np1 3 0 2\n"


@pytest.mark.upstream("PMD - rxq affinity - NUMA", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="0,0,0,1,1,8,8")
def test_rxq_affinity_numa(sandbox: Sandbox) -> None:
    """Pinning to cores of another NUMA node (contiguous 1, non-contiguous 8, or
    split across nodes) creates PMDs there and moves the queues."""
    sandbox.add_of_br("br0")
    sandbox.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    sandbox.ofctl("add-flow", "br0", "actions=controller")
    sandbox.vsctl(*set_open_vswitch(other_config={"pmd-cpu-mask": "7e"}))
    sandbox.vsctl(*add_port("br0", "p1", type="dummy-pmd", ofport_request=1,
                            options={"n_rxq": 2, "numa_id": 0},
                            other_config={"pmd-rxq-affinity": "0:1,1:2"}))
    assert rxq_parsed(sandbox) == "p1 0 0 1\np1 1 0 2\n"
    for pins, listed in (("0:3,1:4", "p1 0 1 3\np1 1 1 4\n"), ("0:5,1:6", "p1 0 8 5\np1 1 8 6\n"),
                         ("0:3,1:1", "p1 0 1 3\np1 1 0 1\n"), ("0:5,1:1", "p1 0 8 5\np1 1 0 1\n")):
        sandbox.vsctl(*set_interface("p1", other_config={"pmd-rxq-affinity": pins}))
        assert rxq_parsed(sandbox) == listed, pins
    sandbox.vsctl("remove", "Interface", "p1", "other_config", "pmd-rxq-affinity")
    assert "".join(sorted(columns(rxq_parsed(sandbox), 2).splitlines(True))) == "p1 0\np1 1\n"
    sandbox.vsctl(*set_interface("p1", other_config={"pmd-rxq-affinity": "0:3"}))
    assert columns(rxq_parsed(sandbox), 3) == "p1 0 1\np1 1 0\n"


@pytest.mark.upstream("PMD - monitor threads", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="0,0")
def test_monitor_threads(sandbox: Sandbox) -> None:
    """Two linked dummy-pmd ports run BFD with a 1 ms interval (a busy monitor
    thread racing the main thread); reconfiguring their queues still succeeds."""
    sandbox.add_of_br("br0")
    sandbox.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    sock = f"{sandbox.rundir}/net.sock"
    sandbox.vsctl(*add_port("br0", "p1", type="dummy-pmd", ofport_request=1,
                            options={"n_rxq": 1, "pstream": f"punix:{sock}"}))
    sandbox.vsctl(*add_port("br0", "p2", type="dummy-pmd", ofport_request=2,
                            options={"n_rxq": 1, "stream": f"unix:{sock}"}))
    assert rxq_parsed(sandbox) == "p1 0 0 0\np2 0 0 0\n"
    for port in ("p1", "p2"):
        sandbox.vsctl(*set_interface(port, bfd={"enable": True, "min_rx": 1, "min_tx": 1}))
    sandbox.vsctl("wait-until", "Interface", "p1", "bfd_status:forwarding=true", "--",
                  "wait-until", "Interface", "p2", "bfd_status:forwarding=true")
    sandbox.vsctl(*set_interface("p1", options={"n_rxq": 2}))
    sandbox.vsctl(*set_interface("p2", options={"n_rxq": 2}))
    assert rxq_parsed(sandbox) == "p1 0 0 0\np1 1 0 0\np2 0 0 0\np2 1 0 0\n"


DP0_FLOW = "in_port(1),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x1234)"
DP0_DUMPED = (f"recirc_id(0),{DP0_FLOW}, packets:0, bytes:0, used:never, actions:2\n")


@pytest.mark.upstream("PMD - dpctl", **PMD_AT)
@pytest.mark.sandbox(dummy_numa="0,0")
def test_dpctl(sandbox: Sandbox) -> None:
    """A datapath made with dpctl: a flow added there is installed in the PMD and
    in the main thread, filtered by pmd=, and deleted from both."""
    sandbox.add_of_br("br0", "del-br", "br0")
    sandbox.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    sandbox.dpctl("add-dp", "dummy@dp0")
    sandbox.dpctl("add-if", "dummy@dp0", "p1,type=dummy-pmd")
    sandbox.dpctl("add-if", "dummy@dp0", "p2,type=dummy")
    assert parse_pmd_rxq_show(rxq_show(sandbox, "dp0")) == "p1 0 0 0\n"
    check(sandbox.dpctl("show", "dummy@dp0"), stdout=(
        "dummy@dp0:\n  lookups: hit:0 missed:0 lost:0\n  flows: 0\n"
        "  port 0: dp0 (dummy-internal)\n  port 1: p1 (dummy-pmd: n_rxq=1, n_txq=1, numa_id=0)\n"
        "  port 2: p2 (dummy)\n"))
    check(sandbox.dpctl("add-flow", "dummy@dp0", DP0_FLOW, "2"), stdout="")
    dump = sandbox.dpctl("dump-flows", "dummy@dp0").stdout
    assert "".join(sorted(dump.splitlines(True))) == (
        "flow-dump from pmd on cpu core: 0\nflow-dump from the main thread:\n"
        + DP0_DUMPED * 2)
    check(sandbox.dpctl("dump-flows", "dummy@dp0", "pmd=0"), stdout=DP0_DUMPED)
    check(sandbox.dpctl("dump-flows", "dummy@dp0", "pmd=-1"), stdout=DP0_DUMPED)
    check(sandbox.dpctl("del-flow", "dummy@dp0", DP0_FLOW), stdout="")
    check(sandbox.dpctl("dump-flows", "dummy@dp0"), stdout="")
    check(sandbox.dpctl("del-dp", "dummy@dp0"), stdout="")
