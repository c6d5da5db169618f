"""Where OVS 4.0.0 deviates at egress: the model's correct packet in, OVS's way
out.  Each deviation names its entry in the catalogue (datapath/model/bugs.py)."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from datapath.deviations.state import Completion, name_bug, state
from datapath.model import csum, gso
from datapath.model.bugs import (
    GRE_CSUM_AT_PUSH,
    IPV4_HEADER_ONLY,
    IPV6_EXT_PSEUDO_HEADER,
    L4_PARTIAL_NOT_TCP_UDP,
    TRUNC_L4_CUT_CRASH,
    TRUNC_PENDING_CSUM,
    TRUNC_TUNNEL_OUTER_CSUM,
    TSO_EMPTY_TUNNEL_CSUM,
    TSO_SHORT_TUNNEL_ASSERT,
    TUNNEL_CSUM_TRUSTS_RX_GOOD,
    OvsBug,
)
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Layer, Packet
from datapath.offloads import CsumState, TxOffloads


@dataclass
class Deviation:
    """How OVS makes a frame differently from the contract (datapath/model/send.py):
    `pkt` with OVS's own changes made before the checksums are completed; per
    checksum slot, OVS's own way of completing it (None: it leaves it as is);
    and the GRE checksum OVS writes."""

    bug: OvsBug
    pkt: Packet
    completions: dict[str, Completion | None] = field(default_factory=dict)
    gre: int | None = None
    note: str = ""
    dropped: bool = False  # OVS hands the port a frame it refuses: nothing leaves


def check_crashes(pkt: Packet, tx: TxOffloads) -> None:
    """Record the aborts this packet runs into at egress (crash bugs)."""
    for lay in (pkt.outer, pkt.inner):
        if lay is not None and lay.l4_csum is CsumState.PARTIAL \
                and lay.proto not in (PROTO_TCP, PROTO_UDP):
            name_bug(pkt, L4_PARTIAL_NOT_TCP_UDP)
    # A cut before a pending IPv4 TCP/UDP header: completing it sums a negative size,
    # unless it is handed to a port that advertises the offload and does not do it.
    # Not where a Linux port is handed the checksum (truncation.linux_completes()).
    cut = state(pkt).cut
    if pkt.cut is not None and cut is not None and cut.before_l4 \
            and pkt.cut.flag not in tx.driver_flags():
        from datapath.deviations import truncation
        if not truncation.linux_completes(pkt, tx):
            name_bug(pkt, TRUNC_L4_CUT_CRASH)
    # packet_udp_tunnel_csum() asserts that a set segment size divides the payload
    # into whole segments (dp_packet_gso_nr_segs(): DIV_ROUND_UP, 0 for no payload).
    length = _tso_tunnel_shortcut(pkt, tx)
    if length is not None and length != pkt.tso_segsz * -(-length // pkt.tso_segsz):
        name_bug(pkt, TSO_SHORT_TUNNEL_ASSERT)
        pkt.notes.append(f"TSO segment size {pkt.tso_segsz} still set on a tunnelled "
                         f"packet with {length} payload bytes (nothing was segmented)")


def _tso_tunnel_shortcut(pkt: Packet, tx: TxOffloads | None) -> int | None:
    """The inner TCP payload length where OVS's outer UDP checksum shortcut
    (packets.c packet_udp_tunnel_csum()) meets a TSO segment size: a VXLAN/Geneve
    packet whose outer UDP checksum OVS's code computes, with an inner TCP
    checksum in a valid state (a set segment size keeps the packet a tunnel one
    even with no inner checksum pending); None where it does not.  OVS's code
    computes it where the port lacks the feature, and also where netdev-dummy
    has it and does it: netdev-dummy does an offloaded checksum with OVS's own
    software path (dp_packet_ol_send_prepare()); only `_disabled` leaves it."""
    inn, out = pkt.inner, pkt.outer
    if not (pkt.tunnel in ("vxlan", "geneve") and inn is not None and pkt.tso_segsz
            and (tx is None or "out_udp" not in tx.driver_flags())
            and out.l4_csum is CsumState.PARTIAL and inn.l4 is not None and inn.l4_csum.valid):
        return None
    if inn.proto == PROTO_TCP:
        return gso.payload_bounds(pkt)[1]
    if inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) != 0:
        # A tunnel inside this one (its UDP header is the inner L4): OVS still
        # reads the inner TCP payload length (dp_packet_get_inner_tcp_payload
        # _length()), taking the UDP header and what follows as a TCP header.
        size = len(pkt.data) - inn.l4
        header = (pkt.data[inn.l4 + 12] >> 4) * 4 if size >= 20 else 0
        return size - header if 20 <= header <= size else 0
    return None


def deviations(pkt: Packet, slots: list[str], tx: TxOffloads | None = None) -> list[Deviation]:
    """The known deviations that may apply to this packet at egress to a port
    with `tx` (send.py keeps those that change what leaves)."""
    found: list[Deviation] = []
    if _tunnel_csum_shortcut(pkt, slots) and _wrong_but_good(pkt):
        found.append(Deviation(TUNNEL_CSUM_TRUSTS_RX_GOOD, pkt,
                               {"outer.UDP": _outer_as_if_valid},
                               note="OVS computes the outer UDP checksum as if the inner "
                                    "checksums flagged good were right"))
    if "outer.UDP" in slots and _tso_tunnel_shortcut(pkt, tx) == 0:
        segsz = pkt.tso_segsz
        found.append(Deviation(TSO_EMPTY_TUNNEL_CSUM, pkt,
                               {"outer.UDP": functools.partial(_tso_empty_outer, segsz=segsz)},
                               note=f"OVS adjusts the outer UDP checksum for {segsz}-byte "
                                    "segments of a packet without payload"))
    gre = state(pkt).gre_csum
    if gre is not None:
        found.append(Deviation(GRE_CSUM_AT_PUSH, pkt, gre=gre,
                               note=f"OVS writes GRE checksum 0x{gre:04x}, taken "
                                    "before the checksums under it were completed"))
    for name in slots:
        lay = pkt.inner if name.startswith("inner.") else pkt.outer
        if lay is None or lay.l3 is None:
            continue
        if name.endswith("IP") and lay.ipv == 4 \
                and (pkt.data[lay.l3] & 0x0F) * 4 >= lay.l3_size:
            found.append(Deviation(IPV4_HEADER_ONLY, pkt, {name: None},
                                   note=f"OVS leaves the pending {name} checksum of a "
                                        "header-only packet as it is"))
        first_nh = pkt.data[lay.l3 + 6]
        if name[-3:] in ("TCP", "UDP") and lay.ipv == 6 and first_nh != lay.proto:
            own: dict[str, Completion | None] = {
                name: functools.partial(_l4_with_proto, proto=first_nh)}
            if name.startswith("inner.") and _tunnel_csum_shortcut(pkt, slots):
                # packet_udp_tunnel_csum(): the outer UDP checksum from the inner
                # pseudo-header it takes (Next Header and payload length of the
                # IPv6 header), as if the inner checksum were right for that one.
                plen = lay.l3_size - 40
                own["outer.UDP"] = functools.partial(_lco_outer, proto=first_nh, length=plen)
            found.append(Deviation(
                IPV6_EXT_PSEUDO_HEADER, pkt, own,
                note=f"OVS completes {name} with Next Header {first_nh} in the pseudo-header"))
    for bug, change, note in state(pkt).changes:
        changed = pkt.copy()
        change(changed)
        found.append(Deviation(bug, changed, note=note))
    from datapath.deviations import truncation
    found += truncation.deviations(pkt, slots, tx)
    return found


def _tso_empty_outer(pkt: Packet, outer: Layer, segsz: int) -> None:
    """The right outer UDP checksum, then changed as if a 16-bit length under it
    went from 0 to `segsz` (RFC 1624 eqn. 3, as recalc_csum16() does): once for
    the outer pseudo-header, once more for an inner IPv6 payload length; a
    result of 0 is sent as 0xffff (RFC 768)."""
    pkt.set_l4_csum(outer)
    ofs = outer.l4_csum_ofs
    times = 2 if pkt.inner is not None and pkt.inner.ipv == 6 else 1
    for _ in range(times):
        pkt.put16(ofs, csum.incremental(pkt.u16(ofs), (0).to_bytes(2, "big"),
                                        segsz.to_bytes(2, "big")))
    if pkt.u16(ofs) == 0:
        pkt.put16(ofs, 0xFFFF)


def _l4_with_proto(pkt: Packet, lay: Layer, proto: int) -> None:
    pkt.set_l4_csum(lay, pseudo_proto=proto)


def _tunnel_csum_shortcut(pkt: Packet, slots: list[str]) -> bool:
    """Whether OVS computes the outer UDP checksum of this packet by its
    nested-checksum shortcut (packets.c packet_udp_tunnel_csum()).  Only a
    packet that stays a tunnel one at send gets there: dp_packet_ol_send_prepare()
    drops the tunnel flags of one with no inner checksum pending and no
    segment size, and then completes the outer UDP checksum over the bytes."""
    inn = pkt.inner
    if inn is None or inn.l4 is None:
        return False
    pending = inn.l4_csum is CsumState.PARTIAL or (inn.ipv == 4 and inn.ip_csum is CsumState.PARTIAL)
    return (pkt.tunnel in ("vxlan", "geneve") and "outer.UDP" in slots
            and (pending or bool(pkt.tso_segsz)) and inn.l4_csum.valid
            and (inn.proto == PROTO_TCP
                 or (inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) != 0)))


def _wrong_but_good(pkt: Packet) -> bool:
    """Whether an inner checksum the rx port flagged good is wrong in the bytes."""
    inn = pkt.inner
    assert inn is not None and inn.l4 is not None
    fixed = pkt.copy()
    lay = fixed.inner
    assert lay is not None
    if inn.ipv == 4 and inn.ip_csum is CsumState.GOOD:
        fixed.set_ip_csum(lay)
    if inn.l4_csum is CsumState.GOOD:
        fixed.set_l4_csum(lay)
    return fixed.data != pkt.data


def _outer_as_if_valid(pkt: Packet, outer: Layer) -> None:
    """packet_udp_tunnel_csum(): the outer UDP checksum over the inner packet
    with its TCP/UDP checksum taken as right (OVS holds it valid: flagged good,
    or pending and completed), and its IPv4 header checksum too where OVS holds
    that one valid; the inner bytes otherwise as they are."""
    tmp = pkt.copy()
    inn = tmp.inner
    assert inn is not None and inn.l4 is not None
    if inn.ipv == 4 and inn.ip_csum.valid:
        tmp.set_ip_csum(inn)
    tmp.set_l4_csum(inn)
    tmp.set_l4_csum(tmp.outer)
    pkt.put16(outer.l4_csum_ofs, tmp.u16(tmp.outer.l4_csum_ofs))
    outer.l4_csum = CsumState.GOOD


def _lco_outer(pkt: Packet, outer: Layer, proto: int, length: int) -> None:
    """The outer UDP checksum for an inner L4 checksum right under a pseudo-header
    with `proto` and `length` (the inner bytes otherwise as they are)."""
    tmp = pkt.copy()
    assert tmp.inner is not None and tmp.inner.l4 is not None
    tmp.set_l4_csum(tmp.inner, pseudo_proto=proto, pseudo_len=length)
    tmp.put16(outer.l4_csum_ofs, 0)
    pkt.put16(outer.l4_csum_ofs, csum.finish(tmp.l4_sum(tmp.outer)) or 0xFFFF)
    outer.l4_csum = CsumState.GOOD


def merge(pkt: Packet, found: list[Deviation]) -> Deviation:
    """All of OVS's deviations for this packet, as one."""
    trunc = next((d for d in found
                  if d.bug in (TRUNC_PENDING_CSUM, TRUNC_TUNNEL_OUTER_CSUM)), None)
    base = (trunc.pkt if trunc is not None else pkt).copy()
    for _, change, _ in state(pkt).changes:
        change(base)
    gre = next((d.gre for d in found if d.gre is not None), None)
    completions: dict[str, Completion | None] = {}
    for d in found:
        completions.update(d.completions)
    return Deviation(found[0].bug, base, completions, gre)
