"""Connection tracking with destination NAT, as far as the upstream conntrack test needs.

- IPv4 header checksum (RFC 791; a host verifies it, RFC 1122 3.2.1.2): a packet
  whose rx flags say the NIC found it bad is invalid without a look; one the NIC
  vouched for (good) or that is ours to finish (partial) is not looked at; an
  unknown one is verified in software (`checked`), and if wrong it is invalid.
  Every invalid verdict for a bad checksum counts one error (`err`).
- An invalid packet is not tracked further: no commit, no NAT; it goes on
  through the pipeline as it is, with ct_state +trk+inv (ovs-fields(7)).
- A valid packet of a new connection is committed with its NAT; the rewrite of
  the destination address follows the datapath's header-rewrite rules (a valid
  checksum state becomes partial, any other is patched incrementally).
- An ICMP error whose embedded header is a packet of a committed connection
  (RFC 5508 section 4) is related to it: the NAT is applied to the outer header
  and, reversed, to the embedded one, and the ICMP checksum and the embedded
  IPv4 and TCP/UDP checksums are patched to match (RFC 1624).
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

from datapath.model import csum
from datapath.model.actions import Action, SetIPv4Addr
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Packet
from datapath.offloads import CsumState

PROTO_ICMP = 1
ICMP_ERRORS = (3, 4, 5, 11, 12)  # unreachable, source quench, redirect, time exceeded, param


@dataclass
class Conntrack:
    """One connection table (zone 0) and its checksum counters."""

    checked: int = 0  # conntrack_l3csum_checked
    err: int = 0  # conntrack_l3csum_err
    # original-direction (src, dst, proto, sport, dport) -> the DNAT address
    nat: dict[tuple[str, str, int, int, int], str] = field(default_factory=dict)

    def l3_valid(self, pkt: Packet) -> bool:
        """The IPv4 header checksum verdict, counting as it goes."""
        state = pkt.outer.ip_csum
        if state is CsumState.BAD:
            self.err += 1
            return False
        if state.valid:
            return True
        self.checked += 1
        assert pkt.l3 is not None
        ihl = (pkt.data[pkt.l3] & 0x0F) * 4
        if csum.checksum(bytes(pkt.data[pkt.l3:pkt.l3 + ihl])) != 0:
            self.err += 1
            return False
        return True


def _tuple(data: bytes | bytearray, l3: int) -> tuple[str, str, int, int, int]:
    ihl = (data[l3] & 0x0F) * 4
    proto = data[l3 + 9]
    sport = dport = 0
    if proto in (PROTO_TCP, PROTO_UDP) and len(data) >= l3 + ihl + 4:
        sport, dport = struct.unpack_from("!HH", data, l3 + ihl)
    return (str(ipaddress.IPv4Address(bytes(data[l3 + 12:l3 + 16]))),
            str(ipaddress.IPv4Address(bytes(data[l3 + 16:l3 + 20]))), proto, sport, dport)


@dataclass(frozen=True, eq=False)
class CtCommitDnat(Action):
    """ct(commit,nat(dst=ADDR)) in zone 0."""

    table: Conntrack
    addr: str

    def ofctl(self) -> str:
        return f"ct(commit,nat(dst={self.addr}))"

    def apply(self, pkt: Packet) -> None:
        if pkt.ipv != 4 or pkt.l3 is None:
            raise NotImplementedError("model: conntrack of a non-IPv4 packet")
        if not self.table.l3_valid(pkt):
            pkt.notes.append("conntrack: IPv4 checksum bad: invalid, not committed, no NAT")
            return
        if pkt.data[pkt.l3 + 9] == PROTO_ICMP and self._related_icmp_error(pkt):
            return
        key = _tuple(pkt.data, pkt.l3)
        addr = self.table.nat.setdefault(key, self.addr)
        SetIPv4Addr(addr, "dst").apply(pkt)
        pkt.notes.append(f"conntrack: committed {key}, destination NAT to {addr}")

    def _related_icmp_error(self, pkt: Packet) -> bool:
        """RFC 5508: NAT the outer destination and the embedded source of an ICMP
        error about a packet (the reply direction) of a committed connection."""
        assert pkt.l3 is not None
        icmp = pkt.l3 + (pkt.data[pkt.l3] & 0x0F) * 4
        inner = icmp + 8
        if pkt.data[icmp] not in ICMP_ERRORS or len(pkt.data) < inner + 20:
            return False
        src, dst, proto, sport, dport = _tuple(pkt.data, inner)
        addr = self.table.nat.get((dst, src, proto, dport, sport))
        if addr is None:
            raise NotImplementedError("model: an ICMP error of no committed connection")
        end = pkt.l3 + pkt.outer.l3_size
        before = bytes(pkt.data[icmp:end])
        new = ipaddress.IPv4Address(addr).packed
        old = bytes(pkt.data[inner + 12:inner + 16])
        ihl = (pkt.data[inner] & 0x0F) * 4
        l4_csum = {PROTO_TCP: 16, PROTO_UDP: 6}.get(proto)
        if l4_csum is not None and inner + ihl + l4_csum + 2 <= end:
            ofs = inner + ihl + l4_csum
            value = pkt.u16(ofs)
            if not (proto == PROTO_UDP and value == 0):
                pkt.put16(ofs, csum.incremental(value, old, new))  # its pseudo-header
        pkt.put16(inner + 10, csum.incremental(pkt.u16(inner + 10), old, new))
        pkt.data[inner + 12:inner + 16] = new
        after = bytes(pkt.data[icmp:end])
        old_words, new_words = before[:2] + before[4:], after[:2] + after[4:]
        if len(old_words) % 2:  # the checksum pads an odd message with a zero byte
            old_words, new_words = old_words + b"\0", new_words + b"\0"
        pkt.put16(icmp + 2, csum.incremental(pkt.u16(icmp + 2), old_words, new_words))
        pkt.notes.append(f"conntrack: ICMP error related to {dst}->{src}: embedded source "
                         f"NATed to {addr}, embedded and ICMP checksums patched")
        SetIPv4Addr(addr, "dst").apply(pkt)
        return True
