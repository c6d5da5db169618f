"""output(port, max_len): rule E8 of send.py.

The port gets the first max_len bytes of the packet as it would leave
(ovs-actions(7): truncation serves mirroring to a collector): its postponed
checksums are completed first, then it is cut.  Who completes a checksum that
was pending depends on the port (E3), so `truncate` leaves a `Cut` on the
packet and egress (send.complete) decides.
"""
from __future__ import annotations

from datapath.model import hooks
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Cut, Packet
from datapath.model.send import complete_in_software, patch_from_end
from datapath.offloads import CsumState


def truncate(pkt: Packet, max_len: int) -> None:
    """E8: complete, then cut to `max_len` bytes; the bytes as received are kept
    on the packet's `cut` for a port that takes the offload and does not do it."""
    if len(pkt.data) <= max_len:
        return
    if pkt.tso_segsz:
        raise NotImplementedError("model: output max_len of a TSO packet")
    pending = [lay for lay in (pkt.inner, pkt.outer)
               if lay is not None and lay.l3 is not None and lay.payload is not None
               and lay.l4_csum is CsumState.PARTIAL and lay.proto in (PROTO_TCP, PROTO_UDP)]
    handed = bytes(pkt.data[:max_len])
    before = pkt.copy()
    complete_in_software(pkt, f"output max_len={max_len}: before the cut,")
    completed = bytes(pkt.data)
    right = completed[:max_len]
    pkt.data = bytearray(right)
    _forget_cut_headers(pkt, max_len)
    pkt.notes.append(f"output max_len={max_len}: the first {max_len} bytes leave")
    if pending:
        pkt.cut = Cut(max_len, "tcp" if pending[0].proto == PROTO_TCP else "udp",
                      patch_from_end(right, handed) if handed != right else None)
    hooks.active().truncated(before, pkt, max_len, completed)


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
