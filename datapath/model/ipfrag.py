"""IP fragment reassembly and refragmentation, as the `ct` action does them.

ovs-actions(7), `ct`: "If ct is executed on IPv4 (or IPv6) fragments, then
the message is implicitly reassembled before sending to the connection
tracker and refragmented upon output, to the original maximum received
fragment size.  Reassembly occurs within the context of the zone ...
Pipeline processing for the initial fragments is halted.  When the final
fragment is received, the message is assembled and pipeline processing
continues."

Reassembly (RFC 791 §3.2, RFC 8200 §4.5): the fragments of one datagram are
those with the same source, destination and identification (IPv4: and
protocol), here also the same zone; each carries its data at offset x 8
octets; the datagram is complete once the fragment with MF (IPv4) or M (IPv6)
clear has come and the data from 0 to its end has no hole.  The reassembled
packet's headers are the first fragment's (offset 0): IPv4 with MF and the
offset cleared, the total length and the header checksum recomputed; IPv6
with the Fragment header removed, the Next Header that named it set to the
Fragment header's Next Header, and the Payload Length recomputed.

Overlaps: RFC 5722 §4: when fragments of an IPv6 datagram overlap,
reassembly of it is abandoned and every fragment received for it discarded;
an exact duplicate may be dropped alone, the others kept (RFC 8200 §4.5).
IPv4 has no such MUST (RFC 791 lets later data win), but overlapping
fragments are how filters are evaded (RFC 1858 §4, RFC 3128 §2): the model
applies RFC 5722's rule to IPv4 as well, which is what a filter that tracks
connections (here, conntrack) must do to see the datagram the receiver will.

Refragmentation: each piece carries at most the largest fragment's data,
rounded down to a multiple of 8 octets (RFC 791 §3.2 fragmentation
procedure, RFC 8200 §4.5 "Fragment Header"): IPv4 copies the header, with
MF, the offset, the total length and the checksum set per fragment; IPv6
repeats the unfragmentable part (the IPv6 header and the extension headers
before the Fragment header) and puts a Fragment header with the datagram's
identification in each.  From fragments a sender made of even size, in
offset order, that gives back the same fragments.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from datapath.model import csum
from datapath.model.packet import (
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    ETH_TYPE_QINQ,
    ETH_TYPE_VLAN,
    IPV6_FRAGMENT,
    IPV6_HEADER,
    ether_type,
)

# IPv6 extension headers that may precede the Fragment header (RFC 8200 §4.1,
# §4.5: the unfragmentable part), each a multiple of 8 octets: Hop-by-Hop,
# Routing, Destination Options.
_UNFRAGMENTABLE = (0, 43, 60)


@dataclass(frozen=True)
class Fragment:
    """One fragment: where its IP header starts, and what it carries."""

    frame: bytes
    l3: int
    ipv: int
    key: tuple[int | bytes, ...]  # (ipv, src, dst, [proto,] identification)
    offset: int  # in octets
    more: bool  # MF / M
    data: bytes  # the fragmentable part it carries
    ident: int
    # IPv6: the length of the unfragmentable part (IPv6 header + extension
    # headers before the Fragment header), the offset (from l3) of the Next
    # Header byte that names the Fragment header, and the Fragment header's
    # Next Header.  IPv4: the header length, 0, the protocol.
    unfrag: int
    nh_at: int
    next_header: int


def parse(frame: bytes) -> Fragment | None:
    """The fragment in `frame` (behind any 802.1Q/802.1ad tags), None if the
    frame holds no IP fragment."""
    eth_type, l3 = ether_type(frame, 0, (ETH_TYPE_VLAN, ETH_TYPE_QINQ), None)
    if eth_type == ETH_TYPE_IPV4 and len(frame) >= l3 + 20:
        ihl = (frame[l3] & 0x0F) * 4
        total, ident, flags_ofs = struct.unpack_from("!HHH", frame, l3 + 2)
        if not flags_ofs & 0x3FFF or ihl < 20 or total < ihl or len(frame) < l3 + total:
            return None
        proto = frame[l3 + 9]
        key: tuple[int | bytes, ...] = (4, frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20],
                                         proto, ident)
        return Fragment(frame, l3, 4, key, (flags_ofs & 0x1FFF) * 8, bool(flags_ofs & 0x2000),
                        frame[l3 + ihl:l3 + total], ident, ihl, 0, proto)
    if eth_type == ETH_TYPE_IPV6 and len(frame) >= l3 + IPV6_HEADER:
        plen = struct.unpack_from("!H", frame, l3 + 4)[0]
        end = l3 + IPV6_HEADER + plen
        if len(frame) < end:
            return None
        nh_at, ofs = 6, l3 + IPV6_HEADER
        while frame[l3 + nh_at] in _UNFRAGMENTABLE and ofs + 8 <= end:
            nh_at, ofs = ofs - l3, ofs + (frame[ofs + 1] + 1) * 8
        if frame[l3 + nh_at] != IPV6_FRAGMENT or ofs + 8 > end:
            return None
        ofs_m, ident = struct.unpack_from("!HI", frame, ofs + 2)
        key = (6, frame[l3 + 8:l3 + 24], frame[l3 + 24:l3 + 40], ident)  # RFC 8200 §4.5
        return Fragment(frame, l3, 6, key, ofs_m & 0xFFF8, bool(ofs_m & 1),
                        frame[ofs + 8:end], ident, ofs - l3, nh_at, frame[ofs])
    return None


def is_fragment(frame: bytes) -> bool:
    """Whether `frame` holds an IPv4 or IPv6 fragment (MF/M set, or an offset)."""
    return parse(frame) is not None


@dataclass
class Whole:
    """A reassembled datagram, and what refragmenting it needs."""

    frame: bytes
    fragments: list[bytes]  # as they came, in arrival order
    size: int  # the largest fragment's data, rounded down to 8 octets
    ipv: int
    ident: int
    unfrag: int  # IPv6: the unfragmentable part's length; IPv4: the header's
    nh_at: int  # IPv6: where (from l3) the Next Header to the fragmentable part is

    def refragment(self, frame: bytes) -> list[bytes]:
        """`frame` (this datagram, as the actions left it) cut into fragments of
        at most `size` octets of data each."""
        _, l3 = ether_type(frame, 0, (ETH_TYPE_VLAN, ETH_TYPE_QINQ), None)
        if self.ipv == 4:
            ihl = (frame[l3] & 0x0F) * 4
            if ihl != 20:
                raise NotImplementedError("model: refragmenting an IPv4 header with options "
                                          "(RFC 791 §3.1: only copied options repeat)")
            total, flags_ofs = struct.unpack_from("!H", frame, l3 + 2)[0], \
                struct.unpack_from("!H", frame, l3 + 6)[0]
            data = frame[l3 + ihl:l3 + total]
            out = []
            for at in range(0, len(data), self.size):
                piece = data[at:at + self.size]
                more = at + self.size < len(data)
                hdr = bytearray(frame[l3:l3 + ihl])
                struct.pack_into("!H", hdr, 2, ihl + len(piece))
                struct.pack_into("!H", hdr, 6, (flags_ofs & 0x4000) | (0x2000 if more else 0)
                                 | (at // 8))
                struct.pack_into("!H", hdr, 10, 0)
                struct.pack_into("!H", hdr, 10, csum.checksum(bytes(hdr)))
                out.append(frame[:l3] + bytes(hdr) + piece)
            return out
        plen = struct.unpack_from("!H", frame, l3 + 4)[0]
        unfrag = bytearray(frame[l3:l3 + self.unfrag])
        next_header = unfrag[self.nh_at]
        unfrag[self.nh_at] = IPV6_FRAGMENT
        data = frame[l3 + self.unfrag:l3 + IPV6_HEADER + plen]
        out = []
        for at in range(0, len(data), self.size):
            piece = data[at:at + self.size]
            more = at + self.size < len(data)
            hdr = bytearray(unfrag)
            struct.pack_into("!H", hdr, 4, self.unfrag - IPV6_HEADER + 8 + len(piece))
            frag = struct.pack("!BBHI", next_header, 0, at | int(more), self.ident)
            out.append(frame[:l3] + bytes(hdr) + frag + piece)
        return out


@dataclass
class _Datagram:
    fragments: list[Fragment] = field(default_factory=list)


@dataclass
class Reassembly:
    """The fragments held, per zone and datagram, until their datagram completes."""

    held: dict[tuple[int | bytes, ...], _Datagram] = field(default_factory=dict)
    overlapped: int = 0  # datagrams abandoned for overlapping fragments
    notes: list[str] = field(default_factory=list)

    def add(self, frame: bytes, zone: int = 0) -> Whole | None:
        """Take one fragment (seen by ct in `zone`); the reassembled datagram
        if it completes it, else None (held, or discarded)."""
        frag = parse(frame)
        if frag is None:
            raise ValueError("not an IP fragment")
        key = (zone, *frag.key)
        dgram = self.held.setdefault(key, _Datagram())
        lo, hi = frag.offset, frag.offset + len(frag.data)
        for other in dgram.fragments:
            o_lo, o_hi = other.offset, other.offset + len(other.data)
            if lo < o_hi and o_lo < hi:
                if (lo, hi, frag.data, frag.more) == (o_lo, o_hi, other.data, other.more):
                    self.notes.append(f"an exact duplicate of [{lo}, {hi}) dropped "
                                      "(RFC 8200 §4.5)")
                    return None
                del self.held[key]
                self.overlapped += 1
                self.notes.append(f"[{lo}, {hi}) overlaps [{o_lo}, {o_hi}): the datagram "
                                  "is discarded (RFC 5722 §4)")
                return None
        dgram.fragments.append(frag)
        last = [f for f in dgram.fragments if not f.more]
        if not last:
            return None
        end = last[0].offset + len(last[0].data)
        pieces = sorted(dgram.fragments, key=lambda f: f.offset)
        at = 0
        for f in pieces:
            if f.offset != at:
                return None  # a hole
            at += len(f.data)
        if at != end:
            return None
        del self.held[key]
        return _whole(pieces, [f.frame for f in dgram.fragments])


def _whole(pieces: list[Fragment], arrived: list[bytes]) -> Whole:
    first = pieces[0]
    data = b"".join(f.data for f in pieces)
    size = max(len(f.data) for f in pieces) // 8 * 8
    l3, frame = first.l3, first.frame
    if first.ipv == 4:
        hdr = bytearray(frame[l3:l3 + first.unfrag])
        struct.pack_into("!H", hdr, 2, len(hdr) + len(data))
        flags = struct.unpack_from("!H", hdr, 6)[0]
        struct.pack_into("!H", hdr, 6, flags & 0x4000)  # DF kept; MF and the offset cleared
        struct.pack_into("!H", hdr, 10, 0)
        struct.pack_into("!H", hdr, 10, csum.checksum(bytes(hdr)))
        return Whole(frame[:l3] + bytes(hdr) + data, arrived, size, 4, first.ident,
                     first.unfrag, 0)
    unfrag = bytearray(frame[l3:l3 + first.unfrag])
    unfrag[first.nh_at] = first.next_header
    struct.pack_into("!H", unfrag, 4, first.unfrag - IPV6_HEADER + len(data))
    return Whole(frame[:l3] + bytes(unfrag) + data, arrived, size, 6, first.ident,
                 first.unfrag, first.nh_at)
