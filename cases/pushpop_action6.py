"""The later steps of 'tunnel_push_pop_ipv6 - action' (test_tunnel_push_pop_ipv6_action.py).

Each function continues the same sandbox where the previous one left it.
"""
from __future__ import annotations

from datapath import model
from datapath.model.decap import pop
from datapath.model.packet import Packet, with_vlan
from datapath.model.tnl_headers import GeneveOpt
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags
from fixtures import pushpop_frames as F
from fixtures.pushpop import BR0_MAC, PushPop, port_rx
from harness.filters import strip_recirc

from cases.pushpop_action import monitor_packet_in

FROM_P0 = ("in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x86dd),"
           "ipv6(src=2001:cafe::92,dst=2001:cafe::88,label=0,proto={p},tclass=0x0,hlimit=64)")
TO_INT = ("in_port(2),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:01),eth_type(0x0800),"
          "ipv4(src=1.1.3.88,dst=1.1.3.112,proto=47,tos=0,ttl=64,frag=no)")
TO_INT_36 = TO_INT.replace("src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:01",
                           "src=36:b1:ee:7c:01:01,dst=36:b1:ee:7c:01:02")
B6, B7, CAFE = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:b7", "f8:bc:12:44:ca:fe"
PEER = "00:1b:21:3c:ab:64"
OPT = GeneveOpt(0xFFFF, 0x80, bytes.fromhex("0000000a"))


def push(port: int, size: int, kind: int, mac: str, dst: str, proto: int, tnl: str,
         pre: str = "") -> str:
    return (f"Datapath actions: {pre}tnl_push(tnl_port({port}),header(size={size},type={kind},"
            f"eth(dst={mac},src=aa:55:aa:55:00:00,dl_type=0x86dd),ipv6(src=2001:cafe::88,"
            f"dst={dst},label=0,proto={proto},tclass=0x0,hlimit=64),{tnl}),out_port(100)),1\n")


def vxlan(mac: str, dst: str, csum: str, vni: str) -> str:
    return push(4789, 70, 4, mac, dst, 17,
                f"udp(src=0,dst=4789,csum={csum}),vxlan(flags=0x8000000,vni={vni})")


TRACES = [
    ("action=2", vxlan(B6, "2001:cafe::92", "0xffff", "0x7b")),
    ("actions=set_tunnel:124,4", vxlan(B7, "2001:cafe::93", "0xffff", "0x7c")),
    ("action=3", push(3, 62, 109, B6, "2001:cafe::92", 47,
                      "gre((flags=0x2000,proto=0x6558),key=0x1c8)")),
    ("action=7", push(6, 78, 112, B6, "2001:cafe::92", 43,
                      "srv6(segments_left=0,segs(2001:cafe::92))", "pop_eth,")),
    ("actions=set_field:2001:cafe::92->tun_ipv6_dst,5",
     push(6081, 70, 5, B6, "2001:cafe::92", 17,
          "udp(src=0,dst=6081,csum=0xffff),geneve(vni=0x7b)")),
    (None, None),
    ("actions=set_field:2001:cafe::92->tun_ipv6_dst,set_field:0xa->tun_metadata0,5",
     push(6081, 78, 5, B6, "2001:cafe::92", 17, "udp(src=0,dst=6081,csum=0xffff),geneve(crit,"
          "vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))")),
]


def spec(kind: str, remote: str, mac: str, **kw: object) -> TunnelSpec:
    return TunnelSpec(kind, "2001:cafe::88", remote, BR0_MAC, mac, **kw)  # type: ignore[arg-type]


def flood_into_tunnels(t: PushPop) -> None:
    """int-br's NORMAL (an Ethernet learning switch) floods p1's Neighbor
    Advertisement into the tunnels that carry Ethernet frames and have a known
    next hop, tagged with br0's VLAN 10 on p0: GRE t1 and VXLAN t2 to
    2001:cafe::92.  t3 waits on 2001:cafe::93 (a solicitation on VLAN 10), t4
    has no remote, and the L3 tunnels t5 (GRE) and t6 (SRv6), which cannot
    carry the Ethernet header the switch forwards on, are not flooded."""
    frames = t.peek("p0", 2)
    sports = {t.sport(f) for f in frames if Packet.parse(f).proto == 17}
    assert len(sports) == 1, sports
    inner = flooded_na()
    out = model.Expected(frames=[])
    for tun, kw in ((spec("vxlan", "2001:cafe::92", B6, key=123), {"udp_src": sports.pop()}),
                    (spec("gre", "2001:cafe::92", B6, key=456), {})):
        out.extend(model.map_frames(model.encapsulate(inner, tun, **kw),  # type: ignore[arg-type]
                                    lambda f: with_vlan(f, 10)))
    t.expect("p0", out, "overlay NA flooded into the tunnels", [inner], any_order=True)


def flooded_na() -> bytes:
    """p1's Neighbor Advertisement as netdev-dummy composes it: the bytes p0's
    tunnel frames must carry (checked field by field against RFC 4861 here)."""
    from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6NDOptDstLLAddr, IPv6
    from scapy.layers.l2 import Ether
    return bytes(Ether(src="f8:bc:12:44:34:c8", dst="aa:55:aa:55:00:00")
                 / IPv6(src="2001:cafe::92", dst="2001:cafe::99", hlim=255)
                 / ICMPv6ND_NA(tgt="2001:cafe::92", R=0, S=0, O=0)
                 / ICMPv6NDOptDstLLAddr(lladdr="f8:bc:12:44:34:c8"))


def check_ports_and_traces(t: PushPop, tnl_ports: str) -> None:
    assert t.tnl_ports() == tnl_ports
    for proto, l4, port in ((17, ",udp(src=51283,dst=4789)", 4789), (47, "", 3),
                            (17, ",udp(src=51283,dst=6081)", 6081), (4, "", 6)):
        assert t.trace_tail("ovs-dummy", FROM_P0.format(p=proto) + l4) == (
            f"Datapath actions: tnl_pop({port})\n")
    for flow, want in TRACES:
        if flow is None:
            t.ofctl("add-tlv-map", "int-br", "{class=0xffff,type=0x80,len=4}->tun_metadata0")
            continue
        t.ofctl("add-flow", "int-br", flow)
        assert t.trace_tail("ovs-dummy", TO_INT) == want, flow


def into_geneve(t: PushPop, inner: bytes, n: int, title: str) -> None:
    """int-br's last flow sends what was decapsulated on into t4: Geneve to
    2001:cafe::92 with VNI 123 and the option 0xa, outer UDP checksum on, to
    the MAC the tunnel packets from 2001:cafe::92 just came from."""
    got = t.peek("p0", n)
    tun = spec("geneve", "2001:cafe::92", PEER, key=123, geneve_opts=(OPT,))
    out = model.Expected(frames=[])
    for frame in got:
        out.extend(model.encapsulate(inner, tun, udp_src=t.sport(frame)))
    t.expect("p0", out, title, [inner] * n)


def check_decap_and_controller(t: PushPop) -> None:
    """GRE and L3 GRE decapsulation (counted on t1 and t5, and sent on into
    Geneve by int-br's last flow, which upstream leaves in place), then Geneve
    options to the controller."""
    gre = pop(bytes.fromhex(F.GRE6), RxFlags()).inner
    assert gre is not None and 2 * len(gre) == 196
    t.receive("p0", F.GRE6)
    t.receive("p0", F.GRE6)
    into_geneve(t, gre, 2, "GRE decapsulated, into Geneve")
    t.settle(lambda: t.port_line("int-br", 3), port_rx(3, 2, 2 * len(gre)), "t1 rx")
    l3 = pop(bytes.fromhex(F.GRE6_L3), RxFlags()).inner
    assert l3 is not None and 2 * len(l3) == 168
    t.receive("p0", F.GRE6_L3)
    t.receive("p0", F.GRE6_L3)
    # An L3 packet is represented with an all-zero Ethernet header (ovs-fields(7),
    # "root fields"): so it goes into Geneve.
    into_geneve(t, bytes(12) + b"\x08\x00" + l3, 2, "L3 GRE decapsulated, into Geneve")
    t.settle(lambda: t.port_line("int-br", 6), port_rx(6, 2, 2 * len(l3)), "t5 rx")
    monitor_packet_in(t, F.GENEVE6_OPTS, "tun_ipv6_src=2001:cafe::92,tun_ipv6_dst=2001:cafe::88",
                      revalidate=False)
    dump = "".join(ln + "\n" for ln in t.appctl("dpif/dump-flows", "int-br").stdout.splitlines()
                   if "in_port(6081)" in ln)
    assert strip_recirc(dump) == (
        "recirc_id(<recirc>),tunnel(tun_id=0x7b,ipv6_src=2001:cafe::92,ipv6_dst=2001:cafe::88,"
        "geneve({class=0xffff,type=0x80,len=4,0xa/0xf}{class=0xffff,type=0,len=4}),"
        "flags(+key)),in_port(6081),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), "
        "packets:0, bytes:0, used:never, actions:userspace(pid=0,controller(reason=1,"
        "dont_send=0,continuation=0,recirc_id=<recirc>,rule_cookie=0,controller_id=0,"
        "max_len=65535))\n")


def check_tunnel_learning(t: PushPop) -> None:
    """A tunnel packet from a new MAC moves the neighbour entry (and counts its
    UDP checksum as checked); one with a bad UDP checksum is dropped; another
    moves the entry back; with csum=false, t3's push has no checksum."""
    t.receive("p0", F.GPE6_FROM_CAFE)
    t.ofctl("add-flow", "int-br", "action=2")
    assert t.trace_tail("ovs-dummy", TO_INT_36) == vxlan(CAFE, "2001:cafe::92", "0xffff", "0x7b")
    for name, value in (("datapath_drop_tunnel_pop_error", 0), ("native_tnl_l3csum_err", 0),
                        ("native_tnl_l4csum_err", 0), ("native_tnl_l3csum_checked", 0),
                        ("native_tnl_l4csum_checked", 1)):
        t.coverage(name, value)
    t.receive("p0", F.GPE6_FROM_CAFE_BAD_UDP)
    for name, value in (("datapath_drop_tunnel_pop_error", 1), ("native_tnl_l3csum_err", 0),
                        ("native_tnl_l4csum_err", 1), ("native_tnl_l3csum_checked", 0),
                        ("native_tnl_l4csum_checked", 2)):
        t.coverage(name, value)
    rows = f"{'2001:cafe::92':<46}{CAFE:<20}br0\n{'2001:cafe::93':<46}{B7:<20}br0\n"
    assert t.neigh("tnl/arp/show") == rows
    t.receive("p0", F.GPE6_FROM_B6)
    t.ofctl("add-flow", "int-br", "action=2")
    assert t.trace_tail("ovs-dummy", TO_INT_36) == vxlan(B6, "2001:cafe::92", "0xffff", "0x7b")
    assert t.neigh("tnl/arp/show") == rows.replace(CAFE, B6)
    t.vsctl("set", "Interface", "t3", "options:csum=false")
    t.ofctl("del-flows", "int-br")
    t.ofctl("add-flow", "int-br", "action=4")
    assert t.trace_tail("ovs-dummy", TO_INT_36) == vxlan(B7, "2001:cafe::93", "0x0", "0x0")
    t.appctl("time/warp", "10000")
    t.vsctl("del-port", "int-br", "t3", "--", "set", "Interface", "t1", "type=vxlan", "--",
            "set", "Interface", "t2", "options:dst_port=4790")
    assert t.tnl_ports() == ("Listening ports:\ngenev_sys_6081 (6081) ref_cnt=1\n"
                             "gre_sys (3) ref_cnt=1\nsrv6_sys (6) ref_cnt=1\n"
                             "srv6_sys (6) ref_cnt=1\nvxlan_sys_4789 (4789) ref_cnt=1\n"
                             "vxlan_sys_4790 (4790) ref_cnt=1\n")
    t.vsctl(*[a for p in ("t1", "t2", "t4", "t5", "t6")
              for a in ("--", "del-port", "int-br", p)][1:])
    assert t.tnl_ports() == "Listening ports:\n"
