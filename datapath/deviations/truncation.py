"""What OVS 4.0.0 does with output(port, max_len) instead of send.py's E8.

OVS cuts first and keeps the offload flags (dp_packet_batch_apply_cutlen()), so
a TCP/UDP checksum still pending is completed at egress over the bytes left, or,
cut before an IPv4 TCP/UDP header, kills the daemon; a VXLAN/Geneve outer UDP
checksum over such a packet goes by the nested-checksum shortcut, which reads
the headers as they were before the cut (bugs.TRUNC_PENDING_CSUM,
TRUNC_TUNNEL_OUTER_CSUM, TRUNC_L4_CUT_CRASH).  Which of these shows depends on
the port: `truncated` keeps what OVS would do on the packet (an OvsCut) and
egress decides.  A Linux port that takes the offload (ports.py) completes it
from OVS's seed, or refuses the frame whose checksum field the cut left out
(TRUNC_CSUM_PAST_END).
"""
from __future__ import annotations

import functools

from datapath.deviations import ports
from datapath.deviations.egress import Deviation
from datapath.deviations.state import Completion, OvsCut, state
from datapath.model import bugs, csum
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Layer, Packet
from datapath.model.send import patch_from_end
from datapath.offloads import CsumState, TxOffloads


def truncated(before: Packet, pkt: Packet, max_len: int, completed: bytes) -> None:
    """Keep on `pkt` (just cut by the model) what OVS does with it: `before` is
    the packet with its checksums pending, `completed` its bytes completed."""
    if len(state(pkt).changes) != len(state(before).changes):
        raise NotImplementedError("model: output max_len of a packet OVS completes otherwise")
    if pkt.cut is None:
        return
    pending = [lay for lay in (before.inner, before.outer)
               if lay is not None and lay.l3 is not None and lay.payload is not None
               and lay.l4_csum is CsumState.PARTIAL and lay.proto in (PROTO_TCP, PROTO_UDP)]
    lay = pending[0]
    assert lay.payload is not None
    theirs = _cut_then_completed(before, max_len)
    zero_udp = lay.proto == PROTO_UDP and lay.l4 is not None \
        and before.u16(lay.l4_csum_ofs) == 0
    start = lay.payload
    tcp_len = ((completed[start + 12] >> 4) * 4 if lay.proto == PROTO_TCP
               and start + 12 < len(completed) else 0)
    right = completed[:max_len]
    # OVS's outer UDP checksum shortcut gives up where the cut leaves part of a TCP
    # header (dp_packet_get_inner_tcp_payload()) or the UDP checksum field held 0.
    shortcut = not (0 <= max_len - start < tcp_len) and not zero_udp
    header_end = start + (tcp_len if lay.proto == PROTO_TCP else 8)
    seeded = _cut_then_completed(before, max_len, seed_from_header=True)
    state(pkt).cut = OvsCut(lay.ipv == 4 and start > max_len, lay.ipv, max_len < header_end,
                            patch_from_end(right, theirs) if theirs != right else None,
                            csum.ones_sum(completed) if shortcut else None,
                            patch_from_end(right, seeded) if seeded != right else None,
                            lay.l4_csum_ofs + 2 > max_len)


def _cut_then_completed(pkt: Packet, max_len: int, seed_from_header: bool = False) -> bytes:
    """The packet cut first, its pending checksums then completed over what is
    left, where their fields are left: packet_{tcp,udp}_complete_csum() take
    IPv4's pseudo-header length from the header, IPv6's from the L4 bytes left;
    `seed_from_header`, as a Linux port completes it from OVS's seed
    (netdev_linux_prepend_vnet_hdr(): packet_csum_pseudoheader{,6}(), the IPv4
    total length and the IPv6 payload length of the header)."""
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
            ovs.set_l4_csum(lay, pseudo_len=max_len - lay.l4 if lay.ipv == 6
                            and not seed_from_header else None)
    return bytes(ovs.data)


def deviations(pkt: Packet, slots: list[str], tx: TxOffloads | None) -> list[Deviation]:
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
    inner checksum itself (over the L4 bytes left).  A Linux port handed the
    inner checksum: see _linux()."""
    cut, ovs = pkt.cut, state(pkt).cut
    if cut is None or ovs is None:
        return []
    undone = tx.driver_flags() if tx is not None else frozenset()
    flags = tx.netdev_flags() if tx is not None else frozenset()
    by_ovs = pkt.tunnel in ("vxlan", "geneve") and "outer.UDP" in slots and (
        "out_udp" not in flags or ("out_udp" not in undone and cut.flag in flags))
    outer = ovs.uncut_sum is not None and by_ovs
    uncut: dict[str, Completion | None] = {
        "outer.UDP": functools.partial(_uncut_outer, length=cut.length, uncut_sum=ovs.uncut_sum)}
    if tx is not None and linux_completes(pkt, tx, by_ovs):
        return _linux(pkt, ovs, uncut if outer else {})
    inner = ovs.change is not None and (cut.flag not in undone
                                        or (by_ovs and ovs.uncut_sum is None))
    if not (inner or outer):
        return []
    changed = pkt.copy()
    if inner and ovs.change is not None:
        ovs.change(changed)
    elif cut.flag in undone and cut.handed is not None:
        cut.handed(changed)
    wrong_outer = outer and (ovs.header_cut or (inner and ovs.ipv == 6))
    found = [Deviation(
        bugs.TRUNC_PENDING_CSUM, changed, uncut if outer and not wrong_outer else {},
        note="OVS completes the pending checksum over the truncated bytes" if inner
        else "OVS takes the outer UDP checksum as if the port completed the inner one "
             "over the truncated bytes")]
    if wrong_outer:
        found.append(Deviation(
            bugs.TRUNC_TUNNEL_OUTER_CSUM, changed, uncut,
            note="OVS takes the outer UDP checksum for inner headers past the cut"
            if ovs.header_cut else "OVS takes the outer UDP checksum under the inner IPv6 "
            "header's payload length, and completes the inner one under the bytes left"))
    return found


def linux_completes(pkt: Packet, tx: TxOffloads, by_ovs: bool | None = None) -> bool:
    """Whether a Linux port (ports.linux()) is handed the pending checksum of a
    cut packet: it offers the checksum, and OVS does not complete it first,
    which it does for a VXLAN/Geneve packet with an outer UDP checksum to take
    where its nested-checksum shortcut gives up (`by_ovs`: OVS takes the outer
    checksum; None: judged from the packet)."""
    cut, ovs = pkt.cut, state(pkt).cut
    if not ports.linux() or cut is None or ovs is None or cut.flag not in tx.netdev_flags():
        return False
    if by_ovs is None:
        by_ovs = pkt.tunnel in ("vxlan", "geneve") and pkt.outer.l4_csum is CsumState.PARTIAL \
            and "out_udp" not in tx.netdev_flags()
    return not (by_ovs and ovs.uncut_sum is None)


def _linux(pkt: Packet, ovs: OvsCut, outer: dict[str, Completion | None]) -> list[Deviation]:
    """What leaves a Linux port handed the cut packet's pending checksum: nothing
    where its field is past the cut (the kernel refuses the virtio-net header,
    TRUNC_CSUM_PAST_END); else the checksum the port completes from OVS's seed
    over the bytes left (TRUNC_PENDING_CSUM), under an outer UDP checksum OVS
    took by its shortcut, which is then right for those bytes."""
    if ovs.field_gone:
        return [Deviation(bugs.TRUNC_CSUM_PAST_END, pkt, dropped=True,
                          note="OVS hands the port a virtio-net header whose checksum field "
                               "is past the truncated frame's end: the kernel refuses it")]
    changed = pkt.copy()
    if ovs.seeded is not None:
        ovs.seeded(changed)
    return [Deviation(bugs.TRUNC_PENDING_CSUM, changed, outer,
                      note="the port completes the pending checksum from OVS's seed (the IP "
                           "header's lengths) over the truncated bytes")]


def _uncut_outer(pkt: Packet, outer: Layer, length: int, uncut_sum: int | None) -> None:
    """The outer UDP checksum of a VXLAN/Geneve packet whose inner frame was cut,
    taken over the outer pseudo-header, the UDP and tunnel headers as they are,
    and the inner frame as it was before the cut with its checksums right; 0 is
    sent as 0xffff (RFC 768)."""
    assert outer.l4 is not None and uncut_sum is not None
    start = len(pkt.data) - length  # the inner frame follows the tunnel header
    pkt.put16(outer.l4_csum_ofs, 0)
    total = csum.ones_sum(bytes(pkt.data[outer.l4:start]), pkt.pseudo_header(outer))
    pkt.put16(outer.l4_csum_ofs, csum.finish(csum.ones_sum(b"", total + uncut_sum))
              or 0xFFFF)
    outer.l4_csum = CsumState.GOOD
