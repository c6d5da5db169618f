"""fixtures/system_l2.py's judge without OVS: what it counts as traffic under
test, and that a hop whose output differs from its rule fails, field by field."""
from __future__ import annotations

from dataclasses import dataclass, field

from scapy.contrib.mpls import MPLS
from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6ND_NS, IPv6
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether

from datapath.backends.native_tunnel import Captured
from datapath.backends.netns import VnetHdr
from datapath.model.l2tags import PushVlan
from fixtures.system_l2 import Crossings, Hop, innermost, tagged, under_test
from harness.records import Step

PING = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(dst="10.1.1.2") / ICMP())
NS = bytes(Ether() / IPv6(dst="ff02::1:ff00:2") / ICMPv6ND_NS(tgt="fc00::2"))
PING6 = bytes(Ether() / IPv6(dst="fc00::2") / ICMPv6EchoRequest())


def test_traffic_under_test_behind_tags_and_labels() -> None:
    assert under_test(PING) and under_test(PING6) and not under_test(NS)
    assert under_test(bytes(Ether() / ARP()))
    qinq = bytes(Ether(type=0x88A8) / Dot1AD(vlan=4094) / Dot1Q(vlan=100) / IPv6(
        dst="ff02::1:ff00:2") / ICMPv6ND_NS(tgt="fc00::2"))
    assert not under_test(qinq)  # housekeeping behind two tags
    assert innermost(bytes(Ether(type=0x8847) / MPLS(s=1) / PING[14:]))[12:14] == b"\x08\x00"
    eth_over_mpls = bytes(Ether(type=0x8847) / MPLS(s=0) / MPLS(s=1)) + NS
    assert not under_test(eth_over_mpls, "ethernet")
    assert under_test(bytes(Ether(type=0x8847) / MPLS(s=1)) + PING, "ethernet")


@dataclass
class FakeSniffer:
    """A sniffer that returns the frames the test gives it."""

    ifname: str
    frames: list[Captured] = field(default_factory=list)


def judge(out: list[bytes]) -> tuple[list[str], list[Step]]:
    src = FakeSniffer("p0", [Captured(True, VnetHdr(), PING)])
    dst = FakeSniffer("p1", [Captured(True, VnetHdr(), f) for f in out])
    hop = Hop("push", src, True, [dst], True, tagged([PushVlan(0x8100, 100)]))  # type: ignore[arg-type]
    steps: list[Step] = []
    return Crossings._judge(None, hop, steps), steps  # type: ignore[arg-type]


def test_a_hop_passes_only_on_the_model_frames() -> None:
    right = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1Q(vlan=100)
                  / IP(dst="10.1.1.2") / ICMP())
    lines, steps = judge([right])
    assert lines == [] and steps[0].ok
    wrong_vid = right[:14] + b"\x00\x65" + right[16:]
    lines, steps = judge([wrong_vid])
    assert lines and not steps[0].ok and any("vlan" in ln.lower() for ln in lines), lines
    lines, _ = judge([PING])  # the tag was not pushed
    assert lines
    lines, _ = judge([right, right])  # one too many
    assert any("count" in ln for ln in lines), lines
