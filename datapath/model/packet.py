"""The model's packet: bytes, parsed offsets, and OVS's per-layer checksum state.

Parsing follows the acceptance rules of OVS flow extraction (lib/flow.c), so
that a header OVS would not treat as IPv4 (e.g. a truncated one) is not
rewritten by the model either.  Rewrites and checksum completion follow the
rules in reference section 4 (packets.c and dp_packet_ol_send_prepare()).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from datapath.model import csum
from datapath.offloads import CsumState, TxOffloads

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_IPV6 = 0x86DD
ETH_TYPE_VLAN = 0x8100
PROTO_TCP = 6
PROTO_UDP = 17


@dataclass
class Packet:
    data: bytearray
    l3: int | None = None  # offset of the IP header
    ipv: int = 0  # 4, 6, or 0 when OVS would not parse an IP header
    l4: int | None = None  # offset of a complete TCP/UDP header
    proto: int | None = None
    l3_size: int = 0  # bytes from l3 to the end of the IP packet (no L2 padding)
    ip_csum: CsumState = CsumState.UNKNOWN
    l4_csum: CsumState = CsumState.UNKNOWN
    notes: list[str] = field(default_factory=list)

    # -- parsing -----------------------------------------------------------

    @classmethod
    def parse(cls, frame: bytes) -> "Packet":
        pkt = cls(bytearray(frame))
        if len(frame) < 14:
            return pkt
        ofs = 12
        eth_type = struct.unpack_from("!H", frame, ofs)[0]
        if eth_type == ETH_TYPE_VLAN and len(frame) >= 18:
            ofs += 4
            eth_type = struct.unpack_from("!H", frame, ofs)[0]
        l3 = ofs + 2
        size = len(frame) - l3
        if eth_type == ETH_TYPE_IPV4:
            pkt._parse_ipv4(l3, size)
        elif eth_type == ETH_TYPE_IPV6:
            pkt._parse_ipv6(l3, size)
        return pkt

    def _parse_ipv4(self, l3: int, size: int) -> None:
        d = self.data
        if size < 20:
            return
        ihl = (d[l3] & 0x0F) * 4
        tot_len = struct.unpack_from("!H", d, l3 + 2)[0]
        # flow.c ipv4_sanity_check(): anything else is not an IPv4 packet to OVS.
        if ihl < 20 or size < ihl or tot_len > size or ihl > tot_len:
            self.notes.append("IPv4 header fails OVS's sanity check: not parsed as IP")
            return
        self.l3, self.ipv, self.l3_size = l3, 4, tot_len
        frag_off = struct.unpack_from("!H", d, l3 + 6)[0] & 0x1FFF
        if frag_off:
            return  # later fragment: no L4 header
        self._set_l4(d[l3 + 9], l3 + ihl, tot_len - ihl)

    def _parse_ipv6(self, l3: int, size: int) -> None:
        if size < 40:
            return
        plen = struct.unpack_from("!H", self.data, l3 + 4)[0]
        if plen + 40 > size:
            return
        self.l3, self.ipv, self.l3_size = l3, 6, plen + 40
        # Extension headers are outside model v1: no L4 then.
        self._set_l4(self.data[l3 + 6], l3 + 40, plen)

    def _set_l4(self, proto: int, l4: int, l4_size: int) -> None:
        self.proto = proto
        if (proto == PROTO_TCP and l4_size >= 20) or (proto == PROTO_UDP and l4_size >= 8):
            self.l4 = l4

    # -- accessors -----------------------------------------------------------

    @property
    def l4_size(self) -> int:
        assert self.l3 is not None and self.l4 is not None
        return self.l3 + self.l3_size - self.l4

    @property
    def l4_csum_ofs(self) -> int:
        assert self.l4 is not None
        return self.l4 + (16 if self.proto == PROTO_TCP else 6)

    def u16(self, ofs: int) -> int:
        return struct.unpack_from("!H", self.data, ofs)[0]

    def put16(self, ofs: int, value: int) -> None:
        struct.pack_into("!H", self.data, ofs, value)

    def l4_name(self) -> str:
        return {PROTO_TCP: "TCP", PROTO_UDP: "UDP"}.get(self.proto or -1, "L4")

    # -- rewrites (packets.c) ------------------------------------------------

    def patch_ip_csum(self, old: bytes, new: bytes) -> None:
        """A rewrite inside the IPv4 header: mark partial if valid, else RFC 1624."""
        assert self.l3 is not None
        if self.ip_csum.valid:
            self.ip_csum = CsumState.PARTIAL
            self.notes.append("IP checksum state valid -> partial (bytes left stale)")
        else:
            ofs = self.l3 + 10
            self.put16(ofs, csum.incremental(self.u16(ofs), old, new))
            self.notes.append(f"IP checksum {self.ip_csum.value}: updated incrementally")

    def patch_l4_csum(self, old: bytes, new: bytes, what: str) -> None:
        """A rewrite covered by the L4 checksum (ports, or addresses via the pseudo-header)."""
        if self.l4 is None:
            return
        if self.l4_csum.valid:
            self.l4_csum = CsumState.PARTIAL
            self.notes.append(f"{self.l4_name()} checksum state valid -> partial ({what})")
            return
        ofs = self.l4_csum_ofs
        old_csum = self.u16(ofs)
        if self.proto == PROTO_UDP and old_csum == 0:
            self.notes.append(f"UDP checksum 0 (none) stays 0 ({what})")
            return
        new_csum = csum.incremental(old_csum, old, new)
        if self.proto == PROTO_UDP and new_csum == 0:
            new_csum = 0xFFFF
        self.put16(ofs, new_csum)
        self.notes.append(f"{self.l4_name()} checksum {self.l4_csum.value}: updated "
                          f"incrementally ({what})")

    # -- completion at send (dp_packet_ol_send_prepare) ----------------------

    def finish(self, tx: TxOffloads) -> None:
        if self.ip_csum is CsumState.PARTIAL and self.l3 is not None:
            if tx.leaves_stale("ip"):
                self.notes.append("IP checksum partial, tx ip offload _disabled: left stale")
            else:
                ihl = (self.data[self.l3] & 0x0F) * 4
                # dp_packet_ip_set_header_csum(): only a header that fits the L3 data.
                if self.ipv == 4 and 20 <= ihl < self.l3_size:
                    self.put16(self.l3 + 10, 0)
                    self.put16(self.l3 + 10, csum.checksum(bytes(self.data[self.l3:self.l3 + ihl])))
                    self.notes.append("IP checksum partial: completed at send")
                self.ip_csum = CsumState.GOOD
        if self.l4_csum is CsumState.PARTIAL and self.l4 is not None:
            kind = "tcp" if self.proto == PROTO_TCP else "udp"
            if tx.leaves_stale(kind):
                self.notes.append(f"{self.l4_name()} checksum partial, tx offload "
                                  "_disabled: left stale")
            else:
                self.complete_l4()
                self.l4_csum = CsumState.GOOD

    def complete_l4(self) -> None:
        ofs = self.l4_csum_ofs
        if self.proto == PROTO_UDP and self.u16(ofs) == 0:
            self.notes.append("UDP checksum partial but 0 (none): left 0")
            return
        self.put16(ofs, 0)
        value = csum.finish(csum.ones_sum(bytes(self.data[self.l4:self.l4 + self.l4_size]),
                                          self.pseudo_header()))
        if self.proto == PROTO_UDP and value == 0:
            value = 0xFFFF
        self.put16(ofs, value)
        self.notes.append(f"{self.l4_name()} checksum partial: completed at send")

    def pseudo_header(self) -> int:
        assert self.l3 is not None
        d = bytes(self.data)
        if self.ipv == 4:
            return csum.pseudo_header_v4(d[self.l3 + 12:self.l3 + 16], d[self.l3 + 16:self.l3 + 20],
                                         self.proto or 0, self.l4_size)
        return csum.pseudo_header_v6(d[self.l3 + 8:self.l3 + 24], d[self.l3 + 24:self.l3 + 40],
                                     self.proto or 0, self.l4_size)

    # -- verdicts --------------------------------------------------------------

    def csum_verdicts(self) -> dict[str, str]:
        """Per layer: 'good', 'bad' (wrong and meant to be), or 'stale' (left for a driver)."""
        out: dict[str, str] = {}
        if self.ipv == 4 and self.l3 is not None:
            ihl = (self.data[self.l3] & 0x0F) * 4
            ok = csum.checksum(bytes(self.data[self.l3:self.l3 + ihl])) == 0
            out["IP"] = "good" if ok else ("stale" if self.ip_csum is CsumState.PARTIAL else "bad")
        if self.l4 is not None:
            value = self.u16(self.l4_csum_ofs)
            if self.proto == PROTO_UDP and value == 0:
                out["UDP"] = "none"
            else:
                total = csum.ones_sum(bytes(self.data[self.l4:self.l4 + self.l4_size]),
                                      self.pseudo_header())
                ok = total == 0xFFFF
                out[self.l4_name()] = "good" if ok else (
                    "stale" if self.l4_csum is CsumState.PARTIAL else "bad")
        return out
