"""system-traffic.at's conntrack tests, as `make check-system-userspace` (and
check-system-tso) run them: two namespaces on br0, upstream's flow table with
ct actions, upstream's traffic and checks (ping | FORMAT_PING, dpctl/dump-
conntrack | FORMAT_CT).  Beyond upstream, every frame that crosses OVS is
judged: the flow table runs through the model's connection tracker in the
order the frames met OVS (fixtures/system_ct.CtWire).
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath.model.actions import Action
from datapath.model.conntrack import EST, TRK, Ct
from fixtures.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports
from fixtures.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import check

pytestmark = pytest.mark.requires(backend="tap")

ARP, IPV4, IPV6 = 0x0806, 0x0800, 0x86DD
ICMP = 1
LOST = re.compile(r"^(\d+) packets transmitted, 0 received, 100% packet loss, time 0ms\n$")


def check_lost(t: Traffic, ns, dst: str, six: bool = False) -> None:  # type: ignore[no-untyped-def]
    """NS_CHECK_EXEC([ns], [ping -q -c 3 -i 0.3 -w 2 dst | FORMAT_PING], [0],
    [7 packets transmitted, 0 received, 100% packet loss, time 0ms]): no reply
    within ping's 2 s deadline.  How many requests fit in the deadline (7 at
    0.3 s on an idle machine) is the scheduler's, not OVS's: at least 3 must
    have gone, none answered."""
    got = t.ping(ns, dst, wait="-w", six=six)
    m = LOST.match(got)
    assert m and int(m.group(1)) >= 3, f"ping {dst}: expected every request lost, got {got!r}"


def arp_normal(a: Arrival) -> list[tuple[str | None, list[Action]]]:
    """priority=10,arp,action=normal."""
    return [(port, []) for port in a.normal()]


@FLAVOUR
@upstream("conntrack - IPv4 ping")
def test_ipv4_ping(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                   flavour: str) -> None:
    """Any ICMP from ns0 is committed and goes to ns1; from ns1 only what
    conntrack says is established.  ns0's pings are answered; the connection
    is dumped, flushed by its tuple, gone; ns1's pings then die (a new
    connection from ns1 is not let through).  Beyond upstream: each request
    and reply through the model's tracker, and nothing from ns1 leaking out."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,icmp,action=ct(commit),2",
                  "priority=100,in_port=2,icmp,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,icmp,ct_state=+trk+est,action=1"])

    def pipeline(a: Arrival) -> list[tuple[str | None, list[Action]]]:
        if a.eth_type == ARP:
            return arp_normal(a)
        if a.eth_type != IPV4 or a.ip_proto != ICMP:
            return []
        if a.ofport == 1:
            return [("ovs-p1", [Ct(a.table, commit=True)])]
        if a.ofport == 2:
            st = a.state().state
            return [("ovs-p0" if st & TRK and st & EST else None, [Ct(a.table)])]
        return []

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    t.check_ping(ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0)\n")
    check(t.sb.appctl("dpctl/flush-conntrack", "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2"))
    wire.flushed()
    check_ct(t, "10.1.1.2", "")
    check_lost(t, ns1, "10.1.1.1")
    assert wire.verify() >= 6
