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
from evidence.compare import diff_frames
from fixtures.dpif_netdev.upstream_tunnel_vectors import TUNNEL_TESTS, resolve
from fixtures.frames import compose, with_l4_csum
from fixtures.tunnel import INNERS, UPSTREAM_INNER, model_actions, spec, upstream_steps

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
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.l2 import Ether

    from datapath.model.bugs import L4_PARTIAL_NOT_TCP_UDP
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP())
    from datapath.model.actions import output
    exp = model.forward(frame, [output("p2")], TxOffloads(), RxFlags.parse("l4=partial"))
    assert exp.frames == [frame] and exp.bugs == [L4_PARTIAL_NOT_TCP_UDP]


def test_tunnel_spec_errors() -> None:
    with pytest.raises(TunnelError, match="unknown tunnel type"):
        spec("stt", 4, True)
    with pytest.raises(TunnelError, match="same family"):
        TunnelSpec("vxlan", "1.1.1.1", "::1", "aa:aa:aa:aa:aa:aa", "bb:bb:bb:bb:bb:bb")


def _outer_udp_verifies(frame: bytes) -> bool:
    """RFC 768 over the bytes as they are: the outer UDP checksum sums to 0xffff
    with its pseudo-header (the frame parsed as a plain packet: its inner
    bytes are just data)."""
    pkt = Packet.parse(frame)
    return pkt.l4_sum(pkt.outer) == 0xFFFF


def _verifies(frame: bytes, where: str) -> bool:
    """Whether the IPv4 header (`where` "ip") or TCP checksum ("l4") at the
    layer `where` names ("outer.", "inner.") is right for the bytes."""
    from datapath.model import csum
    prefix, kind = where.split(".")
    pkt = Packet.parse(frame)
    lay = pkt.outer
    if prefix == "inner":
        assert lay.l4 is not None
        pkt = Packet.parse(frame[lay.l4 + 8 + 8:])  # past the UDP and VXLAN headers
        lay = pkt.outer
    assert lay.l3 is not None
    if kind == "ip":
        return csum.checksum(bytes(pkt.data[lay.l3:lay.l3 + 20])) == 0
    return pkt.l4_sum(lay) == 0xFFFF


def test_any_split_of_the_checksum_work_is_allowed_and_only_a_consistent_one() -> None:
    """E4: a tunnel packet's inner IPv4 and TCP checksums and its outer IPv4 one
    pending, on a port that advertises `ip` and `l4` but does not do them and
    does `out_ip`.  Handed as a tunnel packet, the inner ones may leave as
    handed and the outer one is right (`out_ip` works); handed as a plain
    packet, the inner ones are right and the outer one may leave as handed.
    Both splits are allowed; a frame with both left undone is none of them."""
    from datapath.model import hooks
    from datapath.model.actions import mod_nw_dst
    frame = compose("tcp", 4)
    actions = [mod_nw_dst("10.9.9.9"),
               *model_actions(INNERS["tcp4"], spec("vxlan", 4, False))]
    with hooks.observing(hooks.Observer()):
        exp = model.forward(frame, actions, TxOffloads.parse("ip_disabled,l4_disabled,out_ip"),
                            RxFlags.parse("ip=good,l4=good"))
    allowed = [exp.frames[0], *exp.padded("allowed")[0]]
    outer_undone = [f for f in allowed if not _verifies(f, "outer.ip")]
    inner_undone = [f for f in allowed if not _verifies(f, "inner.l4")]
    assert outer_undone and inner_undone, "both splits are allowed"
    assert all(_verifies(f, "inner.l4") and _verifies(f, "inner.ip") for f in outer_undone)
    assert all(_verifies(f, "outer.ip") for f in inner_undone)
    # Negative control: the outer IPv4 checksum as handed on a frame whose inner
    # TCP checksum is also as handed.
    both = bytearray(inner_undone[0])
    both[14 + 10:14 + 12] = outer_undone[0][14 + 10:14 + 12]
    assert not _verifies(bytes(both), "outer.ip") and not exp.permits(0, bytes(both))
    # Where the port does what it advertises, only the right bytes are allowed.
    with hooks.observing(hooks.Observer()):
        done = model.forward(frame, actions, TxOffloads.parse("ip,l4,out_ip"),
                             RxFlags.parse("ip=good,l4=good"))
    assert not done.padded("allowed")[0] or set(done.allowed[0]) == {done.frames[0]}
    assert all(_verifies(done.frames[0], w) for w in ("outer.ip", "inner.ip", "inner.l4"))


def test_an_outer_udp_checksum_is_judged_against_the_bytes_that_leave() -> None:
    """E7: an inner IPv4 checksum that is wrong but flagged good, pushed into
    VXLAN with csum.  The one outer UDP checksum allowed is right for the bytes
    on the wire (RFC 768); one computed as if the flagged checksum were right
    is rejected, as is any other wrong one.  A right inner checksum gives the
    same rule one value."""
    from datapath.model import hooks
    from fixtures.frames import with_bad_checksums
    tun = spec("vxlan", 4, True)
    rx = RxFlags.parse("ip=good,l4=partial")
    acts = model_actions(INNERS["tcp4"], tun)
    udp = 14 + 20 + 6
    for frame in (with_bad_checksums(compose("tcp", 4)), compose("tcp", 4)):
        with hooks.observing(hooks.Observer()):
            exp = model.forward(frame, acts, TxOffloads(), rx)
        allowed = [exp.frames[0], *exp.padded("allowed")[0]]
        assert {Packet.parse(f).u16(udp) for f in allowed} == {Packet.parse(exp.frames[0]).u16(udp)}
        assert all(_outer_udp_verifies(f) for f in allowed)
        trusting = _as_if_inner_right(exp.frames[0])
        if frame != compose("tcp", 4):
            assert trusting != exp.frames[0] and not _outer_udp_verifies(trusting)
            assert not exp.permits(0, trusting)
        else:
            assert trusting == exp.frames[0]
        wrong = bytearray(exp.frames[0])
        wrong[udp:udp + 2] = ((Packet.parse(exp.frames[0]).u16(udp) + 1) & 0xFFFF).to_bytes(2, "big")
        assert not exp.permits(0, bytes(wrong))


def _as_if_inner_right(frame: bytes) -> bytes:
    """The frame with its outer UDP checksum computed as if the inner IPv4
    header checksum were right, the inner bytes left as they are: the outer
    checksum OVS's shortcut gives."""
    fixed = bytearray(frame)
    inner_ip = 14 + 20 + 8 + 8 + 14
    from datapath.model import csum
    fixed[inner_ip + 10:inner_ip + 12] = b"\0\0"
    fixed[inner_ip + 10:inner_ip + 12] = csum.checksum(bytes(fixed[inner_ip:inner_ip + 20])
                                                      ).to_bytes(2, "big")
    pkt = Packet.parse(bytes(fixed))
    pkt.set_l4_csum(pkt.outer)
    out = bytearray(frame)
    out[14 + 20 + 6:14 + 20 + 8] = pkt.data[14 + 20 + 6:14 + 20 + 8]
    return bytes(out)


def test_ovs_outer_checksum_over_a_lying_rx_flag_is_a_named_deviation() -> None:
    """With OVS's deviations in view, the outer UDP checksum computed as if the
    flagged-good inner checksum were right is what OVS is known to send
    (tunnel-csum-trusts-rx-good): it judges "known"; the right one judges
    "gone" (the entry would need retiring); a third value is a mismatch.  A
    right inner checksum names no deviation."""
    from datapath import deviations
    from datapath.deviations.observer import OvsObserver
    from datapath.model import hooks
    from datapath.model.bugs import TUNNEL_CSUM_TRUSTS_RX_GOOD
    from fixtures.frames import with_bad_checksums
    assert deviations.install  # the suite's way in; here one observer for the block
    acts = model_actions(INNERS["tcp4"], spec("vxlan", 4, True))
    rx = RxFlags.parse("ip=good,l4=partial")
    with hooks.observing(OvsObserver()):
        exp = model.forward(with_bad_checksums(compose("tcp", 4)), acts, TxOffloads(), rx)
        clean = model.forward(compose("tcp", 4), acts, TxOffloads(), rx)
    assert exp.bugs == [TUNNEL_CSUM_TRUSTS_RX_GOOD] and not clean.bugs
    trusting = _as_if_inner_right(exp.frames[0])
    assert exp.ovs_frames == [trusting]
    assert exp.judge([trusting]).status == "known"
    assert exp.judge([exp.frames[0]]).status == "gone"
    other = bytearray(trusting)
    other[14 + 20 + 6] ^= 0x10
    assert exp.judge([bytes(other)]).status == "mismatch"


def test_a_second_push_expects_every_checksum_under_it_right() -> None:
    """The nested-push rule: an inner TCP checksum left pending (rx partial)
    under two VXLAN headers leaves right in the bytes whatever the port
    advertises (no port feature reaches it), and the middle UDP checksum is
    right for those bytes; a frame with the inner checksum as handed is not
    allowed even on a port that advertises `l4` and does not do it."""
    from datapath.model import hooks
    from datapath.model.actions import PushTunnel, output
    inner = compose("tcp", 4)
    first, second = spec("vxlan", 4, True), spec("vxlan", 4, False)
    acts = [PushTunnel(first, "1"), PushTunnel(second, "2"), output("p2")]
    with hooks.observing(hooks.Observer()):
        exp = model.forward(inner, acts, TxOffloads.parse("ip_disabled,l4_disabled,out_ip,out_udp"),
                            RxFlags.parse("l4=partial"))
    allowed = [exp.frames[0], *exp.padded("allowed")[0]]
    outer_len = 14 + 20 + 8 + 8
    for f in allowed:
        middle = Packet.parse(f[outer_len:])
        assert middle.l4_sum(middle.outer) == 0xFFFF  # the first tunnel's UDP, over right bytes
        innermost = Packet.parse(f[outer_len * 2:])
        assert innermost.l4_sum(innermost.outer) == 0xFFFF
