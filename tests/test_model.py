"""The model against independent vectors: the checksum values written in
upstream tests/dpif-netdev.at (1116-1121) and RFC arithmetic."""
from __future__ import annotations

import pytest

from datapath.model import csum, forward
from datapath.model.actions import mod_nw_dst, mod_tp_dst, output
from datapath.model.packet import Packet
from datapath.offloads import CsumState, OffloadError, RxFlags, TxOffloads
from fixtures.frames import MICROGRAM, OPT_PKT, compose, with_ip_csum_flipped, with_l4_csum

G, B, P, U = CsumState.GOOD, CsumState.BAD, CsumState.PARTIAL, CsumState.UNKNOWN
NONE = TxOffloads()


def l4csum(frame: bytes) -> int:
    pkt = Packet.parse(frame)
    return pkt.u16(pkt.l4_csum_ofs)


def ipcsum(frame: bytes) -> int:
    return Packet.parse(frame).u16(14 + 10)


# (l4, ipv, checksum of the composed frame, after mod_tp_dst:2222) from dpif-netdev.at.
L4_VECTORS = [("tcp", 4, 0x6B72, 0x7715), ("udp", 4, 0xBB3B, 0xC6DE),
              ("tcp", 6, 0xE5C2, 0xF165), ("udp", 6, 0x358C, 0x412F)]


@pytest.mark.parametrize("l4,ipv,good,good_exp", L4_VECTORS)
def test_composed_frames_carry_upstream_checksums(l4: str, ipv: int, good: int, good_exp: int) -> None:
    assert l4csum(compose(l4, ipv)) == good
    assert l4csum(compose(l4, ipv, dport=2222)) == good_exp


@pytest.mark.parametrize("tx", [NONE, TxOffloads.parse("l4")], ids=lambda t: t.id)
@pytest.mark.parametrize("l4,ipv,good,good_exp", L4_VECTORS)
def test_check_l4_checksums_matrix(l4: str, ipv: int, good: int, good_exp: int,
                                   tx: TxOffloads) -> None:
    """CHECK_L4_CHECKSUMS: good frame -> good_exp always; bad (0xdead) -> 0xea50 unless
    the rx flag made the state valid, in which case the checksum is recomputed."""
    acts = [mod_tp_dst(2222), output("p2")]
    good_frame = compose(l4, ipv)
    bad_frame = with_l4_csum(good_frame, 0xDEAD)
    for state in (U, G, B, P):
        out = forward(good_frame, acts, tx, RxFlags(l4=state)).frames
        assert [l4csum(f) for f in out] == [good_exp], state
        assert out[0] == compose(l4, ipv, dport=2222)
    for state, want in ((U, 0xEA50), (G, good_exp), (B, 0xEA50), (P, good_exp)):
        out = forward(bad_frame, acts, tx, RxFlags(l4=state)).frames
        assert [l4csum(f) for f in out] == [want], state


@pytest.mark.parametrize("l4,ipv,good,good_exp", L4_VECTORS)
def test_l4_offload_disabled_leaves_stale_checksum(l4: str, ipv: int, good: int, good_exp: int) -> None:
    bad_frame = with_l4_csum(compose(l4, ipv), 0xDEAD)
    exp = forward(bad_frame, [mod_tp_dst(2222), output("p2")],
                  TxOffloads.parse("l4_disabled"), RxFlags(l4=G))
    assert exp.frames == [with_l4_csum(compose(l4, ipv, dport=2222), 0xDEAD)]
    assert exp.csum_state[0][l4.upper()] == "stale"


def test_check_ip_checksums_matrix() -> None:
    good = compose("tcp", 4)
    bad = with_ip_csum_flipped(good)
    good_exp = compose("tcp", 4, dst="192.168.1.1")
    bad_exp = with_ip_csum_flipped(good_exp)
    acts = [mod_nw_dst("192.168.1.1"), output("p2")]
    for tx in (NONE, TxOffloads.parse("ip")):
        for state in (U, G, B, P):
            assert forward(good, acts, tx, RxFlags(ip=state)).frames == [good_exp]
        for state, want in ((U, bad_exp), (G, good_exp), (B, bad_exp), (P, good_exp)):
            assert forward(bad, acts, tx, RxFlags(ip=state)).frames == [want], (tx, state)


def test_ip_offload_disabled_keeps_bad_ip_checksum_but_updates_tcp() -> None:
    bad = with_ip_csum_flipped(compose("tcp", 4))
    good_exp = compose("tcp", 4, dst="192.168.1.1")
    out = forward(bad, [mod_nw_dst("192.168.1.1"), output("p2")],
                  TxOffloads.parse("ip_disabled"), RxFlags(ip=G)).frames[0]
    # Upstream's composed_expected: bad frame up to the addresses, good_expected after.
    cut = bad.hex().index("c0a87b02c0a87b01")
    assert out.hex() == bad.hex()[:cut] + good_exp.hex()[cut:]


def test_ip_options_frame_and_truncated_microgram() -> None:
    acts = [mod_nw_dst("192.168.1.1"), output("p2")]
    rx = RxFlags(ip=G)
    opt = forward(OPT_PKT, acts, NONE, rx).frames
    assert opt == [bytes.fromhex(OPT_PKT.hex().replace("0a000002", "c0a80101")
                                 .replace("eeee", "dd2e"))]
    assert forward(MICROGRAM, acts, NONE, rx).frames == [MICROGRAM]


def test_simple_match_forward_recomputes_only_partial() -> None:
    bad = with_l4_csum(compose("tcp", 4), 0xDEAD)
    for state in (U, G, B):
        assert forward(bad, [output("p2")], NONE, RxFlags(l4=state)).frames == [bad]
    assert forward(bad, [output("p2")], NONE, RxFlags(l4=P)).frames == [compose("tcp", 4)]


def test_udp_zero_checksum_stays_zero() -> None:
    frame = with_l4_csum(compose("udp", 4), 0)
    for state in (U, P):
        out = forward(frame, [mod_tp_dst(2222), mod_nw_dst("10.1.1.1"), output("p2")],
                      NONE, RxFlags(l4=state)).frames[0]
        assert l4csum(out) == 0


def test_partial_udp6_zero_checksum_may_stay_zero() -> None:
    """send.py E2: 0 is UDP's "no checksum" over IPv6 too (RFC 6935 §5, RFC 6936;
    upstream's "IPv6 udp csum offload" no_csum_frame keeps it): a partial UDP/IPv6
    checksum whose field holds 0 may stay 0 or be computed, and no bug is named."""
    frame = with_l4_csum(compose("udp", 6), 0)
    exp = forward(frame, [mod_tp_dst(2222), output("p2")], NONE, RxFlags(l4=G))
    kept = exp.frames[0]
    assert l4csum(kept) == 0 and exp.csum_state[0]["UDP"] == "none" and not exp.bugs
    computed = forward(compose("udp", 6), [mod_tp_dst(2222), output("p2")], NONE,
                       RxFlags(l4=P)).frames[0]
    assert l4csum(computed) == 0x412F and exp.permits(0, computed)


def test_rfc1624_incremental_matches_full_recompute() -> None:
    data = bytes(range(40))
    new = data[:10] + b"\x12\x34" + data[12:]
    assert csum.incremental(csum.checksum(data), data[10:12], b"\x12\x34") == csum.checksum(new)


def test_offload_specs() -> None:
    tx = TxOffloads.parse("l4_disabled+out_udp")
    assert tx.options() == {"ol_l4_tx_csum": "true", "ol_l4_tx_csum_disabled": "true",
                            "ol_out_udp_tx_csum": "true"}
    assert tx.id == "tx_l4_disabled+out_udp"
    assert RxFlags.parse("ip=bad,l4=partial").options() == {
        "ol_ip_rx_csum_set_bad": "true", "ol_l4_rx_csum_set_partial": "true"}
    with pytest.raises(OffloadError, match="unknown tx offload"):
        TxOffloads.parse("l5")
    with pytest.raises(OffloadError, match="unknown rx flag"):
        RxFlags.parse("ip=great")


# A TCP segment whose checksum is zero, as Linux sent it (0xffff: -0), seen in
# test_ftp[afxdp]: OVS's FTP helper recomputed it to +0 (0x0000).
TCP_MINUS_ZERO = bytes.fromhex(
    "963d7aad51c5da246b1486ad08004500004bdacc4000400649dc0a0101020a0101010015cea07935cd998e"
    "b2090080180040ffff00000101080a90e06f195d24748b323330204c6f67696e207375636365737366756c"
    "2e0d0a")


def test_a_zero_tcp_checksum_is_allowed_in_either_form() -> None:
    """send.py E9: +0 and -0 both verify (RFC 1071, RFC 1624 §3); a frame
    allowed with one is allowed with the other, and nothing else is."""
    plus = TCP_MINUS_ZERO[:50] + b"\0\0" + TCP_MINUS_ZERO[52:]
    for sent, other in ((TCP_MINUS_ZERO, plus), (plus, TCP_MINUS_ZERO)):
        exp = forward(sent, [output("p")], NONE)
        assert exp.frames == [sent]
        assert exp.permits(0, other)
        assert not exp.permits(0, sent[:50] + b"\xff\xfe" + sent[52:])


def test_a_udp_checksum_of_zero_has_no_twin() -> None:
    """RFC 768: a UDP checksum of 0 means none, not a second form of -0."""
    frame = bytearray(compose("udp", 4))
    frame[40:42] = b"\0\0"
    exp = forward(bytes(frame), [output("p")], NONE)
    assert not exp.permits(0, bytes(frame[:40]) + b"\xff\xff" + bytes(frame[42:]))
