"""Native tunnel encapsulation: VXLAN, Geneve and GRE over IPv4 or IPv6 (§4.4, §4.5).

The outer header a datapath must build: IPv4 id 0, DF, TTL 64 (IPv6: hop limit
64, flow label 0); TOS is the configured one plus the inner ECN bits (CE
becomes ECT(0)); UDP source port from the egress port range; UDP checksum 0
with csum=false, or to be computed (state partial) with csum=true.  The outer
IPv4 checksum is always left for the tx port (partial).  A GRE checksum is
computed right away, over the bytes as they are at push time.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from datapath.model import csum
from datapath.model.packet import PROTO_GRE, PROTO_UDP, Layer, Packet, parse_layer
from datapath.offloads import CsumState

VXLAN_PORT = 4789
GENEVE_PORT = 6081
ETH_TYPE_TEB = 0x6558
GRE_CSUM, GRE_KEY = 0x8000, 0x2000
ECN_MASK, ECN_CE, ECN_ECT0 = 0x03, 0x03, 0x02
KINDS = ("vxlan", "geneve", "gre")


class TunnelError(ValueError):
    pass


@dataclass(frozen=True)
class TunnelSpec:
    """One tunnel port and the underlay it leaves through."""

    kind: str  # vxlan, geneve, gre
    local_ip: str
    remote_ip: str
    local_mac: str  # the underlay bridge's hwaddr
    remote_mac: str  # the next hop's MAC (tnl/neigh/set)
    key: int = 123
    csum: bool | None = None  # None: the OVS default (on over IPv6, off over IPv4)
    udp_src: int = 57363  # tnl/egress_port_range set to exactly this port
    ttl: int = 64
    tos: int = 0
    # Who picks the UDP source port: "range" (tnl/egress_port_range, see udp_src), or
    # "dummy-offload": with hw-offload on, the dummy offload provider picks it from
    # the inner frame (the low 16 bits of its 32-bit FNV-1a hash) and ignores the range.
    entropy: str = "range"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TunnelError(f"unknown tunnel type {self.kind!r}: one of {', '.join(KINDS)}")
        if self.entropy not in ("range", "dummy-offload"):
            raise TunnelError(f"unknown source port choice {self.entropy!r}")
        if self.underlay != ipaddress.ip_address(self.remote_ip).version:
            raise TunnelError("local and remote IP of a tunnel must be the same family")

    @property
    def underlay(self) -> int:
        return ipaddress.ip_address(self.local_ip).version

    @property
    def checksummed(self) -> bool:
        return self.underlay == 6 if self.csum is None else self.csum


    @property
    def id(self) -> str:
        csum_id = "csum_on" if self.checksummed else "csum_off"
        return f"{self.kind}-ul{self.underlay}-{csum_id}"


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def _inner_tos(pkt: Packet) -> int:
    lay = pkt.outer
    if lay.l3 is None:
        return 0
    if lay.ipv == 4:
        return pkt.data[lay.l3 + 1]
    return (pkt.u16(lay.l3) >> 4) & 0xFF


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bits (offset basis 2166136261, prime 16777619)."""
    value = 2166136261
    for byte in data:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def _tunnel_header(spec: TunnelSpec, inner: bytes) -> bytes:
    """The bytes after the outer IP header, with lengths and checksums still zero."""
    inner_len = len(inner)
    if spec.kind == "gre":
        flags = (GRE_CSUM if spec.checksummed else 0) | GRE_KEY
        hdr = struct.pack("!HH", flags, ETH_TYPE_TEB)
        if spec.checksummed:
            hdr += bytes(4)
        return hdr + struct.pack("!I", spec.key)
    if spec.kind == "vxlan":
        body = struct.pack("!II", 0x08000000, spec.key << 8)
        port = VXLAN_PORT
    else:
        body = struct.pack("!HHI", 0, ETH_TYPE_TEB, spec.key << 8)
        port = GENEVE_PORT
    udp_csum = 0xFFFF if spec.checksummed else 0
    sport = fnv1a_32(inner) & 0xFFFF if spec.entropy == "dummy-offload" else spec.udp_src
    return struct.pack("!HHHH", sport, port, 8 + len(body) + inner_len, udp_csum) + body


def push(pkt: Packet, spec: TunnelSpec) -> None:
    """tnl_push: prepend Ethernet + IP + tunnel header; the old layers become inner."""
    tos = (spec.tos & ~ECN_MASK) | (_inner_tos(pkt) & ECN_MASK)
    if tos & ECN_MASK == ECN_CE:
        tos = (tos & ~ECN_MASK) | ECN_ECT0
    inner_len = len(pkt.data)
    tnl = _tunnel_header(spec, bytes(pkt.data))
    proto = PROTO_GRE if spec.kind == "gre" else PROTO_UDP
    payload_len = len(tnl) + inner_len
    src = ipaddress.ip_address(spec.local_ip).packed
    dst = ipaddress.ip_address(spec.remote_ip).packed
    if spec.underlay == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + payload_len, 0, 0x4000, spec.ttl,
                         proto, 0, src, dst)
        eth_type = 0x0800
    else:
        ip = struct.pack("!IHBB16s16s", (6 << 28) | (tos << 20), payload_len, proto, spec.ttl,
                         src, dst)
        eth_type = 0x86DD
    eth = _mac(spec.remote_mac) + _mac(spec.local_mac) + struct.pack("!H", eth_type)
    header = eth + ip + tnl
    old = pkt.outer
    pkt.data = bytearray(header) + pkt.data
    # tnl_ol_push: the packet's checksum state moves to the inner layer.
    pkt.inner = old.shifted(len(header))
    pkt.tunnel = spec.kind
    outer: Layer = parse_layer(pkt.data)
    outer.ip_csum = CsumState.PARTIAL if spec.underlay == 4 else CsumState.UNKNOWN
    if proto == PROTO_UDP:
        outer.l4_csum = CsumState.PARTIAL if spec.checksummed else CsumState.GOOD
    pkt.outer = outer
    pkt.notes.append(f"push {spec.kind} over IPv{spec.underlay}, csum "
                     f"{'on' if spec.checksummed else 'off'}")
    if spec.kind == "gre" and spec.checksummed:
        # OVS fills the GRE checksum now, over the bytes as they are; the model
        # keeps where it is and fills it (correctly) once the packet is final.
        pkt.gre_csum_ofs = len(eth) + len(ip) + 4
        gre = pkt.gre_csum_ofs - 4
        pkt.ovs_gre_csum = csum.checksum(bytes(pkt.data[gre:]))
