"""system-traffic.at's conntrack fragmentation tests (and the conntrack
tests after them: resubmit to ct twice, zone timeout policies, SCTP SNAT),
as `make check-system-userspace` (and check-system-tso) run them: upstream's
namespaces on br0, flow table, fragments (pings larger than the MTU, or
upstream's own fragments by packet-out or sendpkt.py) and checks (ping |
FORMAT_PING, dpctl/dump-conntrack | FORMAT_CT, dpctl/ipf-get-status, the
fragment lists).  The ipf macros of system-userspace-macros.at are in
fixtures/system_userspace/system_ct_frag.py.

Beyond upstream, every frame that crosses br0 goes through the model's
connection tracker (fixtures/system_userspace/system_ct.py's CtWire), fragments included: a ct on
a fragment holds it until its datagram is complete, tracks the reassembled
packet, and what it outputs is refragmented (ovs-actions(7) ct;
datapath/model/ipfrag.py after RFC 791 §3.2, RFC 8200 §4.5, RFC 5722).  Where
nothing crosses (the packet-out tests), OVS's table is compared with the
model's as well as with upstream's.  Out of the model's reach, and said so
where it matters: ipf's own limits (the 65535-byte datagram it will not send,
its counters), timeouts (the expiry is put in the model's timeline where the
dump shows it), SCTP.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath import model
from datapath.model.actions import Action
from datapath.model.conntrack import EST, NEW, RPL, TRK, Conntrack, Ct, Nat
from datapath.model.ipfrag import Reassembly, parse
from datapath.model.packet import Packet
from datapath.offloads import RxFlags, TxOffloads
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports, dump_ct
from fixtures.system_userspace.system_ct_frag import (
    V4_FIRST,
    V4_LAST,
    V4_LAST_OVERLAP,
    V6_EXT2_FIRST,
    V6_EXT2_LAST,
    V6_EXT_FIRST,
    V6_EXT_LAST,
    V6_FIRST,
    V6_FIRST_INCOMPLETE,
    V6_LAST,
    Device,
    bundle,
    check_frag_large,
    check_fragmentation_fail,
    check_fragmentation_pass,
    far_end,
    modify_fragmentation,
    set_min_frag_size,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream, wait_dad
from fixtures.upstream_system import format_ping
from harness.filters import ofctl_strip
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

ARP, IPV4, IPV6 = 0x0806, 0x0800, 0x86DD
ICMP, UDP, ICMPV6 = 1, 17, 58
LOST = re.compile(r"^(\d+) packets transmitted, 0 received, 100% packet loss, time 0ms\n$")
ONE_OK = "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
Out = list[tuple[str | None, list[Action]]]


def lost(t: Traffic, ns, dst: str, six: bool = False) -> int:  # type: ignore[no-untyped-def]
    """NS_CHECK_EXEC([ns], [ping -s 1600 -q -c 1 -i 0.3 -w 2 dst | FORMAT_PING], [0],
    [7 packets transmitted, 0 received, 100% packet loss, time 0ms]): nothing
    answered within ping's 2 s deadline.  How many requests fit in it (7 at
    0.3 s on an idle machine) is the scheduler's: at least 3; returns it."""
    got = t.ping(ns, dst, "-s", "1600", count=1, wait="-w", six=six)
    m = LOST.match(got)
    assert m and int(m.group(1)) >= 3, f"ping {dst}: expected every request lost, got {got!r}"
    return int(m.group(1))


def icmp6_nd(a: Arrival) -> bool:
    """icmp6,icmp_type=135 or 136 (Neighbour Solicitation, Advertisement)."""
    if a.eth_type != IPV6:
        return False
    pkt = Packet.parse(a.frame)
    return pkt.proto == ICMPV6 and pkt.l4 is not None and a.frame[pkt.l4] in (135, 136)


def normal(a: Arrival) -> Out:
    return [(port, []) for port in a.normal()]


def zone9_pipeline(ip: int, proto: int | None) -> Callable[[Arrival], Out]:
    """Upstream's zone-9 table: from port 1 (`proto`, None: any) ct(commit,zone=9),2;
    from port 2 ct(table=0,zone=9), then +trk+est-new to port 1.  ARP (v4) or
    ND (v6) by NORMAL.  A fragment is reassembled in zone 9 by the ct."""
    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP or icmp6_nd(a):
            return normal(a)
        if a.eth_type != ip or (proto is not None and a.ip_proto != proto):
            return []
        if not a.reassemble(9):
            return []  # held by ct until its datagram completes
        if a.ofport == 1:
            return [("ovs-p1", [Ct(a.table, zone=9, commit=True)])]
        st = a.state(9).state
        ok = st & TRK and st & EST and not st & NEW
        return [("ovs-p0" if ok else None, [Ct(a.table, zone=9)])]
    return pipeline


V4_ZONE9 = ["priority=1,action=drop", "priority=10,arp,action=normal",
            "priority=100,in_port=1,icmp,action=ct(commit,zone=9),2",
            "priority=100,in_port=2,ct_state=-trk,icmp,action=ct(table=0,zone=9)",
            "priority=100,in_port=2,ct_state=+trk+est-new,icmp,action=1"]
V6_ZONE9 = ["priority=1,action=drop",
            "priority=10,in_port=1,ipv6,action=ct(commit,zone=9),2",
            "priority=10,in_port=2,ct_state=-trk,ipv6,action=ct(table=0,zone=9)",
            "priority=10,in_port=2,ct_state=+trk+est-new,ipv6,action=1",
            "priority=100,icmp6,icmp_type=135,action=normal",
            "priority=100,icmp6,icmp_type=136,action=normal"]


# ----------------------------------------------------------------------------
# pings through ct(zone=9): plain, expiry


@FLAVOUR
@upstream("conntrack - IPv4 fragmentation")
def test_ipv4_fragmentation(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                            flavour: str) -> None:
    """ICMP from ns0 committed in zone 9, replies let through when established.
    Pings of 1600 and 3200 bytes (2 and 3 fragments each way) are answered;
    ipf then counts 30 v4 fragments accepted and reassembled; a 65507-byte
    ping reassembles to a packet ipf will not send (logged).  Judged, up to
    that ping: ARP, and every fragment, reassembled in zone 9 for the model's
    tracker and refragmented on output (datapath/model/ipfrag.py).  The
    65535-byte datagram ipf refuses to send is OVS's own limit, no protocol
    rule: its fragments are left unjudged."""
    t: Traffic = system_traffic(flavour)
    t.sb.allow_log(r"Unsupported big reassembled v4 packet")
    ns0, ns1 = ct_ports(t)
    add_flows(t, V4_ZONE9)
    wire = CtWire.on(t, request, [ns0, ns1], zone9_pipeline(IPV4, ICMP))
    modify_fragmentation(t)
    t.check_ping(ns0, "10.1.1.2", "-s", "1600")
    t.check_ping(ns0, "10.1.1.2", "-s", "3200")
    check_fragmentation_pass(t)
    assert wire.verify() >= 30 + 2  # the 30 fragments (each reassembled and sent on), ARP
    # rc=1: no reply (upstream's NS_EXEC leaves the exit unchecked; ipf drops it)
    t.run(["ping", "-s", "65507", "-q", "-c", "1", "-W", "0.5", "10.1.1.2"], ns0, rc=1)
    check_frag_large(t, "v4")


@FLAVOUR
@upstream("conntrack - IPv6 fragmentation")
def test_ipv6_fragmentation(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                            flavour: str) -> None:
    """IPv6 from ns0 committed in zone 9, replies let through when
    established, ND by NORMAL.  Pings of 1600 and 3200 bytes are answered; a
    65487-byte one reassembles to a packet ipf will not send (logged).
    Judged, up to that ping: the unfragmented ping6 (OVS_WAIT_UNTIL's) and
    every fragment, reassembled for the model's tracker and refragmented on
    output; the datagram ipf refuses is OVS's limit, left unjudged."""
    t: Traffic = system_traffic(flavour)
    t.sb.allow_log(r"Unsupported big reassembled v6 packet")
    ns0, ns1 = ct_ports(t, six=True)
    add_flows(t, V6_ZONE9)
    wire = CtWire.on(t, request, [ns0, ns1], zone9_pipeline(IPV6, None))
    t.wait_ping6(ns0, "fc00::2")
    t.check_ping(ns0, "fc00::2", "-s", "1600", six=True)
    t.check_ping(ns0, "fc00::2", "-s", "3200", six=True)
    assert wire.verify() >= 30 + 2  # the fragments, the unfragmented ping6 and its reply
    # rc=1: no reply (upstream's NS_EXEC leaves the exit unchecked; ipf drops it)
    t.run(["ping6", "-s", "65487", "-q", "-c", "1", "-W", "0.5", "fc00::2"], ns0, rc=1)
    check_frag_large(t, "v6")


def first_only(ip: int, proto: int | None) -> Callable[[Arrival], Out]:
    """The expiry tests' table: from port 1 only unfragmented packets and
    first fragments (ip_frag=no, ip_frag=first) go to ct(commit,zone=9),2;
    later fragments meet the drop.  A first fragment whose datagram never
    completes stays in ipf: nothing of it leaves (ovs-actions(7), ct: a
    fragment is held until the packet is reassembled)."""
    inner = zone9_pipeline(ip, proto)  # its ct holds the first fragments

    def pipeline(a: Arrival) -> Out:
        frag = parse(a.frame)
        if a.ofport == 1 and a.eth_type == ip and frag is not None and frag.offset:
            return []  # ip_frag=later: the drop, before any ct
        return inner(a)
    return pipeline


@FLAVOUR
@upstream("conntrack - IPv4 fragmentation expiry")
def test_ipv4_fragmentation_expiry(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str) -> None:
    """Only unfragmented packets and first fragments from ns0 reach ct; a
    1600-byte ping's last fragment is dropped, so no request completes and
    every one is lost; ipf holds each first fragment in a list of its own
    (upstream's 7: one per request ping sent, which the scheduler decides).
    Judged: every frame, fragments included: none of the ICMP leaves."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,icmp,ip_frag=no,action=ct(commit,zone=9),2",
                  "priority=100,in_port=1,icmp,ip_frag=first,action=ct(commit,zone=9),2",
                  "priority=100,in_port=2,ct_state=-trk,icmp,action=ct(table=0,zone=9)",
                  "priority=100,in_port=2,ct_state=+trk+est-new,icmp,action=1"])
    wire = CtWire.on(t, request, [ns0, ns1], first_only(IPV4, ICMP))
    modify_fragmentation(t)
    sent = lost(t, ns0, "10.1.1.2")
    check_fragmentation_fail(t, sent)
    assert wire.verify() >= 2  # ARP; the 2 x sent fragments went in, none came out


@FLAVOUR
@upstream("conntrack - IPv6 fragmentation expiry")
def test_ipv6_fragmentation_expiry(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str) -> None:
    """As the IPv4 test, for IPv6 (no ipf check upstream: 'the kernel will
    either crash or everything is OK').  Judged: every frame; the
    unfragmented ping6 goes through, none of the fragmented one leaves."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, six=True)
    add_flows(t, ["priority=1,action=drop",
                  "priority=10,in_port=1,ipv6,ip_frag=first,action=ct(commit,zone=9),2",
                  "priority=10,in_port=1,ipv6,ip_frag=no,action=ct(commit,zone=9),2",
                  "priority=10,in_port=2,ct_state=-trk,ipv6,action=ct(table=0,zone=9)",
                  "priority=10,in_port=2,ct_state=+trk+est-new,ipv6,action=1",
                  "priority=100,icmp6,icmp_type=135,action=normal",
                  "priority=100,icmp6,icmp_type=136,action=normal"])
    wire = CtWire.on(t, request, [ns0, ns1], first_only(IPV6, None))
    t.wait_ping6(ns0, "fc00::2")
    lost(t, ns0, "fc00::2", six=True)
    assert wire.verify() >= 2  # the ping6 and its reply; the fragments went in, none out


# ----------------------------------------------------------------------------
# ct orig match: upstream's UDP fragments by sendpkt.py, then a fragmented ping

V4_ORIG_FIRST = ("50540000000950540000000a0800" "4500058c0001200040113f5c0a0101010a010102"
                 "0001000206 48dd56".replace(" ", "") + "00" * 1392)
V4_ORIG_LAST = "50540000000950540000000a0800" "450000e4000100af401163550a0101010a010102" + "00" * 208
V6_ORIG_FIRST = ("50540000000950540000000a86dd" "6000000005402c40" + "fc00" + "00" * 13 + "01"
                 + "fc00" + "00" * 13 + "02" + "110000019bdb1fa7" "0001000206 48fb56".replace(" ", "")
                 + "00" * 1328)
V6_ORIG_LAST = ("50540000000950540000000a86dd" "6000000001182c40" + "fc00" + "00" * 13 + "01"
                + "fc00" + "00" * 13 + "02" + "110005389bdb1fa7" + "00" * 272)


def type_code(frame: bytes) -> tuple[int, int] | None:
    """An ICMP or ICMPv6 packet's type and code (its ct_tp_src and ct_tp_dst
    as the original direction of a connection it starts, ovs-fields(7))."""
    pkt = Packet.parse(frame)
    at = pkt.outer.payload
    if pkt.proto not in (ICMP, ICMPV6) or at is None or len(frame) < at + 2:
        return None
    return frame[at], frame[at + 1]


def orig_pipeline(ip: int, echo_proto: int, echo: int) -> Callable[[Arrival], Out]:
    """The ct orig match tables: every untracked IP packet to ct(table=0) (zone
    0, where fragments are reassembled); from port 1 a new UDP 1 -> 2
    connection committed, a new echo request (ct_tp_src=echo, ct_tp_dst=0)
    committed and sent to port 2; from port 2 a reply of the echo (IPv6:
    +est+rpl, ct_tp_src=128) to port 1.  ARP or ND by NORMAL."""
    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP or icmp6_nd(a):
            return normal(a)
        if a.eth_type != ip:
            return []
        if not a.reassemble(0):
            return []
        res = a.state(0)
        st, orig = res.state, res.orig
        if not st & TRK or orig is None:
            return [(None, [Ct(a.table)])]
        if a.ofport == 2:
            # the model tracks ICMP echo only, from the request: its
            # ct_tp_src is the request's type
            ok = orig.proto == echo_proto and st & RPL and (ip == IPV4 or st & EST)
            return [("ovs-p0" if ok else None, [Ct(a.table)])]
        if st & NEW and orig.proto == UDP and (orig.sport, orig.dport) == (1, 2):
            return [(None, [Ct(a.table), Ct(a.table, commit=True)])]
        if st & NEW and orig.proto == echo_proto and type_code(a.frame) == (echo, 0):
            return [("ovs-p1", [Ct(a.table), Ct(a.table, commit=True)])]
        return [(None, [Ct(a.table)])]
    return pipeline


def sendpkt(t: Traffic, ns, port: str, frame: str) -> None:  # type: ignore[no-untyped-def]
    """NS_CHECK_EXEC([ns], [$PYTHON3 $srcdir/sendpkt.py port frame]): an AF_PACKET send."""
    from datapath.backends.netns import KernelSide
    side = KernelSide(ns, port)
    t.env.cleanup.defer(f"close {port}", side.close)
    side.send([bytes.fromhex(frame)])


@FLAVOUR
@upstream("conntrack - IPv4 fragmentation with ct orig match")
def test_ipv4_fragmentation_ct_orig_match(system_traffic: Callable[..., Traffic],
                                          request: pytest.FixtureRequest, flavour: str) -> None:
    """Two fragments of a UDP 1 -> 2 datagram (sendpkt.py), then a 1600-byte
    ping: the reassembled packets are tracked and matched on their original
    direction's tuple (ct_nw_proto, ct_tp_src, ct_tp_dst): UDP committed and
    dropped, ICMP committed and sent on, its reply let back.  Both
    connections are in the table.  Judged: every frame, the fragments
    reassembled for the model's tracker (the UDP ones go nowhere)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,ip,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,icmp,ct_state=+rpl,action=1",
                  "priority=100,in_port=1,ip,ct_nw_proto=17,ct_tp_src=1,ct_tp_dst=2,"
                  "ct_state=+new+trk,action=ct(commit)",
                  "priority=100,in_port=1,ip,ct_nw_proto=1,ct_tp_src=8,ct_tp_dst=0,"
                  "ct_state=+new+trk,action=ct(commit),2"])
    wire = CtWire.on(t, request, [ns0, ns1], orig_pipeline(IPV4, ICMP, 8))
    sendpkt(t, ns0, "p0", V4_ORIG_FIRST)
    sendpkt(t, ns0, "p0", V4_ORIG_LAST)
    got = t.ping(ns0, "10.1.1.2", "-s", "1600", count=1, wait_s="1")
    assert got == ONE_OK, f"ping -s 1600 -c 1 10.1.1.2: got {got!r}"
    check_ct(t, "10.1.1.2",
             "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0)\n"
             "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>)\n")
    assert wire.verify() >= 2


@FLAVOUR
@upstream("conntrack - IPv6 fragmentation with ct orig match")
def test_ipv6_fragmentation_ct_orig_match(system_traffic: Callable[..., Traffic],
                                          request: pytest.FixtureRequest, flavour: str) -> None:
    """As the IPv4 test, for IPv6 (ICMPv6 echo: ct_tp_src=128, ct_tp_dst=0;
    the reply +trk+est+rpl with ct_tp_src=128).  Judged as the IPv4 test."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96", "50:54:00:00:00:09", "", "nodad")
    t.add_veth("p1", ns1, "br0", "fc00::2/96", "50:54:00:00:00:0a", "", "nodad")
    add_flows(t, ["priority=1,action=drop",
                  "priority=10,ipv6,ct_state=-trk,action=ct(table=0)",
                  "priority=10,in_port=2,ipv6,ct_tp_src=128,ct_state=+trk+est+rpl,action=1",
                  "priority=10,in_port=1,ipv6,ct_nw_proto=17,ct_tp_src=1,ct_tp_dst=2,"
                  "ct_state=+new+trk,action=ct(commit)",
                  "priority=10,in_port=1,ipv6,ct_nw_proto=58,ct_tp_src=128,ct_tp_dst=0,"
                  "ct_state=+new+trk,action=ct(commit),2",
                  "priority=100,icmp6,icmp_type=135,action=normal",
                  "priority=100,icmp6,icmp_type=136,action=normal"])
    wire = CtWire.on(t, request, [ns0, ns1], orig_pipeline(IPV6, ICMPV6, 128))
    sendpkt(t, ns0, "p0", V6_ORIG_FIRST)
    sendpkt(t, ns0, "p0", V6_ORIG_LAST)
    got = t.ping(ns0, "fc00::2", "-s", "1600", count=1, wait_s="1", six=True)
    assert got == ONE_OK, f"ping -s 1600 -c 1 fc00::2: got {got!r}"
    check_ct(t, "fc00::2",
             "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=<cleared>,type=128,code=0),"
             "reply=(src=fc00::2,dst=fc00::1,id=<cleared>,type=129,code=0)\n"
             "udp,orig=(src=fc00::1,dst=fc00::2,sport=<cleared>,dport=<cleared>),"
             "reply=(src=fc00::2,dst=fc00::1,sport=<cleared>,dport=<cleared>)\n")
    assert wire.verify() >= 2



# ----------------------------------------------------------------------------
# upstream's fragments by packet-out (bundle.txt), each to ct(commit[,zone=N])

V4_UDP = ("udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
          "reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>)\n")
V6_UDP = ("udp,orig=(src=fc00::1,dst=fc00::2,sport=<cleared>,dport=<cleared>),"
          "reply=(src=fc00::2,dst=fc00::1,sport=<cleared>,dport=<cleared>),zone={}\n")
# title -> (IPv6?, the fragments in bundle.txt's order, zone (0: ct(commit)), the table after)
BUNDLES: dict[str, tuple[bool, tuple[str, ...], int, str]] = {
    "conntrack - IPv4 fragmentation incomplete reassembled packet":
        (False, (V4_FIRST,), 0, ""),
    "conntrack - IPv4 fragmentation with fragments specified":
        (False, (V4_FIRST, V4_LAST), 0, V4_UDP),
    "conntrack - IPv4 fragmentation out of order":
        (False, (V4_LAST, V4_FIRST), 0, V4_UDP),
    "conntrack - IPv4 fragmentation overlapping fragments by 1 octet":
        (False, (V4_FIRST, V4_LAST_OVERLAP), 0, ""),
    "conntrack - IPv4 fragmentation overlapping fragments by 1 octet out of order":
        (False, (V4_LAST_OVERLAP, V4_FIRST), 0, ""),
    "conntrack - IPv6 fragmentation incomplete reassembled packet":
        (True, (V6_FIRST_INCOMPLETE,), 0, ""),
    "conntrack - IPv6 fragmentation with fragments specified":
        (True, (V6_FIRST, V6_LAST), 1, V6_UDP.format(1)),
    "conntrack - IPv6 fragmentation out of order":
        (True, (V6_LAST, V6_FIRST), 2, V6_UDP.format(2)),
    "conntrack - IPv6 fragmentation, multiple extension headers":
        (True, (V6_EXT_FIRST, V6_EXT_LAST), 3, V6_UDP.format(3)),
    "conntrack - IPv6 fragmentation, multiple extension headers + out of order":
        (True, (V6_EXT_LAST, V6_EXT_FIRST), 4, V6_UDP.format(4)),
    "conntrack - IPv6 fragmentation, multiple extension headers 2":
        (True, (V6_EXT2_FIRST, V6_EXT2_LAST), 5, V6_UDP.format(5)),
    "conntrack - IPv6 fragmentation, multiple extension headers 2 + out of order":
        (True, (V6_EXT2_LAST, V6_EXT2_FIRST), 6, V6_UDP.format(6)),
}


def model_table(frags: tuple[str, ...], zone: int) -> str:
    """What the model's ct(commit,zone=Z) makes of the fragments, in their
    order: each reassembled datagram committed (datapath/model/ipfrag.py),
    dumped as FORMAT_CT shows a UDP connection."""
    table, ipf = Conntrack(), Reassembly()
    for frag in frags:
        whole = ipf.add(bytes.fromhex(frag), zone)
        if whole is not None:
            model.forward(whole.frame, [Ct(table, zone=zone, commit=True)], TxOffloads(),
                          RxFlags())
    lines = []
    for conn in table.conns:
        assert conn.orig.proto == UDP and conn.committed, conn
        lines.append(f"udp,orig=(src={conn.orig.src},dst={conn.orig.dst},sport=<cleared>,"
                     f"dport=<cleared>),reply=(src={conn.reply.src},dst={conn.reply.dst},"
                     f"sport=<cleared>,dport=<cleared>){f',zone={zone}' if zone else ''}\n")
    return "".join(sorted(lines))


def bundle_id(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.removeprefix("conntrack - ").lower()).strip("-")


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(title, marks=upstream(title), id=bundle_id(title))
                                   for title in BUNDLES])
def test_fragments_by_packet_out(system_traffic: Callable[..., Traffic], flavour: str,
                                 title: str) -> None:
    """Upstream's fragments of one UDP 1 -> 2 datagram, put through
    ct(commit) by packet-out in one bundle (ipf's minimum fragment size
    lowered to 400 bytes first): a datagram whose fragments all came, in
    order or not, behind IPv6 extension headers or not, is tracked and
    committed as one UDP connection (RFC 791 §3.2, RFC 8200 §4.5); one
    missing its last fragment is not; nor one whose fragments overlap (RFC
    5722 for IPv6; the model applies it to IPv4 too, RFC 1858 §4).  Nothing
    is output, so no frame crosses OVS: the table is the verdict, upstream's
    and the model's (the fragments through datapath/model/ipfrag.py and its
    tracker)."""
    t: Traffic = system_traffic(flavour)
    six, frags, zone, table = BUNDLES[title]
    set_min_frag_size(t)
    ct_ports(t, six=six)
    action = f"ct(commit, zone={zone})" if zone else "ct(commit)"
    bundle(t, [f"packet-out in_port=1, packet={f},  actions={action}" for f in frags])
    dst = "fc00::2" if six else "10.1.1.2"
    zone_arg = (f"zone={zone}",) if zone else ()
    check_ct(t, dst, table, *zone_arg)
    want = model_table(frags, zone)
    assert dump_ct(t, dst, *zone_arg) == want, f"the model's table:\n{want}"
    if title == "conntrack - IPv4 fragmentation incomplete reassembled packet":
        # upstream then sends the last fragment, so that ipf does not hold the first
        t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0",
                   f"in_port=1, packet={V4_LAST}, actions=ct(commit)")


# ----------------------------------------------------------------------------
# NAT of a fragmented ping


def nat_pipeline(a: Arrival) -> Out:
    """table 0: untracked IP to ct(table=1,nat); table 1: +new from ovs-p0
    ct(commit,nat(src=10.1.1.1)) to ovs-p1, +est either way across."""
    if a.eth_type == ARP:
        return normal(a)
    if a.eth_type != IPV4 or not a.reassemble(0):
        return []
    st = a.state(0, Nat()).state
    first = Ct(a.table, nat=Nat())
    if a.ofport == 1 and st & TRK and st & NEW:
        return [("ovs-p1", [first, Ct(a.table, commit=True, nat=Nat.of("src", "10.1.1.1"))])]
    if st & TRK and st & EST:
        return [("ovs-p1" if a.ofport == 1 else "ovs-p0", [first])]
    return [(None, [first])]


@FLAVOUR
@upstream("conntrack - IPv4 Fragmentation + NAT")
def test_ipv4_fragmentation_nat(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """A 4500-byte ping (4 fragments, DF off) from ns0 to 10.1.1.2 (ns1's
    loopback, routed by ns1's address 10.2.1.2): reassembled, SNATed to
    10.1.1.1, fragmented again, answered; the reply un-NATed.  Upstream's
    tcpdumps are 'solely for debugging': the captures here are the wire's.
    Judged: ARP, and every fragment: reassembled, tracked and NATed by the
    model, refragmented on output (ovs-actions(7) ct; RFC 791 §3.2)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, addrs=("10.2.1.1/24", "10.2.1.2/24"))
    t.ip("addr", "add", "10.1.1.2/32", "dev", "lo", ns=ns1)
    t.ip("route", "add", "10.1.1.0/24", "via", "10.2.1.2", ns=ns0)
    t.ip("route", "add", "10.1.1.0/24", "via", "10.2.1.1", ns=ns1)
    path = t.sb.rundir / "flows.txt"
    path.write_text("table=0,arp,actions=normal\n"
                    "table=0,ct_state=-trk,ip,in_port=ovs-p0, actions=ct(table=1, nat)\n"
                    "table=0,ct_state=-trk,ip,in_port=ovs-p1, actions=ct(table=1, nat)\n"
                    "table=1,ct_state=+trk+new,ip,in_port=ovs-p0, "
                    "actions=ct(commit, nat(src=10.1.1.1)),ovs-p1\n"
                    "table=1,ct_state=+trk+est,ip,in_port=ovs-p0, actions=ovs-p1\n"
                    "table=1,ct_state=+trk+est,ip,in_port=ovs-p1, actions=ovs-p0\n")
    t.sb.ofctl("add-flows", "br0", str(path))
    wire = CtWire.on(t, request, [ns0, ns1], nat_pipeline)
    got = format_ping(t.run(["ping", "-c", "1", "10.1.1.2", "-M", "dont", "-s", "4500"], ns0,
                            timeout=60).stdout)
    assert got == "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n", got
    assert wire.verify() >= 2


# ----------------------------------------------------------------------------
# resubmit to ct twice


@FLAVOUR
@upstream("conntrack - resubmit to ct multiple times")
def test_resubmit_to_ct_multiple_times(system_traffic: Callable[..., Traffic],
                                       request: pytest.FixtureRequest, flavour: str) -> None:
    """An IP packet from port 1 goes through ct twice (resubmit to tables 1
    and 2, each ct(table=3), table 3 drops): each rule counts it once, table
    3 twice; the ping is lost.  Judged: both lookups, nothing of the ping
    leaving; ARP by NORMAL."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    path = t.sb.rundir / "flows.txt"
    path.write_text("table=0,priority=150,arp,action=normal\n"
                    "table=0,priority=100,ip,in_port=1,action=resubmit(,1),resubmit(,2)\n\n"
                    "table=1,ip,action=ct(table=3)\ntable=2,ip,action=ct(table=3)\n\n"
                    "table=3,ip,action=drop\n")
    t.sb.ofctl("add-flows", "br0", str(path))

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return normal(a)
        if a.eth_type == IPV4 and a.ofport == 1:
            return [(None, [Ct(a.table), Ct(a.table)])]
        return []

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    # rc=1: table 3 drops the ping, so it gets no reply
    got = format_ping(t.run(["ping", "-q", "-c", "1", "10.1.1.2"], ns0, timeout=60, rc=1).stdout)
    assert got == "1 packets transmitted, 0 received, 100% packet loss, time 0ms\n", got
    want = (" n_packets=1, n_bytes=98, priority=100,ip,in_port=1 actions=resubmit(,1),resubmit(,2)\n"
            " n_packets=2, n_bytes=84, priority=150,arp actions=NORMAL\n"
            " table=1, n_packets=1, n_bytes=98, ip actions=ct(table=3)\n"
            " table=2, n_packets=1, n_bytes=98, ip actions=ct(table=3)\n"
            " table=3, n_packets=2, n_bytes=196, ip actions=drop\n"
            "NXST_FLOW reply:\n")

    def dump() -> str:
        out = ofctl_strip(t.sb.ofctl("dump-flows", "br0").stdout)
        return "".join(f"{line}\n" for line in sorted(out.splitlines()))
    # upstream dumps once the ping is over; the counters reach ofproto when a
    # revalidator next pushes the datapath flows' stats: wait for that event
    wait_until(lambda: dump() == want, 10, what=f"ovs-ofctl dump-flows br0 to read\n{want}",
               describe=dump)
    assert wire.verify() >= 2


# ----------------------------------------------------------------------------
# zone-based timeout policy

UDP_OUT = "50540000000a50540000000908004500001c000000000011a4cd0a0101010a0101020001000200080000"
ZONE5 = ("icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
         "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0),zone=5\n"
         "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
         "reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),zone=5\n")


@FLAVOUR
@upstream("conntrack - zone-based timeout policy")
def test_zone_based_timeout_policy(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str) -> None:
    """ICMP and UDP through ct(zone=5): with the default timeouts the
    connections stay; with zone 5's policy at 1 s (udp_first, icmp_reply; 255
    other zones' policies besides) they expire, and come back with new
    traffic; with the policy deleted they stay again.  Upstream's sleeps
    become waits on the table: present at once after the traffic, gone once
    expired (the event).  Judged: every frame through the model's tracker,
    the packet-outs as arrivals on port 1; the model has no timeouts, so each
    expiry is put in its timeline where the dump showed it."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,ip,action=ct(zone=5, table=1)",
                  "priority=100,in_port=2,ip,action=ct(zone=5, table=1)",
                  "table=1,in_port=2,ip,ct_state=+trk+est,action=1",
                  "table=1,in_port=1,ip,ct_state=+trk+new,action=ct(commit,zone=5),2",
                  "table=1,in_port=1,ip,ct_state=+trk+est,action=2"])

    wire = CtWire.on(t, request, [ns0, ns1])

    def traffic() -> None:
        t.check_ping(ns0, "10.1.1.2")
        wire.packet_out("ovs-p0", UDP_OUT, "-O", "OpenFlow13", in_port="1")

    def expired() -> None:
        """sleep 6, then AT_CHECK([dpctl/dump-conntrack | FORMAT_CT(10.1.1.2)], [0], [])."""
        wait_until(lambda: dump_ct(t, "10.1.1.2") == "", 10,
                   what="zone 5's connections to expire", describe=lambda: dump_ct(t, "10.1.1.2"))
        wire.event("zone 5's connections expire", lambda w: w.table.conns.clear())

    traffic()
    check_ct(t, "10.1.1.2", ZONE5)  # the default timeouts (60 s): upstream sleeps 4 s first
    t.sb.appctl("dpctl/flush-conntrack")
    wire.flushed()
    # VSCTL_ADD_DATAPATH_TABLE
    t.sb.vsctl("--", "--id=@m", "create", "Datapath", "datapath_version=0", "--", "set",
               "Open_vSwitch", ".", 'datapaths:"netdev"=@m')
    for i in range(1, 256):
        t.sb.vsctl("--may-exist", "add-zone-tp", "netdev", f"zone={i}", f"udp_first={i}",
                   f"udp_single={i}", f"icmp_first={i}", f"icmp_reply={i}")
    t.sb.vsctl("--may-exist", "add-zone-tp", "netdev", "zone=5", "udp_first=1",
               "udp_single=1", "icmp_first=1", "icmp_reply=1")
    traffic()
    check_ct(t, "10.1.1.2", ZONE5)
    expired()
    traffic()  # the conntrack cache
    check_ct(t, "10.1.1.2", ZONE5)
    expired()
    t.sb.vsctl("del-zone-tp", "netdev", "zone=5")
    traffic()
    check_ct(t, "10.1.1.2", ZONE5)  # upstream: after sleep 1
    assert wire.verify() >= 4 * 7


# ----------------------------------------------------------------------------
# SCTP SNAT with a port range

SCTP = (  # upstream's association: INIT, INIT_ACK, COOKIE_ECHO, COOKIE_ACK, DATA, SACK, ABORT
    (1, (
        "e666c1222222e666c111111108004502004400004000408424300a0101010a010102d6b9303900000000c5cc42"
        "6b0100002470e18ccc0001a000000affff7ae1c142000c00060005000080000004c0000004"
    )),
    (2, (
        "e666c1111111e666c122222208004502012400004000408422610a0101020a0101f03039870770e18ccc97abd4"
        "9a0200010425bb9dfa0001a000000a000abb90fba5000700e827a048cd1474b111490710816ec95cfc501126b2"
        "00000000000000000000000000000000fa9dbb25cc8ce17000000000000000002b953b0e1d346d160a000a00a5"
        "fb90bb020087070a0101f00000000000000000000000000000000000000000393001000000000080020024fbb8"
        "2eae13af8d70329bc42bb7cd7e6458d60ff1a181e9b41167c2cab54471bf000000000000000000000000000000"
        "0000000000000000000000000000000000000000000100002470e18ccc0001a000000affff7ae1c142000c0006"
        "0005000080000004c00000040000000000000000000000000000000080000004c0000004"
    )),
    (1, (
        "e666c1222222e666c1111111080045020108000040004084236c0a0101010a010102d6b9303925bb9dfaf2c860"
        "300a0000e827a048cd1474b111490710816ec95cfc501126b200000000000000000000000000000000fa9dbb25"
        "cc8ce17000000000000000002b953b0e1d346d160a000a00a5fb90bb020087070a0101f0000000000000000000"
        "0000000000000000000000393001000000000080020024fbb82eae13af8d70329bc42bb7cd7e6458d60ff1a181"
        "e9b41167c2cab54471bf0000000000000000000000000000000000000000000000000000000000000000000000"
        "000100002470e18ccc0001a000000affff7ae1c142000c00060005000080000004c00000040000000000000000"
        "0000000000000000"
    )),
    (2, (
        "e666c1111111e666c122222208004502002400004000408423610a0101020a0101f03039870770e18ccc039139"
        "8b0b000004"
    )),
    (1, (
        "e666c1222222e666c1111111080045020034000140004084243f0a0101010a010102d6b9303925bb9dfabc3663"
        "45000300147ae1c1420000000000000000666f6f0a"
    )),
    (2, (
        "e666c1111111e666c122222208004502003042c840004084e08c0a0101020a0101f03039870770e18ccc6a9907"
        "14030000107ae1c14200019ffc00000000"
    )),
    (1, (
        "e666c1222222e666c111111108004500002400010000408464510a0101010a010102d6b9303925bb9dfae3b82c"
        "3806000004"
    )),
)
SCTP_PACKET_INS = (
    "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=82 in_port=1 (via action) data_len=82 (unbu"
    "ffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:11:11:11,dl_dst=e6:66:c1:22:22:22,nw_src=10.1.1.240,n"
    "w_dst=10.1.1.2,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=34567,tp_dst=12345 sctp_csum:"
    "9670267b" "\n"
    "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=306 ct_state=est|rpl|trk|dnat,ct"
    "_zone=1,ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=132,ct_tp_src=54969,ct_tp_dst=12"
    "345,ip,in_port=2 (via action) data_len=306 (unbuffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:22:22:22,dl_dst=e6:66:c1:11:11:11,nw_src=10.1.1.2,nw_"
    "dst=10.1.1.1,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=12345,tp_dst=54969 sctp_csum:49"
    "864886" "\n"
    "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=278 in_port=1 (via action) data_len=278 (un"
    "buffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:11:11:11,dl_dst=e6:66:c1:22:22:22,nw_src=10.1.1.240,n"
    "w_dst=10.1.1.2,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=34567,tp_dst=12345 sctp_csum:"
    "8c816918" "\n"
    "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=50 ct_state=est|rpl|trk|dnat,ct_"
    "zone=1,ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=132,ct_tp_src=54969,ct_tp_dst=123"
    "45,ip,in_port=2 (via action) data_len=50 (unbuffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:22:22:22,dl_dst=e6:66:c1:11:11:11,nw_src=10.1.1.2,nw_"
    "dst=10.1.1.1,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=12345,tp_dst=54969 sctp_csum:ef"
    "4749fc" "\n"
    "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=66 in_port=1 (via action) data_len=66 (unbu"
    "ffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:11:11:11,dl_dst=e6:66:c1:22:22:22,nw_src=10.1.1.240,n"
    "w_dst=10.1.1.2,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=34567,tp_dst=12345 sctp_csum:"
    "eb2b2c17" "\n"
    "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=62 ct_state=est|rpl|trk|dnat,ct_"
    "zone=1,ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=132,ct_tp_src=54969,ct_tp_dst=123"
    "45,ip,in_port=2 (via action) data_len=62 (unbuffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:22:22:22,dl_dst=e6:66:c1:11:11:11,nw_src=10.1.1.2,nw_"
    "dst=10.1.1.1,nw_tos=0,nw_ecn=2,nw_ttl=64,nw_frag=no,tp_src=12345,tp_dst=54969 sctp_csum:9b"
    "67e853" "\n"
    "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=50 in_port=1 (via action) data_len=50 (unbu"
    "ffered)" "\n"
    "sctp,vlan_tci=0x0000,dl_src=e6:66:c1:11:11:11,dl_dst=e6:66:c1:22:22:22,nw_src=10.1.1.240,n"
    "w_dst=10.1.1.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=34567,tp_dst=12345 sctp_csum:"
    "4bb49f65" "\n"
)


@FLAVOUR
@upstream("conntrack - SCTP SNAT with port range")
def test_sctp_snat_with_port_range(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """An SCTP association by packet-out (INIT ... DATA, SACK, then ABORT)
    from 10.1.1.1 SNATed to 10.1.1.240:34567 in zone 1, every packet to the
    controller: ns0's packets NATed (the SCTP checksum recomputed, RFC 9260
    §6.8), the replies to 34567 un-NATed (ct_state est|rpl|trk|dnat, the
    original tuple in ct_nw_*/ct_tp_*); the connection then in the table.
    The model has no SCTP tracking (RFC 9260's states): the packet-ins are
    upstream's verdict, exactly."""
    from harness.ofmonitor import OfctlMonitor
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", "e6:66:c1:11:11:11", ns=ns0)
    t.ip("link", "set", "dev", "p1", "address", "e6:66:c1:22:22:22", ns=ns1)
    add_flows(t, ["table=0,priority=100,in_port=1,sctp,"
                  "action=ct(commit,zone=1,nat(src=10.1.1.240:34567)),controller",
                  "table=0,priority=100,in_port=2,ct_state=-trk,sctp,tp_dst=34567,"
                  "action=ct(table=1,zone=1,nat)",
                  "table=0,priority=0,action=drop",
                  "table=1,priority=100,in_port=2,ct_state=+trk+rpl,ct_zone=1,sctp,"
                  "action=controller",
                  "table=1,priority=0,action=drop"])
    monitor = OfctlMonitor(t.sb, "br0", "65534", "invalid_ttl")
    t.env.cleanup.defer("stop ovs-ofctl monitor", monitor.kill)
    for port, frame in SCTP:
        t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0",
                   f"in_port={port} packet={frame} actions=resubmit(,0)")
    t.sb.appctl("revalidator/purge")
    monitor.wait_lines(2 * len(SCTP))  # upstream reads it after the exit: the packet-ins came
    got = monitor.exit()
    assert got == SCTP_PACKET_INS, f"cat ofctl_monitor.log: expected\n{SCTP_PACKET_INS}got\n{got}"
    table = re.sub(r",protoinfo=.*$", "", dump_ct(t, "10.1.1.2"), flags=re.M)
    assert table == ("sctp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
                     "reply=(src=10.1.1.2,dst=10.1.1.240,sport=<cleared>,dport=<cleared>),"
                     "zone=1\n"), f"dpctl/dump-conntrack | FORMAT_CT | sed: got\n{table}"


# ----------------------------------------------------------------------------
# + vlan, + cvlan

VLAN_TITLES = {(False, "vlan"): "conntrack - IPv4 fragmentation + vlan",
               (False, "cvlan"): "conntrack - IPv4 fragmentation + cvlan",
               (True, "vlan"): "conntrack - IPv6 fragmentation + vlan",
               (True, "cvlan"): "conntrack - IPv6 fragmentation + cvlan"}
C_TAG, S_TAG = (0x8100, 100), (0x88A8, 4094)


def devices(i: int, six: bool, kind: str) -> list[Device]:
    """at_nsI's devices: ADD_VETH's, then ADD_VLAN's (vlan) or ADD_SVLAN's and
    ADD_CVLAN's (cvlan), with upstream's addresses."""
    n = i + 1 if not six else i + 3
    plain = Device(f"p{i}", (), f"fc00::{i + 1}/96" if six else f"10.1.1.{i + 1}/24")
    inner = f"fc00:1::{n}/96" if six else f"10.2.2.{n}/24"
    if kind == "vlan":
        return [plain, Device(f"p{i}.100", (C_TAG,), inner)]
    outer = f"fc00:ffff::{n}/96" if six else f"10.255.2.{n}/24"
    return [plain, Device(f"p{i}.4094", (S_TAG,), outer, 1496),
            Device(f"p{i}.4094.100", (S_TAG, C_TAG), inner, 1492)]


def wait_ping(t: Traffic, ns, dst: str, six: bool) -> None:  # type: ignore[no-untyped-def]
    """OVS_WAIT_UNTIL([ip netns exec ns ping[6] -c 1 dst])."""
    if six:
        t.wait_ping6(ns, dst)
        return
    wait_until(lambda: t.run(["ping", "-c", "1", "-W", "1", dst], ns, timeout=30,
                             rc=None).rc == 0, 30,
               what=f"ping {dst} to answer")


@FLAVOUR
@pytest.mark.parametrize("six,kind", [
    pytest.param(six, kind, marks=upstream(title), id=f"{'ipv6' if six else 'ipv4'}-{kind}")
    for (six, kind), title in VLAN_TITLES.items()])
@pytest.mark.requires(kernel_optional="vlan")
def test_fragmentation_over_vlan(system_traffic: Callable[..., Traffic],
                                 request: pytest.FixtureRequest, flavour: str, six: bool,
                                 kind: str) -> None:
    """The zone-9 tables of the plain fragmentation tests, the pings of 1600
    and 3200 bytes between VLAN devices (vlan: 802.1Q VID 100; cvlan: a C-tag
    100 inside an 802.1ad S-tag 4094, and the S-tag alone, with
    vlan-limit=0), fragmented in the namespaces and reassembled by ct
    through the tags.  IPv4 vlan also reads ipf's counters (30 fragments
    reassembled).  The far ends are upstream's VLAN devices, or the same wire
    built by OVS rules where the kernel has none (fixtures/system_userspace/system_ct_frag.py
    far_end).  Judged: every frame into and out of br0, tagged as it is: the
    model's parser reads one 802.1Q tag (OVS's default vlan-limit), so the
    pipeline takes the tags off, tracks the packet and puts them back on
    what it outputs (the table has no VLAN action).  IPv6: the VLAN devices'
    addresses are waited past DAD (RFC 4862), which upstream leaves to luck."""
    t: Traffic = system_traffic(flavour, vsctl_extra=(
        ("set", "Open_vSwitch", ".", "other_config:vlan-limit=0") if kind == "cvlan" else ()))
    if kind == "cvlan":
        t.check_8021ad()
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    caps = [far_end(t, ns, f"p{i}", devices(i, six, kind)) for i, ns in enumerate((ns0, ns1))]
    add_flows(t, V6_ZONE9 if six else V4_ZONE9)
    inner = zone9_pipeline(IPV6 if six else IPV4, None if six else ICMP)

    def pipeline(a: Arrival) -> Out:
        a.untag()
        return inner(a)

    wire = CtWire(t, request, pipeline)
    for i, (ns, ifname) in enumerate(caps):
        wire.add(f"ovs-p{i}", ns, ifname)
    far = devices(1, six, kind)
    dsts = [d.addr.split("/")[0] for d in reversed(far[1:])]  # the inner (C) one first
    if six:
        wait_ping(t, ns0, far[0 if kind == "vlan" else -1].addr.split("/")[0], six)
        wait_dad(t, ns0, ns1)
    elif kind == "vlan":
        modify_fragmentation(t)
    else:
        wait_ping(t, ns0, dsts[0], six)
    for size in ("1600", "3200"):
        for dst in dsts:
            t.check_ping(ns0, dst, "-s", size, six=six)
    if kind == "vlan" and not six:
        check_fragmentation_pass(t)
    assert wire.verify() >= 30 * len(dsts)
