"""tunnel-push-pop-ipv6.at: SRv6, ip6gre, ip6erspan, local_ip, recirculation.

Upstream's checks, in its order, then the frames p0 sends against the model:
the Neighbor Solicitations (RFC 4861), SRv6 H.Encaps frames (RFC 8754 SRH,
RFC 8986 §5.1) with each flow label mode, and Geneve over IPv6 with its UDP
checksum (on by default over IPv6) computed in full by the model where
upstream masks it.  The SRv6 case also captures what int-br1..3 received
(rxq_pcap, beyond upstream): the packets upstream describes as ODP flows,
which are the model's input.
"""
from __future__ import annotations

import re
import time

import pytest

from datapath import model
from datapath.model.decap import pop
from datapath.model.neigh import neighbor_solicitation
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags
from fixtures.tunnel_push_pop import pushpop_frames as F
from fixtures.tunnel_push_pop.pushpop import (
    BR0_MAC,
    INT_BR,
    P0,
    PushPop,
    erspan_timestamp,
    neigh_advert,
    port_rx,
)
from harness.filters import strip_ufid, strip_used
from harness.vsctl import set_interface

FILE = "tunnel-push-pop-ipv6.at"
B6, B7 = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:b7"
ROUTES_46 = ("Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n"
             "Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n"
             "Cached: 2001:ca00::/24 dev br0 SRC 2001:cafe::88\n"
             "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
ICMP_FROM_INT_BR = ("in_port(2),eth(src=aa:55:aa:55:00:00,dst=f8:bc:12:ff:ff:ff),"
                    "eth_type(0x0800),ipv4(src=1.1.3.92,dst=1.1.3.88,proto=1,tos=0,ttl=64,"
                    "frag=no),icmp(type=0,code=0)")
TO_INT = ("in_port(2),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:01),eth_type(0x0800),"
          "ipv4(src=1.1.3.88,dst=1.1.3.112,proto=47,tos=0,ttl=64,frag=no)")
POP_GRE = ("in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x86dd),"
           "ipv6(src=2001:cafe::92,dst=2001:cafe::88,label=0,proto=47,tclass=0x0,hlimit=64)")
IP6 = "ipv6(src=2001:cafe::88,dst={dst},label=0,proto={p},tclass=0x0,hlimit=64)"


def tcp_flows(port: int) -> list[str]:
    """The four packets of each SRv6 round: IPv4 and IPv6 TCP to two hosts."""
    head = f"in_port({port}),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),"
    return [head + "eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,tos=0,ttl=64,"
            "frag=no),tcp(src=100,dst=200),tcp_flags(0x001)",
            head + "eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.3,proto=6,tos=0,ttl=64,"
            "frag=no),tcp(src=100,dst=200),tcp_flags(0x001)",
            head + "eth_type(0x86dd),ipv6(src=2001:beef::1,dst=2001:beef::2,label=2,proto=6,"
            "tclass=0x0,hlimit=64),tcp(src=100,dst=200),tcp_flags(0x001)",
            head + "eth_type(0x86dd),ipv6(src=2001:beef::1,dst=2001:beef::3,label=3,proto=6,"
            "tclass=0x0,hlimit=64),tcp(src=100,dst=200),tcp_flags(0x001)"]


def label(frame: bytes) -> int:
    return int.from_bytes(frame[14:18], "big") & 0xFFFFF


@pytest.mark.upstream("tunnel_push_pop_ipv6 - srv6", file=FILE)
def test_srv6(pushpop: PushPop) -> None:
    """Three SRv6 ports, flow label copy, zero and compute: upstream's label
    checks (copied labels 0, 0, 2, 3; all zero; four distinct computed labels,
    one per flow whatever its TCP flags or inner label), and every frame in
    full: outer IPv6 to the segment with next header 43, the SRH (routing type
    4, segments left 0, the one segment, next header 4 or 41) and the inner IP
    packet without its Ethernet header."""
    t = pushpop
    t.start(*P0, "options:pcap=p0.pcap")
    t.capture("p0", "p0.pcap", combined=True)
    for n in (1, 2, 3):
        t.vsctl("add-br", f"int-br{n}", "--", "set", "bridge", f"int-br{n}",
                "datapath_type=dummy")
    modes = {1: "copy", 2: "zero", 3: "compute"}
    for n, mode in modes.items():
        t.vsctl("add-port", f"int-br{n}", f"t{n}", "--", "set", "Interface", f"t{n}",
                "type=srv6", f"options:remote_ip=2001:cafe::9{n}", f"ofport_request={n + 1}",
                f"options:srv6_flowlabel={mode}")
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/24")
    assert t.routes() == ("Cached: 2001:ca00::/24 dev br0 SRC 2001:cafe::88\n"
                          "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
    for n in (1, 2, 3):
        t.ok("tnl/neigh/set", "br0", f"2001:cafe::9{n}", f"aa:55:aa:55:00:0{n}")
    t.ofctl("add-flow", "br0", "action=1")
    for n in (1, 2, 3):
        t.ofctl("add-flow", f"int-br{n}", f"action={n + 1}")
    rx = {}
    for n in (1, 2, 3):  # beyond upstream: what each int-br received
        t.vsctl(*set_interface(f"int-br{n}", options={"rxq_pcap": f"int-br{n}-rx.pcap"}))
        rx[n] = t.capture(f"int-br{n}", f"int-br{n}-rx.pcap", combined=False, rx_only=True)

    def send(n: int, flows: list[str]) -> list[int]:
        seen = len(rx[n].frames())
        for flow in flows:
            t.receive(f"int-br{n}", flow)
        inner = rx[n].frames()[seen:]
        got = t.peek("p0", len(flows))
        spec = TunnelSpec("srv6", "2001:cafe::88", f"2001:cafe::9{n}", BR0_MAC,
                          f"aa:55:aa:55:00:0{n}", key=None, flow_label=modes[n])
        out = model.Expected(frames=[])
        for frame, sent in zip(inner, got):
            out.extend(model.encapsulate(frame, spec, flow_label=label(sent)))
        t.expect("p0", out, f"SRv6 flow label {modes[n]}", inner)
        return [label(f) for f in got]

    def parsed(n: int) -> list[str]:
        """The flow labels of p0's last N frames.

        `ovs-ofctl parse-pcap p0.pcap | tail -n N | grep -o 'ipv6_label=0x[0-9a-f]*'`
        """
        out = t.ofctl("parse-pcap", "p0.pcap").stdout.splitlines()[-n:]
        return [m for ln in out for m in re.findall(r"ipv6_label=0x[0-9a-f]*", ln)]

    labels = send(1, tcp_flows(2))
    assert sorted(parsed(4)) == ["ipv6_label=0x00000"] * 2 + ["ipv6_label=0x00002",
                                                               "ipv6_label=0x00003"]
    assert sorted(labels) == [0, 0, 2, 3]
    assert send(2, tcp_flows(3)) == [0, 0, 0, 0]
    assert parsed(4) == ["ipv6_label=0x00000"] * 4
    assert len(set(send(3, tcp_flows(4)))) == 4
    assert len(set(parsed(4))) == 4
    flows = tcp_flows(4)
    assert len(set(send(3, [flows[0], flows[0].replace("0x001", "0x002")]))) == 1
    assert len(set(parsed(2))) == 1
    assert len(set(send(3, [flows[2], flows[2].replace("label=2", "label=3")
                            .replace("0x001", "0x002")]))) == 1
    assert len(set(parsed(2))) == 1
    t.finish()


def int_br_with(t: PushPop, *ports: str) -> None:
    t.start(*P0)
    t.vsctl(*INT_BR)
    t.vsctl(*ports)


def resolve(t: PushPop, targets: tuple[str, ...]) -> None:
    """p0 captures; a packet flooded from int-br makes br0 solicit the targets."""
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/24")
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes() == ROUTES_46
    t.ofctl("add-flow", "br0", "action=normal")
    t.vsctl("--", *set_interface("p0", options={"pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=True)
    t.receive("int-br", ICMP_FROM_INT_BR)
    t.expect_requests("p0", [neighbor_solicitation(BR0_MAC, "2001:cafe::88", ip)
                             for ip in targets])


@pytest.mark.upstream("tunnel_push_pop_ipv6 - ip6gre", file=FILE)
def test_ip6gre(pushpop: PushPop) -> None:
    """The solicitation for the remote, the learned neighbour, the GRE pop and
    the ip6gre push header (no key, no checksum)."""
    t = pushpop
    int_br_with(t, "add-port", "int-br", "t2", "--", "set", "Interface", "t2", "type=ip6gre",
                "options:remote_ip=2001:cafe::92", "ofport_request=2",
                "options:packet_type=legacy_l2")
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n  int-br:\n    int-br 65534/2: (dummy-internal)\n"
        "    t2 2/6: (ip6gre: remote_ip=2001:cafe::92)\n"))
    resolve(t, ("2001:cafe::92",))
    t.receive("p0", neigh_advert("2001:cafe::92", B6))
    assert t.neigh("tnl/arp/show") == f"{'2001:cafe::92':<46}{B6:<20}br0\n"
    assert t.tnl_ports() == "Listening ports:\nip6gre_sys (6) ref_cnt=1\n"
    assert t.trace_tail("ovs-dummy", POP_GRE) == "Datapath actions: tnl_pop(6)\n"
    t.ofctl("add-flow", "int-br", "action=2")
    assert t.trace_tail("ovs-dummy", TO_INT) == (
        "Datapath actions: tnl_push(tnl_port(6),header(size=58,type=109,"
        f"eth(dst={B6},src=aa:55:aa:55:00:00,dl_type=0x86dd),"
        + IP6.format(dst="2001:cafe::92", p=47)
        + ",gre((flags=0x0,proto=0x6558))),out_port(100)),1\n")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop_ipv6 - ip6erspan", file=FILE)
def test_ip6erspan(pushpop: PushPop) -> None:
    """Two ip6erspan ports (v1 and v2): solicitations, learned neighbours, the
    pop and both push headers, and v1/v2 decapsulation into the right port
    (the byte counts being the model's popped inner frames)."""
    t = pushpop
    int_br_with(t, "add-port", "int-br", "t2", "--", "set", "Interface", "t2",
                "type=ip6erspan", "options:remote_ip=2001:cafe::92", "options:key=123",
                "options:erspan_ver=1", "options:erspan_idx=3", "ofport_request=2",
                "--", "add-port", "int-br", "t3", "--", "set", "Interface", "t3",
                "type=ip6erspan", "options:remote_ip=2001:cafe::93", "options:key=567",
                "options:erspan_ver=2", "options:erspan_dir=1", "options:erspan_hwid=0x7",
                "ofport_request=3")
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n  int-br:\n    int-br 65534/2: (dummy-internal)\n"
        "    t2 2/6: (ip6erspan: erspan_idx=0x3, erspan_ver=1, key=123, "
        "remote_ip=2001:cafe::92)\n"
        "    t3 3/6: (ip6erspan: erspan_dir=1, erspan_hwid=0x7, erspan_ver=2, key=567, "
        "remote_ip=2001:cafe::93)\n"))
    resolve(t, ("2001:cafe::92", "2001:cafe::93"))
    t.receive("p0", neigh_advert("2001:cafe::92", B6))
    t.receive("p0", neigh_advert("2001:cafe::93", B7))
    assert t.neigh("tnl/arp/show") == (f"{'2001:cafe::92':<46}{B6:<20}br0\n"
                                       f"{'2001:cafe::93':<46}{B7:<20}br0\n")
    assert t.tnl_ports() == "Listening ports:\nip6erspan_sys (6) ref_cnt=2\n"
    assert t.trace_tail("ovs-dummy", POP_GRE) == "Datapath actions: tnl_pop(6)\n"
    for verb, flow, size, mac, dst, erspan in (
            ("add-flow", "action=2", 70, B6, "2001:cafe::92", "ver=1,sid=0x7b,idx=0x3"),
            ("mod-flows", "action=3", 74, B7, "2001:cafe::93", "ver=2,sid=0x237,dir=1,hwid=0x7")):
        t.ofctl(verb, "int-br", flow)
        assert t.trace_tail("ovs-dummy", TO_INT) == (
            f"Datapath actions: tnl_push(tnl_port(6),header(size={size},type=108,"
            f"eth(dst={mac},src=aa:55:aa:55:00:00,dl_type=0x86dd),"
            + IP6.format(dst=dst, p=47) + f",erspan({erspan})),out_port(100)),1\n")
    t.appctl("vlog/set", "dbg")
    for frames, ofport, upstream in (([F.ERSPAN6_1] * 2, 2, 196), ([F.ERSPAN6_2], 3, 98)):
        inner = pop(bytes.fromhex(frames[0]), RxFlags()).inner
        assert inner is not None and len(frames) * len(inner) == upstream
        before = time.time()
        for frame in frames:
            t.receive("p0", frame)
        if ofport == 2:
            # Not in upstream: int-br's flow (action=3) sends what t2 decapsulated
            # into t3, ERSPAN v2 to 2001:cafe::93: session 0x237's first two
            # datagrams, sequence numbers 0 and 1.
            got = t.peek("p0", 2)
            t3 = TunnelSpec("erspan", "2001:cafe::88", "2001:cafe::93", BR0_MAC, B7, key=567,
                            erspan_ver=2, erspan_dir=1, erspan_hwid=7)
            out = model.Expected(frames=[])
            for seq, frame in enumerate(got):
                ts = erspan_timestamp(frame, 14 + 40, before, time.time())
                out.extend(model.encapsulate(inner, t3, seq=seq, timestamp=ts))
            t.expect("p0", out, "decapsulated from t2, into t3", [inner] * 2)
        t.settle(lambda: t.port_line("int-br", ofport),
                 port_rx(ofport, len(frames), len(frames) * len(inner)), f"port {ofport} rx")
    t.finish()


def geneve6_push(src: str, tail: str) -> str:
    return ("tnl_push(tnl_port(6081),header(size=70,type=5,eth(dst=f8:bc:12:44:34:b6,"
            "src=aa:55:aa:55:00:00,dl_type=0x86dd),"
            + IP6.format(dst="2001:cafe::92", p=17).replace("2001:cafe::88", src)
            + ",udp(src=0,dst=6081,csum=0xffff),geneve(vni=0x7b)),out_port(100))" + tail)


def geneve6_case(t: PushPop, local: str, traced: str, installed: str) -> None:
    """After the Neighbor Advertisement: the trace, two packets into Geneve over
    IPv6 (outer UDP checksum computed, as IPv6 tunnels default to), the flow."""
    t.receive("p0", "recirc_id(0)," + neigh_advert("2001:cafe::92", B6))
    lines = [ln for ln in t.trace("int-br", "in_port=LOCAL").splitlines()
             if "tunnel" in ln or "actions" in ln]
    assert lines == ["     -> output to native tunnel",
                     "     -> tunneling to 2001:cafe::92 via br0",
                     f"     -> tunneling from aa:55:aa:55:00:00 {local} to {B6} 2001:cafe::92",
                     "Datapath actions: " + geneve6_push(local, traced)]
    t.vsctl("--", *set_interface("p0", options={"tx_pcap": "p0.pcap"}))
    t.capture("p0", "p0.pcap", combined=False)
    packet = bytes.fromhex("50540000000a5054000000091234")
    spec = TunnelSpec("geneve", local, "2001:cafe::92", BR0_MAC, B6, key=123)
    ports = []
    for title in ("miss", "datapath flow"):
        t.receive("int-br", packet.hex())
        ports.append(t.sport(t.peek("p0")[0]))
        t.expect("p0", model.encapsulate(packet, spec, udp_src=ports[-1]), title, [packet])
    assert ports[0] == ports[1]
    flows = [ln for ln in t.appctl("dpctl/dump-flows").stdout.splitlines() if "tnl_push" in ln]
    assert strip_used(strip_ufid("\n".join(flows))) == (
        "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:09,"
        "dst=50:54:00:00:00:0a),eth_type(0x1234), packets:1, bytes:14, used:0.0s, "
        f"actions:{geneve6_push(local, installed)}\n")
    t.finish()


def geneve6_setup(t: PushPop, local_ip: str = "") -> None:
    t.start(*P0)
    t.appctl("vlog/set", "dpif_netdev:dbg")
    t.vsctl(*INT_BR)
    t.vsctl("add-port", "int-br", "t2", "--", "set", "Interface", "t2", "type=geneve",
            *((f"options:local_ip={local_ip}",) if local_ip else ()),
            "options:remote_ip=2001:cafe::92", "options:key=123", "ofport_request=2")


@pytest.mark.upstream("tunnel_push_pop_ipv6 - local_ip configuration", file=FILE)
def test_local_ip6(pushpop: PushPop) -> None:
    """options:local_ip picks br0's second IPv6 address as the outer source."""
    t = pushpop
    geneve6_setup(t, "2001:beef::88")
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/64")
    t.ok("netdev-dummy/ip6addr", "br0", "2001:beef::88/64")
    assert t.routes() == ("Cached: 2001:beef::/64 dev br0 SRC 2001:beef::88\n"
                          "Cached: 2001:beef::88/128 dev br0 SRC 2001:beef::88 local\n"
                          "Cached: 2001:cafe::/64 dev br0 SRC 2001:cafe::88\n"
                          "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.ofctl("add-flow", "int-br", "action=normal")
    geneve6_case(t, "2001:beef::88", ",1", ",1")


@pytest.mark.upstream("tunnel_push_pop_ipv6 - recirculation after encapsulation", file=FILE)
def test_recirculation6(pushpop: PushPop) -> None:
    """br0's LOCAL port sends through a dp_hash select group: push, hash and
    recirc, and the frames leave p0 with a correct outer UDP checksum."""
    t = pushpop
    geneve6_setup(t)
    t.ok("netdev-dummy/ip6addr", "br0", "2001:cafe::88/64")
    assert t.routes() == ("Cached: 2001:cafe::/64 dev br0 SRC 2001:cafe::88\n"
                          "Cached: 2001:cafe::88/128 dev br0 SRC 2001:cafe::88 local\n")
    t.ofctl("add-group", "br0",
            "group_id=1234,type=select,selection_method=dp_hash,bucket=weight=1,output:p0")
    t.ofctl("add-flow", "br0", "in_port=br0,action=group:1234")
    t.ofctl("add-flow", "br0", "in_port=p0,action=normal")
    t.ofctl("add-flow", "int-br", "action=normal")
    geneve6_case(t, "2001:cafe::88", ",hash(l4(0)),recirc(0x1)", ",hash(l4(0)),recirc(0x2)")
