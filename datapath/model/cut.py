"""output(port, max_len): rule E8 of send.py, and what OVS 4.0.0 does instead.

The port gets the first max_len bytes of the packet as it would leave
(ovs-actions(7): truncation serves mirroring to a collector): its postponed
checksums are completed first, then it is cut.  OVS cuts first and keeps the
offload flags, so a TCP/UDP checksum still pending is completed at egress over
the bytes left, or, cut before an IPv4 TCP/UDP header, kills the daemon; a
VXLAN/Geneve outer UDP checksum over such a packet is taken for the uncut one
(bugs.TRUNC_PENDING_CSUM, bugs.TRUNC_TUNNEL_OUTER_CSUM, bugs.TRUNC_L4_CUT_CRASH).
Which of these shows depends on the port, so `truncate` leaves a `Cut` on the
packet and egress (send.complete, bugs.check_crashes and bugs.deviations)
decides.
"""
from __future__ import annotations

import functools

from datapath.model import bugs, csum
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Cut, Layer, Packet
from datapath.model.send import complete_in_software, patch_from_end
from datapath.offloads import CsumState, TxOffloads


def truncate(pkt: Packet, max_len: int) -> None:
    """E8: complete, then cut to `max_len` bytes; what OVS does otherwise, kept
    on the packet as its `cut`."""
    if len(pkt.data) <= max_len:
        return
    if pkt.tso_segsz:
        raise NotImplementedError("model: output max_len of a TSO packet")
    theirs = _cut_then_completed(pkt, max_len)
    pending = [lay for lay in (pkt.inner, pkt.outer)
               if lay is not None and lay.l3 is not None and lay.payload is not None
               and lay.l4_csum is CsumState.PARTIAL and lay.proto in (PROTO_TCP, PROTO_UDP)]
    zero_udp = bool(pending) and pending[0].proto == PROTO_UDP \
        and pending[0].l4 is not None and pkt.u16(pending[0].l4_csum_ofs) == 0
    handed = bytes(pkt.data[:max_len])
    changes = len(pkt.ovs_changes)
    complete_in_software(pkt, f"output max_len={max_len}: before the cut,")
    if len(pkt.ovs_changes) != changes:
        raise NotImplementedError("model: output max_len of a packet OVS completes otherwise")
    uncut = csum.ones_sum(bytes(pkt.data))
    start = pending[0].payload if pending else None
    tcp_len = ((pkt.data[start + 12] >> 4) * 4 if start is not None and pending[0].proto
               == PROTO_TCP and start + 12 < len(pkt.data) else 0)
    right = bytes(pkt.data[:max_len])
    pkt.data = bytearray(right)
    _forget_cut_headers(pkt, max_len)
    pkt.notes.append(f"output max_len={max_len}: the first {max_len} bytes leave")
    if start is None:
        return
    lay = pending[0]
    # OVS's outer UDP checksum shortcut gives up where the cut leaves part of a TCP
    # header (dp_packet_get_inner_tcp_payload()) or the UDP checksum field held 0.
    shortcut = not (0 <= max_len - start < tcp_len) and not zero_udp
    header_end = start + (tcp_len if lay.proto == PROTO_TCP else 8)
    pkt.cut = Cut(max_len, "tcp" if lay.proto == PROTO_TCP else "udp",
                  lay.ipv == 4 and start > max_len, lay.ipv, max_len < header_end,
                  patch_from_end(right, theirs) if theirs != right else None,
                  patch_from_end(right, handed) if handed != right else None,
                  uncut if shortcut else None)


def _cut_then_completed(pkt: Packet, max_len: int) -> bytes:
    """The packet cut first, its pending checksums then completed over what is
    left, where their fields are left: packet_{tcp,udp}_complete_csum() take
    IPv4's pseudo-header length from the header, IPv6's from the L4 bytes left."""
    ovs = pkt.copy()
    ovs.data = ovs.data[:max_len]
    for lay in (ovs.inner, ovs.outer):
        if lay is None or lay.l3 is None:
            continue
        if lay.ip_csum is CsumState.PARTIAL and lay.ipv == 4 and lay.l3 < max_len \
                and lay.l3 + (ovs.data[lay.l3] & 0x0F) * 4 <= max_len:
            ovs.set_ip_csum(lay)
        if lay.l4_csum is CsumState.PARTIAL and lay.l4 is not None \
                and lay.proto in (PROTO_TCP, PROTO_UDP) and not lay.fragment \
                and lay.l4_csum_ofs + 2 <= max_len:
            ovs.set_l4_csum(lay, pseudo_len=max_len - lay.l4 if lay.ipv == 6 else None)
    return bytes(ovs.data)


def _forget_cut_headers(pkt: Packet, max_len: int) -> None:
    """A checksum covering bytes that are gone is not judged, nor is an IP
    header cut short."""
    for lay in (pkt.outer, pkt.inner):
        if lay is None or lay.l3 is None or lay.l3 + lay.l3_size <= max_len:
            continue
        lay.l4 = None
        header = 40 if lay.ipv == 6 else (
            (pkt.data[lay.l3] & 0x0F) * 4 if lay.l3 < max_len else max_len)
        if lay.l3 + header > max_len:
            lay.l3, lay.payload = None, None


def deviations(pkt: Packet, slots: list[str], tx: TxOffloads | None) -> list[bugs.Deviation]:
    """TRUNC_PENDING_CSUM and TRUNC_TUNNEL_OUTER_CSUM at egress to a port with
    `tx`, where they change anything.

    A VXLAN/Geneve outer UDP checksum that OVS's code takes (the port lacks the
    feature, or netdev-dummy does it with the inner one left to it too) goes by
    the nested-checksum shortcut, which reads the uncut packet's headers; where
    the shortcut gives up, OVS completes the inner checksum itself, whatever
    the port offers.  Otherwise the inner one is OVS's to complete unless the
    port takes the offload (and, `_disabled`, leaves it as received).

    The shortcut's outer checksum is right for the bytes that leave where the
    cut leaves the inner headers whole and the inner checksum is completed
    under the same pseudo-header: IPv4's total length for both, or a port
    handed the IPv6 checksum with OVS's seed (the header's payload length).  It
    is wrong where the cut fell in the inner TCP/UDP header or before it (the
    shortcut sums headers that are gone), or over IPv6 where OVS completes the
    inner checksum itself (over the L4 bytes left)."""
    cut = pkt.cut
    if cut is None:
        return []
    undone = tx.driver_flags() if tx is not None else frozenset()
    flags = tx.netdev_flags() if tx is not None else frozenset()
    by_ovs = pkt.tunnel in ("vxlan", "geneve") and "outer.UDP" in slots and (
        "out_udp" not in flags or ("out_udp" not in undone and cut.flag in flags))
    outer = cut.uncut_sum is not None and by_ovs
    inner = cut.change is not None and (cut.flag not in undone
                                        or (by_ovs and cut.uncut_sum is None))
    if not (inner or outer):
        return []
    changed = pkt.copy()
    if inner and cut.change is not None:
        cut.change(changed)
    elif cut.flag in undone and cut.handed is not None:
        cut.handed(changed)
    uncut: dict[str, bugs.Completion | None] = {
        "outer.UDP": functools.partial(_uncut_outer, cut=cut)}
    wrong_outer = outer and (cut.header_cut or (inner and cut.ipv == 6))
    found = [bugs.Deviation(
        bugs.TRUNC_PENDING_CSUM, changed, uncut if outer and not wrong_outer else {},
        note="OVS completes the pending checksum over the truncated bytes" if inner
        else "OVS takes the outer UDP checksum as if the port completed the inner one "
             "over the truncated bytes")]
    if wrong_outer:
        found.append(bugs.Deviation(
            bugs.TRUNC_TUNNEL_OUTER_CSUM, changed, uncut,
            note="OVS takes the outer UDP checksum for inner headers past the cut"
            if cut.header_cut else "OVS takes the outer UDP checksum under the inner IPv6 "
            "header's payload length, and completes the inner one under the bytes left"))
    return found


def _uncut_outer(pkt: Packet, outer: Layer, cut: Cut) -> None:
    """The outer UDP checksum of a VXLAN/Geneve packet whose inner frame was cut,
    taken over the outer pseudo-header, the UDP and tunnel headers as they are,
    and the inner frame as it was before the cut with its checksums right; 0 is
    sent as 0xffff (RFC 768)."""
    assert outer.l4 is not None and cut.uncut_sum is not None
    start = len(pkt.data) - cut.length  # the inner frame follows the tunnel header
    pkt.put16(outer.l4_csum_ofs, 0)
    total = csum.ones_sum(bytes(pkt.data[outer.l4:start]), pkt.pseudo_header(outer))
    pkt.put16(outer.l4_csum_ofs, csum.finish(csum.ones_sum(b"", total + cut.uncut_sum))
              or 0xFFFF)
    outer.l4_csum = CsumState.GOOD
