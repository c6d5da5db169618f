"""tunnel-push-pop.at: packets into Geneve and GRE tunnels from int-br.

packet_out (plain and debug_slow), local_ip configuration, underlay bridge
match and recirculation after encapsulation: upstream greps p0's pcap for the
encapsulated frame with the UDP source port masked, and checks the datapath
flows.  Here every frame p0 sends is compared in full with the model; the
UDP source port (a hash of the inner flow) is the model's only input taken
from the frame, after checking it lies in the tunnel source port range.
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.tunnel import TunnelSpec
from fixtures.tunnel_push_pop.pushpop import BR0_MAC, INT_BR, P0, PushPop, arp_reply
from harness.filters import ofctl_strip, strip_ufid, strip_used
from harness.vsctl import add_port, set_interface

FILE = "tunnel-push-pop.at"
B6 = "f8:bc:12:44:34:b6"
PACKET = "50540000000a5054000000091234"
GENEVE_T2 = ("add-port", "int-br", "t2", "--", "set", "Interface", "t2", "type=geneve",
             "options:remote_ip=1.1.2.92", "options:key=123", "ofport_request=2")
ROUTES_1 = ("Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n"
            "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n")


def geneve_push(src: str = "1.1.2.88", tail: str = ",1") -> str:
    return ("tnl_push(tnl_port(6081),header(size=50,type=5,eth(dst=f8:bc:12:44:34:b6,"
            f"src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src={src},dst=1.1.2.92,proto=17,"
            "tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),geneve(vni=0x7b)),"
            f"out_port(100)){tail}")


def geneve_out(t: PushPop, frames: list[bytes], title: str, local: str = "1.1.2.88") -> list[int]:
    """The next frames on p0 are these inner frames in Geneve (VNI 123, no UDP
    checksum over IPv4) from `local` to 1.1.2.92 at f8:bc:12:44:34:b6."""
    got = t.peek("p0", len(frames))
    spec = TunnelSpec("geneve", local, "1.1.2.92", BR0_MAC, B6, key=123)
    ports = [t.sport(f) for f in got]
    out = model.Expected(frames=[])
    for frame, sport in zip(frames, ports):
        out.extend(model.encapsulate(frame, spec, udp_src=sport))
    t.expect("p0", out, title, frames)
    return ports


def geneve_setup(t: PushPop, local_ip: str = "") -> None:
    """The common start: p0, int-br with Geneve port t2 (ofport 2) to 1.1.2.92."""
    t.start(*P0)
    t.appctl("vlog/set", "dpif_netdev:dbg")
    t.vsctl(*INT_BR)
    opts = (f"options:local_ip={local_ip}",) if local_ip else ()
    t.vsctl(*GENEVE_T2[:8], *opts, *GENEVE_T2[8:])


@pytest.mark.upstream("tunnel_push_pop - packet_out", file=FILE)
def test_packet_out(pushpop: PushPop) -> None:
    """Output to a Geneve port from int-br's LOCAL port and from the controller
    (an OpenFlow 1.3 packet-out): both frames leave p0 encapsulated."""
    t = pushpop
    geneve_setup(t)
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ROUTES_1
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", B6, in_port=2))
    t.vsctl("--", *set_interface("p0", options={"tx_pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=False)
    t.ofctl("add-flow", "int-br", "in_port=LOCAL,actions=output:2")
    t.revalidate()
    t.receive("int-br", PACKET)
    geneve_out(t, [bytes.fromhex(PACKET)], "from int-br LOCAL")
    t.ofctl("-O", "OpenFlow13", "packet-out", "int-br", "CONTROLLER", "output:2",
            "50540000000a5054000000091235")
    geneve_out(t, [bytes.fromhex("50540000000a5054000000091235")], "from the controller")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - packet_out debug_slow", file=FILE)
def test_packet_out_debug_slow(pushpop: PushPop) -> None:
    """With debug_slow the encapsulation happens in the slow path, for a miss,
    a second packet, two packets at once (distinct buffers) and a packet-out:
    all five leave encapsulated, with one UDP source port (one inner flow), and
    the datapath flow has slow_path(action) instead of tnl_push."""
    t = pushpop
    geneve_setup(t)
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ROUTES_1
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", B6, in_port=2))
    t.vsctl("--", *set_interface("p0", options={"tx_pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=False)
    packet = bytes.fromhex("50540000000a5054000000091234")
    t.ofctl("add-flow", "int-br", "in_port=LOCAL,actions=debug_slow,output:2")
    t.revalidate()
    ports: list[int] = []
    for n, title in ((1, "miss"), (1, "second packet"), (2, "two at once")):
        t.receive("int-br", *[packet.hex()] * n)
        ports += geneve_out(t, [packet] * n, title)
    packet5 = bytes.fromhex("50540000000a5054000000091235")
    t.ofctl("-O", "OpenFlow13", "packet-out", "int-br", "CONTROLLER", "debug_slow,output:2",
            packet5.hex())
    ports += geneve_out(t, [packet5], "packet-out")
    assert len(set(ports)) == 1, f"source ports {ports}: upstream expects one"
    dump = t.appctl("dpctl/dump-flows").stdout
    assert "tnl_push" not in dump
    assert "slow_path(action)" in dump
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - local_ip configuration", file=FILE)
def test_local_ip(pushpop: PushPop) -> None:
    """options:local_ip picks the second of br0's addresses as the outer source:
    in the trace, in both frames (miss and datapath flow) and in the flow."""
    t = pushpop
    geneve_setup(t, local_ip="2.2.2.88")
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    t.ok("netdev-dummy/ip4addr", "br0", "2.2.2.88/24")
    assert t.routes() == ROUTES_1 + ("Cached: 2.2.2.0/24 dev br0 SRC 2.2.2.88\n"
                                     "Cached: 2.2.2.88/32 dev br0 SRC 2.2.2.88 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.ofctl("add-flow", "int-br", "action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", B6))
    check_trace_and_flow(t, "2.2.2.88", ",1", ",1")


def check_trace_and_flow(t: PushPop, local: str, traced: str, installed: str) -> None:
    """The trace from int-br LOCAL, two packets out, the datapath flow (`traced`
    and `installed`: what follows the push in the trace and in the flow)."""
    lines = [ln for ln in t.trace("int-br", "in_port=LOCAL").splitlines()
             if "tunnel" in ln or "actions" in ln]
    assert lines == ["     -> output to native tunnel",
                     "     -> tunneling to 1.1.2.92 via br0",
                     f"     -> tunneling from aa:55:aa:55:00:00 {local} to {B6} 1.1.2.92",
                     "Datapath actions: " + geneve_push(local, traced)]
    t.vsctl("--", *set_interface("p0", options={"tx_pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=False)
    packet = bytes.fromhex(PACKET)
    ports = []
    for title in ("miss", "datapath flow"):
        t.receive("int-br", PACKET)
        ports += geneve_out(t, [packet], title, local)
    assert ports[0] == ports[1]
    flows = [ln for ln in t.appctl("dpctl/dump-flows").stdout.splitlines() if "tnl_push" in ln]
    assert strip_used(strip_ufid("\n".join(flows))) == (
        "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:09,"
        "dst=50:54:00:00:00:0a),eth_type(0x1234), packets:1, bytes:14, used:0.0s, "
        f"actions:{geneve_push(local, installed)}\n")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - recirculation after encapsulation", file=FILE)
def test_recirculation(pushpop: PushPop) -> None:
    """br0 sends from its LOCAL port through a dp_hash select group: the push
    is followed by hash and recirc in the datapath, and the frames still leave
    p0 with correct outer headers (a regression test for outer checksums)."""
    t = pushpop
    geneve_setup(t)
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ROUTES_1
    t.ofctl("add-group", "br0",
            "group_id=1234,type=select,selection_method=dp_hash,bucket=weight=1,output:p0")
    t.ofctl("add-flow", "br0", "in_port=br0,action=group:1234")
    t.ofctl("add-flow", "br0", "in_port=p0,action=normal")
    t.ofctl("add-flow", "int-br", "action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", B6))
    check_trace_and_flow(t, "1.1.2.88", ",hash(l4(0)),recirc(0x1)", ",hash(l4(0)),recirc(0x2)")


@pytest.mark.upstream("tunnel_push_pop - underlay bridge match", file=FILE)
def test_underlay_bridge_match(pushpop: PushPop) -> None:
    """br0 forwards the GRE packet by a rule on its outer L2/L3 fields: that
    rule (and the ARP rule) count it.  Beyond upstream, p0's tx is captured: the
    frame is GRE with key 456 and, seq=true, sequence number 0 (RFC 2890 §2.2:
    the first datagram)."""
    t = pushpop
    t.start(*P0)
    t.vsctl(*INT_BR)
    t.vsctl(*add_port("int-br", "t1", type="gre", options={"remote_ip": "1.1.2.92", "key": 456, "seq": True},
                      ofport_request=3))
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n  int-br:\n    int-br 65534/2: (dummy-internal)\n"
        "    t1 3/3: (gre: key=456, remote_ip=1.1.2.92, seq=true)\n"))
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ROUTES_1
    t.ofctl("add-flow", "br0", "arp,priority=1,action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", B6, dst=BR0_MAC))
    assert t.neigh() == f"{'1.1.2.92':<46}{B6:<20}br0\n"
    t.ofctl("add-flow", "br0", "ip,ip_proto=47,nw_tos=0,eth_src=aa:55:aa:55:00:00,"
            f"eth_dst={B6},ip_src=1.1.2.88,ip_dst=1.1.2.92,priority=99,action=normal")
    t.ofctl("add-flow", "int-br", "action=3")
    t.revalidate()
    assert t.trace_tail("ovs-dummy", "in_port(2),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),"
                        "eth_type(0x0800),ipv4(src=1.1.3.88,dst=1.1.3.112,proto=17,tos=0,"
                        "ttl=64,frag=no),udp(src=51283,dst=4789)") == (
        "Datapath actions: tnl_push(tnl_port(3),header(size=46,type=3,eth(dst=f8:bc:12:44:34:b6,"
        "src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,"
        "ttl=64,frag=0x4000),gre((flags=0x3000,proto=0x6558),key=0x1c8,seq=0x0)),"
        "out_port(100)),1\n")
    t.vsctl(*set_interface("p0", options={"tx_pcap": "p0.pcap"}))  # beyond upstream
    t.capture("p0", "p0.pcap", combined=False)
    packet = bytes.fromhex(PACKET)
    t.receive("int-br", PACKET)
    spec = TunnelSpec("gre", "1.1.2.88", "1.1.2.92", BR0_MAC, B6, key=456, seq=True)
    sent = t.expect("p0", model.encapsulate(packet, spec, seq=0), "GRE with seq", [packet])
    assert [len(f) for f in sent] == [60]  # the rule's n_bytes below

    def flows() -> str:
        out = t.ofctl("dump-flows", "br0").stdout
        return "".join(ln + "\n" for ln in sorted(ofctl_strip(out).splitlines()))
    t.settle(flows, (
        " n_packets=1, n_bytes=42, priority=1,arp actions=NORMAL\n"
        " n_packets=1, n_bytes=60, priority=99,ip,dl_src=aa:55:aa:55:00:00,"
        "dl_dst=f8:bc:12:44:34:b6,nw_src=1.1.2.88,nw_dst=1.1.2.92,nw_proto=47,nw_tos=0 "
        "actions=NORMAL\nNXST_FLOW reply:\n"), "br0's rules to count the packets")
    t.finish()
