"""fixtures/system_userspace/system_l2.py's judge without OVS: what it counts as traffic under
test, and that a hop whose output differs from its rule fails, field by field."""
from __future__ import annotations

from dataclasses import dataclass, field

from scapy.contrib.mpls import MPLS
from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6ND_NS, IPv6
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether

from datapath.backends.native_tunnel import Captured
from datapath.backends.netns import VnetHdr
from datapath.model import Expected, deviation
from datapath.model.bugs import GRE_CSUM_AT_PUSH
from datapath.model.hooks import NOT_SENT
from datapath.model.l2tags import PushVlan
from datapath.verdict import PRESENT, conclude_ports
from fixtures.system_userspace.system_l2 import Crossings, Hop, Rule, innermost, mapped, tagged, under_test
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


def judge(out: list[bytes], rule: Rule = tagged([PushVlan(0x8100, 100)]),
          status: list[str] | None = None) -> tuple[list[str], list[Step]]:
    """One hop's judgement as Crossings.verify() concludes it (order-free)."""
    src = FakeSniffer("p0", [Captured(True, VnetHdr(), PING)])
    dst = FakeSniffer("p1", [Captured(True, VnetHdr(), f) for f in out])
    hop = Hop("push", src, True, [dst], True, rule)  # type: ignore[arg-type]
    steps: list[Step] = []
    v = conclude_ports(steps, [Crossings._judged(None, hop)],  # type: ignore[arg-type]
                       ordered=False)
    if status is not None:
        status.append(v.status)
    return v.lines, steps


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


def test_a_hop_takes_what_ovs_is_known_to_send_as_a_sighting() -> None:
    """A rule that is the model's (an Expected) brings OVS's known variant:
    that frame on the wire is a sighting, not a failure; the right one passes
    as "gone" does not apply to a frame no bug touches."""
    bad = PING[:-1] + bytes([PING[-1] ^ 0xFF])
    known = deviation(Expected(frames=[PING], csum_state=[{}]),
                      Expected(frames=[bad], csum_state=[{}]), GRE_CSUM_AT_PUSH)
    status: list[str] = []
    lines, steps = judge([bad], lambda c: known, status)
    assert status == ["known"] and lines and steps[0].bugs == {GRE_CSUM_AT_PUSH.key: PRESENT}
    status.clear()
    _, steps = judge([PING], lambda c: known, status)
    assert status == ["gone"] and not steps[0].ok
    status.clear()
    judge([bad], lambda c: [PING], status)  # frames a rule builds: no variants
    assert status == ["mismatch"]


def test_mapped_changes_every_frame_an_expectation_names() -> None:
    e = Expected(frames=[b"ab"], csum_state=[{"ip": "good"}], allowed=[{b"ac": {}}],
                 ovs_allowed=[{NOT_SENT: {}}], bugs=[GRE_CSUM_AT_PUSH])
    m = mapped(e, lambda f: f + b"!")
    assert m.frames == [b"ab!"] and m.allowed == [{b"ac!": {}}]
    assert m.ovs_allowed == [{NOT_SENT: {}}] and m.bugs == e.bugs and m.csum_state == e.csum_state
