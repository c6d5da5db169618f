"""Tunnel headers after the outer IP header, built from their specifications.

Each builder returns the bytes that follow the outer IPv4/IPv6 header, with
every length filled in and every checksum zero (the caller finishes them):

- VXLAN, RFC 7348 §5: flags with I (0x08), 24-bit VNI; UDP port 4789.
- VXLAN-GPE, draft-ietf-nvo3-vxlan-gpe-12 §3.2: flags I and P (0x0c), a Next
  Protocol byte (1 IPv4, 2 IPv6, 3 Ethernet).
- Geneve, RFC 8926 §3.4/§3.5: version 0, option length in 4-byte words, the C
  bit when any option is critical (type bit 0x80), protocol type 0x6558 for
  Ethernet, 24-bit VNI, then the option TLVs; UDP port 6081.
- GRE, RFC 2784 §2 with RFC 2890 §2: C (0x8000, checksum and reserved1 follow),
  K (0x2000, key follows), S (0x1000, sequence number follows), version 0;
  protocol type 0x6558 (RFC 1701 transparent Ethernet bridging) for Ethernet,
  the payload's EtherType for an L3 payload.
- ERSPAN, draft-foschiano-erspan-03 §4.2 (type II, version 1) and §4.3 (type
  III, version 2): GRE with only S set, protocol 0x88BE / 0x22EB, then
  Ver|VLAN|COS|En (or BSO)|T|Session ID and, for type II, Reserved|Index; for
  type III, a 32-bit Timestamp and SGT|P|FT|HW ID|D|Gra|O.
- SRv6, RFC 8754 §2 (Segment Routing Header) used by H.Encaps, RFC 8986 §5.1:
  routing type 4, Segments Left and Last Entry n-1, the segment list in
  reverse order of visit; the next header is the payload's (4 IPv4, 41 IPv6).
- GTP-U, 3GPP TS 29.281 §5.1: flags 0x30 (version 1, PT 1), message type 255
  (G-PDU), length of what follows the 8 mandatory bytes, TEID.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

VXLAN_PORT = 4789
GENEVE_PORT = 6081
GTPU_PORT = 2152
ETH_TYPE_TEB = 0x6558
ETH_TYPE_IPV4, ETH_TYPE_IPV6 = 0x0800, 0x86DD
ETH_TYPE_ERSPAN1, ETH_TYPE_ERSPAN2 = 0x88BE, 0x22EB
GRE_CSUM, GRE_KEY, GRE_SEQ = 0x8000, 0x2000, 0x1000
GPE_NEXT_PROTO = {ETH_TYPE_IPV4: 1, ETH_TYPE_IPV6: 2, ETH_TYPE_TEB: 3}
IPPROTO_OF_ETH_TYPE = {ETH_TYPE_IPV4: 4, ETH_TYPE_IPV6: 41}
IPPROTO_ROUTING = 43
SRH_ROUTING_TYPE = 4


@dataclass(frozen=True)
class GeneveOpt:
    """One Geneve option TLV (RFC 8926 §3.5); the data is a multiple of 4 bytes."""

    cls: int
    type: int
    data: bytes

    @property
    def critical(self) -> bool:
        return bool(self.type & 0x80)

    def pack(self) -> bytes:
        if len(self.data) % 4 or len(self.data) > 124:
            raise ValueError("Geneve option data: a multiple of 4 bytes, at most 124")
        return struct.pack("!HBB", self.cls, self.type, len(self.data) // 4) + self.data


def udp(src: int, dst: int, payload_len: int) -> bytes:
    """RFC 768: length covers the header; the checksum is left 0 here."""
    return struct.pack("!HHHH", src, dst, 8 + payload_len, 0)


def vxlan(vni: int, gpe: bool = False, next_type: int = ETH_TYPE_TEB) -> bytes:
    """A VXLAN header (RFC 7348), or a VXLAN-GPE one with the next protocol of NEXT_TYPE."""
    if gpe:
        return struct.pack("!BHBI", 0x0C, 0, GPE_NEXT_PROTO[next_type], vni << 8)
    return struct.pack("!II", 0x08000000, vni << 8)


def geneve(vni: int, opts: tuple[GeneveOpt, ...] = ()) -> bytes:
    """A Geneve header (RFC 8926) with its options, carrying Ethernet."""
    body = b"".join(o.pack() for o in opts)
    first = (len(body) // 4) & 0x3F
    second = 0x40 if any(o.critical for o in opts) else 0
    return struct.pack("!BBHI", first, second, ETH_TYPE_TEB, vni << 8) + body


def gre(proto: int, *, csum: bool = False, key: int | None = None,
        seq: int | None = None) -> bytes:
    """A GRE header (RFC 2784, RFC 2890) with the optional checksum, key and sequence fields."""
    flags = (GRE_CSUM if csum else 0) | (GRE_KEY if key is not None else 0) | (
        GRE_SEQ if seq is not None else 0)
    out = struct.pack("!HH", flags, proto)
    if csum:
        out += bytes(4)
    if key is not None:
        out += struct.pack("!I", key)
    if seq is not None:
        out += struct.pack("!I", seq & 0xFFFFFFFF)
    return out


def erspan_base(ver: int, session: int, vlan: int = 0, cos: int = 0, en_bso: int = 0,
                truncated: bool = False) -> bytes:
    """Ver(4) VLAN(12) | COS(3) En/BSO(2) T(1) Session ID(10)."""
    if session >> 10:
        raise ValueError(f"ERSPAN session ID {session:#x} is wider than 10 bits")
    return struct.pack("!HH", (ver << 12) | (vlan & 0xFFF),
                       (cos << 13) | (en_bso << 11) | (int(truncated) << 10) | session)


def erspan_v1(session: int, index: int, vlan: int = 0, cos: int = 0, en: int = 0) -> bytes:
    """Type II: the base, then Reserved(12) Index(20)."""
    return erspan_base(1, session, vlan, cos, en) + struct.pack("!I", index & 0xFFFFF)


def erspan_v2(session: int, timestamp: int, hwid: int, direction: int, *, vlan: int = 0,
              cos: int = 0, bso: int = 0, sgt: int = 0, p: int = 0, ft: int = 0,
              gra: int = 0) -> bytes:
    """Type III: the base, Timestamp(32), SGT(16) P(1) FT(5) HW ID(6) D(1) Gra(2) O(1).

    FT 0 is an Ethernet frame; Gra 00 is a timestamp in 100 microsecond units;
    BSO 00 is a good frame "or unknown integrity" (the datapath does not check);
    P is for Ethernet protocol (PDU) frames, and no optional sub-header (O 0)."""
    last = (p << 15) | (ft << 10) | ((hwid & 0x3F) << 4) | (direction << 3) | (gra << 1)
    return (erspan_base(2, session, vlan, cos, bso)
            + struct.pack("!IHH", timestamp & 0xFFFFFFFF, sgt, last))


def srh(segments: tuple[str, ...], next_type: int) -> bytes:
    """The SRH of H.Encaps for a segment list given in order of visit."""
    n = len(segments)
    if not n:
        raise ValueError("an SRv6 tunnel needs at least one segment")
    head = struct.pack("!BBBBBBH", IPPROTO_OF_ETH_TYPE[next_type], 2 * n, SRH_ROUTING_TYPE,
                       n - 1, n - 1, 0, 0)
    return head + b"".join(ipaddress.IPv6Address(s).packed for s in reversed(segments))


def gtpu(teid: int, payload_len: int) -> bytes:
    """A GTP-U header (3GPP TS 29.281) without options: a G-PDU for TEID."""
    return struct.pack("!BBHI", 0x30, 0xFF, payload_len, teid)
