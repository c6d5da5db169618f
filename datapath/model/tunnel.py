"""Native tunnel encapsulation: the outer headers a datapath must build (§4.4, §4.5).

Kinds: VXLAN (optionally GPE), Geneve (with options), GRE (optionally with key,
sequence numbers, checksum, or an L3 payload), ERSPAN type II/III, SRv6 and
GTP-U, each over IPv4 or IPv6 (tnl_headers.py builds what follows the IP
header, citing each specification).

The outer header: IPv4 id 0, DF, TTL 64 (IPv6: hop limit 64, flow label 0
unless an SRv6 flow label mode says otherwise); TOS is the configured one plus
the inner ECN bits (CE becomes ECT(0)); UDP source port from the egress port
range; UDP checksum 0 with csum=false, or to be computed (state partial) with
csum=true.  The outer IPv4 checksum is always left for the tx port (partial).
A GRE checksum covers the bytes as sent: it is filled at egress.

L3 tunnels (GRE with packet_type=legacy_l3, SRv6, GTP-U) carry the IP packet
without its Ethernet header (pop_eth before the push).  Per-packet values the
spec cannot know are inputs of push(): the GRE/ERSPAN sequence number (RFC 2890
§2.2: the first datagram of a flow carries 0, then +1 per datagram), the ERSPAN
type III timestamp, the UDP source port when it is hash-based, and a computed
SRv6 flow label.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from datapath.model import hooks
from datapath.model import tnl_headers as th
from datapath.model.packet import PROTO_GRE, PROTO_UDP, Layer, Packet, parse_layer
from datapath.model.tnl_headers import (  # noqa: F401
    ETH_TYPE_TEB,
    GENEVE_PORT,
    GRE_CSUM,
    GRE_KEY,
    GTPU_PORT,
    VXLAN_PORT,
    GeneveOpt,
)
from datapath.offloads import CsumState

ECN_MASK, ECN_CE, ECN_ECT0 = 0x03, 0x03, 0x02
KINDS = ("vxlan", "geneve", "gre", "erspan", "srv6", "gtpu")
L3_KINDS = ("srv6", "gtpu")
FLOW_LABEL_MODES = ("zero", "copy", "compute")


def csum_id(on: bool) -> str:
    """How an id names a tunnel's checksum setting."""
    return "csum_on" if on else "csum_off"


class TunnelError(ValueError):
    """A tunnel specification the model cannot build."""


@dataclass(frozen=True)
class TunnelSpec:
    """One tunnel port (its type and options) and the underlay it leaves through."""

    kind: str  # one of KINDS; ip6gre/ip6erspan are gre/erspan over an IPv6 underlay
    local_ip: str
    remote_ip: str
    local_mac: str  # the underlay bridge's hwaddr
    remote_mac: str  # the next hop's MAC (tnl/neigh/set or learned)
    key: int | None = 123  # None: no key option (GRE without K bit, VNI 0)
    csum: bool | None = None  # None: the OVS default (on for UDP tunnels over IPv6 only)
    udp_src: int = 57363  # tnl/egress_port_range set to exactly this port
    ttl: int = 64
    tos: int = 0
    seq: bool = False  # GRE options:seq=true (ERSPAN always has sequence numbers)
    l3: bool = False  # GRE options:packet_type=legacy_l3: carries the IP packet only
    gpe: bool = False  # VXLAN options:exts=gpe
    geneve_opts: tuple[GeneveOpt, ...] = ()
    erspan_ver: int = 1
    erspan_idx: int = 0
    erspan_dir: int = 0
    erspan_hwid: int = 0
    srv6_segs: tuple[str, ...] = ()  # default: the remote IP as the only segment
    # The outer IPv6 flow label of SRv6 (options:srv6_flowlabel, SRv6 only): zero, copy or
    # compute; vswitch.xml: "By default, or if this option is copy, copy the
    # flowlabel of inner IPv6 header ... If inner header is not IPv6, it is set to 0."
    flow_label: str = "copy"
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
        if self.kind == "srv6" and self.underlay != 6:
            raise TunnelError("SRv6 needs an IPv6 underlay")
        if self.flow_label not in FLOW_LABEL_MODES:
            raise TunnelError(f"flow label mode {self.flow_label!r}: one of "
                              f"{', '.join(FLOW_LABEL_MODES)}")

    @property
    def underlay(self) -> int:
        return ipaddress.ip_address(self.local_ip).version

    @property
    def checksummed(self) -> bool:
        """vswitch.xml options:csum: unset means on for UDP tunnels over IPv6,
        off for GRE and for UDP tunnels over IPv4."""
        if self.csum is not None:
            return self.csum
        return self.underlay == 6 and self.kind in ("vxlan", "geneve")

    @property
    def carries_l3(self) -> bool:
        return self.l3 or self.kind in L3_KINDS

    @property
    def ip_proto(self) -> int:
        if self.kind in ("gre", "erspan"):
            return PROTO_GRE
        return th.IPPROTO_ROUTING if self.kind == "srv6" else PROTO_UDP

    @property
    def id(self) -> str:
        return f"{self.kind}-ul{self.underlay}-{csum_id(self.checksummed)}"


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def _inner_tos(pkt: Packet) -> int:
    lay = pkt.outer
    if lay.l3 is None:
        return 0
    if lay.ipv == 4:
        return pkt.data[lay.l3 + 1]
    return (pkt.u16(lay.l3) >> 4) & 0xFF


def _inner_vlan(pkt: Packet) -> tuple[int, int]:
    """(VID, PCP) of an 802.1Q-tagged frame, or (0, 0) untagged (plus a tagged flag)."""
    if len(pkt.data) >= 18 and pkt.u16(12) == 0x8100:
        tci = pkt.u16(14)
        return tci & 0xFFF, tci >> 13
    return 0, 0


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bits (offset basis 2166136261, prime 16777619)."""
    value = 2166136261
    for byte in data:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def _tunnel_header(spec: TunnelSpec, pkt: Packet, inner_len: int, inner_type: int,
                   seq: int, timestamp: int, udp_src: int) -> bytes:
    """The bytes after the outer IP header, with lengths filled and checksums zero."""
    key = spec.key
    if spec.kind == "gre":
        return th.gre(inner_type, csum=spec.checksummed, key=key,
                      seq=seq if spec.seq else None)
    if spec.kind == "erspan":
        vid, pcp = _inner_vlan(pkt)
        tagged = pkt.u16(12) == 0x8100
        if spec.erspan_ver == 1:
            # En: 00 originally untagged, 11 the VLAN tag is preserved in the frame.
            body = th.erspan_v1(key or 0, spec.erspan_idx, vid, pcp, 3 if tagged else 0)
            proto = th.ETH_TYPE_ERSPAN1
        elif spec.erspan_ver == 2:
            body = th.erspan_v2(key or 0, timestamp, spec.erspan_hwid, spec.erspan_dir,
                                vlan=vid, cos=pcp)
            proto = th.ETH_TYPE_ERSPAN2
        else:
            raise TunnelError(f"ERSPAN version {spec.erspan_ver}: 1 or 2")
        return th.gre(proto, seq=seq) + body
    if spec.kind == "srv6":
        return th.srh(spec.srv6_segs or (spec.remote_ip,), inner_type)
    if spec.kind == "vxlan":
        body, port = th.vxlan(key or 0, spec.gpe, inner_type), VXLAN_PORT
    elif spec.kind == "geneve":
        body, port = th.geneve(key or 0, spec.geneve_opts), GENEVE_PORT
    else:
        body, port = th.gtpu(key or 0, inner_len), GTPU_PORT
    hdr = bytearray(th.udp(udp_src, port, len(body) + inner_len) + body)
    if spec.checksummed:  # to be computed; a driver that "forgets" leaves ffff (§4.4)
        hdr[6:8] = b"\xff\xff"
    return bytes(hdr)


def _flow_label(spec: TunnelSpec, pkt: Packet, computed: int | None) -> int:
    """vswitch.xml srv6_flowlabel: zero; copy (the inner IPv6 label, 0 for any other
    payload); compute (a hash of the inner L3/L4 fields: an input of the model)."""
    if spec.flow_label == "zero":
        return 0
    if spec.flow_label == "copy":
        lay = pkt.outer
        if lay.ipv == 6 and lay.l3 is not None:
            return int(struct.unpack_from("!I", pkt.data, lay.l3)[0]) & 0xFFFFF
        return 0
    if computed is None:
        raise TunnelError("flow label mode compute: the label is an input of push()")
    return computed & 0xFFFFF


def push(pkt: Packet, spec: TunnelSpec, *, seq: int = 0, timestamp: int = 0,
         udp_src: int | None = None, flow_label: int | None = None) -> None:
    """tnl_push: prepend Ethernet + IP + tunnel header; the old layers become inner.

    `seq` is the sequence number this datagram carries (GRE with seq, ERSPAN),
    `timestamp` the ERSPAN type III timestamp, `udp_src` the UDP source port
    (default: the spec's fixed port), `flow_label` a computed SRv6 flow label."""
    tos = (spec.tos & ~ECN_MASK) | (_inner_tos(pkt) & ECN_MASK)
    if tos & ECN_MASK == ECN_CE:
        tos = (tos & ~ECN_MASK) | ECN_ECT0
    # options:srv6_flowlabel is an SRv6 option; OVS documents no label for the other
    # tunnels over IPv6: they leave unlabelled, 0 (RFC 6437 §2).
    label = _flow_label(spec, pkt, flow_label) if spec.kind == "srv6" else 0
    inner_type = ETH_TYPE_TEB
    strip = 0
    if spec.carries_l3:  # pop_eth: only the IP packet travels
        if pkt.outer.ipv not in (4, 6) or pkt.outer.l3 != 14:
            raise TunnelError(f"an L3 {spec.kind} tunnel carries an untagged IP packet only")
        inner_type = th.ETH_TYPE_IPV4 if pkt.outer.ipv == 4 else th.ETH_TYPE_IPV6
        strip = 14
    elif spec.kind == "vxlan" and spec.gpe:
        inner_type = ETH_TYPE_TEB
    inner = pkt.data[strip:]
    inner_len = len(inner)
    if udp_src is None:
        udp_src = (fnv1a_32(bytes(inner)) & 0xFFFF if spec.entropy == "dummy-offload"
                   else spec.udp_src)
    tnl = _tunnel_header(spec, pkt, inner_len, inner_type, seq, timestamp, udp_src)
    proto = spec.ip_proto
    payload_len = len(tnl) + inner_len
    src = ipaddress.ip_address(spec.local_ip).packed
    dst = ipaddress.ip_address(spec.remote_ip).packed
    if spec.kind == "srv6":
        dst = ipaddress.IPv6Address((spec.srv6_segs or (spec.remote_ip,))[0]).packed
    if spec.underlay == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + payload_len, 0, 0x4000, spec.ttl,
                         proto, 0, src, dst)
        eth_type = 0x0800
    else:
        ip = struct.pack("!IHBB16s16s", (6 << 28) | (tos << 20) | label, payload_len, proto,
                         spec.ttl, src, dst)
        eth_type = 0x86DD
    eth = _mac(spec.remote_mac) + _mac(spec.local_mac) + struct.pack("!H", eth_type)
    header = eth + ip + tnl
    old = pkt.outer
    pkt.data = bytearray(header) + inner
    # tnl_ol_push: the packet's checksum state moves to the inner layer.
    pkt.inner = old.shifted(len(header) - strip)
    pkt.tunnel = {"erspan": "gre"}.get(spec.kind, spec.kind)
    outer: Layer = parse_layer(pkt.data)
    outer.ip_csum = CsumState.PARTIAL if spec.underlay == 4 else CsumState.UNKNOWN
    if proto == PROTO_UDP:
        outer.l4_csum = CsumState.PARTIAL if spec.checksummed else CsumState.GOOD
    pkt.outer = outer
    pkt.notes.append(f"push {spec.kind} over IPv{spec.underlay}, csum "
                     f"{'on' if spec.checksummed else 'off'}")
    if spec.kind == "gre" and spec.checksummed:
        # The model keeps where the GRE checksum is and fills it once the packet
        # is final (RFC 2784 §2.5: it covers the bytes as sent).
        pkt.gre_csum_ofs = len(eth) + len(ip) + 4
    hooks.active().pushed(pkt)
