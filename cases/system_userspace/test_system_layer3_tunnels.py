"""system-layer3-tunnels.at's layer-3 tunnel pings, as `make
check-system-userspace` (and check-system-tso) run them: br0 (hwaddr
00:12:34:56:78:bb, 10.1.1.2) reaches at_ns0 (10.1.1.1) through an OVS
tunnel port with options:packet_type=legacy_l3, over br-underlay; the far
end is a Linux device in at_ns0 with a route that encapsulates 10.1.1.2
(`ip route ... encap ip id 0 dst 172.31.1.100`).  br0's flows send IPv4 for
10.1.1.1 into the tunnel, and IPv4 for 10.1.1.2 to LOCAL with the Ethernet
addresses set (the popped packet has none of its own).

Each case keeps upstream's topology, options, flows and pings (the underlay,
then the overlay at 56 and 3200 bytes; ping's summary after FORMAT_PING).
Beyond upstream, every frame OVS pushed into the tunnel and every packet it
popped out are judged against the model (fixtures/system_userspace/system_layer3.py).

VXLAN-GPE needs the kernel's flow-based VXLAN with GPE; GRE needs the
kernel's `gre` devices (CONFIG_NET_IPGRE): without one an id skips, naming it.
upstream's Bareudp titles are not here (harness/system_userspace.NOT_HERE:
upstream skips them in userspace).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.system_userspace.system_layer3 import L3WireCheck
from fixtures.system_userspace.system_traffic import USERSPACE_FLAVOUR, Traffic
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

L3 = "system-layer3-tunnels.at"
BR0_MAC, NS0_OVERLAY_MAC = "00:12:34:56:78:bb", "00:12:34:56:78:aa"
TUNNELS = {
    # title: (OVS type, kernel kind, OVS port, OVS options, ns device, `ip link add` args)
    "layer3 - ping over VXLAN-GPE": (
        "vxlan", "vxlan-gpe", "at_vxlan0",
        ("options:packet_type=legacy_l3", "options:exts=gpe"),
        "at_vxlan1", ("type", "vxlan", "dstport", "4789", "external", "gpe")),
    "layer3 - ping over GRE": (
        "gre", "gre-l3", "at_gre0", ("options:packet_type=legacy_l3",),
        "at_gre1", ("type", "gre", "remote", "172.31.1.100")),
}


@USERSPACE_FLAVOUR
@pytest.mark.parametrize("title", [
    pytest.param(title, id=TUNNELS[title][1], marks=[
        pytest.mark.upstream(title, file=L3), pytest.mark.requires(kernel=TUNNELS[title][1])])
    for title in TUNNELS])
def test_layer3_ping_over_tunnel(system_traffic: Callable[..., Traffic],
                                 request: pytest.FixtureRequest, flavour: str,
                                 title: str) -> None:
    """Upstream's test: once at_ns0 gets an answer from 10.1.1.2 (its
    OVS_WAIT_UNTIL), 3 pings on the underlay, then 3 of 56 and 3 of 3200
    bytes on the overlay, all answered.  Judged: every IPv4 packet br0's
    kernel side sent to 10.1.1.1 left on p0 as the model's push (outer
    IPv4, UDP to 4789 with a VXLAN-GPE header saying IPv4, or GRE with
    protocol 0x0800; no Ethernet inside), and every tunnel packet at_ns0
    sent reached br0 as its IP packet behind the flow's Ethernet header,
    from the upstream checks' pings on.  Not judged: the OVS_WAIT_UNTIL's
    pings.  at_ns0's first ARP for 172.31.1.100 may be answered through the
    switch namespace's side of the veth too (Linux answers for any local
    address on any interface, arp_ignore=0), so its first VXLAN-GPE packet
    may go to a MAC other than br-underlay's: seen here, with the datapath
    flow showing that destination; OVS then rightly does not pop it (the
    tunnel endpoint is br-underlay's address and MAC), and the host answers
    port unreachable.  Upstream's wait absorbs that."""
    ovs_type, kind, oport, oargs, nport, link = TUNNELS[title]
    t: Traffic = system_traffic(flavour, ("set", "Bridge", "br0",
                                          f'other-config:hwaddr="{BR0_MAC}"'))
    t.add_br("br-underlay")
    ns = t.add_namespace("at_ns0")
    t.add_veth("p0", ns, "br-underlay", "172.31.1.1/24")
    t.ip("addr", "add", "dev", "br-underlay", "172.31.1.100/24")
    t.ip("link", "set", "dev", "br-underlay", "up")
    t.add_ovs_tunnel(ovs_type, "br0", oport, "172.31.1.1", "10.1.1.2/24", *oargs)
    t.ip("neigh", "add", "10.1.1.1", "lladdr", NS0_OVERLAY_MAC, "dev", "br0")
    t._declared(kind)
    t.ip("link", "add", "dev", nport, *link, ns=ns)
    t.ip("addr", "add", "dev", nport, "10.1.1.1/24", ns=ns)
    t.ip("link", "set", "dev", nport, "mtu", "1450", "up", ns=ns)
    t.ip("route", "add", "10.1.1.2/32", "encap", "ip", "id", "0", "dst", "172.31.1.100",
         "dev", nport, ns=ns)
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    t.sb.ofctl("add-flow", "br0", "priority=1 action=drop")
    t.sb.ofctl("add-flow", "br0", f"priority=100 ip,nw_dst=10.1.1.1 action=output:{oport}")
    t.sb.ofctl("add-flow", "br0", "priority=100 ip,nw_dst=10.1.1.2 action=mod_dl_src:"
               f"{NS0_OVERLAY_MAC},mod_dl_dst:{BR0_MAC},local")
    wait_until(lambda: t.run(["ping", "-c", "1", "-W", "1", "10.1.1.2"], ns, timeout=30,
                             rc=None).rc == 0,
               30, what="ping 10.1.1.2 from at_ns0 to answer")
    wire = L3WireCheck.start_l3(t, request, ovs_type, ns, NS0_OVERLAY_MAC, BR0_MAC,
                                gpe=kind == "vxlan-gpe")
    t.check_ping(ns, "172.31.1.100")
    t.check_ping(ns, "10.1.1.2")
    t.check_ping(ns, "10.1.1.2", "-s", "3200")
    wire.verify()
