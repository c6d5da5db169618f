"""output(port, max_len) in the model (send.truncate, rule E8), against a
frame the Linux kernel sent and OVS 4.0.0 truncated in
cases/system_userspace/test_system_traffic_truncate.py (the tso flavour): the kernel's veth
left the UDP checksum to the "NIC" (0x4e62 on the wire), OVS completed it over
the first 100 bytes only (0x4966)."""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.actions import PushTunnel, Truncate, ofctl_actions, output
from datapath.model.bugs import TRUNC_PENDING_CSUM, TRUNC_TUNNEL_OUTER_CSUM
from datapath.model.packet import Packet
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import CsumState, RxFlags, TxOffloads

# at_ns1 -> 10.1.1.1:1234, a 200-byte UDP payload, the checksum as on the wire
UDP = bytes.fromhex(
    "e666c1111111e666c12222220800450000e44eb840004011d54c0a0101020a010101954004d200d04e626adf"
    "e1ce849aeda5428e86fff7ce41cd6a7979183c4834875f6544adc015e0c57032a3e72fe3784aa68e55eadf34"
    "5e17b812f2cb91764e1228f446cdb6d3e20fd29a0cc6989544344188328296fd25bba0d1b3076bf727a9823e"
    "71c55c8574a6749c2072f5a8e7255e2e424ba8cf7f28cbbea9a71ffd2a759b27c44df1f02a79488db6e741fc"
    "cf261b44fd1cc99416f4a4b815f3fa403e509557814e8a98ae6d685b746aa16f2d779d7f6a2df0bc10744800"
    "96b3ef73cad288caba310974b9c5c708a0732716dcfa")
GRE = TunnelSpec("gre", "172.31.1.100", "172.31.1.1", "02:90:8c:a8:a1:49", "fa:ad:fa:25:05:60",
                 key=None, csum=False)
PENDING = RxFlags(l4=CsumState.PARTIAL)


def test_ofctl_writes_max_len_into_its_output() -> None:
    assert ofctl_actions([Truncate(100), output("p2"), output("p3")]) == \
        "output(port=p2,max_len=100),output:p3"
    assert ofctl_actions([Truncate(64), PushTunnel(GRE, "11"), output("p0")]) == \
        "output(port=11,max_len=64)"
    with pytest.raises(ValueError):
        ofctl_actions([Truncate(64)])


def test_a_complete_packet_leaves_as_its_first_bytes_and_later_outputs_whole() -> None:
    exp = model.forward(UDP, [Truncate(100), output("p2"), output("p2")], TxOffloads())
    assert exp.frames == [UDP[:100], UDP] and not exp.bugs
    assert exp.csum_state[0] == {"IP": "good"}  # the UDP checksum covers bytes that are gone
    assert model.forward(UDP, [Truncate(len(UDP)), output("p2")], TxOffloads()).frames == [UDP]


def test_a_pending_checksum_is_completed_before_the_cut_and_ovs_does_it_after() -> None:
    broken = UDP[:40] + b"\x12\x34" + UDP[42:]  # pending: the field holds anything
    exp = model.forward(broken, [Truncate(100), output("p2")], TxOffloads(), PENDING)
    assert exp.frames == [UDP[:100]]  # 0x4e62, the datagram's checksum
    assert exp.bugs == [TRUNC_PENDING_CSUM]
    assert exp.ovs_frames[0][40:42].hex() == "4966"  # what OVS 4.0.0 sent
    assert exp.ovs_frames[0][:40] == UDP[:40] and exp.ovs_frames[0][42:] == UDP[42:100]


def test_truncation_comes_before_the_tunnel_push() -> None:
    exp = model.forward(UDP, [Truncate(100), PushTunnel(GRE, "11"), output("p0")], TxOffloads(),
                        PENDING)
    assert len(exp.frames[0]) == 14 + 20 + 4 + 100  # upstream's n_bytes=138
    assert exp.frames[0][38:] == UDP[:100]
    assert exp.ovs_frames[0][38 + 40:38 + 42].hex() == "4966"


def test_over_ipv6_ovs_takes_the_bytes_left_as_the_pseudo_header_length() -> None:
    from datapath.model import csum
    from fixtures.frames import compose
    frame = compose("udp", 6, payload=bytes(range(120)))
    exp = model.forward(frame, [Truncate(100), output("p2")], TxOffloads(), PENDING)
    assert exp.frames == [frame[:100]] and exp.bugs == [TRUNC_PENDING_CSUM]
    left = bytearray(frame[54:100])
    left[6:8] = b"\0\0"
    want = csum.finish(csum.ones_sum(bytes(left), csum.pseudo_header_v6(
        frame[22:38], frame[38:54], 17, len(left))))
    assert int.from_bytes(exp.ovs_frames[0][60:62], "big") == want


@pytest.mark.parametrize("tx,crash", [("none", True), ("l4", True), ("l4_disabled", False)])
def test_a_cut_before_a_pending_ipv4_l4_header_is_the_known_crash(tx: str, crash: bool) -> None:
    """OVS sums a negative L4 size where it (or a port doing the offload) completes
    the checksum; a port that takes the offload and does nothing is handed it."""
    from datapath.model.bugs import TRUNC_L4_CUT_CRASH
    exp = model.forward(UDP, [Truncate(20), output("p2")], TxOffloads.parse(tx), PENDING)
    assert exp.frames == [UDP[:20]]
    assert (TRUNC_L4_CUT_CRASH in exp.bugs) is crash
    # from the first byte of the UDP header on, and over IPv6, no crash
    assert not model.forward(UDP, [Truncate(34), output("p2")], TxOffloads(), PENDING).bugs
    from fixtures.frames import compose
    six = compose("udp", 6)
    assert not model.forward(six, [Truncate(20), output("p2")], TxOffloads(), PENDING).bugs


def test_into_a_udp_tunnel_ovs_takes_the_outer_checksum_for_the_uncut_packet() -> None:
    """The exploration's vector: an IPv6 TCP frame (pending checksum) cut to its
    Ethernet header and pushed into VXLAN with csum: right over the bytes sent
    0xc990, OVS 4.0.0 sent 0x6356 (the checksum for the uncut inner frame)."""
    from fixtures.explore import build_frame
    from fixtures.tunnel import spec
    frame = build_frame({"bad": False, "dport": 1, "ipv": 6, "l4": "tcp", "payload": "",
                         "sport": 1, "vlan": False})
    exp = model.forward(frame, [Truncate(14), PushTunnel(spec("vxlan", 4, True), "11"),
                                output("p2")], TxOffloads(), PENDING)
    assert exp.frames[0][-14:] == frame[:14] and exp.bugs == [TRUNC_TUNNEL_OUTER_CSUM]
    assert (exp.frames[0][40:42].hex(), exp.ovs_frames[0][40:42].hex()) == ("c990", "6356")
    # a port that does the outer UDP checksum itself takes it over the bytes sent
    done = model.forward(frame, [Truncate(14), PushTunnel(spec("vxlan", 4, True), "11"),
                                 output("p2")], TxOffloads.parse("out_udp"), PENDING)
    assert not done.bugs


@pytest.mark.parametrize("ipv", [4, 6])
@pytest.mark.parametrize("l4", ["tcp", "udp"])
def test_into_a_udp_tunnel_a_payload_cut_breaks_the_outer_checksum_over_ipv6_only(
        ipv: int, l4: str) -> None:
    """Cut in the inner payload, OVS completing the inner checksum: over IPv4 the
    shortcut and the completion both take the header's total length, so OVS's
    outer UDP checksum verifies over the bytes it sends (only the inner value is
    OVS's own: trunc-pending-csum); over IPv6 the shortcut takes the header's
    payload length and the completion the L4 bytes left (trunc-tunnel-outer-csum)."""
    from fixtures.frames import compose
    from fixtures.tunnel import spec
    frame = compose(l4, ipv, payload=bytes(range(120)))
    cut = 14 + (20 if ipv == 4 else 40) + (20 if l4 == "tcp" else 8) + 30
    exp = model.forward(frame, [Truncate(cut), PushTunnel(spec("vxlan", 4, True), "11"),
                                output("p2")], TxOffloads(), PENDING)
    sent = Packet.parse(exp.ovs_frames[0])
    assert (sent.l4_sum(sent.outer) == 0xFFFF) is (ipv == 4)
    assert exp.bugs == ([TRUNC_PENDING_CSUM] if ipv == 4
                        else [TRUNC_PENDING_CSUM, TRUNC_TUNNEL_OUTER_CSUM])


def test_into_a_udp_tunnel_a_cut_in_the_inner_udp_header_breaks_the_outer_checksum() -> None:
    """Over IPv4 too: the shortcut reads the UDP header's checksum and the headers
    past the cut (no crash: OVS's own completion needs the checksum field)."""
    from fixtures.frames import compose
    from fixtures.tunnel import spec
    frame = compose("udp", 4, payload=bytes(range(120)))
    exp = model.forward(frame, [Truncate(14 + 20 + 4), PushTunnel(spec("vxlan", 4, True), "11"),
                                output("p2")], TxOffloads(), PENDING)
    sent = Packet.parse(exp.ovs_frames[0])
    assert sent.l4_sum(sent.outer) != 0xFFFF and exp.bugs == [TRUNC_TUNNEL_OUTER_CSUM]


# Out of a Linux port that offers L4 checksum offload (a veth with tx
# checksumming): OVS hands it the pending checksum in a virtio-net header, the
# field seeded with the pseudo-header of the IP header's lengths
# (datapath/deviations/ports.py).

def _into_vxlan(l4: str, ipv: int, cut: int) -> tuple[bytes, model.Expected]:
    from datapath.deviations import ports
    from fixtures.frames import compose
    from fixtures.tunnel import spec
    frame = compose(l4, ipv, payload=bytes(range(20)))
    with ports.linux_egress():
        exp = model.forward(frame, [Truncate(cut), PushTunnel(spec("vxlan", 4, True), "11"),
                                    output("p2")], TxOffloads.parse("l4"), PENDING)
    return frame, exp


def test_a_linux_port_completes_the_cut_checksum_from_ovs_seed() -> None:
    """The vector of --backend tap test_output_max_len_into_tunnel[tx_l4-vxlan-ul4-
    tcp6-max_len80]: the inner TCP checksum under the IPv6 header's payload length
    (the uncut packet's) over the 26 bytes left, and OVS's outer UDP checksum,
    taken by its shortcut, right for the bytes that leave."""
    from datapath.model import csum
    frame, exp = _into_vxlan("tcp", 6, 80)
    assert exp.bugs == [TRUNC_PENDING_CSUM]
    sent = Packet.parse(exp.ovs_frames[0])
    assert sent.l4_sum(sent.outer) == 0xFFFF
    inner = exp.ovs_frames[0][50:]
    left = bytearray(inner[54:80])
    left[16:18] = b"\0\0"
    want = csum.finish(csum.ones_sum(bytes(left), csum.pseudo_header_v6(
        frame[22:38], frame[38:54], 6, len(frame) - 54)))
    assert int.from_bytes(inner[70:72], "big") == want
    assert inner[:70] + inner[72:] == frame[:70] + frame[72:80]


@pytest.mark.parametrize("l4,ipv,cut", [("udp", 4, 40), ("tcp", 4, 14), ("tcp", 6, 40)])
def test_a_linux_port_refuses_a_checksum_field_past_the_cut(l4: str, ipv: int,
                                                           cut: int) -> None:
    """The field ends past the cut: the kernel refuses the virtio-net header
    (__packet_snd_vnet_parse(): EINVAL), nothing leaves; no crash, OVS does not
    sum the negative L4 size itself."""
    from datapath.model.bugs import TRUNC_CSUM_PAST_END
    from datapath.model.hooks import NOT_SENT
    _, exp = _into_vxlan(l4, ipv, cut)
    assert exp.bugs == [TRUNC_CSUM_PAST_END] and exp.ovs_allowed == [{NOT_SENT: {}}]
    assert exp.not_sent == 1 and exp.ovs_frames == []
    assert exp.judge([]).status == "known"
    assert exp.judge(exp.frames).status == "gone"


def test_a_linux_port_is_not_handed_what_ovs_completes_first() -> None:
    """Cut inside the inner TCP header: OVS's outer checksum shortcut gives up,
    so OVS completes the inner checksum itself (its field is gone with the cut)
    and hands the port nothing to complete: the model's frame leaves."""
    _, exp = _into_vxlan("tcp", 6, 64)
    assert not exp.bugs and exp.not_sent == 0


def test_a_linux_port_refuses_nothing_of_a_whole_field() -> None:
    """Cut at the end of the IPv6 UDP header: the field is whole, and the port
    completes it under the header's payload length over the header alone."""
    _, exp = _into_vxlan("udp", 6, 14 + 40 + 8)
    assert exp.not_sent == 0 and exp.bugs == [TRUNC_PENDING_CSUM]


def test_the_rest_of_a_refused_batch_is_lost_with_it() -> None:
    """--backend tap test_output_max_len[tx_l4-udp4-rx_partial-max_len40]: the
    cut copy's checksum field is past the cut, the veth refuses it, and the
    whole packet output after it in the same batch is lost too."""
    from datapath.deviations import ports
    from datapath.model.bugs import TRUNC_CSUM_PAST_END
    from datapath.model.hooks import NOT_SENT
    with ports.linux_egress():
        exp = model.forward(UDP, [Truncate(40), output("p2"), output("p2")],
                            TxOffloads.parse("l4"), PENDING)
    assert exp.bugs == [TRUNC_CSUM_PAST_END] and exp.ovs_allowed[1] != {NOT_SENT: {}}
    ports.lost_with_the_refused(exp)
    assert exp.ovs_allowed == [{NOT_SENT: {}}, {NOT_SENT: {}}] and exp.not_sent == 2
    assert exp.judge([]).status == "known" and exp.judge([UDP]).status == "mismatch"
