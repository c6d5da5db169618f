"""The tunnel model against upstream's expected frames for 'IPv4/IPv6 vxlan tunnel - *'.

Every forward of those 12 upstream tests is replayed through the model and its
output compared byte for byte with upstream's hex (transcribed facts)."""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.packet import Packet
from datapath.model.send import transmit
from datapath.model.tunnel import TunnelError, TunnelSpec, push
from datapath.offloads import RxFlags, TxOffloads
from fixtures.frames import compose, with_l4_csum
from fixtures.tunnel import INNERS, UPSTREAM_INNER, model_actions, spec, upstream_steps
from harness.compare import diff_frames
from fixtures.upstream_tunnel_vectors import TUNNEL_TESTS, resolve


CASES = [(title, ul, inner) for title in TUNNEL_TESTS
         for ul, inner in [(int(title[3]), UPSTREAM_INNER[title.split(" - ", 1)[1]])]]


@pytest.mark.parametrize("title,underlay,inner", CASES, ids=[c[0] for c in CASES])
def test_model_reproduces_upstream_tunnel_vectors(title: str, underlay: int, inner: str) -> None:
    """Every frame upstream expects is one the contract allows (or, where the model
    names a known bug, the one OVS is known to send); and where the contract
    leaves no choice, the model's frame is upstream's byte for byte."""
    test = TUNNEL_TESTS[title]
    inn = INNERS[inner]
    frames = inn.frames()
    for name in ("good_frame", "arp_frame", "ndp_frame", "no_csum_frame"):
        if name in test["data"]:
            assert frames[name].hex() == test["data"][name], name
    steps = upstream_steps(inner)
    assert steps
    problems = []
    for step in steps:
        tun = spec("vxlan", underlay, step.csum)
        exp = model.forward(frames[step.frame], model_actions(inn, tun), step.tx, step.rx)
        want = bytes.fromhex(resolve(test, step.expected))
        if len(exp.frames) != 1 or not (exp.permits(0, want) or exp.ovs_sends(0, want)):
            problems.append(f"{step.id} ({step.expected}): "
                            + "; ".join(diff_frames(want, exp.frames[0])))
        elif len(exp.padded("allowed")[0]) <= 1 and not exp.deviates:
            assert exp.frames == [want], step.id
    assert not problems, "\n".join(problems)


def test_outer_headers_follow_the_template() -> None:
    """Outer IPv4: id 0, DF, TTL 64; IPv6: flow label 0, hop limit 64; VXLAN
    header with the VNI; Geneve with TEB; GRE with csum and key flags."""
    inner = compose("tcp", 4)
    for kind, ul, sig in (("vxlan", 4, "0800000000007b00"), ("geneve", 6, "000065580000" "7b00"),
                          ("gre", 4, "a0006558")):
        pkt = Packet.parse(inner)
        push(pkt, spec(kind, ul, True))
        pkt = transmit(pkt, TxOffloads())[0].pkt
        data = bytes(pkt.data)
        assert sig in data.hex(), kind
        if ul == 4:
            assert data[14 + 4:14 + 9].hex() == "0000400040", kind  # id 0, DF, ttl 64
        else:
            assert data[14:18].hex() == "60000000" and data[14 + 7] == 64
        assert all(v == "good" for v in pkt.csum_verdicts().values()), (kind, pkt.csum_verdicts())


def test_ecn_is_inherited_and_ce_becomes_ect0() -> None:
    for tos, outer_tos in ((0x01, 0x01), (0x02, 0x02), (0x03, 0x02), (0xB8, 0x00)):
        pkt = Packet.parse(compose("udp", 4, tos=tos))
        push(pkt, spec("vxlan", 4, False))
        assert pkt.data[15] == outer_tos, hex(tos)


def test_gre_checksum_covers_the_final_bytes_and_names_the_ovs_deviation() -> None:
    """A partial inner checksum finished after the GRE push: the correct GRE
    checksum covers the final bytes; OVS's (taken at push) is recorded as a
    known bug, differing from the correct frame in the GRE checksum only."""
    from datapath.model.bugs import GRE_CSUM_AT_PUSH
    frame = with_l4_csum(compose("tcp", 4), 0xDEAD)
    exp = model.forward(frame, model_actions(INNERS["tcp4"], spec("gre", 4, True)),
                        TxOffloads(), RxFlags.parse("l4=good"))
    assert exp.bugs == [GRE_CSUM_AT_PUSH]
    assert exp.csum_state[0]["outer.GRE"] == "good"
    assert diff_frames(exp.frames[0], exp.ovs_frames[0]) == [
        f"outer.GRE.chksum: expected 0x{Packet.parse(exp.frames[0]).u16(38):04x}, "
        f"got 0x{Packet.parse(exp.ovs_frames[0]).u16(38):04x}"]
    clean = model.forward(frame, model_actions(INNERS["tcp4"], spec("gre", 4, True)),
                          TxOffloads(), RxFlags())  # nothing partial: no deviation
    assert clean.bugs == [] and clean.ovs_frames == clean.frames


def test_l4_partial_on_icmp_is_a_known_crash() -> None:
    from datapath.model.bugs import L4_PARTIAL_NOT_TCP_UDP
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.l2 import Ether
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP())
    from datapath.model.actions import output
    exp = model.forward(frame, [output("p2")], TxOffloads(), RxFlags.parse("l4=partial"))
    assert exp.frames == [frame] and exp.bugs == [L4_PARTIAL_NOT_TCP_UDP]


def test_tunnel_spec_errors() -> None:
    with pytest.raises(TunnelError, match="unknown tunnel type"):
        spec("stt", 4, True)
    with pytest.raises(TunnelError, match="same family"):
        TunnelSpec("vxlan", "1.1.1.1", "::1", "aa:aa:aa:aa:aa:aa", "bb:bb:bb:bb:bb:bb")


def test_inner_checksum_the_port_lacks_is_completed_before_the_outer_is_handed() -> None:
    """E4: an inner TCP checksum the port has no feature for is completed in
    software first, so the port sees a plain packet and may be handed the outer
    IPv4 checksum through `ip`; advertised but not done (`ip_disabled`), the
    outer checksum may then leave as handed.  With `l4` advertised the inner one
    is still pending at the port: the outer one is `out_ip`'s, which works."""
    from datapath.model.actions import mod_nw_dst
    frame = compose("tcp", 4)
    actions = [mod_nw_dst("0.0.0.0"), *model_actions(INNERS["tcp4"], spec("vxlan", 4, False))]
    outer_ip = 14 + 10
    lax = model.forward(frame, actions, TxOffloads.parse("ip_disabled,out_ip"),
                        RxFlags.parse("l4=good"))
    values = {Packet.parse(f).u16(outer_ip) for f in lax.allowed[0]}
    assert 0 in values and len(values) == 2, values
    strict = model.forward(frame, actions, TxOffloads.parse("ip_disabled,l4,out_ip"),
                           RxFlags.parse("l4=good"))
    assert {Packet.parse(f).u16(outer_ip) for f in strict.allowed[0]} != values
    assert 0 not in {Packet.parse(f).u16(outer_ip) for f in strict.allowed[0]}


def test_outer_udp_may_trust_an_inner_checksum_flagged_good() -> None:
    """E7: an inner IPv4 checksum that is wrong but flagged good: the outer UDP
    checksum may be right for the bytes, or right as if the flagged one were; a
    right inner checksum gives one value only."""
    from fixtures.frames import with_bad_checksums
    tun = spec("vxlan", 4, True)
    rx = RxFlags.parse("ip=good,l4=partial")
    acts = model_actions(INNERS["tcp4"], tun)
    udp = 14 + 20 + 6
    for frame, n in ((with_bad_checksums(compose("tcp", 4)), 2), (compose("tcp", 4), 1)):
        exp = model.forward(frame, acts, TxOffloads(), rx)
        values = {Packet.parse(f).u16(udp) for f in [exp.frames[0], *exp.padded("allowed")[0]]}
        assert len(values) == n, values
