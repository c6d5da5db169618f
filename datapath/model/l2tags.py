"""VLAN tags and MPLS label stacks: the OpenFlow actions that push, pop,
encapsulate and decapsulate them, on a frame's bytes.

The rules come from the standards and from ovs-actions(7), never from OVS's
code:
- IEEE 802.1Q §9.6: a tag is a TPID (0x8100 for a C-tag, 0x88a8 for an
  802.1ad S-tag, IEEE 802.1ad §9.5) and a TCI of PCP (3 bits), DEI (1) and VID
  (12), inserted after the source MAC; a pushed tag is the outermost.
- RFC 3032 §2.1: a label stack entry is label (20 bits), TC (3, RFC 5462), S
  (bottom of stack, set only on the last entry) and TTL (8); EtherType 0x8847
  for unicast, 0x8848 for multicast (§5).
- ovs-actions(7) `push_mpls`: on a packet without labels the new entry's TTL
  is the IP TTL (64 if not IP) and its TC the DSCP's low 3 bits (0 if not IP);
  on a packet with labels it is a copy of the outermost (with S clear, RFC 3032
  §2.1).  `pop_mpls:ETHERTYPE` strips the outermost entry and sets the
  EtherType; it changes nothing else (no TTL goes back into IP).
- ovs-actions(7) `encap(mpls)`/`encap(mpls_mc)` put an entry at the start of
  the packet (an Ethernet frame becomes the MPLS payload, as RFC 4448's
  Ethernet pseudowire without control word); `encap(ethernet)` puts a zeroed
  Ethernet header whose EtherType is the packet's (0x8847/0x8848 after
  encap(mpls)/encap(mpls_mc)); `decap` removes the Ethernet header of an
  Ethernet packet, or the outermost MPLS entry of an MPLS packet, the rest
  then being what `packet_type` says.  The documentation leaves the TC and TTL
  of an entry made by encap(mpls) open: `UNSPECIFIED_BY_ENCAP` says so, and
  mask_lse() lets a comparison ignore them (and only them).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_ARP = 0x0800, 0x86DD, 0x0806
TPID_CTAG, TPID_STAG = 0x8100, 0x88A8
MPLS_UC, MPLS_MC = 0x8847, 0x8848
MPLS_TYPES = (MPLS_UC, MPLS_MC)
ETHERNET = "ethernet"  # packet_type(ns=0,type=0)
UNSPECIFIED_BY_ENCAP = ("TC", "TTL")


@dataclass
class L2Packet:
    """The bytes and the packet type (OpenFlow 1.5 §7.2.3.11): "ethernet", or
    the EtherType of a bare L3 packet (ns=1)."""

    data: bytes
    ptype: str | int = ETHERNET
    notes: list[str] = field(default_factory=list)

    @property
    def eth_type(self) -> int:
        """The EtherType of an Ethernet packet (after its tags), or the L3 type."""
        if self.ptype != ETHERNET:
            return int(self.ptype)
        ofs = 12
        while struct.unpack_from("!H", self.data, ofs)[0] in (TPID_CTAG, TPID_STAG):
            ofs += 4
        return int(struct.unpack_from("!H", self.data, ofs)[0])


def lse(label: int, tc: int, bos: bool, ttl: int) -> bytes:
    """RFC 3032 §2.1: one label stack entry."""
    return struct.pack("!I", (label << 12) | (tc << 9) | (int(bos) << 8) | ttl)


def ip_ttl_tc(l3: bytes, eth_type: int) -> tuple[int, int]:
    """(TTL, TC) for a first push_mpls (ovs-actions(7)): IP TTL or hop limit
    (RFC 791 §3.1, RFC 8200 §3) and the DSCP's low 3 bits (RFC 2474 §3)."""
    if eth_type == ETH_TYPE_IPV4 and len(l3) >= 20:
        return l3[8], (l3[1] >> 2) & 7
    if eth_type == ETH_TYPE_IPV6 and len(l3) >= 40:
        tclass = ((l3[0] & 0x0F) << 4) | (l3[1] >> 4)
        return l3[7], (tclass >> 2) & 7
    return 64, 0


def _eth_split(data: bytes) -> tuple[bytes, int]:
    """(MACs and tags up to the EtherType, offset of the EtherType)."""
    ofs = 12
    while struct.unpack_from("!H", data, ofs)[0] in (TPID_CTAG, TPID_STAG):
        ofs += 4
    return data[:ofs], ofs


class L2Action:
    """A VLAN or MPLS action the model applies to an L2 packet, and its ovs-ofctl spelling."""

    def ofctl(self) -> str:
        raise NotImplementedError

    def apply(self, pkt: L2Packet) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class PushVlan(L2Action):
    """push_vlan:TPID then set_field of vlan_vid (and vlan_pcp): the new tag is
    the outermost (IEEE 802.1Q §9.6); TPID 0x8100 or 0x88a8 (ovs-actions(7))."""

    tpid: int
    vid: int
    pcp: int = 0

    def ofctl(self) -> str:
        return f"push_vlan:0x{self.tpid:04x},set_field:{0x1000 | self.vid}->vlan_vid"

    def apply(self, pkt: L2Packet) -> None:
        assert pkt.ptype == ETHERNET, "push_vlan applies to Ethernet packets"
        tci = (self.pcp << 13) | self.vid
        pkt.data = pkt.data[:12] + struct.pack("!HH", self.tpid, tci) + pkt.data[12:]
        pkt.notes.append(f"pushed tag TPID 0x{self.tpid:04x} VID {self.vid} PCP {self.pcp}")


@dataclass(frozen=True)
class PopVlan(L2Action):
    """pop_vlan (strip_vlan): the outermost tag goes, if any (ovs-actions(7))."""

    def ofctl(self) -> str:
        return "pop_vlan"

    def apply(self, pkt: L2Packet) -> None:
        if struct.unpack_from("!H", pkt.data, 12)[0] in (TPID_CTAG, TPID_STAG):
            pkt.data = pkt.data[:12] + pkt.data[16:]
            pkt.notes.append("popped the outermost tag")


@dataclass(frozen=True)
class PushMpls(L2Action):
    """push_mpls:ETHERTYPE,set_mpls_label:LABEL (ovs-actions(7), RFC 3032)."""

    ethertype: int
    label: int

    def ofctl(self) -> str:
        return f"push_mpls:0x{self.ethertype:04x},set_mpls_label:{self.label}"

    def apply(self, pkt: L2Packet) -> None:
        assert pkt.ptype == ETHERNET, "push_mpls applies to Ethernet packets"
        head, ofs = _eth_split(pkt.data)
        inner_type = struct.unpack_from("!H", pkt.data, ofs)[0]
        rest = pkt.data[ofs + 2:]
        if inner_type in MPLS_TYPES:
            top = struct.unpack_from("!I", rest)[0]
            tc, ttl = (top >> 9) & 7, top & 0xFF
            entry = lse(self.label, tc, False, ttl)  # a copy of the top, S clear
        else:
            ttl, tc = ip_ttl_tc(rest, inner_type)
            entry = lse(self.label, tc, True, ttl)
        pkt.data = head + struct.pack("!H", self.ethertype) + entry + rest


@dataclass(frozen=True)
class PopMpls(L2Action):
    """pop_mpls:ETHERTYPE: the outermost entry goes, the EtherType becomes
    ETHERTYPE; nothing else changes (ovs-actions(7))."""

    ethertype: int

    def ofctl(self) -> str:
        return f"pop_mpls:0x{self.ethertype:04x}"

    def apply(self, pkt: L2Packet) -> None:
        if pkt.ptype != ETHERNET:  # an MPLS L3 packet: decap's job, not pop's
            raise ValueError("pop_mpls applies to Ethernet packets")
        head, ofs = _eth_split(pkt.data)
        if struct.unpack_from("!H", pkt.data, ofs)[0] not in MPLS_TYPES:
            pkt.notes.append("pop_mpls on a packet without labels: no change")
            return
        pkt.data = head + struct.pack("!H", self.ethertype) + pkt.data[ofs + 6:]


@dataclass(frozen=True)
class EncapMpls(L2Action):
    """encap(mpls|mpls_mc),set_mpls_label:LABEL: an entry at the start of the
    packet, bottom of stack if the packet had no labels (RFC 3032 §2.1); its TC
    and TTL are left open by the documentation (written as 0 here, masked)."""

    label: int
    multicast: bool = False

    def ofctl(self) -> str:
        return f"encap({'mpls_mc' if self.multicast else 'mpls'}),set_mpls_label:{self.label}"

    def apply(self, pkt: L2Packet) -> None:
        bos = pkt.ptype not in MPLS_TYPES
        pkt.data = lse(self.label, 0, bos, 0) + pkt.data
        pkt.ptype = MPLS_MC if self.multicast else MPLS_UC


@dataclass(frozen=True)
class EncapEthernet(L2Action):
    """encap(ethernet) then set_field of dl_dst and dl_src: an Ethernet header
    whose EtherType is the L3 packet's type (ovs-actions(7))."""

    dst: str = "00:00:00:00:00:00"
    src: str = "00:00:00:00:00:00"

    def ofctl(self) -> str:
        return f"encap(ethernet),set_field:{self.dst}->dl_dst,set_field:{self.src}->dl_src"

    def apply(self, pkt: L2Packet) -> None:
        assert pkt.ptype != ETHERNET, "encap(ethernet) applies to L3 packets"
        pkt.data = (mac(self.dst) + mac(self.src) + struct.pack("!H", int(pkt.ptype))
                    + pkt.data)
        pkt.ptype = ETHERNET


@dataclass(frozen=True)
class SetEthAddrs(L2Action):
    """mod_dl_dst / mod_dl_src."""

    dst: str
    src: str

    def ofctl(self) -> str:
        return f"mod_dl_dst:{self.dst},mod_dl_src:{self.src}"

    def apply(self, pkt: L2Packet) -> None:
        assert pkt.ptype == ETHERNET
        pkt.data = mac(self.dst) + mac(self.src) + pkt.data[12:]


@dataclass(frozen=True)
class Decap(L2Action):
    """decap[(packet_type(ns=N,type=T))]: an Ethernet packet loses its
    Ethernet header (tagged ones are refused: None); an MPLS packet loses its
    outermost entry and becomes `inner` (ETHERNET, or an EtherType)."""

    inner: str | int = ETHERNET

    def ofctl(self) -> str:
        if self.inner == ETHERNET:
            return "decap(packet_type(ns=0,type=0))"
        return f"decap(packet_type(ns=1,type=0x{int(self.inner):04x}))"

    def apply(self, pkt: L2Packet) -> None:
        if pkt.ptype == ETHERNET:
            if struct.unpack_from("!H", pkt.data, 12)[0] in (TPID_CTAG, TPID_STAG):
                raise ValueError("decap of a tagged Ethernet packet: unsupported packet type")
            pkt.ptype = int(struct.unpack_from("!H", pkt.data, 12)[0])
            pkt.data = pkt.data[14:]
        elif pkt.ptype in MPLS_TYPES:
            pkt.data = pkt.data[4:]
            pkt.ptype = self.inner
        else:
            raise ValueError(f"decap of an L3 packet of type 0x{int(pkt.ptype):04x}")


def mac(text: str) -> bytes:
    """A MAC address in colon-separated hex, as 6 bytes."""
    return bytes.fromhex(text.replace(":", ""))


def run(frame: bytes, actions: list[L2Action]) -> bytes:
    """The frame after the actions (which must end with an Ethernet packet)."""
    pkt = L2Packet(frame)
    for action in actions:
        action.apply(pkt)
    assert pkt.ptype == ETHERNET, f"the actions leave a packet of type {pkt.ptype}, not Ethernet"
    return pkt.data


def mask_lse(frame: bytes) -> bytes:
    """The frame with the TC and TTL of every label stack entry after its
    Ethernet header (and tags) zeroed: what a comparison keeps of entries made
    by encap(mpls), whose TC and TTL ovs-actions(7) leaves open."""
    head, ofs = _eth_split(frame)
    if len(frame) < ofs + 6 or struct.unpack_from("!H", frame, ofs)[0] not in MPLS_TYPES:
        return frame
    out = bytearray(frame)
    pos = ofs + 2
    while pos + 4 <= len(out):
        entry = struct.unpack_from("!I", out, pos)[0]
        struct.pack_into("!I", out, pos, entry & 0xFFFFF100)
        pos += 4
        if entry & 0x100:
            break
    return bytes(out)


def lse_fields(frame: bytes) -> list[tuple[int, int, int, int]]:
    """(label, TC, S, TTL) of each label stack entry after the Ethernet header."""
    _, ofs = _eth_split(frame)
    out: list[tuple[int, int, int, int]] = []
    if len(frame) < ofs + 6 or struct.unpack_from("!H", frame, ofs)[0] not in MPLS_TYPES:
        return out
    pos = ofs + 2
    while pos + 4 <= len(frame):
        e = struct.unpack_from("!I", frame, pos)[0]
        out.append((e >> 12, (e >> 9) & 7, (e >> 8) & 1, e & 0xFF))
        pos += 4
        if e & 0x100:
            break
    return out
