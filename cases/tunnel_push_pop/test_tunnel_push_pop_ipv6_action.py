"""tunnel-push-pop-ipv6.at: 'tunnel_push_pop_ipv6 - action', one sandbox as upstream.

VXLAN, GRE, VXLAN with flow key and checksum, Geneve with flow remote, L3
GRE and SRv6 ports on int-br over br0/p0 with 2001:cafe::88.  In upstream's
order: Neighbor Discovery started by a trace, aging, snooping of Neighbor
Advertisements (wrong destination, wrong and right VLAN, overlay port,
solicited-node multicast), the traced pops and pushes, decapsulation (whose
packets int-br's last flow sends on into Geneve with an option), Geneve
options to the controller, the neighbour entry moved by a tunnel packet's
source MAC, and the UDP checksum counters.
"""
from __future__ import annotations

import pytest

from datapath.model.neigh import neighbor_solicitation
from datapath.model.packet import with_vlan
from fixtures.tunnel_push_pop.pushpop import BR0_MAC, INT_BR, P0, PushPop, neigh_advert
from fixtures.tunnel_push_pop.pushpop_action6 import (
    check_decap_and_controller,
    check_ports_and_traces,
    check_tunnel_learning,
    flood_into_tunnels,
)
from harness.vsctl import set_interface

FILE = "tunnel-push-pop-ipv6.at"
PORTS = (("t2", "type=vxlan", "options:remote_ip=2001:cafe::92", "options:key=123",
          "ofport_request=2"),
         ("t1", "type=gre", "options:remote_ip=2001:cafe::92", "options:key=456",
          "ofport_request=3"),
         ("t3", "type=vxlan", "options:remote_ip=2001:cafe::93", "options:out_key=flow",
          "options:csum=true", "ofport_request=4"),
         ("t4", "type=geneve", "options:remote_ip=flow", "options:key=123", "ofport_request=5"),
         ("t5", "type=gre", "options:remote_ip=2001:cafe::92", "options:key=455",
          "options:packet_type=legacy_l3", "ofport_request=6"),
         ("t6", "type=srv6", "options:remote_ip=2001:cafe::92", "ofport_request=7"))
DPIF_SHOW = """dummy@ovs-dummy: hit:0 missed:0
  br0:
    br0 65534/100: (dummy-internal)
    p0 1/1: (dummy)
  int-br:
    int-br 65534/2: (dummy-internal)
    t1 3/3: (gre: key=456, remote_ip=2001:cafe::92)
    t2 2/4789: (vxlan: key=123, remote_ip=2001:cafe::92)
    t3 4/4789: (vxlan: csum=true, out_key=flow, remote_ip=2001:cafe::93)
    t4 5/6081: (geneve: key=123, remote_ip=flow)
    t5 6/3: (gre: key=455, packet_type=legacy_l3, remote_ip=2001:cafe::92)
    t6 7/6: (srv6: remote_ip=2001:cafe::92)
"""
TNL_PORTS = ("Listening ports:\ngenev_sys_6081 (6081) ref_cnt=1\ngre_sys (3) ref_cnt=2\n"
             "srv6_sys (6) ref_cnt=1\nsrv6_sys (6) ref_cnt=1\nvxlan_sys_4789 (4789) ref_cnt=2\n")
ICMP_FROM_INT_BR = ("in_port(int-br),eth(src=aa:55:aa:55:00:00,dst=f8:bc:12:ff:ff:ff),"
                    "eth_type(0x0800),ipv4(src=1.1.3.92,dst=1.1.3.88,proto=1,tos=0,ttl=64,"
                    "frag=no),icmp(type=0,code=0)")
B6, C8 = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:c8"


def row(ip: str, mac: str) -> str:
    return f"{ip:<46}{mac:<20}br0\n"


def resolve_and_age(t: PushPop) -> None:
    """ND started by a trace (then waited on), an entry that ages out."""
    t.vsctl("--", *set_interface("p0", options={"pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=True)
    assert "sending ND request" in t.trace("ovs-dummy", ICMP_FROM_INT_BR)
    second = t.trace("ovs-dummy", ICMP_FROM_INT_BR)
    assert "waiting on ND request" in second
    assert "sending ND request" not in second  # upstream: grep -qv (any other line)
    t.expect_requests("p0", [neighbor_solicitation(BR0_MAC, "2001:cafe::88", f"2001:cafe::{n}")
                             for n in (92, 93)])
    t.ok("tnl/neigh/retrans_time", "5000")
    t.ok("tnl/neigh/aging", "5")
    t.appctl("tnl/neigh/aging", stdout="5\n")
    t.ok("tnl/neigh/set", "br0", "2001:cafe::92", "aa:bb:cc:00:00:01")
    assert t.neigh_grep("br0", sort=True) == (
        row("2001:cafe::92", "aa:bb:cc:00:00:01")
        + f"{'2001:cafe::93':<66}br0 INCOMPLETE\n")
    t.appctl("time/warp", "5000")  # the aging time: both entries must go
    t.settle(lambda: t.neigh_grep("br0", sort=True), "", "the entries to age out",
             revalidate=False)
    t.ok("tnl/neigh/aging", "900")
    t.appctl("tnl/neigh/aging", stdout="900\n")


def snooping(t: PushPop) -> None:
    """Which Neighbor Advertisements the cache learns from."""
    def learned(mac: str) -> None:
        assert t.neigh("tnl/arp/show") == row("2001:cafe::92", mac)

    t.receive("p0", neigh_advert("2001:cafe::92", C8))
    learned(C8)
    t.receive("p0", neigh_advert("2001:cafe::92", B6, dst="2001:cafe::99"))  # not to us
    learned(C8)
    vlan_na = ("in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x8100),"
               "vlan(vid={vid},pcp=7),encap(eth_type(0x86dd),ipv6(src=2001:cafe::92,"
               "dst=2001:cafe::88,label=0,proto=58,tclass=0,hlimit=255,frag=no),"
               "icmpv6(type=136,code=0),nd(target=2001:cafe::92,sll=00:00:00:00:00:00,"
               "tll=f8:bc:12:44:34:b6))")
    for vid, want in ((99, C8), (10, B6)):
        t.vsctl("set", "port", "br0", "tag=10")
        t.receive("p0", vlan_na.format(vid=vid))
        learned(want)
    # In the overlay bridge: not learned, and int-br floods it into the tunnels.
    t.vsctl("add-port", "int-br", "p1", "--", "set", "interface", "p1", "type=dummy",
            "ofport_request=200", "other-config:hwaddr=aa:55:aa:55:00:99")
    t.receive("p1", neigh_advert("2001:cafe::92", C8, dst="2001:cafe::99",
                                 prefix="in_port(200),"))
    assert t.neigh_grep("br", complete_only=True, sort=True) == row("2001:cafe::92", B6)
    flood_into_tunnels(t)
    t.vsctl("set", "port", "br0", "tag=0")
    t.ok("tnl/neigh/flush")
    t.receive("p0", neigh_advert("2001:cafe::92", B6))
    t.receive("p0", neigh_advert("2001:cafe::93", "f8:bc:12:44:34:b7",
                                 dst="ff02::1:ff00:0088"))
    assert t.neigh("tnl/arp/show") == (row("2001:cafe::92", B6)
                                       + row("2001:cafe::93", "f8:bc:12:44:34:b7"))


@pytest.mark.upstream("tunnel_push_pop_ipv6 - action", file=FILE)
def test_action6(pushpop: PushPop) -> None:
    """Everything upstream checks, in its order, plus every frame p0 sends
    against the model: the solicitations, the overlay NA flooded into the
    tunnels, and the decapsulated packets int-br sends on into Geneve."""
    t = pushpop
    t.start(*P0)
    t.vsctl(*INT_BR)
    args: list[str] = []
    for name, *opts in PORTS:
        args += ["--", "add-port", "int-br", name, "--", "set", "Interface", name, *opts]
    t.vsctl(*args[1:])
    t.appctl("dpif/show", stdout=DPIF_SHOW)
    assert t.tnl_ports() == TNL_PORTS
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/24")
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ("Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n"
                          "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n"
                          "Cached: 2001:ca00::/24 dev br0 SRC 2001:cafe::88\n"
                          "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    resolve_and_age(t)
    snooping(t)
    check_ports_and_traces(t, TNL_PORTS)
    check_decap_and_controller(t)
    check_tunnel_learning(t)
    nss = [neighbor_solicitation(BR0_MAC, "2001:cafe::88", f"2001:cafe::{n}") for n in (92, 93)]
    t.expect_requests("p0", nss + [with_vlan(nss[1], 10)])
    t.finish()
