"""system-traffic.at's "IGMP - flood under normal action", as `make
check-system-userspace` (and check-system-tso) run it: an IGMPv3 report
(IPv4 with a Router Alert option, RFC 3376 §4, RFC 2113) sent from at_ns0
(upstream's sendpkt.py; an AF_PACKET send here) into br0 with actions=NORMAL
and no multicast snooping must be flooded: the datapath flow upstream
dumps (`dpctl/dump-flows --names`, its ipv4 lines, after strip_stats,
strip_used and strip_recirc) outputs to br0 and ovs-p2.

Beyond upstream: the frame that arrived in at_ns1 against the model's
output of the frame at_ns0 sent (fixtures/system_userspace/system_l2.py), and nothing else
of the traffic under test crossed.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath.backends.netns import KernelSide
from fixtures.system_userspace.system_l2 import Crossings, port_tx, switched
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.filters import strip_recirc, strip_stats, strip_used
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

IGMP = ("01 00 5e 01 01 03 f0 00 00 01 01 01 08 00 46 c0 00 28 00 00 40 00 01 02 d3 49 45 65 "
        "eb 4a e0 00 00 16 94 04 00 00 22 00 f9 02 00 00 00 01 04 00 00 00 e0 00 00 fb 00 00 "
        "00 00 00 00")
WANT = ("recirc_id(<recirc>),in_port(ovs-p1),eth(src=f0:00:00:01:01:01,dst=01:00:5e:01:01:03),"
        "eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, used:never, actions:br0,ovs-p2\n")


def dump_ipv4(t: Traffic) -> str:
    """dpctl/dump-flows --names | grep -e .*ipv4 | sort | strip_stats | strip_used |
    strip_recirc | sed 's/,packet_type(ns=[0-9]*,id=[0-9]*),/,/'."""
    out = t.sb.appctl("dpctl/dump-flows", "--names").stdout
    lines = sorted(line for line in out.splitlines() if "ipv4" in line)
    text = strip_recirc(strip_used(strip_stats("".join(f"{ln}\n" for ln in lines))))
    return re.sub(r",packet_type\(ns=[0-9]*,id=[0-9]*\),", ",", text)


@FLAVOUR
@upstream("IGMP - flood under normal action")
def test_igmp_flood_under_normal_action(system_traffic: Callable[..., Traffic],
                                        request: pytest.FixtureRequest, flavour: str) -> None:
    """Upstream's packet, flow and dump check (module docstring).  Upstream
    dumps right after sendpkt.py; here the dump is taken once the flow is in
    (the event), then compared exactly."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p1", ns0, "br0", "10.1.1.1/24", "f0:00:00:01:01:01")
    t.add_veth("p2", ns1, "br0", "10.1.1.2/24", "f0:00:00:01:01:02")
    t.sb.ofctl("add-flow", "br0", "actions=NORMAL")
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p1", True), (ns1, "p2", False),
             switched(port_tx(t, "ovs-p2")))
    side = KernelSide(ns0, "p1")
    t.env.cleanup.defer("close p1", side.close)
    side.send([bytes.fromhex(IGMP.replace(" ", ""))])
    got = wait_until(lambda: (lambda d: d if "in_port(ovs-p1)" in d else "")(dump_ipv4(t)), 10,
                     what="the IGMP report's datapath flow")
    assert got == WANT, f"dpctl/dump-flows: expected\n{WANT}got\n{got}"
    assert wire.verify() == 1


ICMP = ("f0 00 00 01 01 02 f0 00 00 01 01 01 08 00 45 00 00 1c 00 01 00 00 40 01 64 dc 0a 01 01 "
        "01 0a 01 01 02 08 00 f7 ff ff ff ff ff")
FORWARD_FLOWS = ("table=0, arp actions=NORMAL",
                 "table=0, ip,in_port=1 actions=ct(table=1,zone=64000)",
                 "table=0, in_port=2 actions=output:1",
                 "table=1, ip,ct_state=+trk+inv actions=drop",
                 "table=1  ip,in_port=1,icmp,ct_state=+trk+new actions=output:2",
                 "table=1, in_port=1,ip,ct_state=+trk+new "
                 "actions=controller(userdata=00.de.ad.be.ef.ca.fe.01)",
                 "table=1, in_port=1,ip,ct_state=+trk+est actions=output:2")
FORWARD_WANT = (
    " cookie=0x0,  table=0, n_packets=0, n_bytes=0, idle_age=0, ip,in_port=1 "
    "actions=ct(table=1,zone=64000)\n"
    " cookie=0x0,  table=1, n_packets=0, n_bytes=0, idle_age=0, ct_state=+new+trk,icmp,in_port=1 "
    "actions=output:2\n"
    " cookie=0x0,  table=1, n_packets=0, n_bytes=0, idle_age=0, ct_state=+new+trk,ip,in_port=1 "
    "actions=controller(userdata=00.de.ad.be.ef.ca.fe.01)\n")


def forward_dump(t: Traffic) -> str:
    """dump-flows br0 | grep -v NXST | strip_duration | grep -v arp | grep -v
    n_packets=0 | grep -v 'in_port=2 actions=output:1' | sed (n_bytes, idle_age,
    n_packets=[1-9] to 0) | sort."""
    out = t.sb.ofctl("dump-flows", "br0").stdout
    lines = []
    for line in out.splitlines():
        line = re.sub(r"duration=[0-9.]*s,", "", line)
        if "NXST" in line or "arp" in line or "n_packets=0" in line \
                or "in_port=2 actions=output:1" in line:
            continue
        line = re.sub(r"n_bytes=[0-9]*", "n_bytes=0", line, count=1)
        line = re.sub(r"idle_age=[0-9]*", "idle_age=0", line, count=1)
        lines.append(re.sub(r"n_packets=[1-9]", "n_packets=0", line, count=1))
    return "".join(f"{ln}\n" for ln in sorted(lines))


@FLAVOUR
@upstream("IGMP - forward with ICMP")
def test_igmp_forward_with_icmp(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """Upstream's flows (conntrack in zone 64000: new ICMP out of port 2, other
    new IP to the controller), an IGMP report then a unicast ICMP echo from
    at_ns0: the ICMP must not be black-holed behind the IGMP.  Upstream sleeps
    a second, then checks the hit flows (dump-flows after its filters); here
    the check waits until the three flows have counted their packets.  Beyond
    upstream: the echo request reached at_ns1 unchanged (ct without nat
    changes no byte, ovs-actions(7)), and the IGMP report did not (it went to
    the controller)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p1", ns0, "br0", "10.1.1.1/24", "f0:00:00:01:01:01")
    t.add_veth("p2", ns1, "br0", "10.1.1.2/24", "f0:00:00:01:01:02")
    t.sb.ofctl("del-flows", "br0")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f"{f}\n" for f in FORWARD_FLOWS))
    t.sb.ofctl("add-flows", "br0", str(flows))
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p1", True), (ns1, "p2", False),
             lambda c: [c.frame] if arp_or_icmp(c.frame) else [])
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "p2", True), (ns0, "p1", False),
             lambda c: [c.frame])  # in_port=2 actions=output:1
    side = KernelSide(ns0, "p1")
    t.env.cleanup.defer("close p1", side.close)
    side.send([bytes.fromhex(IGMP.replace(" ", "").replace("01005e010103", "f00000010102", 1))])
    side.send([bytes.fromhex(ICMP.replace(" ", ""))])
    got = wait_until(lambda: (lambda d: d if d.count("\n") >= 3 else "")(forward_dump(t)), 10,
                     what="the three flows to count their packets")
    assert got == FORWARD_WANT, f"dump-flows br0: expected\n{FORWARD_WANT}got\n{got}"
    assert wire.verify() >= 2  # the echo request, its reply


def arp_or_icmp(frame: bytes) -> bool:
    """What table 0/1 send on from port 1: ARP (NORMAL), new ICMP (output:2)."""
    return frame[12:14] == b"\x08\x06" or (frame[12:14] == b"\x08\x00" and frame[23] == 1)
