"""datapath/model/ipfrag.py: reassembly (RFC 791 §3.2, RFC 8200 §4.5), overlaps
(RFC 5722), refragmentation; fragments built here by hand, field by field."""
from __future__ import annotations

import struct

import pytest

from datapath.model import csum
from datapath.model.ipfrag import Reassembly, is_fragment, parse
from fixtures.system_userspace.system_ct_frag import (
    V4_FIRST,
    V4_LAST,
    V4_LAST_OVERLAP,
    V6_EXT2_FIRST,
    V6_EXT2_LAST,
    V6_FIRST,
    V6_LAST,
)

ETH4 = bytes.fromhex("505400000002505400000001" "0800")
ETH6 = bytes.fromhex("505400000002505400000001" "86dd")
SRC4, DST4 = bytes([10, 1, 1, 1]), bytes([10, 1, 1, 2])
SRC6, DST6 = bytes.fromhex("fc00" + "00" * 13 + "01"), bytes.fromhex("fc00" + "00" * 13 + "02")
PAYLOAD = bytes(range(256)) * 12  # 3072 octets


def v4(data: bytes, offset: int, more: bool, ident: int = 7, proto: int = 17,
       df: bool = False) -> bytes:
    hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(data), ident,
                                (0x4000 if df else 0) | (0x2000 if more else 0) | offset // 8,
                                64, proto, 0, SRC4, DST4))
    struct.pack_into("!H", hdr, 10, csum.checksum(bytes(hdr)))
    return ETH4 + bytes(hdr) + data


def v6(data: bytes, offset: int, more: bool, ident: int = 0x1234, ext: bytes = b"",
       first_nh: int = 44) -> bytes:
    frag = struct.pack("!BBHI", 17, 0, offset | int(more), ident)
    fixed = struct.pack("!IHBB16s16s", 6 << 28, len(ext) + 8 + len(data), first_nh, 64,
                        SRC6, DST6)
    return ETH6 + fixed + ext + frag + data


def test_v4_in_order_out_of_order_and_refragmented() -> None:
    frags = [v4(PAYLOAD[0:1480], 0, True), v4(PAYLOAD[1480:2960], 1480, True),
             v4(PAYLOAD[2960:], 2960, False)]
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        r = Reassembly()
        got = [r.add(frags[i]) for i in order]
        assert got[:2] == [None, None]
        whole = got[2]
        assert whole is not None
        assert whole.frame == v4(PAYLOAD, 0, False)  # header of the first, MF clear, lengths
        assert whole.size == 1480
        assert whole.refragment(whole.frame) == frags
        assert not r.held


def test_v4_keeps_df_and_needs_every_piece() -> None:
    r = Reassembly()
    assert r.add(v4(PAYLOAD[:800], 0, True, df=True)) is None
    assert r.add(v4(PAYLOAD[1600:2400], 1600, False, df=True)) is None  # a hole at 800
    whole = r.add(v4(PAYLOAD[800:1600], 800, True, df=True))
    assert whole is not None and whole.frame == v4(PAYLOAD[:2400], 0, False, df=True)


def test_v4_keys_zone_identification_protocol() -> None:
    r = Reassembly()
    assert r.add(v4(PAYLOAD[:8], 0, True), zone=1) is None
    assert r.add(v4(PAYLOAD[8:16], 8, False), zone=2) is None  # another zone
    assert r.add(v4(PAYLOAD[8:16], 8, False, ident=8), zone=1) is None  # another datagram
    assert r.add(v4(PAYLOAD[8:16], 8, False, proto=1), zone=1) is None  # another protocol
    assert r.add(v4(PAYLOAD[8:16], 8, False), zone=1) is not None
    assert len(r.held) == 3


def test_overlap_discards_the_datagram() -> None:
    r = Reassembly()
    assert r.add(v4(PAYLOAD[:400], 0, True)) is None
    assert r.add(v4(PAYLOAD[392:420], 392, False)) is None
    assert not r.held and r.overlapped == 1
    # a fragment after that starts over: nothing of the abandoned datagram is kept
    assert r.add(v4(PAYLOAD[400:420], 400, False)) is None
    assert len(r.held) == 1


def test_exact_duplicate_is_dropped_alone() -> None:
    r = Reassembly()
    first = v6(PAYLOAD[:1448], 0, True)
    assert r.add(first) is None
    assert r.add(first) is None
    whole = r.add(v6(PAYLOAD[1448:2000], 1448, False))
    assert whole is not None and r.overlapped == 0


def test_v6_fragment_header_removed_and_put_back() -> None:
    hbh = bytes([44, 0, 1, 4, 0, 0, 0, 0])  # Hop-by-Hop, PadN, naming the Fragment header
    data = PAYLOAD[:2400]
    frags = [v6(data[:1448], 0, True, ext=hbh, first_nh=0),
             v6(data[1448:], 1448, False, ext=hbh, first_nh=0)]
    r = Reassembly()
    assert r.add(frags[1]) is None
    whole = r.add(frags[0])
    assert whole is not None
    fixed = struct.pack("!IHBB16s16s", 6 << 28, 8 + len(data), 0, 64, SRC6, DST6)
    assert whole.frame == ETH6 + fixed + bytes([17]) + hbh[1:] + data
    assert whole.refragment(whole.frame) == frags


def test_later_fragment_without_its_first_is_held() -> None:
    r = Reassembly()
    assert r.add(v6(PAYLOAD[8:16], 8, False)) is None
    assert len(r.held) == 1
    assert is_fragment(v6(PAYLOAD[8:16], 8, False)) and not is_fragment(v4(PAYLOAD[:8], 0, False))
    with pytest.raises(ValueError):
        r.add(v4(PAYLOAD[:8], 0, False))


def test_refragment_follows_a_rewrite() -> None:
    r = Reassembly()
    r.add(v4(PAYLOAD[:1480], 0, True))
    whole = r.add(v4(PAYLOAD[1480:1600], 1480, False))
    assert whole is not None
    natted = bytearray(whole.frame)
    natted[14 + 12:14 + 16] = bytes([10, 1, 1, 240])
    struct.pack_into("!H", natted, 14 + 10, 0)
    struct.pack_into("!H", natted, 14 + 10, csum.checksum(bytes(natted[14:34])))
    out = whole.refragment(bytes(natted))
    assert [o[14 + 12:14 + 16] for o in out] == [bytes([10, 1, 1, 240])] * 2
    assert all(csum.checksum(o[14:34]) == 0 for o in out)


def test_upstream_bundle_fragments() -> None:
    """system-traffic.at's packet-out fragments: a UDP 1 -> 2 datagram whole
    from its two fragments in either order; not when they overlap by 8
    octets; the same behind a Hop-by-Hop header with a Router Alert."""
    for frames in ((V4_FIRST, V4_LAST), (V4_LAST, V4_FIRST), (V6_FIRST, V6_LAST),
                   (V6_LAST, V6_FIRST), (V6_EXT2_FIRST, V6_EXT2_LAST)):
        r = Reassembly()
        assert r.add(bytes.fromhex(frames[0])) is None
        whole = r.add(bytes.fromhex(frames[1]))
        assert whole is not None
        frag = parse(bytes.fromhex(frames[0]))
        assert frag is not None
        l4 = 14 + (20 if frag.ipv == 4 else frag.unfrag)
        assert whole.frame[l4:l4 + 4] == bytes.fromhex("00010002")  # UDP 1 -> 2
        assert len(whole.frame) == l4 + (428 if frag.ipv == 4 else 1300)
    for frames in ((V4_FIRST, V4_LAST_OVERLAP), (V4_LAST_OVERLAP, V4_FIRST)):
        r = Reassembly()
        assert [r.add(bytes.fromhex(f)) for f in frames] == [None, None]
        assert r.overlapped == 1
