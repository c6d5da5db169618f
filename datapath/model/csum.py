"""Internet checksum arithmetic (RFC 1071, RFC 1624), written for the model."""
from __future__ import annotations

import struct


def ones_sum(data: bytes, start: int = 0) -> int:
    """16-bit ones' complement sum of data (odd length padded with a zero byte)."""
    if len(data) % 2:
        data = bytes(data) + b"\0"
    total = start + sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return int(total)


def finish(total: int) -> int:
    """The checksum field value for a sum: its complement."""
    return ~total & 0xFFFF


def checksum(data: bytes) -> int:
    """The Internet checksum of the bytes (RFC 1071): the complement of their ones' complement sum."""
    return finish(ones_sum(data))


def incremental(old_csum: int, old_words: bytes, new_words: bytes) -> int:
    """RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), applied 16 bits at a time.

    This is how a datapath patches a checksum after rewriting a field without
    looking at the rest: a checksum that was wrong stays exactly as wrong.
    """
    assert len(old_words) == len(new_words) and len(old_words) % 2 == 0
    csum = old_csum
    for i in range(0, len(old_words), 2):
        m = (old_words[i] << 8) | old_words[i + 1]
        m_new = (new_words[i] << 8) | new_words[i + 1]
        total = (~csum & 0xFFFF) + (~m & 0xFFFF) + m_new
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        csum = ~total & 0xFFFF
    return csum


def pseudo_header_v4(src: bytes, dst: bytes, proto: int, length: int) -> int:
    """The ones' complement sum of the IPv4 pseudo-header (RFC 9293 §3.1, RFC 768)."""
    return ones_sum(src + dst + struct.pack("!BBH", 0, proto, length))


def pseudo_header_v6(src: bytes, dst: bytes, proto: int, length: int) -> int:
    """The ones' complement sum of the IPv6 pseudo-header (RFC 8200 §8.1)."""
    return ones_sum(src + dst + struct.pack("!IxxxB", length, proto))
