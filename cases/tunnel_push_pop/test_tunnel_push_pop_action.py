"""tunnel-push-pop.at: 'tunnel_push_pop - action', one sandbox as upstream.

Eight tunnel ports on int-br (VXLAN, GRE, VXLAN with flow key and checksum,
Geneve with flow remote, Geneve with egress mark, L3 GRE, VXLAN-GPE, GTP-U)
over br0/p0 with 1.1.2.88.  In upstream's order: ARP resolution started by a
trace, the neighbour timers' bounds and aging, ARP snooping (wrong target,
wrong and right VLAN, overlay port, gratuitous request and reply), the tunnel
ports, the traced pop and push actions of every kind, decapsulation with every
rx checksum flag and the csum counters, bad checksums and ECN CE drops, L3 GRE
packets sent back into their tunnel, Geneve options to the controller, and the
neighbour entry updated from a tunnel packet's source MAC.
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.neigh import arp_packet, arp_request
from datapath.model.packet import Packet, with_vlan
from datapath.model.tunnel import TunnelSpec
from fixtures.tunnel_push_pop.pushpop import BR0_MAC, INT_BR, P0, PushPop, arp_reply
from fixtures.tunnel_push_pop.pushpop_action import (
    check_decap,
    check_geneve_controller,
    check_l3gre_echo,
    check_ports_and_traces,
    check_tunnel_learning,
)
from harness.vsctl import set_interface

FILE = "tunnel-push-pop.at"
PORTS = (("t2", "type=vxlan", "options:remote_ip=1.1.2.92", "options:key=123", "ofport_request=2"),
         ("t1", "type=gre", "options:remote_ip=1.1.2.92", "options:key=456", "ofport_request=3"),
         ("t3", "type=vxlan", "options:remote_ip=1.1.2.93", "options:out_key=flow",
          "options:csum=true", "ofport_request=4"),
         ("t4", "type=geneve", "options:remote_ip=flow", "options:key=123", "ofport_request=5"),
         ("t5", "type=geneve", "options:remote_ip=1.1.2.93", "options:out_key=flow",
          "options:egress_pkt_mark=1234", "ofport_request=6"),
         ("t6", "type=gre", "options:remote_ip=1.1.2.92", "options:key=456",
          "options:packet_type=legacy_l3", "ofport_request=7"),
         ("t7", "type=vxlan", "options:remote_ip=1.1.2.92", "options:key=345",
          "options:exts=gpe", "ofport_request=8"),
         ("t8", "type=gtpu", "options:remote_ip=1.1.2.92", "options:key=123", "ofport_request=9"))
DPIF_SHOW = """dummy@ovs-dummy: hit:0 missed:0
  br0:
    br0 65534/100: (dummy-internal)
    p0 1/1: (dummy)
  int-br:
    int-br 65534/2: (dummy-internal)
    t1 3/3: (gre: key=456, remote_ip=1.1.2.92)
    t2 2/4789: (vxlan: key=123, remote_ip=1.1.2.92)
    t3 4/4789: (vxlan: csum=true, out_key=flow, remote_ip=1.1.2.93)
    t4 5/6081: (geneve: key=123, remote_ip=flow)
    t5 6/6081: (geneve: egress_pkt_mark=1234, out_key=flow, remote_ip=1.1.2.93)
    t6 7/3: (gre: key=456, packet_type=legacy_l3, remote_ip=1.1.2.92)
    t7 8/4789: (vxlan: key=345, remote_ip=1.1.2.92)
    t8 9/2152: (gtpu: key=123, remote_ip=1.1.2.92)
"""
ICMP_FROM_INT_BR = ("in_port(int-br),eth(src=aa:55:aa:55:00:00,dst=f8:bc:12:ff:ff:ff),"
                    "eth_type(0x0800),ipv4(src=1.1.3.92,dst=1.1.3.88,proto=1,tos=0,ttl=64,"
                    "frag=no),icmp(type=0,code=0)")
ROW = "{ip:<46}{mac:<20}br0\n"


def neigh_row(ip: str, mac: str) -> str:
    return ROW.format(ip=ip, mac=mac)


def add_ports() -> list[str]:
    args: list[str] = []
    for name, *opts in PORTS:
        args += ["--", "add-port", "int-br", name, "--", "set", "Interface", name, *opts]
    return args[1:]


def resolve_and_age(t: PushPop) -> None:
    """The first trace sends one ARP request per next hop and leaves INCOMPLETE
    entries; the second waits on them.  Then the timers' bounds, and an entry
    that ages out."""
    t.vsctl("--", *set_interface("p0", options={"pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=True)
    assert "sending ARP request" in t.trace("ovs-dummy", ICMP_FROM_INT_BR)
    assert sorted(ln for ln in t.appctl("tnl/arp/show").stdout.splitlines()
                  if "INCOMPLETE" in ln) == [
        f"{ip:<66}br0 INCOMPLETE" for ip in ("1.1.2.92", "1.1.2.93")]
    second = t.trace("ovs-dummy", ICMP_FROM_INT_BR)
    assert "waiting on ARP request" in second
    assert "sending ARP request" not in second  # upstream: grep -qv (any other line)
    t.expect_requests("p0", [arp_request(BR0_MAC, "1.1.2.88", ip)
                             for ip in ("1.1.2.92", "1.1.2.93")])
    for cmd, value, error in (
            ("aging", "0", "bad aging value"), ("retrans_time", "0", None),
            ("aging", "3601", "bad aging value"), ("aging", "1", None),
            ("retrans_time", "2000", "retrans_time value cannot be greater than aging"),
            ("aging", "3600", None), ("retrans_time", "5000", None),
            ("aging", "4", "aging value cannot be less than retrans_time"), ("aging", "5", None)):
        if error:
            t.refused(f"tnl/neigh/{cmd}", value, error=error)
        else:
            t.ok(f"tnl/neigh/{cmd}", value)
    t.appctl("tnl/neigh/aging", stdout="5\n")
    t.appctl("tnl/neigh/retrans_time", stdout="5000\n")
    t.ok("tnl/neigh/set", "br0", "1.1.2.92", "aa:bb:cc:00:00:01")
    assert t.neigh_grep("br0", sort=True) == neigh_row("1.1.2.92", "aa:bb:cc:00:00:01")
    # Upstream warps 5 s, the aging time: the entry must then be gone.
    t.appctl("time/warp", "5000")
    t.settle(lambda: t.neigh_grep("br0", sort=True), "", "the 1.1.2.92 entry to age out",
             revalidate=False)
    t.ok("tnl/neigh/aging", "900")
    t.appctl("tnl/neigh/aging", stdout="900\n")


def flood_into_tunnels(t: PushPop) -> None:
    """int-br's NORMAL (an Ethernet learning switch) floods p1's ARP reply into
    every tunnel that carries Ethernet frames to a known next hop: GRE t1, VXLAN
    t2 and VXLAN-GPE t7 to 1.1.2.92 (at f8:bc:12:44:34:b6), tagged with br0's
    access VLAN 10 on the trunk p0.  t3 and t5 wait on 1.1.2.93 (an ARP request
    on VLAN 10), t4 has no remote, and the L3 tunnels t6 (GRE) and t8 (GTP-U),
    which cannot carry the Ethernet header the switch forwards on, are not
    flooded."""
    arp = arp_packet(2, "f8:bc:12:44:34:c8", "1.1.2.92", "00:00:00:00:00:00", "1.1.2.88")
    frames = t.peek("p0", 3)
    sports = {t.sport(f) for f in frames if Packet.parse(f).proto == 17}  # one inner flow
    assert len(sports) == 1, sports
    sport = sports.pop()
    spec = dict(local_ip="1.1.2.88", remote_ip="1.1.2.92", local_mac=BR0_MAC,
                remote_mac="f8:bc:12:44:34:b6")
    out = model.Expected(frames=[])
    for tun in (TunnelSpec("gre", key=456, **spec), TunnelSpec("vxlan", key=123, **spec),
                TunnelSpec("vxlan", key=345, gpe=True, **spec)):
        out.extend(model.map_frames(model.encapsulate(arp, tun, udp_src=sport),
                                    lambda f: with_vlan(f, 10)))
    t.expect("p0", out, "overlay ARP reply flooded into the tunnels", [arp], any_order=True)


def snooping(t: PushPop) -> None:
    """Which ARP packets the neighbour cache learns from, and which not."""
    def learned(mac: str) -> None:
        assert t.neigh_grep("br", complete_only=True) == neigh_row("1.1.2.92", mac)

    t.receive("p0", arp_reply("1.1.2.92", "f8:bc:12:44:34:c8"))
    learned("f8:bc:12:44:34:c8")
    # A reply to another target address is not for us.
    t.receive("p0", arp_reply("1.1.2.92", "f8:bc:12:44:34:b8", tip="1.1.2.90"))
    learned("f8:bc:12:44:34:c8")
    # br0 on VLAN 10: a reply on VLAN 99 is not learned, one on VLAN 10 is.
    t.vsctl("set", "port", "br0", "tag=10")
    for vid, want in ((99, "f8:bc:12:44:34:c8"), (10, "f8:bc:12:44:34:b6")):
        t.receive("p0", "recirc_id(0),in_port(1),eth(src=f8:bc:12:44:34:b6,"
                  f"dst=ff:ff:ff:ff:ff:ff),eth_type(0x8100),vlan(vid={vid},pcp=7),"
                  "encap(eth_type(0x0806),arp(sip=1.1.2.92,tip=1.1.2.88,op=2,"
                  "sha=f8:bc:12:44:34:b6,tha=00:00:00:00:00:00))")
        learned(want)
    # A reply in the overlay bridge is not about the underlay (it floods int-br).
    t.vsctl("add-port", "int-br", "p1", "--", "set", "interface", "p1", "type=dummy",
            "ofport_request=200", "other-config:hwaddr=aa:55:aa:55:00:99")
    t.receive("p1", arp_reply("1.1.2.92", "f8:bc:12:44:34:c8", in_port=200))
    learned("f8:bc:12:44:34:b6")
    flood_into_tunnels(t)
    # Gratuitous ARP, request then reply, on VLAN 10.
    for op, mac, tha in ((1, "f8:bc:12:44:34:c8", "00:00:00:00:00:00"),
                         (2, "f8:bc:12:44:34:b2", "f8:bc:12:44:34:b2")):
        t.receive("p0", f"recirc_id(0),in_port(1),eth(src={mac},dst=ff:ff:ff:ff:ff:ff),"
                  "eth_type(0x8100),vlan(vid=10,pcp=7),encap(eth_type(0x0806),"
                  f"arp(sip=1.1.2.92,tip=1.1.2.92,op={op},sha={mac},tha={tha}))")
        learned(mac)
    # Untagged again, flushed, then two replies.
    t.vsctl("set", "port", "br0", "tag=0")
    t.ok("tnl/neigh/flush")
    t.receive("p0", arp_reply("1.1.2.92", "f8:bc:12:44:34:b6"))
    t.receive("p0", arp_reply("1.1.2.93", "f8:bc:12:44:34:b7"))
    assert t.neigh() == (neigh_row("1.1.2.92", "f8:bc:12:44:34:b6")
                         + neigh_row("1.1.2.93", "f8:bc:12:44:34:b7"))


@pytest.mark.upstream("tunnel_push_pop - action", file=FILE)
def test_action(pushpop: PushPop) -> None:
    """Everything upstream checks, in its order, plus: the ARP requests and
    every frame p0 sends (the flood of an overlay ARP reply into the tunnels,
    the L3 GRE echo) against the model; the decapsulated byte counts and the
    checksum counters against the model's pop."""
    t = pushpop
    t.sb.allow_log(r"dropping tunnel packet marked ECN CE but is not ECN capable",
                   r"ip packet has invalid checksum")  # OVS_VSWITCHD_STOP's allowlist
    t.start(*P0)
    t.vsctl(*INT_BR)
    t.vsctl(*add_ports())
    t.appctl("dpif/show", stdout=DPIF_SHOW)
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/24")
    t.ok("ovs/route/add", "1.1.2.92/24", "br0", "pkt_mark=1234")
    assert t.routes("br0") == (
        "Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n"
        "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n"
        "Cached: 2001:ca00::/24 dev br0 SRC 2001:cafe::88\n"
        "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n"
        "User: 1.1.2.0/24 MARK 1234 dev br0 SRC 1.1.2.88\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()
    resolve_and_age(t)
    snooping(t)
    check_ports_and_traces(t)
    check_decap(t)
    check_l3gre_echo(t)
    check_geneve_controller(t)
    check_tunnel_learning(t)
    requests = [arp_request(BR0_MAC, "1.1.2.88", ip) for ip in ("1.1.2.92", "1.1.2.93")]
    t.expect_requests("p0", requests + [with_vlan(requests[1], 10)])
    t.finish()
