"""Unit tests for the one IPv4/IPv6 header parser (datapath/model/packet.py) and
its users: net_tap's rx flags, the native tunnel pop and the decap cases'
corrupt_outer (fixtures/frames.py).  Frames are built with scapy, independently of the parser."""
from __future__ import annotations

import pytest
from scapy.layers.inet import GRE, IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

from datapath.backends.dpdk import net_tap_rx_flags
from datapath.model.decap import pop
from datapath.model.packet import (
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    ETH_TYPE_QINQ,
    ETH_TYPE_VLAN,
    PROTO_GRE,
    PROTO_TCP,
    PROTO_UDP,
    Packet,
    ether_type,
    ipv4_header,
    ipv6_header,
    parse_layer,
)
from datapath.offloads import CsumState, RxFlags
from fixtures.frames import corrupt_outer, encapsulate

ETH = Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01")
G, B = CsumState.GOOD, CsumState.BAD


def test_ipv4_header_fields() -> None:
    """Every field read from an IPv4 header is the one scapy wrote (RFC 791 §3.1)."""
    frame = bytes(ETH / IP(src="10.0.0.1", dst="10.0.0.2", flags="MF", frag=0, ihl=6,
                           options=b"\x01\x01\x01\x01") / UDP() / (b"x" * 3))
    hdr = ipv4_header(frame, 14)
    assert hdr.ihl == 24 and hdr.total_len == 24 + 8 + 3 and hdr.frag == 0x2000
    assert hdr.proto == PROTO_UDP
    assert hdr.src == bytes([10, 0, 0, 1]) and hdr.dst == bytes([10, 0, 0, 2])


def test_ipv6_header_fields() -> None:
    """Payload length, next header and addresses of the fixed header (RFC 8200 §3)."""
    frame = bytes(ETH / IPv6(src="fe80::2", dst="fe80::1") / TCP() / b"abcd")
    hdr = ipv6_header(frame, 14)
    assert hdr.payload_len == 24 and hdr.next_header == PROTO_TCP
    assert hdr.src == bytes.fromhex("fe80" + "00" * 13 + "02")
    assert hdr.dst == bytes.fromhex("fe80" + "00" * 13 + "01")


def test_ether_type_skips_the_tags_asked_for() -> None:
    """One 802.1Q tag by default; 802.1ad and several tags only when asked."""
    inner = IP() / UDP()
    assert ether_type(bytes(ETH / inner)) == (ETH_TYPE_IPV4, 14)
    assert ether_type(bytes(ETH / Dot1Q(vlan=5) / inner)) == (ETH_TYPE_IPV4, 18)
    qinq = bytes(ETH / Dot1AD(vlan=7) / Dot1Q(vlan=5) / IPv6())
    assert ether_type(qinq) == (ETH_TYPE_QINQ, 14)  # 0x88a8 is not a default TPID
    assert ether_type(qinq, tpids=(ETH_TYPE_VLAN, ETH_TYPE_QINQ)) == (ETH_TYPE_VLAN, 18)
    assert ether_type(qinq, tpids=(ETH_TYPE_VLAN, ETH_TYPE_QINQ), max_tags=None) == (
        ETH_TYPE_IPV6, 22)
    assert ETH_TYPE_QINQ == 0x88A8
    assert ether_type(b"\x00" * 13) == (0, 14)


def test_layer_payload_is_the_upper_layer_header() -> None:
    """payload points past the IPv4 options or the IPv6 extension headers, also
    for a protocol without a complete L4 header (GRE); a later fragment has none."""
    v4 = parse_layer(bytes(ETH / IP(ihl=6, options=b"\x01" * 4) / GRE() / (b"\x00" * 4)))
    assert (v4.proto, v4.payload, v4.l4) == (PROTO_GRE, 14 + 24, None)
    v6 = parse_layer(bytes(ETH / IPv6() / IPv6ExtHdrDestOpt() / UDP() / b"y"))
    assert (v6.proto, v6.payload, v6.l4) == (PROTO_UDP, 14 + 40 + 8, 14 + 40 + 8)
    later = parse_layer(bytes(ETH / IPv6() / IPv6ExtHdrFragment(offset=2, nh=17) / (b"z" * 8)))
    assert later.payload is None and later.l4 is None
    short = parse_layer(bytes(ETH / IP(proto=6) / (b"\x00" * 8)))  # TCP header cut short
    assert (short.proto, short.payload, short.l4) == (PROTO_TCP, 34, None)
    assert v4.shifted(4).payload == 14 + 24 + 4
    assert Packet.parse(bytes(ETH / IP() / UDP())).copy().outer.payload == 34


def test_net_tap_rx_flags_behind_qinq_tags() -> None:
    """net_tap verifies behind 802.1ad + 802.1Q tags too (any number of them)."""
    good = bytes(ETH / Dot1AD(vlan=7) / Dot1Q(vlan=5) / IP() / TCP() / b"p")
    assert net_tap_rx_flags(good) == RxFlags(ip=G, l4=G)
    bad = bytearray(good)
    bad[22 + 20 + 16] ^= 0xFF  # the TCP checksum
    assert net_tap_rx_flags(bytes(bad)) == RxFlags(ip=G, l4=B)
    no_udp_csum = bytes(ETH / IP() / UDP(chksum=0) / b"q")
    assert net_tap_rx_flags(no_udp_csum) == RxFlags(ip=G, l4=G)
    frag = bytes(ETH / IP(flags="MF") / UDP() / b"q")
    assert net_tap_rx_flags(frag) == RxFlags(ip=G)


@pytest.mark.parametrize("kind", ["vxlan", "geneve", "gre"])
@pytest.mark.parametrize("underlay", [4, 6])
def test_corrupt_outer_breaks_exactly_the_checksum_named(kind: str, underlay: int) -> None:
    """The decap cases' corrupted frames: each breaks the one outer checksum it
    names, so the native tunnel pop drops it for that reason."""
    local, remote = ("1.1.2.88", "1.1.2.92") if underlay == 4 else ("2001:cafe::88",
                                                                     "2001:cafe::92")
    inner = bytes(ETH / IP() / UDP() / b"inner")
    sent = encapsulate(kind, local, remote, "aa:55:aa:55:00:00", "f8:bc:12:44:34:b6", inner,
                       csum=True)
    assert pop(sent, RxFlags()).inner is not None
    broken = corrupt_outer(sent, "bad_outer_csum")
    assert sum(a != b for a, b in zip(sent, broken)) == 1
    popped = pop(broken, RxFlags())
    assert popped.inner is None
    what = "GRE" if kind == "gre" else "UDP"
    assert any(f"{what} checksum wrong" in note for note in popped.notes)
    if underlay == 4:
        popped = pop(corrupt_outer(sent, "bad_outer_ip"), RxFlags())
        assert popped.inner is None and popped.counters["native_tnl_l3csum_err"] == 1
