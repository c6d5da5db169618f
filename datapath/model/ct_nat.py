"""NAT translation of a tracked packet's bytes (ovs-actions(7) `nat`; RFC 5508, RFC 1624).

The conntrack model (datapath/model/conntrack.py) decides what a packet of a
NATed connection becomes: the tuple it travels as and the tuple it is to carry.
This module makes the packet so:
- The addresses and, outside a related error, the TCP/UDP ports that differ
  are rewritten; the source only if the packet still carries the original one,
  the destination likewise.  Which were rewritten gives ct_state's +snat and
  +dnat ("transformed by source/destination address/port translation",
  ovs-fields(7)).
- A related ICMP error (RFC 5508 4.2, RFC 5382 7.1): the outer address this
  direction's NAT writes is written (whoever sent the error), and
  the embedded packet, which travelled the other way, gets the inverse; the
  embedded IPv4 and TCP/UDP checksums, and the ICMP checksum, are patched to
  match (RFC 1624); ICMPv6's checksum covers its pseudo-header too (RFC 4443 2.3).
- The rewrites of the outer header follow the datapath's header-rewrite rules
  (datapath/model/actions.py: a valid checksum state becomes partial, any other
  is patched incrementally); an IPv6 address has no header checksum, its
  upper layer's pseudo-header covers it (RFC 8200 8.1).
"""
from __future__ import annotations

import ipaddress
import struct
from typing import TYPE_CHECKING

from datapath.model import csum
from datapath.model.actions import SetIPv4Addr, SetL4Port
from datapath.model.packet import PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, Packet

if TYPE_CHECKING:
    from datapath.model.conntrack import Key


def rewrite(pkt: Packet, outer: Key, to: Key, related: bool) -> tuple[bool, bool]:
    """Rewrite the packet, which travels as `outer`, to travel as `to` (a related
    ICMP error's embedded packet to the inverse): whether its source and whether
    its destination were translated."""
    if related:
        _rewrite_embedded(pkt, outer.reversed(), to.reversed())
    snat = dnat = False
    lay = pkt.outer
    assert lay.l3 is not None
    src, dst = _addrs(pkt)
    # A related error's outer header gets the address this direction's NAT
    # writes even when another host sent it (a router's error in the reply
    # direction of a DNAT connection leaves with the virtual address as its
    # source: system-traffic.at's "ICMP from different source related with
    # NAT", whose expected frames count as facts).
    if outer.src != to.src and (src == outer.src or related) and src != to.src:
        _set_addr(pkt, "src", to.src)
        snat = True
    if outer.dst != to.dst and (dst == outer.dst or related) and dst != to.dst:
        _set_addr(pkt, "dst", to.dst)
        dnat = True
    if not related and outer.proto in (PROTO_ICMP, PROTO_ICMPV6) and outer.sport != to.sport \
            and lay.payload is not None:
        # An echo's Query Identifier, mapped as a port (RFC 5508 3.1 REQ-1 a), and the
        # ICMP checksum patched (RFC 1624).
        ident = lay.payload + 4
        old, new = pkt.data[ident:ident + 2], struct.pack("!H", to.sport)
        pkt.put16(lay.payload + 2, csum.incremental(pkt.u16(lay.payload + 2), bytes(old), new))
        pkt.data[ident:ident + 2] = new
    if not related and pkt.l4 is not None and outer.proto in (PROTO_TCP, PROTO_UDP):
        if outer.sport != to.sport:
            SetL4Port(to.sport, "src").apply(pkt)
            snat = True
        if outer.dport != to.dport:
            SetL4Port(to.dport, "dst").apply(pkt)
            dnat = True
    return snat, dnat


def _addrs(pkt: Packet) -> tuple[str, str]:
    """The packet's source and destination addresses (RFC 791 3.1, RFC 8200 3)."""
    assert pkt.l3 is not None
    alen, ofs = (4, pkt.l3 + 12) if pkt.ipv == 4 else (16, pkt.l3 + 8)
    src, dst = (str(ipaddress.ip_address(bytes(pkt.data[a:a + alen]))) for a in (ofs, ofs + alen))
    return src, dst


def _set_addr(pkt: Packet, which: str, addr: str) -> None:
    if pkt.ipv == 4:
        SetIPv4Addr(addr, which).apply(pkt)
        return
    # IPv6: no header checksum; the upper layer's pseudo-header covers it (RFC 8200 8.1).
    assert pkt.l3 is not None
    ofs = pkt.l3 + (8 if which == "src" else 24)
    old, new = bytes(pkt.data[ofs:ofs + 16]), ipaddress.IPv6Address(addr).packed
    if pkt.proto == PROTO_ICMPV6 and pkt.outer.payload is not None:
        icmp = pkt.outer.payload
        pkt.put16(icmp + 2, csum.incremental(pkt.u16(icmp + 2), old, new))
    elif pkt.l4 is not None:
        pkt.patch_l4_csum(old, new, f"pseudo-header IPv6 {which}")
    pkt.data[ofs:ofs + 16] = new


def _rewrite_embedded(pkt: Packet, was: Key, to: Key) -> None:
    """The embedded packet of an ICMP error becomes `to`; its checksums and the
    ICMP checksum are patched (RFC 5508 4.2, RFC 1624)."""
    lay = pkt.outer
    assert lay.l3 is not None and lay.payload is not None
    icmp, inner = lay.payload, lay.payload + 8
    end = lay.l3 + lay.l3_size
    before = bytes(pkt.data[icmp:end])
    v4 = pkt.ipv == 4
    alen, src_ofs = (4, 12) if v4 else (16, 8)
    ihl = (pkt.data[inner] & 0x0F) * 4 if v4 else 40
    l4 = inner + ihl
    l4_csum = {PROTO_TCP: 16, PROTO_UDP: 6}.get(was.proto)
    csum_ofs = l4 + l4_csum if l4_csum is not None and l4 + l4_csum + 2 <= end else None
    if csum_ofs is not None and was.proto == PROTO_UDP and pkt.u16(csum_ofs) == 0:
        csum_ofs = None  # no UDP checksum to patch
    for i, (old_a, new_a) in enumerate(((was.src, to.src), (was.dst, to.dst))):
        if old_a == new_a:
            continue
        ofs = inner + src_ofs + i * alen
        old, new = bytes(pkt.data[ofs:ofs + alen]), ipaddress.ip_address(new_a).packed
        if csum_ofs is not None:
            pkt.put16(csum_ofs, csum.incremental(pkt.u16(csum_ofs), old, new))
        if v4:
            pkt.put16(inner + 10, csum.incremental(pkt.u16(inner + 10), old, new))
        pkt.data[ofs:ofs + alen] = new
    if was.proto in (PROTO_TCP, PROTO_UDP) and l4 + 4 <= end:
        for i, (old_p, new_p) in enumerate(((was.sport, to.sport), (was.dport, to.dport))):
            if old_p != new_p:
                old, new = struct.pack("!H", old_p), struct.pack("!H", new_p)
                if csum_ofs is not None:
                    pkt.put16(csum_ofs, csum.incremental(pkt.u16(csum_ofs), old, new))
                pkt.data[l4 + 2 * i:l4 + 2 * i + 2] = new
    after = bytes(pkt.data[icmp:end])
    old_words, new_words = before[:2] + before[4:], after[:2] + after[4:]
    if len(old_words) % 2:  # the checksum pads an odd message with a zero byte
        old_words, new_words = old_words + b"\0", new_words + b"\0"
    pkt.put16(icmp + 2, csum.incremental(pkt.u16(icmp + 2), old_words, new_words))
    pkt.notes.append(f"conntrack: embedded packet {was} -> {to}, its checksums and the "
                     "ICMP checksum patched")

