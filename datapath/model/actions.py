"""OpenFlow actions known to the model.  Each renders itself for ovs-ofctl and
applies itself to a model Packet, so a case states its flow exactly once."""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from datapath.model import hooks
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Packet
from datapath.model.tunnel import TunnelSpec, push


class Action:
    """An OpenFlow action the model applies to a packet, and its ovs-ofctl spelling."""

    def ofctl(self) -> str:
        raise NotImplementedError

    def apply(self, pkt: Packet) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class SetIPv4Addr(Action):
    """mod_nw_src / mod_nw_dst (packet_set_ipv4_addr)."""

    addr: str
    field: str = "dst"

    def ofctl(self) -> str:
        return f"mod_nw_{self.field}:{self.addr}"

    def apply(self, pkt: Packet) -> None:
        if pkt.ipv != 4 or pkt.l3 is None:
            pkt.notes.append(f"{self.ofctl()}: not an IPv4 packet to OVS, no change")
            return
        ofs = pkt.l3 + (12 if self.field == "src" else 16)
        old = bytes(pkt.data[ofs:ofs + 4])
        new = ipaddress.IPv4Address(self.addr).packed
        if old == new:
            return
        if pkt.l4 is None:
            # No TCP/UDP header, so no L4 checksum to patch: a later IPv4 fragment
            # carries none (RFC 791 §3.2), and the address changes the IP header only.
            hooks.active().ipv4_addr_rewritten(pkt, old, new)
        # The L4 checksum (its pseudo-header holds the address: RFC 768, RFC 9293 §3.1)
        # and the IPv4 header checksum (RFC 791) are patched independently (RFC 1624):
        # their order does not change the bytes.
        if pkt.l4 is not None:
            pkt.patch_l4_csum(old, new, f"pseudo-header {self.ofctl()}")
        pkt.patch_ip_csum(old, new)
        pkt.data[ofs:ofs + 4] = new


@dataclass(frozen=True)
class SetL4Port(Action):
    """mod_tp_src / mod_tp_dst on TCP or UDP (packet_set_{tcp,udp}_port)."""

    port: int
    field: str = "dst"

    def ofctl(self) -> str:
        return f"mod_tp_{self.field}:{self.port}"

    def apply(self, pkt: Packet) -> None:
        if pkt.l4 is None or pkt.proto not in (PROTO_TCP, PROTO_UDP):
            pkt.notes.append(f"{self.ofctl()}: no TCP/UDP header to OVS, no change")
            return
        # The datapath sets both ports (the untouched one to its own value).
        src = pkt.u16(pkt.l4)
        dst = pkt.u16(pkt.l4 + 2)
        new_src, new_dst = (self.port, dst) if self.field == "src" else (src, self.port)
        if pkt.outer.l4_csum.valid and not pkt.outer.fragment:
            pkt.patch_l4_csum(b"", b"", self.ofctl())
        else:
            for old, new in ((src, new_src), (dst, new_dst)):
                if old != new:  # packet_set_port() skips an unchanged port
                    pkt.patch_l4_csum(struct.pack("!H", old), struct.pack("!H", new),
                                      self.ofctl())
        pkt.put16(pkt.l4, new_src)
        pkt.put16(pkt.l4 + 2, new_dst)


@dataclass(frozen=True)
class SetVlanVid(Action):
    """mod_vlan_vid on a tagged frame: the 802.1Q tag's 12-bit VID changes; PCP and
    DEI stay (IEEE 802.1Q; OVS may do it as pop_vlan,push_vlan with the same PCP)."""

    vid: int

    def ofctl(self) -> str:
        return f"mod_vlan_vid:{self.vid}"

    def apply(self, pkt: Packet) -> None:
        if len(pkt.data) < 18 or pkt.u16(12) != 0x8100:
            raise NotImplementedError("model: mod_vlan_vid on an untagged frame (a push)")
        pkt.put16(14, (pkt.u16(14) & 0xF000) | (self.vid & 0x0FFF))
        pkt.notes.append(f"{self.ofctl()}: VLAN id {self.vid}, PCP and DEI kept")


@dataclass(frozen=True)
class PushTunnel(Action):
    """What output to a native tunnel port does: push the tunnel header.

    The case still needs an Output to the underlay port after it; the OpenFlow
    action is the output to the tunnel port itself."""

    spec: "TunnelSpec"
    ofport: str

    def ofctl(self) -> str:
        return f"output:{self.ofport}"

    def apply(self, pkt: Packet) -> None:
        push(pkt, self.spec)


@dataclass(frozen=True)
class Output(Action):
    """output:PORT, the action that sends the packet to a port."""

    port: str

    def ofctl(self) -> str:
        return f"output:{self.port}"

    def apply(self, pkt: Packet) -> None:  # outputs are handled by forward()
        pass


@dataclass(frozen=True)
class Truncate(Action):
    """The max_len of the output after it (output(port=P,max_len=N)): that one
    output gets the packet's first max_len bytes (send.truncate); later
    actions work with the whole packet (ovs-actions(7))."""

    max_len: int

    def ofctl(self) -> str:  # written by the output it belongs to
        return ""

    def apply(self, pkt: Packet) -> None:  # handled by forward(), per output
        pass


def mod_nw_dst(addr: str) -> SetIPv4Addr:
    """mod_nw_dst: set the IPv4 destination address."""
    return SetIPv4Addr(addr, "dst")


def mod_nw_src(addr: str) -> SetIPv4Addr:
    """mod_nw_src: set the IPv4 source address."""
    return SetIPv4Addr(addr, "src")


def mod_tp_dst(port: int) -> SetL4Port:
    """mod_tp_dst: set the TCP or UDP destination port."""
    return SetL4Port(port, "dst")


def mod_tp_src(port: int) -> SetL4Port:
    """mod_tp_src: set the TCP or UDP source port."""
    return SetL4Port(port, "src")


def output(port: str) -> Output:
    """The output action to a port."""
    return Output(port)


def ofctl_actions(actions: list[Action]) -> str:
    """The OpenFlow actions: a tunnel push and the underlay output it implies are one
    `output:TUNNEL` (the underlay output is the underlay bridge's doing)."""
    parts: list[str] = []
    for i, a in enumerate(actions):
        if isinstance(a, PushTunnel) and not (i + 1 < len(actions)
                                              and isinstance(actions[i + 1], Output)):
            raise ValueError("a nested tunnel push spans bridges: write those flows by hand")
        if isinstance(a, Truncate):
            if not (i + 1 < len(actions) and isinstance(actions[i + 1], (Output, PushTunnel))):
                raise ValueError("a max_len belongs to the output after it")
            continue
        if isinstance(a, Output) and i and isinstance(actions[i - 1], PushTunnel):
            continue
        before = actions[i - 1] if i else None
        if isinstance(before, Truncate) and isinstance(a, (Output, PushTunnel)):
            port = a.ofport if isinstance(a, PushTunnel) else a.port
            parts.append(f"output(port={port},max_len={before.max_len})")
            continue
        parts.append(a.ofctl())
    return ",".join(parts)
