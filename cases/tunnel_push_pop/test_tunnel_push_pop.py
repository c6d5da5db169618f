"""tunnel-push-pop.at: ERSPAN (v1 and v2) over IPv4.

The same daemon, bridges, ports, flows and packets as upstream, in the same
order.  Upstream checks the traces' datapath actions, the neighbour table, the
tunnel ports, the decapsulated packets' port counters, and greps p0's pcap for
the start of each ERSPAN header.  Those greps also match the ERSPAN packets
p0 *received* earlier (the pcap holds rx and tx), so upstream would pass even
if nothing were encapsulated.  Here the frames p0 sent are told apart from
those it received and compared in full with the model, header by header.
"""
from __future__ import annotations

import time

import pytest

from datapath import model
from datapath.model import bugs
from datapath.model.decap import pop
from datapath.model.neigh import arp_request
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags
from fixtures.tunnel_push_pop.pushpop import (
    BR0_MAC,
    INT_BR,
    P0,
    PushPop,
    arp_reply,
    erspan_timestamp,
    port_rx,
)
from harness.vsctl import set_interface

FILE = "tunnel-push-pop.at"
IN2 = ("in_port(2),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x0800),"
       "ipv4(src=1.1.3.88,dst=1.1.3.112,proto=47,tos=0,ttl=64,frag=no)")
ERSPAN_V1_RX = (
    "aa55aa550000001b213cab6408004500007e79464000402fba550101025c01010258100088be00000001"
    "1000007b00000003fe71d883724fbeb6f4e1494a080045000054ba200000400184861e0000011e000002"
    "00004227e75400030af3195500000000f265010000000000101112131415161718191a1b1c1d1e1f2021"
    "22232425262728292a2b2c2d2e2f3031323334353637")
ERSPAN_V2_RX = (
    "aa55aa550000001b213cab6408004500007e79464000402fba550101025c01010258100022eb00000001"
    "2000023710abcd0100000078fe71d883724fbeb6f4e1494a080045000054ba200000400184861e000001"
    "1e00000200004227e75400030af3195500000000f265010000000000101112131415161718191a1b1c1d"
    "1e1f202122232425262728292a2b2c2d2e2f3031323334353637")


def push_action(size: int, dst_mac: str, dst_ip: str, erspan: str) -> str:
    return (f"Datapath actions: tnl_push(tnl_port(3),header(size={size},type=107,"
            f"eth(dst={dst_mac},src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,"
            f"dst={dst_ip},proto=47,tos=0,ttl=64,frag=0x4000),erspan({erspan})),"
            "out_port(100)),1\n")


def erspan_ports() -> tuple[str, ...]:
    opts = [("t1", "options:remote_ip=1.1.2.92", "options:key=123", "options:erspan_ver=1",
             "options:erspan_idx=3", "ofport_request=2"),
            ("t2", "options:remote_ip=1.1.2.92", "options:key=567", "options:erspan_ver=2",
             "options:erspan_dir=1", "options:erspan_hwid=0x7", "ofport_request=3"),
            ("t3", "options:remote_ip=flow", "options:erspan_ver=2", "options:key=456",
             "options:erspan_hwid=flow", "options:erspan_dir=flow", "ofport_request=4"),
            ("t4", "options:remote_ip=flow", "options:erspan_ver=2", "options:key=56",
             "options:erspan_ver=flow", "ofport_request=5")]
    args: list[str] = []
    for name, *rest in opts:
        args += ["--", "add-port", "int-br", name, "--", "set", "Interface", name,
                 "type=erspan", *rest]
    return tuple(args[1:])


@pytest.mark.upstream("tunnel_push_pop - erspan", file=FILE)
def test_erspan(pushpop: PushPop) -> None:
    """ERSPAN v1/v2 ports with fixed and flow-based options: the traced push
    headers, decapsulation of v1 and v2 into the right port, and the frames
    sent for packets output to t1 (v1) and t2 (v2): outer Ethernet to the
    latest next hop, IPv4 with DF and TTL 64, GRE with only S set and a
    per-session sequence number from 0, the ERSPAN header with session ID,
    index or direction/hardware ID and a wall-clock timestamp."""
    t = pushpop
    t.start(*P0)
    t.vsctl(*INT_BR)
    t.vsctl(*erspan_ports())
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n  int-br:\n    int-br 65534/2: (dummy-internal)\n"
        "    t1 2/3: (erspan: erspan_idx=0x3, erspan_ver=1, key=123, remote_ip=1.1.2.92)\n"
        "    t2 3/3: (erspan: erspan_dir=1, erspan_hwid=0x7, erspan_ver=2, key=567, "
        "remote_ip=1.1.2.92)\n"
        "    t3 4/3: (erspan: erspan_dir=flow, erspan_hwid=flow, erspan_ver=2, key=456, "
        "remote_ip=flow)\n"
        "    t4 5/3: (erspan: erspan_dir=flow, erspan_hwid=flow, erspan_idx=flow, "
        "erspan_ver=flow, key=56, remote_ip=flow)\n"))
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/24")
    assert t.routes() == (
        "Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n"
        "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n"
        "Cached: 2001:ca00::/24 dev br0 SRC 2001:cafe::88\n"
        "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()

    # Check ARP request: int-br floods to t1/t2, whose next hop 1.1.2.92 is unknown.
    t.vsctl("--", *set_interface("p0", options={"pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=True)
    t.receive("int-br", "in_port(2),eth(src=aa:55:aa:55:00:00,dst=f8:bc:12:ff:ff:ff),"
              "eth_type(0x0800),ipv4(src=1.1.3.92,dst=1.1.3.88,proto=1,tos=0,ttl=64,"
              "frag=no),icmp(type=0,code=0)")
    t.expect_requests("p0", [arp_request(BR0_MAC, "1.1.2.88", "1.1.2.92")])
    # ARP snoop.
    for ip, mac in (("1.1.2.92", "b6"), ("1.1.2.93", "b7"), ("1.1.2.94", "b8")):
        t.receive("p0", arp_reply(ip, f"f8:bc:12:44:34:{mac}", in_port=100))
    assert t.neigh() == ("1.1.2.92                                      f8:bc:12:44:34:b6   br0\n"
                         "1.1.2.93                                      f8:bc:12:44:34:b7   br0\n"
                         "1.1.2.94                                      f8:bc:12:44:34:b8   br0\n")
    assert t.tnl_ports() == "Listening ports:\nerspan_sys (3) ref_cnt=4\n"

    # The push headers, fixed and flow-based, v1 and v2 (upstream runs the last
    # three traces twice: so do we).
    t.vsctl("--", *set_interface("br0", options={"pcap": "br0.pcap"}))
    b6, b8 = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:b8"
    steps = [("add-flow", "action=2",
              push_action(50, b6, "1.1.2.92", "ver=1,sid=0x7b,idx=0x3")),
             ("mod-flows", "action=3",
              push_action(54, b6, "1.1.2.92", "ver=2,sid=0x237,dir=1,hwid=0x7"))]
    flow_based = [("mod-flows", "action=set_field:1.1.2.94->tun_dst,set_field:1->tun_erspan_dir,"
                   "set_field:0x1->tun_erspan_hwid,4",
                   push_action(54, b8, "1.1.2.94", "ver=2,sid=0x1c8,dir=1,hwid=0x1")),
                  ("mod-flows", "action=set_field:1.1.2.94->tun_dst,set_field:2->tun_erspan_ver,"
                   "set_field:1->tun_erspan_dir,set_field:0x1->tun_erspan_hwid,5",
                   push_action(54, b8, "1.1.2.94", "ver=2,sid=0x38,dir=1,hwid=0x1")),
                  ("mod-flows", "action=set_field:1.1.2.94->tun_dst,set_field:1->tun_erspan_ver,"
                   "set_field:1->tun_erspan_idx,5",
                   push_action(50, b8, "1.1.2.94", "ver=1,sid=0x38,idx=0x1"))]
    for verb, actions, want in steps + flow_based + flow_based:
        t.ofctl(verb, "int-br", actions)
        assert t.trace_tail("ovs-dummy", IN2) == want, actions
    # ERSPAN tunnel pop.
    assert t.trace_tail("ovs-dummy", "in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),"
                        "eth_type(0x0800),ipv4(src=1.1.11.93,dst=1.1.2.88,proto=47,tos=0,"
                        "ttl=64,frag=no)") == "Datapath actions: tnl_pop(3)\n"
    t.ofctl("del-flows", "int-br")
    t.revalidate()

    # Decapsulation of v1 into t1 (port 2) and of v2 into t2 (port 3): the
    # counted bytes are those of the inner frame the model pops.
    for frame, ofport in ((ERSPAN_V1_RX, 2), (ERSPAN_V2_RX, 3)):
        inner = pop(bytes.fromhex(frame), RxFlags()).inner
        assert inner is not None
        want = port_rx(ofport, 1, len(inner))
        assert want == port_rx(ofport, 1, 98)  # upstream's numbers
        t.receive("p0", frame)
        t.settle(lambda: t.port_line("int-br", ofport), want, f"int-br port {ofport} rx")

    # ERSPAN encapsulation in the pcap.  This ARP reply from p0 is meant to make
    # 1.1.2.92 known at f8:bc:12:44:34:b6 again (the decapsulated packets above
    # came from 00:1b:21:3c:ab:64) and br0 learn that MAC on p0.
    t.receive("p0", arp_reply("1.1.2.92", b6, in_port=2))
    t.vsctl("--", *set_interface("p0", options={"tx_pcap": "p0.pcap"}))
    stale = "00:1b:21:3c:ab:64"  # OVS still uses the MAC of the tunnel packets
    t.ofctl("add-flow", "int-br", "in_port=LOCAL,actions=output:2")
    t.revalidate()
    frame = bytes.fromhex("50540000000a5054000000091234")
    t.receive("int-br", frame.hex())
    t1 = TunnelSpec("erspan", "1.1.2.88", "1.1.2.92", BR0_MAC, b6, key=123, erspan_ver=1,
                    erspan_idx=3)
    t.expect("p0", model.deviation(
        model.encapsulate(frame, t1, seq=0),
        model.encapsulate(frame, TunnelSpec(**{**t1.__dict__, "remote_mac": stale}), seq=0),
        bugs.NEIGH_SNOOP_CACHED), "ERSPAN v1 from int-br LOCAL via t1", [frame])

    t.ofctl("mod-flows", "int-br", "in_port=LOCAL,actions=output:3")
    t.revalidate()
    frame = bytes.fromhex("50540000000a5054000000091235")
    before = time.time()
    t.receive("int-br", frame.hex())
    ts = erspan_timestamp(t.peek("p0")[0], 14 + 20, before, time.time())
    t2 = TunnelSpec("erspan", "1.1.2.88", "1.1.2.92", BR0_MAC, b6, key=567, erspan_ver=2,
                    erspan_dir=1, erspan_hwid=7)
    # Session 0x237's first datagram: sequence number 0.  OVS takes the next
    # number of erspan_sys's counter, which session 0x7b already used once.
    t.expect("p0", model.deviation(
        model.encapsulate(frame, t2, seq=0, timestamp=ts),
        model.encapsulate(frame, TunnelSpec(**{**t2.__dict__, "remote_mac": stale}), seq=1,
                          timestamp=ts),
        bugs.NEIGH_SNOOP_CACHED, bugs.GRE_SEQ_SHARED), "ERSPAN v2 from int-br LOCAL via t2",
        [frame])
    t.finish()
