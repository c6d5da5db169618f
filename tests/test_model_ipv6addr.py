"""datapath/model/ipv6addr.py against scapy, which computes checksums from
scratch (an independent encoder)."""
from __future__ import annotations

from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from datapath.model.ipv6addr import set_ipv6_addr


def test_unfragmented_echo_gets_a_right_checksum() -> None:
    before = Ether() / IPv6(src="fc00::1", dst="fc00::3") / ICMPv6EchoRequest(data=b"x" * 40)
    after = Ether() / IPv6(src="fc00::1", dst="fc00::2") / ICMPv6EchoRequest(data=b"x" * 40)
    assert set_ipv6_addr(bytes(before), "dst", "fc00::2") == bytes(after)


def test_first_fragment_updated_later_fragment_only_the_address() -> None:
    echo = bytes(IPv6(src="fc00::2", dst="fc00::1") / ICMPv6EchoRequest(data=b"y" * 100))[40:]
    moved = bytes(IPv6(src="fc00::3", dst="fc00::1") / ICMPv6EchoRequest(data=b"y" * 100))[40:]
    first = Ether() / IPv6(src="fc00::2", dst="fc00::1", nh=44) / IPv6ExtHdrFragment(
        nh=58, m=1, id=7) / Raw(echo[:48])
    want = Ether() / IPv6(src="fc00::3", dst="fc00::1", nh=44) / IPv6ExtHdrFragment(
        nh=58, m=1, id=7) / Raw(moved[:48])
    assert set_ipv6_addr(bytes(first), "src", "fc00::3") == bytes(want)
    later = Ether() / IPv6(src="fc00::2", dst="fc00::1", nh=44) / IPv6ExtHdrFragment(
        nh=58, offset=6, id=7) / Raw(echo[48:])
    got = set_ipv6_addr(bytes(later), "src", "fc00::3")
    assert got[14 + 8:14 + 24] == bytes(IPv6(src="fc00::3"))[8:24]
    assert got[14 + 40:] == bytes(later)[14 + 40:]
