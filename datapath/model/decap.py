"""Native tunnel receive (tnl_pop): which encapsulated frames a datapath must
accept.  The counters named below are OVS's own names for these events
(`ovs-appctl coverage/show`), recorded as observed facts of each verdict.

- Outer IPv4 header checksum (RFC 791 §3.1; a receiver verifies it, RFC 1122
  §3.2.1.2): trusted if the rx port said good or partial, as the checksum
  offloading document (CSUM-DOC, datapath/model/send.py) defines those flags;
  verified if unknown (native_tnl_l3csum_checked); a bad one (said or found)
  drops the frame (native_tnl_l3csum_err).  IPv6 has none.
- VXLAN/Geneve UDP checksum: 0 means none (RFC 768; RFC 6935 §5 over IPv6);
  otherwise as above with the L4 flag (native_tnl_l4csum_checked / _err).
- GRE checksum (RFC 2784 §2.5): verified when present, no port offloads it; a
  wrong one drops the frame.
- ERSPAN (GRE protocol 0x88BE/0x22EB) carries its own header before the
  frame; a GRE payload of another EtherType than 0x6558 (RFC 1701's Transparent
  Ethernet Bridging) is an L3 packet.
- Every drop counts datapath_drop_tunnel_pop_error.
- After the pop the inner packet's checksum state is unknown: the rx flags
  spoke of the frame as received, the outer packet (CSUM-DOC), so nothing is
  known of the inner checksums; they are neither checked nor finished, only
  patched by rewrites.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from datapath.model import csum
from datapath.model.packet import PROTO_GRE, PROTO_UDP, Packet, ipv4_header, parse_layer
from datapath.model.tnl_headers import ETH_TYPE_ERSPAN1, ETH_TYPE_ERSPAN2, ETH_TYPE_TEB, VXLAN_PORT
from datapath.offloads import CsumState, RxFlags

COUNTERS = ("datapath_drop_tunnel_pop_error", "native_tnl_l3csum_checked",
            "native_tnl_l3csum_err", "native_tnl_l4csum_checked", "native_tnl_l4csum_err")


@dataclass
class Popped:
    """The result of a tunnel receive: the inner frame (None if dropped), the counters, notes."""

    inner: bytes | None  # None: dropped
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    notes: list[str] = field(default_factory=list)


def pop(frame: bytes, rx: RxFlags) -> Popped:
    """The inner frame that comes out of the tunnel port, or a drop and why."""
    out = Popped(None)
    lay = parse_layer(frame)
    if lay.l3 is None or lay.payload is None or lay.proto not in (PROTO_UDP, PROTO_GRE):
        raise ValueError("not an IP/UDP or IP/GRE tunnel frame")

    def drop(reason: str, *counters: str) -> Popped:
        out.counters["datapath_drop_tunnel_pop_error"] += 1
        for c in counters:
            out.counters[c] += 1
        out.notes.append(f"dropped: {reason}")
        return out

    if lay.ipv == 4:
        ihl = ipv4_header(frame, lay.l3).ihl
        if rx.ip is CsumState.UNKNOWN:
            out.counters["native_tnl_l3csum_checked"] += 1
            if csum.checksum(frame[lay.l3:lay.l3 + ihl]) != 0:
                return drop("outer IPv4 checksum wrong (verified)", "native_tnl_l3csum_err")
        elif rx.ip is CsumState.BAD:
            return drop("rx port flagged the outer IP checksum bad", "native_tnl_l3csum_err")
        else:
            out.notes.append(f"outer IPv4 checksum trusted (rx flag {rx.ip.value})")
    l4 = lay.payload
    if lay.proto == PROTO_UDP:
        lay.l4 = l4
        udp_csum = struct.unpack_from("!H", frame, lay.l4_csum_ofs)[0]
        if udp_csum:
            if rx.l4 is CsumState.UNKNOWN:
                out.counters["native_tnl_l4csum_checked"] += 1
                if Packet(bytearray(frame)).l4_sum(lay) != 0xFFFF:
                    return drop("outer UDP checksum wrong (verified)", "native_tnl_l4csum_err")
            elif rx.l4 is CsumState.BAD:
                return drop("rx port flagged the outer UDP checksum bad", "native_tnl_l4csum_err")
            else:
                out.notes.append(f"outer UDP checksum trusted (rx flag {rx.l4.value})")
        dport = struct.unpack_from("!H", frame, l4 + 2)[0]
        hdr = 8 + (8 if dport == VXLAN_PORT else 8 + 4 * (frame[l4 + 8] & 0x3F))
    else:
        flags, proto = struct.unpack_from("!HH", frame, l4)
        hdr = 4 + 4 * sum(1 for bit in (0x8000, 0x2000, 0x1000) if flags & bit)
        if flags & 0x8000 and csum.checksum(frame[l4:]) != 0:
            return drop("GRE checksum wrong (always verified)")
        if proto == ETH_TYPE_ERSPAN1 and flags & 0x1000:
            hdr += 8  # type II header (draft-foschiano-erspan-03 §4.2)
        elif proto == ETH_TYPE_ERSPAN2:
            # type III: 12 bytes, 8 more with the platform sub-header (O bit)
            hdr += 12 + (8 if frame[l4 + hdr + 11] & 1 else 0)
        elif proto != ETH_TYPE_TEB:
            out.notes.append(f"GRE protocol 0x{proto:04x}: an L3 payload, no Ethernet header")
    out.inner = frame[l4 + hdr:]
    out.notes.append("popped; inner checksum state reset to unknown")
    return out
