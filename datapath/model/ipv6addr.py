"""set_field of ipv6_src / ipv6_dst on a frame's bytes.

The address changes in the IPv6 header (RFC 8200 §3).  The upper-layer
checksums of TCP, UDP and ICMPv6 cover it through the pseudo-header (RFC 8200
§8.1, RFC 4443 §2.3), so where the packet carries the upper-layer header (not
fragmented, or the first fragment: RFC 8200 §4.5) that checksum is updated
for the change (RFC 1624 eqn. 3); a first fragment's checksum covers the
whole datagram, which the update keeps right.  A later fragment carries no
upper-layer header: only the address changes.  A UDP checksum of 0 over IPv6
stays as sent (RFC 6935 §5 and RFC 6936 allow it).
"""
from __future__ import annotations

import ipaddress
import struct

from datapath.model import csum
from datapath.model.packet import PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, parse_layer

CSUM_OFS = {PROTO_TCP: 16, PROTO_UDP: 6, PROTO_ICMPV6: 2}


def set_ipv6_addr(frame: bytes, field: str, addr: str) -> bytes:
    """The frame with its IPv6 source (`field` "src") or destination set to `addr`."""
    lay = parse_layer(frame)
    if lay.ipv != 6 or lay.l3 is None:
        raise ValueError("set_field of an IPv6 address on a frame without an IPv6 header")
    ofs = lay.l3 + (8 if field == "src" else 24)
    old, new = frame[ofs:ofs + 16], ipaddress.IPv6Address(addr).packed
    out = bytearray(frame)
    out[ofs:ofs + 16] = new
    if lay.payload is not None and lay.proto in CSUM_OFS:
        at = lay.payload + CSUM_OFS[lay.proto]
        if at + 2 <= len(out):
            value = struct.unpack_from("!H", out, at)[0]
            if not (lay.proto == PROTO_UDP and value == 0):
                value = csum.incremental(value, old, new)
                if lay.proto == PROTO_UDP and value == 0:
                    value = 0xFFFF
                struct.pack_into("!H", out, at, value)
    return bytes(out)
