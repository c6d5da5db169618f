"""Facts from tunnel-push-pop.at and tunnel-push-pop-ipv6.at, for the model.

HEADERS: the tunnel header templates upstream expects in datapath actions
(ofproto/trace and dpctl/dump-flows), each with the tunnel port options that
produced it (the model's TunnelSpec arguments) and the payload type.  FRAMES:
the frames upstream expects on the wire, in full or with the UDP source port
masked as '....' (it hashes the inner flow).
"""
from __future__ import annotations

from typing import Any

V4 = {"local_ip": "1.1.2.88", "local_mac": "aa:55:aa:55:00:00"}
V6 = {"local_ip": "2001:cafe::88", "local_mac": "aa:55:aa:55:00:00"}
B6, B7, B8 = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:b7", "f8:bc:12:44:34:b8"
IP4 = "ipv4(src={src},dst={dst},proto={p},tos=0,ttl=64,frag=0x4000)"
IP6 = "ipv6(src={src},dst={dst},label=0,proto={p},tclass=0x0,hlimit=64)"


def h(size: int, kind: int, mac: str, ip: str, tnl: str, eth_type: str = "0x0800",
      src_mac: str = "aa:55:aa:55:00:00") -> str:
    return (f"header(size={size},type={kind},eth(dst={mac},src={src_mac},dl_type={eth_type}),"
            f"{ip},{tnl})")


def v4(size: int, kind: int, mac: str, dst: str, proto: int, tnl: str,
       src: str = "1.1.2.88", **kw: str) -> str:
    return h(size, kind, mac, IP4.format(src=src, dst=dst, p=proto), tnl, **kw)


def v6(size: int, kind: int, mac: str, dst: str, proto: int, tnl: str,
       src: str = "2001:cafe::88") -> str:
    return h(size, kind, mac, IP6.format(src=src, dst=dst, p=proto), tnl, "0x86dd")


GENEVE_OPT = ",options({class=0xffff,type=0x80,len=4,0xa})"
OPT = ("geneve_opt", (0xFFFF, 0x80, "0000000a"))

# (name, upstream's header, TunnelSpec arguments, inner packet type)
HEADERS: list[tuple[str, str, dict[str, Any], int]] = [
    # tunnel_push_pop - erspan
    ("erspan v1", v4(50, 107, B6, "1.1.2.92", 47, "erspan(ver=1,sid=0x7b,idx=0x3)"),
     dict(V4, kind="erspan", remote_ip="1.1.2.92", remote_mac=B6, key=123, erspan_idx=3),
     0x0800),
    ("erspan v2", v4(54, 107, B6, "1.1.2.92", 47, "erspan(ver=2,sid=0x237,dir=1,hwid=0x7)"),
     dict(V4, kind="erspan", remote_ip="1.1.2.92", remote_mac=B6, key=567, erspan_ver=2,
          erspan_dir=1, erspan_hwid=7), 0x0800),
    ("erspan v2 flow", v4(54, 107, B8, "1.1.2.94", 47, "erspan(ver=2,sid=0x1c8,dir=1,hwid=0x1)"),
     dict(V4, kind="erspan", remote_ip="1.1.2.94", remote_mac=B8, key=456, erspan_ver=2,
          erspan_dir=1, erspan_hwid=1), 0x0800),
    ("erspan ver=flow v2", v4(54, 107, B8, "1.1.2.94", 47, "erspan(ver=2,sid=0x38,dir=1,hwid=0x1)"),
     dict(V4, kind="erspan", remote_ip="1.1.2.94", remote_mac=B8, key=56, erspan_ver=2,
          erspan_dir=1, erspan_hwid=1), 0x0800),
    ("erspan ver=flow v1", v4(50, 107, B8, "1.1.2.94", 47, "erspan(ver=1,sid=0x38,idx=0x1)"),
     dict(V4, kind="erspan", remote_ip="1.1.2.94", remote_mac=B8, key=56, erspan_idx=1),
     0x0800),
    # tunnel_push_pop - action
    ("vxlan", v4(50, 4, B6, "1.1.2.92", 17, "udp(src=0,dst=4789,csum=0x0),"
                 "vxlan(flags=0x8000000,vni=0x7b)"),
     dict(V4, kind="vxlan", remote_ip="1.1.2.92", remote_mac=B6, key=123), 0x0800),
    ("vxlan-gpe", v4(50, 4, B6, "1.1.2.92", 17, "udp(src=0,dst=4789,csum=0x0),"
                     "vxlan(flags=0xc000003,vni=0x159)"),
     dict(V4, kind="vxlan", remote_ip="1.1.2.92", remote_mac=B6, key=345, gpe=True), 0x0800),
    ("vxlan csum", v4(50, 4, B7, "1.1.2.93", 17, "udp(src=0,dst=4789,csum=0xffff),"
                      "vxlan(flags=0x8000000,vni=0x7c)"),
     dict(V4, kind="vxlan", remote_ip="1.1.2.93", remote_mac=B7, key=124, csum=True), 0x0800),
    ("gre", v4(42, 3, B6, "1.1.2.92", 47, "gre((flags=0x2000,proto=0x6558),key=0x1c8)"),
     dict(V4, kind="gre", remote_ip="1.1.2.92", remote_mac=B6, key=456), 0x0800),
    ("l3 gre", v4(42, 3, B6, "1.1.2.92", 47, "gre((flags=0x2000,proto=0x800),key=0x1c8)"),
     dict(V4, kind="gre", remote_ip="1.1.2.92", remote_mac=B6, key=456, l3=True), 0x0800),
    ("geneve", v4(50, 5, B6, "1.1.2.92", 17, "udp(src=0,dst=6081,csum=0x0),geneve(vni=0x7b)"),
     dict(V4, kind="geneve", remote_ip="1.1.2.92", remote_mac=B6, key=123), 0x0800),
    ("geneve mark", v4(50, 5, B7, "1.1.2.93", 17, "udp(src=0,dst=6081,csum=0x0),geneve(vni=0xea)"),
     dict(V4, kind="geneve", remote_ip="1.1.2.93", remote_mac=B7, key=234), 0x0800),
    ("geneve option", v4(58, 5, B6, "1.1.2.92", 17, "udp(src=0,dst=6081,csum=0x0),"
                         "geneve(crit,vni=0x7b" + GENEVE_OPT + ")"),
     dict(V4, kind="geneve", remote_ip="1.1.2.92", remote_mac=B6, key=123, opts=[OPT]), 0x0800),
    ("gtpu", v4(50, 110, B6, "1.1.2.92", 17, "udp(src=0,dst=2152,csum=0x0),"
                "gtpu(flags=0x30,msgtype=255,teid=0x7b)"),
     dict(V4, kind="gtpu", remote_ip="1.1.2.92", remote_mac=B6, key=123), 0x0800),
    # local_ip, underlay bridge match, VXLAN access port, non-local endpoint
    ("geneve local_ip", v4(50, 5, B6, "1.1.2.92", 17, "udp(src=0,dst=6081,csum=0x0),"
                           "geneve(vni=0x7b)", src="2.2.2.88"),
     dict(V4, kind="geneve", remote_ip="1.1.2.92", remote_mac=B6, key=123,
          local_ip="2.2.2.88"), 0x0800),
    ("gre seq", v4(46, 3, B6, "1.1.2.92", 47, "gre((flags=0x3000,proto=0x6558),key=0x1c8,seq=0x0)"),
     dict(V4, kind="gre", remote_ip="1.1.2.92", remote_mac=B6, key=456, seq=True), 0x0800),
    ("vxlan access", v4(50, 4, "aa:55:aa:66:00:00", "10.0.0.11", 17,
                        "udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x0)",
                        src="10.0.0.2"),
     dict(V4, kind="vxlan", local_ip="10.0.0.2", remote_ip="10.0.0.11",
          remote_mac="aa:55:aa:66:00:00", key=None), 0x0800),
    ("gre no key", v4(38, 3, B6, "1.1.2.92", 47, "gre((flags=0x0,proto=0x6558))",
                      src_mac="aa:55:aa:55:00:03"),
     dict(V4, kind="gre", remote_ip="1.1.2.92", remote_mac=B6, key=None,
          local_mac="aa:55:aa:55:00:03"), 0x0800),
    # IPv6 underlays
    ("ip6gre", v6(58, 109, B6, "2001:cafe::92", 47, "gre((flags=0x0,proto=0x6558))"),
     dict(V6, kind="gre", remote_ip="2001:cafe::92", remote_mac=B6, key=None), 0x0800),
    ("ip6erspan v1", v6(70, 108, B6, "2001:cafe::92", 47, "erspan(ver=1,sid=0x7b,idx=0x3)"),
     dict(V6, kind="erspan", remote_ip="2001:cafe::92", remote_mac=B6, key=123, erspan_idx=3),
     0x0800),
    ("ip6erspan v2", v6(74, 108, B7, "2001:cafe::93", 47, "erspan(ver=2,sid=0x237,dir=1,hwid=0x7)"),
     dict(V6, kind="erspan", remote_ip="2001:cafe::93", remote_mac=B7, key=567, erspan_ver=2,
          erspan_dir=1, erspan_hwid=7), 0x0800),
    ("vxlan6", v6(70, 4, B6, "2001:cafe::92", 17, "udp(src=0,dst=4789,csum=0xffff),"
                  "vxlan(flags=0x8000000,vni=0x7b)"),
     dict(V6, kind="vxlan", remote_ip="2001:cafe::92", remote_mac=B6, key=123), 0x0800),
    ("vxlan6 no csum", v6(70, 4, B7, "2001:cafe::93", 17, "udp(src=0,dst=4789,csum=0x0),"
                          "vxlan(flags=0x8000000,vni=0x0)"),
     dict(V6, kind="vxlan", remote_ip="2001:cafe::93", remote_mac=B7, key=None, csum=False),
     0x0800),
    ("gre6", v6(62, 109, B6, "2001:cafe::92", 47, "gre((flags=0x2000,proto=0x6558),key=0x1c8)"),
     dict(V6, kind="gre", remote_ip="2001:cafe::92", remote_mac=B6, key=456), 0x0800),
    ("srv6", v6(78, 112, B6, "2001:cafe::92", 43, "srv6(segments_left=0,segs(2001:cafe::92))"),
     dict(V6, kind="srv6", remote_ip="2001:cafe::92", remote_mac=B6, key=None), 0x0800),
    ("geneve6", v6(70, 5, B6, "2001:cafe::92", 17, "udp(src=0,dst=6081,csum=0xffff),"
                   "geneve(vni=0x7b)"),
     dict(V6, kind="geneve", remote_ip="2001:cafe::92", remote_mac=B6, key=123), 0x0800),
    ("geneve6 option", v6(78, 5, B6, "2001:cafe::92", 17, "udp(src=0,dst=6081,csum=0xffff),"
                          "geneve(crit,vni=0x7b" + GENEVE_OPT + ")"),
     dict(V6, kind="geneve", remote_ip="2001:cafe::92", remote_mac=B6, key=123, opts=[OPT]),
     0x0800),
    ("geneve6 local_ip", v6(70, 5, B6, "2001:cafe::92", 17, "udp(src=0,dst=6081,csum=0xffff),"
                            "geneve(vni=0x7b)", src="2001:beef::88"),
     dict(V6, kind="geneve", remote_ip="2001:cafe::92", remote_mac=B6, key=123,
          local_ip="2001:beef::88"), 0x0800),
]

PACKET = "50540000000a5054000000091234"
# The frames upstream greps for (p0's tx pcap), the UDP source port masked.
MASKED: list[tuple[str, str, dict[str, Any]]] = [
    ("geneve (packet_out debug_slow, recirculation)",
     "f8bc124434b6aa55aa5500000800450000320000400040113406010102580101025c"
     "....17c1001e00000000655800007b00" + PACKET,
     dict(V4, kind="geneve", remote_ip="1.1.2.92", remote_mac=B6, key=123)),
    ("geneve local_ip", "f8bc124434b6aa55aa5500000800450000320000400040113305020202580101025c"
     "....17c1001e00000000655800007b00" + PACKET,
     dict(V4, kind="geneve", remote_ip="1.1.2.92", remote_mac=B6, key=123,
          local_ip="2.2.2.88")),
    ("geneve6 local_ip", "f8bc124434b6aa55aa55000086dd60000000001e11402001beef000000000000000000"
     "0000882001cafe000000000000000000000092....17c1001e....0000655800007b00" + PACKET,
     dict(V6, kind="geneve", remote_ip="2001:cafe::92", remote_mac=B6, key=123,
          local_ip="2001:beef::88")),
    ("geneve6 (recirculation)", "f8bc124434b6aa55aa55000086dd60000000001e11402001cafe00000000"
     "00000000000000882001cafe000000000000000000000092....17c1001e....0000655800007b00"
     + PACKET,
     dict(V6, kind="geneve", remote_ip="2001:cafe::92", remote_mac=B6, key=123)),
]

# tunnel_push_pop - action: an L3 GRE packet sent back into the L3 GRE port.
L3GRE_ECHO = ("001b213cab64aa55aa55000008004500007000004000402f33aa010102580101025c"
              "20000800000001c8" "45000054ba200000400184861e0000011e00000200004227e754"
              "00030af3195500000000f265010000000000" + bytes(range(0x10, 0x38)).hex())
# Address resolution requests upstream expects from br0 (aa:55:aa:55:00:00).
ARP_92 = "ffffffffffffaa55aa55000008060001080006040001aa55aa550000010102580000000000000101025c"
ARP_93 = "ffffffffffffaa55aa55000008060001080006040001aa55aa550000010102580000000000000101025d"
NS_92 = ("3333ff000092aa55aa55000086dd6000000000203aff2001cafe000000000000000000000088ff02000000"
         "00000000000001ff00009287004d48000000002001cafe0000000000000000000000920101aa55aa550000")
NS_93 = ("3333ff000093aa55aa55000086dd6000000000203aff2001cafe000000000000000000000088ff02000000"
         "00000000000001ff00009387004d46000000002001cafe0000000000000000000000930101aa55aa550000")
