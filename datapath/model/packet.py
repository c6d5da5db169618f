"""The model's packet: bytes, parsed layers, and each layer's checksum state.

Parsing follows the protocol rules: an IPv4 header is one a router would accept
(RFC 1812 §5.2.2: at least 20 bytes, total length at least the header and at
most what arrived), an IPv6 packet's upper layer follows its extension headers
(RFC 8200 §4: hop-by-hop, routing, fragment, destination options; AH, RFC 4302
§2.2), and a fragment other than the first carries no upper-layer header
(RFC 791 §3.2, RFC 8200 §4.5).  A tunnelled packet has an outer and an inner
Layer; each layer carries its own IP and L4 checksum state (good, bad, partial
or unknown: OVS Documentation/topics/userspace-checksum-offloading.rst).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

from datapath.model import csum
from datapath.model.hooks import Known, Overlay
from datapath.offloads import CsumState

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_IPV6 = 0x86DD
ETH_TYPE_VLAN = 0x8100
ETH_TYPE_QINQ = 0x88A8  # IEEE 802.1ad service tag
PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_GRE = 47
PROTO_ICMPV6 = 58
IPV6_FRAGMENT, IPV6_AH = 44, 51
# Hop-by-hop, routing, fragment, destination options, AH (RFC 8200 §4, RFC 4302).
IPV6_EXT_HEADERS = (0, 43, IPV6_FRAGMENT, 60, IPV6_AH)
IPV4_MIN_HEADER, IPV6_HEADER = 20, 40
IPV4_CSUM = 10  # offset of the header checksum in an IPv4 header (RFC 791 §3.1)
# Offset of the checksum in a TCP (RFC 9293 §3.1), UDP (RFC 768) or GRE header
# with its C bit set (RFC 2784 §2.1).
L4_CSUM_OFS = {PROTO_TCP: 16, PROTO_UDP: 6, PROTO_GRE: 4}


class IPv4Header(NamedTuple):
    """The fields of an IPv4 header (RFC 791 §3.1) the model reads."""

    ihl: int  # header length in bytes (IHL x 4), options included
    total_len: int
    frag: int  # flags (3 bits) and fragment offset (13 bits)
    proto: int
    src: bytes
    dst: bytes


class IPv6Header(NamedTuple):
    """The fields of an IPv6 fixed header (RFC 8200 §3) the model reads."""

    payload_len: int
    next_header: int
    src: bytes
    dst: bytes


def ipv4_header(data: bytes | bytearray, l3: int) -> IPv4Header:
    """The IPv4 header at `l3` (at least 20 bytes must be there)."""
    frag = struct.unpack_from("!H", data, l3 + 6)[0]
    return IPv4Header((data[l3] & 0x0F) * 4, struct.unpack_from("!H", data, l3 + 2)[0], frag,
                      data[l3 + 9], bytes(data[l3 + 12:l3 + 16]), bytes(data[l3 + 16:l3 + 20]))


def ipv6_header(data: bytes | bytearray, l3: int) -> IPv6Header:
    """The IPv6 fixed header at `l3` (at least 40 bytes must be there)."""
    return IPv6Header(struct.unpack_from("!H", data, l3 + 4)[0], data[l3 + 6],
                      bytes(data[l3 + 8:l3 + 24]), bytes(data[l3 + 24:l3 + 40]))


def ether_type(data: bytes | bytearray, eth: int = 0, tpids: tuple[int, ...] = (ETH_TYPE_VLAN,),
               max_tags: int | None = 1) -> tuple[int, int]:
    """(EtherType, offset of the L3 header) of the Ethernet frame at `eth`, after
    up to `max_tags` (None: any number of) IEEE 802.1Q tags whose TPID is in
    `tpids`; EtherType 0 for a frame shorter than an Ethernet header."""
    if len(data) < eth + 14:
        return 0, eth + 14
    ofs = eth + 12
    eth_type = struct.unpack_from("!H", data, ofs)[0]
    tags = 0
    while eth_type in tpids and len(data) >= ofs + 6 and (max_tags is None or tags < max_tags):
        ofs, tags = ofs + 4, tags + 1
        eth_type = struct.unpack_from("!H", data, ofs)[0]
    return int(eth_type), ofs + 2


@dataclass
class Layer:
    """One IP header and what follows it, by offsets into the packet's bytes."""

    l3: int | None = None  # offset of the IP header
    ipv: int = 0  # 4, 6, or 0 when OVS would not parse an IP header
    l4: int | None = None  # offset of a complete TCP/UDP header
    proto: int | None = None
    # Offset of the upper-layer header (`proto`, after any IPv6 extension
    # headers), complete or not; None where there is none (a later fragment).
    payload: int | None = None
    l3_size: int = 0  # bytes from l3 to the end of the IP packet (no L2 padding)
    ip_csum: CsumState = CsumState.UNKNOWN
    l4_csum: CsumState = CsumState.UNKNOWN
    # A first fragment: its L4 checksum covers the whole datagram, most of which
    # is not in this packet, so it can be patched (RFC 1624) but never computed.
    fragment: bool = False

    def shifted(self, by: int) -> "Layer":
        return replace(self, l3=None if self.l3 is None else self.l3 + by,
                       l4=None if self.l4 is None else self.l4 + by,
                       payload=None if self.payload is None else self.payload + by)

    @property
    def l4_name(self) -> str:
        return {PROTO_TCP: "TCP", PROTO_UDP: "UDP"}.get(self.proto or -1, "L4")

    @property
    def l4_size(self) -> int:
        assert self.l3 is not None and self.l4 is not None
        return self.l3 + self.l3_size - self.l4

    @property
    def l4_csum_ofs(self) -> int:
        assert self.l4 is not None
        return self.l4 + L4_CSUM_OFS[PROTO_TCP if self.proto == PROTO_TCP else PROTO_UDP]


def parse_layer(data: bytes | bytearray, eth: int = 0) -> Layer:
    """The IP layer of the Ethernet frame starting at `eth`, as OVS would see it."""
    layer = Layer()
    eth_type, l3 = ether_type(data, eth)
    size = len(data) - l3
    if eth_type == ETH_TYPE_IPV4 and size >= IPV4_MIN_HEADER:
        v4 = ipv4_header(data, l3)
        ihl, tot_len = v4.ihl, v4.total_len
        if ihl < IPV4_MIN_HEADER or size < ihl or tot_len > size or ihl > tot_len:
            return layer  # not an IPv4 header (RFC 1812 §5.2.2)
        layer.l3, layer.ipv, layer.l3_size = l3, 4, tot_len
        if v4.frag & 0x1FFF:
            return layer  # a later fragment has no L4 header
        layer.fragment = bool(v4.frag & 0x2000)  # MF: the first of several
        _set_l4(layer, v4.proto, l3 + ihl, tot_len - ihl)
    elif eth_type == ETH_TYPE_IPV6 and size >= IPV6_HEADER:
        v6 = ipv6_header(data, l3)
        plen = v6.payload_len
        if plen + IPV6_HEADER > size:
            return layer
        layer.l3, layer.ipv, layer.l3_size = l3, 6, plen + IPV6_HEADER
        end = l3 + IPV6_HEADER + plen
        nh, ofs = v6.next_header, l3 + IPV6_HEADER
        while nh in IPV6_EXT_HEADERS and ofs + 8 <= end:
            if nh == IPV6_FRAGMENT:
                offset_mf = struct.unpack_from("!H", data, ofs + 2)[0]
                if offset_mf & 0xFFF8:
                    layer.proto = data[ofs]
                    return layer  # a later fragment has no L4 header
                layer.fragment = bool(offset_mf & 1)
                nh, ofs = data[ofs], ofs + 8
            elif nh == IPV6_AH:
                nh, ofs = data[ofs], ofs + (data[ofs + 1] + 2) * 4
            else:
                nh, ofs = data[ofs], ofs + (data[ofs + 1] + 1) * 8
        if ofs > end:
            return layer
        _set_l4(layer, nh, ofs, end - ofs)
    return layer


def _set_l4(layer: Layer, proto: int, l4: int, l4_size: int) -> None:
    layer.proto, layer.payload = proto, l4
    if (proto == PROTO_TCP and l4_size >= 20) or (proto == PROTO_UDP and l4_size >= 8):
        layer.l4 = l4


@dataclass(frozen=True)
class Cut:
    """A packet output max_len cut while a TCP/UDP checksum was pending: who
    completes it depends on the port, so egress decides (send.py E3, E8)."""

    length: int  # max_len: the cut frame's length
    flag: str  # the offload flag that checksum needs: "tcp" or "udp"
    # The cut bytes as received (for a port that takes the offload and does not do it).
    handed: Callable[["Packet"], None] | None


@dataclass
class Packet:
    """A packet as the model carries it through the actions: bytes, layers, tunnel, offload flags."""

    data: bytearray
    outer: Layer = field(default_factory=Layer)
    inner: Layer | None = None  # set once a tunnel header was pushed
    tunnel: str | None = None  # "vxlan", "geneve" or "gre" while OVS tracks it
    notes: list[str] = field(default_factory=list)
    gre_csum_ofs: int | None = None  # the GRE checksum field, when there is one
    # Known deviations of the datapath under test this packet runs into, as a
    # layer above names them (datapath/model/hooks.py); the model names none.
    bugs: list[Known] = field(default_factory=list)
    tso_segsz: int = 0  # set by a TSO rx port: the packet may be segmented on tx
    # What output max_len left for egress (datapath/model/cut.py), if it cut the
    # packet while a TCP/UDP checksum was pending.
    cut: Cut | None = None
    # What a layer above keeps on the packet (datapath/model/hooks.py).
    overlay: Overlay | None = None
    # zone -> (connection, reply, snat/dnat bits) of the ct action that NATed
    # the packet in that zone (datapath/model/conntrack.py).
    ct_nat: dict[int, tuple[Any, bool, int]] = field(default_factory=dict)
    # Set by an action after which nothing of the packet leaves (a ct commit with
    # NAT that the tracker refused: datapath/model/conntrack.py).
    dropped: bool = False

    @classmethod
    def parse(cls, frame: bytes) -> "Packet":
        if len(frame) < 14:
            return cls(bytearray(frame))
        return cls(bytearray(frame), parse_layer(frame))

    def copy(self) -> "Packet":
        return Packet(bytearray(self.data), replace(self.outer),
                      None if self.inner is None else replace(self.inner), self.tunnel, [],
                      self.gre_csum_ofs, list(self.bugs), self.tso_segsz, self.cut,
                      None if self.overlay is None else self.overlay.copy())

    # The outermost layer is what rewrites act on.
    @property
    def l3(self) -> int | None:
        return self.outer.l3

    @property
    def l4(self) -> int | None:
        return self.outer.l4

    @property
    def ipv(self) -> int:
        return self.outer.ipv

    @property
    def proto(self) -> int | None:
        return self.outer.proto

    @property
    def l4_csum_ofs(self) -> int:
        return self.outer.l4_csum_ofs

    def u16(self, ofs: int) -> int:
        return int(struct.unpack_from("!H", self.data, ofs)[0])

    def put16(self, ofs: int, value: int) -> None:
        struct.pack_into("!H", self.data, ofs, value)

    # -- rewrites (CSUM-DOC: postpone, or RFC 1624 for an unknown checksum) --

    def patch_ip_csum(self, old: bytes, new: bytes) -> None:
        """A rewrite inside the IPv4 header: mark partial if valid, else RFC 1624."""
        lay = self.outer
        assert lay.l3 is not None
        if lay.ip_csum.valid:
            lay.ip_csum = CsumState.PARTIAL
            self.notes.append("IP checksum state valid -> partial (bytes left stale)")
        else:
            ofs = lay.l3 + IPV4_CSUM
            self.put16(ofs, csum.incremental(self.u16(ofs), old, new))
            self.notes.append(f"IP checksum {lay.ip_csum.value}: updated incrementally")

    def patch_l4_csum(self, old: bytes, new: bytes, what: str) -> None:
        """A rewrite covered by the L4 checksum (ports, or addresses via the pseudo-header)."""
        lay = self.outer
        if lay.l4 is None:
            return
        if lay.l4_csum.valid and not lay.fragment:
            lay.l4_csum = CsumState.PARTIAL
            self.notes.append(f"{lay.l4_name} checksum state valid -> partial ({what})")
            return
        ofs = lay.l4_csum_ofs
        old_csum = self.u16(ofs)
        if lay.proto == PROTO_UDP and old_csum == 0:
            self.notes.append(f"UDP checksum 0 (none) stays 0 ({what})")
            return
        new_csum = csum.incremental(old_csum, old, new)
        if lay.proto == PROTO_UDP and new_csum == 0:
            new_csum = 0xFFFF
        self.put16(ofs, new_csum)
        self.notes.append(f"{lay.l4_name} checksum {lay.l4_csum.value}: updated "
                          f"incrementally ({what})")

    # -- checksum arithmetic on a layer ---------------------------------------

    def pseudo_header(self, lay: Layer, proto: int | None = None,
                      length: int | None = None) -> int:
        """RFC 768 / 9293 §3.1 (IPv4) and RFC 8200 §8.1 (IPv6: the upper-layer
        protocol and length, whatever extension headers come before)."""
        assert lay.l3 is not None
        proto = lay.proto or 0 if proto is None else proto
        length = lay.l4_size if length is None else length
        if lay.ipv == 4:
            v4 = ipv4_header(self.data, lay.l3)
            return csum.pseudo_header_v4(v4.src, v4.dst, proto, length)
        v6 = ipv6_header(self.data, lay.l3)
        return csum.pseudo_header_v6(v6.src, v6.dst, proto, length)

    def l4_sum(self, lay: Layer, pseudo_proto: int | None = None,
               pseudo_len: int | None = None) -> int:
        """Ones' sum of pseudo-header and L4 bytes: 0xffff when the checksum is right."""
        assert lay.l4 is not None
        return csum.ones_sum(bytes(self.data[lay.l4:lay.l4 + lay.l4_size]),
                             self.pseudo_header(lay, pseudo_proto, pseudo_len))

    def set_ip_csum(self, lay: Layer, where: str = "") -> None:
        """Make an IPv4 header checksum right (RFC 791 §3.1, RFC 1071): the sum over
        the whole header, options included, with the field taken as zero."""
        assert lay.l3 is not None
        ihl = (self.data[lay.l3] & 0x0F) * 4  # IHL x 4 (RFC 791 §3.1)
        if lay.ipv == 4 and IPV4_MIN_HEADER <= ihl <= lay.l3_size:
            self.put16(lay.l3 + IPV4_CSUM, 0)
            self.put16(lay.l3 + IPV4_CSUM,
                       csum.checksum(bytes(self.data[lay.l3:lay.l3 + ihl])))
            if where:
                self.notes.append(f"{where} IP checksum completed")
        lay.ip_csum = CsumState.GOOD

    def set_l4_csum(self, lay: Layer, where: str = "", pseudo_proto: int | None = None,
                    pseudo_len: int | None = None) -> None:
        """Make a TCP or UDP checksum right: pseudo-header plus segment (RFC 9293
        §3.1, RFC 768, RFC 8200 §8.1); a UDP result of 0 is sent as 0xffff (RFC 768).
        `pseudo_proto` and `pseudo_len` compute it under another pseudo-header."""
        ofs = lay.l4_csum_ofs
        self.put16(ofs, 0)
        value = csum.finish(self.l4_sum(lay, pseudo_proto, pseudo_len))
        if lay.proto == PROTO_UDP and value == 0:
            value = 0xFFFF
        self.put16(ofs, value)
        if where:
            self.notes.append(f"{where} {lay.l4_name} checksum completed")
        lay.l4_csum = CsumState.GOOD

    # -- verdicts --------------------------------------------------------------

    def csum_verdicts(self) -> dict[str, str]:
        """Per layer: good, bad (wrong and meant to be), stale (partial, left for a
        driver that did not do it), or none (UDP checksum 0)."""
        out: dict[str, str] = {}
        layers = [("", self.outer)] if self.inner is None else [("outer.", self.outer),
                                                                 ("inner.", self.inner)]
        inner_stale = self.inner is not None and CsumState.PARTIAL in (
            self.inner.ip_csum, self.inner.l4_csum)
        for prefix, lay in layers:
            # An outer UDP checksum made for the finished inner packet is only as
            # wrong as the inner checksums a driver still has to finish.
            pending = lay is self.outer and inner_stale
            if lay.ipv == 4 and lay.l3 is not None:
                ihl = ipv4_header(self.data, lay.l3).ihl
                ok = csum.checksum(bytes(self.data[lay.l3:lay.l3 + ihl])) == 0
                out[prefix + "IP"] = "good" if ok else (
                    "stale" if lay.ip_csum is CsumState.PARTIAL else "bad")
            if lay.l4 is not None and lay.proto in (PROTO_TCP, PROTO_UDP) and not lay.fragment:
                name = prefix + lay.l4_name
                if lay.proto == PROTO_UDP and self.u16(lay.l4_csum_ofs) == 0:
                    # RFC 768: none; over IPv6 RFC 6935 §5 and RFC 6936 allow it
                    # (send.py E2): neither good nor bad (tshark: illegal).
                    out[name] = "none"
                else:
                    ok = self.l4_sum(lay) == 0xFFFF
                    out[name] = "good" if ok else (
                        "stale" if lay.l4_csum is CsumState.PARTIAL or pending else "bad")
        if self.gre_csum_ofs is not None:
            ok = csum.checksum(bytes(self.data[self.gre_csum_ofs - 4:])) == 0
            out["outer.GRE"] = "good" if ok else "bad"
        return out


def with_vlan(frame: bytes, vid: int, pcp: int = 0) -> bytes:
    """IEEE 802.1Q: the frame as a trunk port sends it for an access VLAN, a tag
    (TPID 0x8100, TCI = PCP(3) DEI(1) VID(12)) after the source MAC."""
    return frame[:12] + struct.pack("!HH", ETH_TYPE_VLAN, (pcp << 13) | vid) + frame[12:]
