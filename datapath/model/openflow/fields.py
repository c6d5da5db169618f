"""The names of OpenFlow's match fields as the model knows them
(ovs-fields(7)), the values of a flow's match decoded into (value, mask), and
the fields a packet's bytes carry.  `NotModelled` is raised for any name or
value outside them: the model never guesses."""
from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from datapath.model.packet import Packet

DEFAULT_PRIORITY = 0x8000  # ovs-ofctl(8): "priority=value ... default 32768"
RESUBMIT_LIMIT = 64  # ovs-actions(7), resubmit: "nested up to 64 levels deep"
ETH_ARP, ETH_RARP, ETH_IPV4, ETH_IPV6, ETH_VLAN = 0x0806, 0x8035, 0x0800, 0x86DD, 0x8100

# ovs-fields(7)'s shorthand matches: each is dl_type and, for some, nw_proto.
SHORTHANDS: dict[str, tuple[int, int | None]] = {
    "ip": (ETH_IPV4, None), "ipv6": (ETH_IPV6, None), "arp": (ETH_ARP, None),
    "rarp": (ETH_RARP, None), "icmp": (ETH_IPV4, 1), "icmp6": (ETH_IPV6, 58),
    "tcp": (ETH_IPV4, 6), "tcp6": (ETH_IPV6, 6), "udp": (ETH_IPV4, 17),
    "udp6": (ETH_IPV6, 17), "sctp": (ETH_IPV4, 132), "sctp6": (ETH_IPV6, 132),
    # Other spellings ovs-ofctl accepts (upstream's flow tables use them).
    "ip4": (ETH_IPV4, None), "ipv4": (ETH_IPV4, None), "ip6": (ETH_IPV6, None),
}
# ovs-fields(7)'s other names of one field (OXM and NXM spellings included).
ALIASES = {
    "eth_src": "dl_src", "eth_dst": "dl_dst", "eth_type": "dl_type", "ip_src": "nw_src",
    "ip_dst": "nw_dst", "ip_proto": "nw_proto", "tcp_src": "tp_src", "udp_src": "tp_src",
    "sctp_src": "tp_src", "tcp_dst": "tp_dst", "udp_dst": "tp_dst", "sctp_dst": "tp_dst",
    "icmpv4_type": "icmp_type", "icmpv6_type": "icmp_type", "icmpv4_code": "icmp_code",
    "icmpv6_code": "icmp_code", "ct_ipv6_src": "ct_nw_src", "ct_ipv6_dst": "ct_nw_dst",
    "arp_spa": "nw_src", "arp_tpa": "nw_dst", "arp_op": "nw_proto",
    "NXM_OF_IN_PORT": "in_port", "OXM_OF_IN_PORT": "in_port", "NXM_NX_CT_MARK": "ct_mark",
    "NXM_NX_CT_LABEL": "ct_label", "NXM_NX_CT_ZONE": "ct_zone", "NXM_NX_CT_STATE": "ct_state",
    "OXM_OF_METADATA": "metadata", "NXM_OF_ETH_SRC": "dl_src", "NXM_OF_ETH_DST": "dl_dst",
    "NXM_OF_IP_SRC": "nw_src", "NXM_OF_IP_DST": "nw_dst",
}
for _i in range(16):
    ALIASES[f"NXM_NX_REG{_i}"] = f"reg{_i}"
REGS = tuple(f"reg{i}" for i in range(16))
# ARP's fields (RFC 826), by their names in ovs-fields(7); arp_spa, arp_tpa and
# arp_op share nw_src, nw_dst and nw_proto's names in the model's tables.
for _name in ("SHA", "THA"):
    ALIASES[f"OXM_OF_ARP_{_name}"] = ALIASES[f"NXM_NX_ARP_{_name}"] = f"arp_{_name.lower()}"
for _name, _to in (("SPA", "nw_src"), ("TPA", "nw_dst"), ("OP", "nw_proto")):
    ALIASES[f"OXM_OF_ARP_{_name}"] = ALIASES[f"NXM_OF_ARP_{_name}"] = _to
# Where each field no checksum covers sits in an untagged Ethernet frame
# carrying ARP (IEEE 802.3; RFC 826): (offset, bytes).
RAW = {"dl_dst": (0, 6), "dl_src": (6, 6)}
ARP_RAW = {"nw_proto": (20, 2), "arp_sha": (22, 6), "nw_src": (28, 4), "arp_tha": (32, 6),
           "nw_dst": (38, 4)}
# What set_field, load and move may write: the pipeline's metadata, the in-port,
# Ethernet addresses and ARP's fields (ARP_RAW's on an ARP packet only); set_field
# also rewrites IPv4 addresses and TCP/UDP ports, their checksums patched.
LOAD_TARGETS = frozenset({"in_port", *RAW, *ARP_RAW, "metadata", *(f"reg{i}" for i in range(16)),
                          *(f"xreg{i}" for i in range(8))})
SET_FIELD_TARGETS = LOAD_TARGETS | {"tp_src", "tp_dst"}
# ovs-fields(7): xregN overlays reg(2N), its most-significant 32 bits, and reg(2N+1).
XREGS = tuple(f"xreg{i}" for i in range(8))
for _i in range(8):
    # OXM_OF_PKT_REGn is xregn's OpenFlow 1.5 name (ovs-fields(7)).
    ALIASES[f"NXM_NX_XREG{_i}"] = ALIASES[f"OXM_OF_PKT_REG{_i}"] = f"xreg{_i}"
# Fields the pipeline keeps beside the packet (ovs-fields(7), "Metadata" and
# "Connection Tracking Fields"); an action may write the first group.
WRITABLE_META = ("metadata", *REGS, *XREGS)
CT_FIELDS = ("ct_state", "ct_zone", "ct_mark", "ct_label", "ct_nw_src", "ct_nw_dst",
             "ct_nw_proto", "ct_tp_src", "ct_tp_dst")
# The match fields the model reads from a packet and its metadata.
MODELLED_FIELDS = frozenset({
    "in_port", "priority", "dl_src", "dl_dst", "dl_type", "nw_src", "nw_dst", "nw_proto",
    "nw_tos", "nw_ttl", "ipv6_src", "ipv6_dst", "tp_src", "tp_dst", "icmp_type", "icmp_code",
    "ip_frag", "tcp_flags", "vlan_tci", "dl_vlan", "arp_sha", "arp_tha", *CT_FIELDS,
    *WRITABLE_META,
    *SHORTHANDS, *ALIASES,
})
# ip_frag's names (ovs-fields(7)): (value, mask) over bit 0 "a fragment" and
# bit 1 "not the first".
IP_FRAG = {"no": (0, 1), "yes": (1, 1), "first": (1, 3), "later": (3, 3), "not_later": (0, 2)}
CT_STATE_BITS = {"new": 0x01, "est": 0x02, "rel": 0x04, "rpl": 0x08, "inv": 0x10,
                 "trk": 0x20, "snat": 0x40, "dnat": 0x80}
MODELLED_ACTIONS = frozenset({
    "output", "drop", "ct", "ct_clear", "resubmit", "goto_table", "controller", "set_field",
    "load", "move", "mod_nw_src", "mod_nw_dst", "mod_tp_src", "mod_tp_dst", "mod_dl_src",
    "mod_dl_dst",
})
# ct's arguments (ovs-actions(7)) the model interprets, and those it accepts
# with a note that their effect is not modelled (alg's related connections).
CT_ARGS = frozenset({"zone", "nat", "exec", "table", "commit", "force"})
CT_ARGS_NOTED = frozenset({"alg"})
INFO_KEYS = ("table", "cookie", "idle_timeout", "hard_timeout", "importance", "out_port",
             "out_group")


class NotModelled(NotImplementedError):
    """A construct of a flow table the model does not interpret."""

    def __init__(self, what: str, flow: str = "") -> None:
        super().__init__(f"not modelled: {what}" + (f" (in flow `{flow}`)" if flow else ""))
        self.what = what


def mask_of(name: str, value: Any) -> tuple[int, int]:
    """An ovs.flow match value as (value, mask)."""
    if name == "ct_state":
        return _ct_state(str(value))
    if name == "ip_frag":
        if str(value) not in IP_FRAG:
            raise NotModelled(f"ip_frag={value}")
        return IP_FRAG[str(value)]
    if isinstance(value, bool):
        return int(value), 1
    if isinstance(value, int):
        return value, -1
    if hasattr(value, "value") and hasattr(value, "mask") and isinstance(value.value, int):
        return int(value.value), int(value.mask)
    text = str(value)
    if re.fullmatch(r"[0-9a-fA-F:]+(/[0-9a-fA-F:]+)?", text) and text.count(":") >= 5:
        addr, _, mask = text.partition("/")
        return _mac(addr), _mac(mask) if mask else (1 << 48) - 1
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError as err:
        raise NotModelled(f"the value `{text}` of {name}") from err
    return int(net.network_address), int(net.netmask)


def _mac(text: str) -> int:
    return int.from_bytes(bytes(int(b, 16) for b in text.split(":")), "big")


def _ct_state(text: str) -> tuple[int, int]:
    """ct_state=+trk+est-new or a value/mask (ovs-fields(7))."""
    if not text.startswith(("+", "-")):
        bits, _, over = text.partition("/")
        return int(bits, 0), int(over, 0) if over else 0xFF
    value = mask = 0
    for sign, name in re.findall(r"([+-])([a-z]+)", text):
        if name not in CT_STATE_BITS:
            raise NotModelled(f"ct_state flag {name}")
        bit = CT_STATE_BITS[name]
        mask |= bit
        value |= bit if sign == "+" else 0
    return value, mask


def packet_fields(pkt: Packet) -> dict[str, int]:
    """The match fields the packet's bytes carry (ovs-fields(7)); a field the
    packet lacks is absent."""
    data = bytes(pkt.data)
    out: dict[str, int] = {}
    if len(data) < 14:
        return out
    out["dl_dst"] = int.from_bytes(data[0:6], "big")
    out["dl_src"] = int.from_bytes(data[6:12], "big")
    eth, ofs = struct.unpack_from("!H", data, 12)[0], 14
    out["vlan_tci"] = 0
    if eth == ETH_VLAN and len(data) >= 18:
        tci = struct.unpack_from("!H", data, 14)[0]
        # vlan_tci carries the CFI bit set whenever a tag is present (ovs-fields(7)).
        out["vlan_tci"], out["dl_vlan"] = tci | 0x1000, tci & 0xFFF
        eth, ofs = struct.unpack_from("!H", data, 16)[0], 18
    out["dl_type"] = eth
    if eth in (ETH_ARP, ETH_RARP) and len(data) >= ofs + 28:
        out["nw_proto"] = struct.unpack_from("!H", data, ofs + 6)[0] & 0xFF  # arp_op
        out["arp_sha"] = int.from_bytes(data[ofs + 8:ofs + 14], "big")
        out["arp_tha"] = int.from_bytes(data[ofs + 18:ofs + 24], "big")
        out["nw_src"] = int.from_bytes(data[ofs + 14:ofs + 18], "big")
        out["nw_dst"] = int.from_bytes(data[ofs + 24:ofs + 28], "big")
        return out
    if pkt.l3 is None or pkt.ipv not in (4, 6):
        return out
    l3 = pkt.l3
    if pkt.ipv == 4:
        out["nw_src"] = int.from_bytes(data[l3 + 12:l3 + 16], "big")
        out["nw_dst"] = int.from_bytes(data[l3 + 16:l3 + 20], "big")
        out["nw_tos"], out["nw_ttl"] = data[l3 + 1] & 0xFC, data[l3 + 8]
        frag = struct.unpack_from("!H", data, l3 + 6)[0]
        fragment, later = bool(frag & 0x3FFF), bool(frag & 0x1FFF)
        out["nw_proto"], l4 = data[l3 + 9], l3 + (data[l3] & 0xF) * 4
    else:
        out["ipv6_src"] = int.from_bytes(data[l3 + 8:l3 + 24], "big")
        out["ipv6_dst"] = int.from_bytes(data[l3 + 24:l3 + 40], "big")
        out["nw_tos"], out["nw_ttl"] = (struct.unpack_from("!H", data, l3)[0] >> 4) & 0xFC, \
            data[l3 + 7]
        fragment, later, nxt, at = False, False, data[l3 + 6], l3 + 40
        while nxt in (0, 43, 44, 60) and len(data) >= at + 8:
            if nxt == 44:
                fragment = True
                later = bool(struct.unpack_from("!H", data, at + 2)[0] & 0xFFF8)
                nxt, at = data[at], at + 8
            else:
                nxt, at = data[at], at + 8 + data[at + 1] * 8
        out["nw_proto"], l4 = nxt, at
    out["ip_frag"] = (1 if fragment else 0) | (2 if later else 0)
    proto = out["nw_proto"]
    if later:  # a later fragment carries no L4 header (RFC 791 §3.2, RFC 8200 §4.5)
        return out
    if proto in (6, 17, 132) and len(data) >= l4 + 4:
        out["tp_src"], out["tp_dst"] = struct.unpack_from("!HH", data, l4)
        if proto == 6 and len(data) >= l4 + 14:
            out["tcp_flags"] = struct.unpack_from("!H", data, l4 + 12)[0] & 0xFFF
    elif proto in (1, 58) and len(data) >= l4 + 2:
        out["icmp_type"], out["icmp_code"] = data[l4], data[l4 + 1]
    return out


@dataclass
class Meta:
    """The fields that travel with the packet through the pipeline, not in it."""

    in_port: int
    values: dict[str, int] = field(default_factory=dict)  # regs, metadata, ct_*

    def get(self, name: str) -> int:
        if name in XREGS:
            n = int(name[4:])
            return self.get(f"reg{2 * n}") << 32 | self.get(f"reg{2 * n + 1}")
        return self.in_port if name == "in_port" else self.values.get(name, 0)

    def set(self, name: str, value: int) -> None:
        if name in XREGS:
            n = int(name[4:])
            self.values[f"reg{2 * n}"] = value >> 32 & 0xFFFFFFFF
            self.values[f"reg{2 * n + 1}"] = value & 0xFFFFFFFF
        else:
            self.values[name] = value

    def clear_ct(self) -> None:
        for name in (*CT_FIELDS, "ct_tp_unknown"):
            self.values.pop(name, None)
