"""The Network Service Header (NSH, RFC 8300) with MD type 1, on a frame's
bytes: what `encap(nsh(md_type=1))`, `encap(ethernet)` and `decap` do to
an Ethernet frame (ovs-actions(7)).

The rules, from RFC 8300 and ovs-actions(7), never from OVS's code:
- RFC 8300 §2.2: the base header is one 32-bit word: Ver (2 bits, 0), O (1),
  U (1), TTL (6), Length (6, in 4-byte words, the whole NSH), U (4), MD Type
  (4), Next Protocol (8: 0x1 IPv4, 0x2 IPv6, 0x3 Ethernet, 0x4 NSH, 0x5 MPLS).
  "If no initial value is explicitly provided, the default initial TTL value
  of 63 MUST be used."
- RFC 8300 §2.3: the Service Path header: SPI (24 bits) and SI (8).  The
  initial SI is the classifier's choice: the standard does not fix it, so
  `SI_OFFSET` lets a comparison leave it open where no flow sets it.
- RFC 8300 §2.4: MD type 1 carries a fixed 16-byte context (four 32-bit
  words, c1..c4 in ovs-fields(7)); Length is then 6.
- RFC 8300 §9.1: EtherType 0x894F.
- ovs-actions(7): `encap(nsh(md_type=1))` puts an NSH header before an
  Ethernet frame (Next Protocol Ethernet); `encap(ethernet)` then adds an
  Ethernet header with the packet's EtherType (NSH's) and zero addresses;
  `decap` removes the Ethernet header, then (again) the NSH header, the
  inner packet being what Next Protocol says.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from datapath.model.l2tags import mac

ETH_TYPE_NSH = 0x894F
NP_IPV4, NP_IPV6, NP_ETHERNET, NP_NSH, NP_MPLS = 1, 2, 3, 4, 5
MD_TYPE_1 = 1
TTL_DEFAULT = 63  # RFC 8300 §2.2
MD1_WORDS = 6  # base + service path + 4 context words (RFC 8300 §2.4)
SI_OFFSET = 14 + 7  # in an Ethernet frame carrying NSH: the SI byte


@dataclass(frozen=True)
class Nsh:
    """An MD type 1 NSH header's fields."""

    spi: int
    si: int
    next_proto: int = NP_ETHERNET
    ttl: int = TTL_DEFAULT
    context: tuple[int, int, int, int] = (0, 0, 0, 0)
    oam: bool = False

    def pack(self) -> bytes:
        base = ((int(self.oam) << 29) | (self.ttl & 0x3F) << 22 | MD1_WORDS << 16
                | MD_TYPE_1 << 8 | self.next_proto)
        return struct.pack("!II4I", base, (self.spi & 0xFFFFFF) << 8 | self.si, *self.context)

    @classmethod
    def unpack(cls, data: bytes) -> tuple[Nsh, bytes]:
        """The header at the start of `data` and what follows it."""
        base, path = struct.unpack_from("!II", data)
        assert base >> 30 == 0, f"NSH version {base >> 30}: RFC 8300 defines 0"
        assert (base >> 8) & 0xF == MD_TYPE_1, "only MD type 1 is modelled"
        words = (base >> 16) & 0x3F
        context = struct.unpack_from("!4I", data, 8)
        return (cls(path >> 8, path & 0xFF, base & 0xFF, (base >> 22) & 0x3F,
                    (context[0], context[1], context[2], context[3]), bool(base >> 29 & 1)),
                data[words * 4:])


def encap(frame: bytes, header: Nsh, dst: str, src: str) -> bytes:
    """`frame` (an Ethernet frame) behind NSH behind Ethernet: the actions
    encap(nsh(md_type=1)) with `header`'s fields set, then encap(ethernet) and
    the addresses set."""
    assert header.next_proto == NP_ETHERNET, "an Ethernet frame's NSH says Next Protocol 3"
    return mac(dst) + mac(src) + struct.pack("!H", ETH_TYPE_NSH) + header.pack() + frame


def decap(frame: bytes) -> bytes:
    """The inner Ethernet frame, as two decap actions leave it: the first
    removes the Ethernet header, the second the NSH header."""
    assert struct.unpack_from("!H", frame, 12)[0] == ETH_TYPE_NSH, "not an NSH frame"
    header, inner = Nsh.unpack(frame[14:])
    assert header.next_proto == NP_ETHERNET, (
        f"NSH Next Protocol {header.next_proto}: only an Ethernet inner frame is modelled")
    return inner


def mask_si(frame: bytes) -> bytes:
    """The frame with an NSH header's SI zeroed (RFC 8300 leaves the initial SI open)."""
    if len(frame) > SI_OFFSET and struct.unpack_from("!H", frame, 12)[0] == ETH_TYPE_NSH:
        return frame[:SI_OFFSET] + b"\0" + frame[SI_OFFSET + 1:]
    return frame
