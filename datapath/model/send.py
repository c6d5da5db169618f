"""Checksum completion on the way out of a port (reference §4.3, §4.6).

OVS finishes a packet's partial checksums twice: netdev_send() with the flags
the port advertises (whatever the port will not do is done in software), then
the netdev-dummy driver with the flags it advertises but "forgets"
(`_disabled`), doing everything else itself.  Good, bad and unknown checksums
are never touched; only partial ones are finished.
"""
from __future__ import annotations

import struct

from datapath.model import bugs, csum, gso
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Packet
from datapath.offloads import CsumState, TxOffloads

P = CsumState.PARTIAL


def transmit(pkt: Packet, tx: TxOffloads) -> list[Packet]:
    """Everything that happens to a packet between the datapath and the wire:
    software segmentation where the port cannot segment, then checksums."""
    if pkt.tso_segsz and ("tso" not in tx.netdev_flags() or pkt.tunnel):
        segs = gso.segment(pkt)
    else:
        segs = [pkt]
    for seg in segs:
        finish(seg, tx)
    return segs


def finish(pkt: Packet, tx: TxOffloads) -> None:
    """Checksum completion of one packet (netdev_send, then the driver)."""
    for lay in (pkt.outer, pkt.inner):
        if lay is not None and lay.l4_csum is P and lay.proto not in (PROTO_TCP, PROTO_UDP):
            pkt.bugs.append(bugs.L4_PARTIAL_NOT_TCP_UDP)
            pkt.notes.append("L4 checksum partial on a packet that is neither TCP nor UDP: "
                             "nothing to finish; a correct datapath sends it as it is")
            lay.l4_csum = CsumState.UNKNOWN
    prepare(pkt, tx.netdev_flags(), "netdev_send:")
    prepare(pkt, tx.driver_flags(), "driver:")
    if pkt.gre_csum_ofs is not None:
        finish_gre_csum(pkt)
    for name, lay in (("outer", pkt.outer), ("inner", pkt.inner)):
        if lay is None:
            continue
        for kind, state in (("IP", lay.ip_csum), ("L4", lay.l4_csum)):
            if state is P:
                pkt.notes.append(f"{name if pkt.inner else ''} {kind} checksum left partial: "
                                 "the tx offload is advertised but _disabled".strip())


def prepare(pkt: Packet, flags: frozenset[str], who: str) -> None:
    """One pass of dp_packet_ol_send_prepare(pkt, flags)."""
    out, inn = pkt.outer, pkt.inner
    inner_partial = inn is not None and P in (inn.ip_csum, inn.l4_csum)
    if not inner_partial:
        if P not in (out.ip_csum, out.l4_csum):
            return
        if pkt.tunnel:  # no inner work left: from here on it is a plain packet
            pkt.notes.append(f"{who} no inner checksum pending: the tunnel packet is "
                             "finished as a plain one (inner offload flags apply)")
            pkt.tunnel = None
    if not pkt.tunnel or inn is None:
        if out.ip_csum is P and "ip" not in flags and out.l3 is not None:
            pkt.set_ip_csum(out, who)
        if out.l4_csum is P and out.l4 is not None:
            if ("tcp" if out.proto == PROTO_TCP else "udp") not in flags:
                pkt.set_l4_csum(out, who)
        return

    flags = set(flags)
    if pkt.tunnel in ("vxlan", "geneve") and "out_udp" not in flags and out.l4_csum is P:
        if nested_udp_csum(pkt, who):
            pass
        else:
            flags -= {"tcp", "udp", "ip"}
            pkt.notes.append(f"{who} outer UDP shortcut not possible: inner checksums "
                             "are finished in software whatever the port offers")
    if inn.ip_csum is P and "ip" not in flags and inn.l3 is not None:
        pkt.set_ip_csum(inn, f"{who} inner")
    if inn.l4_csum is P and inn.l4 is not None:
        if ("tcp" if inn.proto == PROTO_TCP else "udp") not in flags:
            pkt.set_l4_csum(inn, f"{who} inner")
    if out.ip_csum is P and "out_ip" not in flags and out.l3 is not None:
        pkt.set_ip_csum(out, f"{who} outer")
    if out.l4_csum is P and "out_udp" not in flags and out.l4 is not None:
        pkt.set_l4_csum(out, f"{who} outer")


def finish_gre_csum(pkt: Packet) -> None:
    """The GRE checksum covers the GRE header and everything after it, as sent."""
    ofs = pkt.gre_csum_ofs
    assert ofs is not None
    pkt.put16(ofs, 0)
    value = csum.checksum(bytes(pkt.data[ofs - 4:]))
    pkt.put16(ofs, value)
    if pkt.ovs_gre_csum is not None and pkt.ovs_gre_csum != value:
        pkt.bugs.append(bugs.GRE_CSUM_AT_PUSH)
        pkt.ovs_data = bytearray(pkt.data)
        struct.pack_into("!H", pkt.ovs_data, ofs, pkt.ovs_gre_csum)
        pkt.notes.append(f"GRE checksum 0x{value:04x} over the final bytes; OVS sends "
                         f"0x{pkt.ovs_gre_csum:04x}, taken at push before the inner "
                         "checksums were finished")


def nested_udp_csum(pkt: Packet, who: str) -> bool:
    """The outer UDP checksum without reading the inner payload (§4.6).

    Its value is defined here by what it must equal, not by how OVS sums it:
    the checksum the whole frame has once the inner L4 checksum is right (and
    the inner IPv4 header checksum too, when its state is valid).  It applies
    only to inner TCP, or inner UDP with a checksum, in a valid state.
    """
    inn, out = pkt.inner, pkt.outer
    assert inn is not None and out.l4 is not None
    if inn.l4 is None or inn.proto not in (PROTO_TCP, PROTO_UDP):
        return False
    if inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) == 0:
        return False
    if not inn.l4_csum.valid:
        return False
    if pkt.tso_segsz and inn.proto == PROTO_TCP:
        _, length = gso.payload_bounds(pkt)
        if length != pkt.tso_segsz * gso.n_segments(pkt):
            pkt.bugs.append(bugs.TSO_SHORT_TUNNEL_ASSERT)
            pkt.notes.append(f"TSO segment size {pkt.tso_segsz} still set on a tunnelled "
                             f"packet with {length} payload bytes (nothing was segmented)")
    ideal = pkt.copy()
    ideal_inn = ideal.inner
    assert ideal_inn is not None
    if inn.ipv == 4 and inn.ip_csum.valid:
        ideal.set_ip_csum(ideal_inn, "")
    ideal.put16(ideal_inn.l4_csum_ofs, 0)
    ideal.put16(ideal_inn.l4_csum_ofs, csum.finish(ideal.l4_sum(ideal_inn)))
    ideal.put16(out.l4_csum_ofs, 0)
    value = csum.finish(ideal.l4_sum(ideal.outer)) or 0xFFFF
    pkt.put16(out.l4_csum_ofs, value)
    out.l4_csum = CsumState.GOOD
    pkt.notes.append(f"{who} outer UDP checksum from the nested-checksum shortcut "
                     "(valid as if the inner checksums were complete)")
    return True
