"""Software segmentation of TSO packets (reference §4.8).

A TCP packet carrying a segment size leaves a port that cannot segment it
(no TSO, or a tunnelled packet on a port without tunnel TSO) as
ceil(payload / segsz) segments, in order.  Each segment copies the headers and
carries its slice of the payload; then:
- IPv4 (outer and inner): total length, id + i, checksum to be finished;
- IPv6 (outer and inner): payload length;
- a UDP tunnel header's length;
- TCP: seq + i * segsz, checksum to be finished, PSH and FIN only on the last
  (FIN marks the last octet: RFC 9293 §3.10.7.4), CWR only on the first (RFC
  3168 §6.1.2: it marks the first new data packet after a window reduction);
  other flags (ACK, URG with its pointer, ECE, RST, SYN) are copied as they are,
  as NIC TSO and Linux GSO (net/ipv4/tcp_offload.c) do;
- a GRE checksum is the GRE header and everything after it, as sent.
"""
from __future__ import annotations

import struct

from datapath.model import hooks
from datapath.model.packet import PROTO_TCP, Layer, Packet
from datapath.offloads import CsumState

TCP_PSH, TCP_FIN, TCP_CWR = 0x08, 0x01, 0x80


def tcp_layer(pkt: Packet) -> Layer | None:
    """The TCP layer of a packet (the inner one of an encapsulated packet), or None if not TCP."""
    lay = pkt.inner if pkt.inner is not None else pkt.outer
    return lay if lay.l4 is not None and lay.proto == PROTO_TCP else None


def payload_bounds(pkt: Packet) -> tuple[int, int]:
    """(offset, length) of the TCP payload."""
    lay = tcp_layer(pkt)
    assert lay is not None and lay.l4 is not None and lay.l3 is not None
    start = lay.l4 + (pkt.data[lay.l4 + 12] >> 4) * 4
    return start, lay.l3 + lay.l3_size - start


def n_segments(pkt: Packet) -> int:
    """How many segments the packet leaves as: 1 unless it is TCP with a TSO segment size."""
    if tcp_layer(pkt) is None or not pkt.tso_segsz:
        return 1
    return max(1, -(-payload_bounds(pkt)[1] // pkt.tso_segsz))


def segment(pkt: Packet) -> list[Packet]:
    """The segments of a TSO packet, first to last (the packet itself if one)."""
    segsz = pkt.tso_segsz
    n = n_segments(pkt)
    if n <= 1:
        return [pkt]
    start, length = payload_bounds(pkt)
    head, payload = bytes(pkt.data[:start]), bytes(pkt.data[start:start + length])
    segs = []
    for i in range(n):
        seg = pkt.copy()
        seg.data = bytearray(head + payload[i * segsz:(i + 1) * segsz])
        seg.tso_segsz = 0
        seg.notes = [f"segment {i + 1}/{n} of a TSO packet (segsz {segsz})"] if i == 0 else []
        _update(seg, i, n, segsz)
        hooks.active().segmented(pkt, seg, i)
        segs.append(seg)
    return segs


def _set_ip(pkt: Packet, lay: Layer, i: int) -> None:
    assert lay.l3 is not None
    lay.l3_size = len(pkt.data) - lay.l3
    if lay.ipv == 4:
        pkt.put16(lay.l3 + 2, lay.l3_size)
        pkt.put16(lay.l3 + 4, (pkt.u16(lay.l3 + 4) + i) & 0xFFFF)
        pkt.put16(lay.l3 + 10, 0)
        lay.ip_csum = CsumState.PARTIAL
    else:
        pkt.put16(lay.l3 + 4, lay.l3_size - 40)


def _update(seg: Packet, i: int, n: int, segsz: int) -> None:
    if seg.inner is not None:
        if seg.tunnel in ("vxlan", "geneve") and seg.outer.l4 is not None:
            seg.put16(seg.outer.l4 + 4, len(seg.data) - seg.outer.l4)
        _set_ip(seg, seg.inner, i)
    _set_ip(seg, seg.outer, i)
    tcp = tcp_layer(seg)
    assert tcp is not None and tcp.l4 is not None
    tcp.l4_csum = CsumState.PARTIAL
    seq = struct.unpack_from("!I", seg.data, tcp.l4 + 4)[0]
    struct.pack_into("!I", seg.data, tcp.l4 + 4, (seq + i * segsz) & 0xFFFFFFFF)
    if i < n - 1:
        seg.data[tcp.l4 + 13] &= ~(TCP_PSH | TCP_FIN) & 0xFF
    if i > 0:
        seg.data[tcp.l4 + 13] &= ~TCP_CWR & 0xFF


def check_pkt_len(pkt: Packet) -> int:
    """The length check_pkt_len compares (§4.10): a TSO packet counts as headers
    plus one segment, as if it had already been segmented."""
    if not pkt.tso_segsz or tcp_layer(pkt) is None:
        return len(pkt.data)
    start, _ = payload_bounds(pkt)
    return min(len(pkt.data), start + pkt.tso_segsz)
