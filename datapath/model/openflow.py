"""The model's OpenFlow pipeline: a case's flow table, as ovs-ofctl takes it,
interpreted for one packet arriving on a port.

Given the flows (tables, priorities, masked matches, actions) and a packet with
its in-port and offload flags, `OpenFlow.run` computes every frame that leaves
each port, in order, the packet-ins, the conntrack table's changes (the model's
tracker, datapath/model/conntrack.py) and each flow's n_packets and n_bytes.
The flows are read with `ovs.flow`, the parser of the `ovs` Python package.

Semantics, each from the documentation, never from OVS's code:
- Lookup: in each table the matching flow of the highest priority; a flow
  without priority= has 32768 (ovs-ofctl(8), "Flow Syntax").  Two matching
  flows of one priority: OpenFlow 1.5 §5.3 leaves the choice undefined, so the
  model says it cannot tell (`NotModelled`) rather than guess.  A miss drops
  the packet (OpenFlow 1.5 §5.4, the table-miss default).
- Match fields and their prerequisites: ovs-fields(7).  A field the packet
  lacks (tp_dst of an ARP frame) does not match.
- Actions: ovs-actions(7).  output to the packet's in-port sends nothing;
  `in_port` does ("output").  `ct` without table= goes on with the
  connection tracking fields cleared; with table=N the packet re-enters the
  pipeline at table N with ct_state, ct_zone, ct_mark, ct_label and the
  original direction's ct_nw_*/ct_tp_* set ("ct").  resubmit searches a table
  and comes back; goto_table continues there after the flow's actions.
- `normal` is the caller's (802.1D learning, which the caller keeps).

A construct the model does not interpret raises NotModelled, whose message
starts `not modelled:` and names the field or action.  It never guesses.
"""
from __future__ import annotations

import ipaddress
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from datapath.model import Expected, emit, receive
from datapath.model.actions import Action, SetEthAddr, SetIPv4Addr, SetL4Port
from datapath.model.conntrack import Conntrack, Ct, CtClear, Key, Nat
from datapath.model.packet import Packet
from datapath.model.send import transmit
from datapath.offloads import RxFlags, TxOffloads

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


@dataclass(eq=False)
class Flow:
    """One flow of a table: its match as (field, value, mask) and its actions as
    ovs.flow decoded them."""

    table: int
    priority: int
    match: list[tuple[str, int, int]]
    actions: list[tuple[str, Any]]
    text: str
    cookie: int = 0
    n_packets: int = 0
    n_bytes: int = 0


@dataclass
class PacketIn:
    """What a `controller` action sends the controller (ovs-actions(7))."""

    frame: bytes
    reason: str
    table: int
    cookie: int
    ct_state: int


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


@dataclass
class Outcome:
    """What one packet through the pipeline comes to."""

    sent: dict[str, Expected]
    packet_ins: list[PacketIn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- reading the flows ---------------------------------------------------------

def _split_actions(line: str) -> tuple[str, str]:
    m = re.search(r"(?:^|[\s,])actions?=", line)
    if m is None:
        raise NotModelled(f"a flow without actions: `{line}`")
    return line[:m.start()], line[m.end():]


def _mask_of(name: str, value: Any) -> tuple[int, int]:
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


def _normalise(line: str) -> tuple[list[tuple[str, str]], str]:
    """One flow line in the syntax ovs.flow reads: ovs-ofctl's spellings it lacks
    normalised (action= for actions=, spaces between match fields) and the
    INFO_KEYS pulled out; (those keys with their text values, the flow's text)."""
    head, acts = _split_actions(line)
    info: list[tuple[str, str]] = []
    keep = []
    for part in (p.strip() for p in re.split(r"[,\s]+", head) if p.strip()):
        key, _, value = part.partition("=")
        if key in INFO_KEYS:
            info.append((key, value))
        else:
            keep.append(part)
    return info, f"{','.join(keep)} actions={acts}" if keep else f"actions={acts}"


def _ovs_flow(text: str, line: str) -> Any:
    """The normalised flow read by ovs.flow (its OFPFlow)."""
    from ovs.flow.ofp import OFPFlow  # the `ovs` package: imported where it is used

    try:
        return OFPFlow(text)
    except Exception as err:  # ovs.flow raises its own classes and ValueError
        raise NotModelled(f"a flow ovs.flow cannot read ({err})", line) from err


@dataclass(frozen=True)
class FlowKeys:
    """What one flow names, as ovs.flow reads it through parse_flows' normalisation,
    modelled or not: its INFO_KEYS, its match keys as written (no alias resolved,
    shorthands included) and its actions as ovs.flow decoded them (key, value)."""

    info: tuple[str, ...]
    match: tuple[str, ...]
    actions: tuple[tuple[str, Any], ...]


def flow_keys(line: str) -> FlowKeys:
    """The keys of one flow line, whatever the model interprets (tooling/of_scope.py
    lists them against MODELLED_FIELDS and MODELLED_ACTIONS).  Raises NotModelled
    only when the line is no flow ovs.flow can read (no actions=, or its error)."""
    info, text = _normalise(line.strip())
    of = _ovs_flow(text, line.strip())
    return FlowKeys(tuple(key for key, _ in info), tuple(kv.key for kv in of.match_kv),
                    tuple((kv.key, kv.value) for kv in of.actions_kv))


def parse_flows(flows: str | Iterable[str]) -> list[Flow]:
    """Flows as `ovs-ofctl add-flows` reads a file: one per line, `#` comments
    and blank lines skipped (ovs-ofctl(8))."""
    lines = flows.splitlines() if isinstance(flows, str) else list(flows)
    parsed = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        texts, text = _normalise(line)
        info = {key: int(value, 0) for key, value in texts}
        of = _ovs_flow(text, line)
        match, priority = [], DEFAULT_PRIORITY
        for kv in of.match_kv:
            name = ALIASES.get(kv.key, kv.key)
            if name == "priority":
                priority = int(kv.value)
            elif name in SHORTHANDS:
                dl_type, proto = SHORTHANDS[name]
                match.append(("dl_type", dl_type, 0xFFFF))
                if proto is not None:
                    match.append(("nw_proto", proto, 0xFF))
            elif name not in MODELLED_FIELDS:
                raise NotModelled(f"match field {kv.key}", line)
            elif name == "in_port" and not isinstance(kv.value, int):
                match.append((f"in_port:{kv.value}", 0, 0))  # a name: the port map's
            else:
                value, mask = _mask_of(name, kv.value)
                match.append((name, value, mask))
        parsed.append(Flow(info.get("table", 0), priority, match,
                           [(kv.key, kv.value) for kv in of.actions_kv], line,
                           info.get("cookie", 0)))
    return parsed


# -- reading the packet --------------------------------------------------------

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


# -- the pipeline --------------------------------------------------------------

@dataclass
class OpenFlow:
    """A bridge's flow table and the connection tracker its ct actions use.

    `ports` maps OpenFlow port numbers to the names the outcome uses; `normal`
    gives NORMAL's output ports for a frame and its in-port's name."""

    flows: list[Flow]
    ports: dict[int, str]
    conntrack: Conntrack = field(default_factory=Conntrack)
    normal: Callable[[bytes, str], list[str]] = lambda frame, port: []

    @classmethod
    def of(cls, flows: str | Iterable[str], ports: dict[int, str], **kw: Any) -> "OpenFlow":
        return cls(parse_flows(flows), ports, **kw)

    def number(self, name: str) -> int:
        for num, port in self.ports.items():
            if port == name:
                return num
        raise NotModelled(f"port {name}: not in the model's port map {self.ports}")

    def run(self, frame: bytes, in_port: str, rx: RxFlags = RxFlags(),
            tx_of: Callable[[str], TxOffloads] = lambda port: TxOffloads(),
            actions: str | None = None) -> Outcome:
        """The packet `frame` arriving on `in_port`, through table 0 on; with
        `actions`, a packet-out's: the frame goes through that action list
        instead, as if in `in_port` (OpenFlow 1.5 §7.3.7, OFPT_PACKET_OUT)."""
        out = Outcome({port: Expected(frames=[]) for port in self.ports.values()})
        pkt = receive(frame, rx)
        walk = _Walk(self, out, tx_of, in_port)
        meta = Meta(self.number(in_port))
        if actions is None:
            walk.table(pkt, meta, 0, 0)
        else:
            (flow,) = parse_flows([f"actions={actions}"])
            walk.actions(pkt, meta, flow, flow.actions, 0)
        if pkt.dropped:
            out.notes += pkt.notes
        return out

    def lookup(self, fields: dict[str, int], meta: Meta, table: int) -> Flow | None:
        """The matching flow of the highest priority in `table` (None: a miss)."""
        best: list[Flow] = []
        for flow in self.flows:
            if flow.table != table or not self._matches(flow, fields, meta):
                continue
            if not best or flow.priority > best[0].priority:
                best = [flow]
            elif flow.priority == best[0].priority:
                best.append(flow)
        if len(best) > 1:
            raise NotModelled("two matching flows of one priority (OpenFlow 1.5 §5.3 leaves "
                              "the choice undefined): " + " | ".join(f.text for f in best))
        return best[0] if best else None

    def _matches(self, flow: Flow, fields: dict[str, int], meta: Meta) -> bool:
        for name, value, mask in flow.match:
            if name.startswith("in_port:"):
                if meta.in_port != self.number(name.split(":", 1)[1]):
                    return False
                continue
            if name in ("ct_tp_src", "ct_tp_dst") and meta.values.get("ct_tp_unknown"):
                raise NotModelled(f"{name} of an ICMP connection", flow.text)
            if name == "in_port" or name in WRITABLE_META or name in CT_FIELDS:
                have: int | None = meta.get(name)
            else:
                have = fields.get(name)
                if name in ("nw_src", "nw_dst") and have is None:
                    have = fields.get("ipv6_" + name[3:])
            if have is None or (have ^ value) & mask:
                return False
        return True


@dataclass
class _Walk:
    """One packet's way through the tables."""

    of: OpenFlow
    out: Outcome
    tx_of: Callable[[str], TxOffloads]
    in_name: str

    def table(self, pkt: Packet, meta: Meta, table: int, depth: int,
              swap_ct: bool = False) -> None:
        if depth > RESUBMIT_LIMIT:
            raise NotModelled(f"more than {RESUBMIT_LIMIT} nested table lookups")
        fields = packet_fields(pkt)
        if swap_ct:
            fields = self._orig_tuple(fields, meta)
        flow = self.of.lookup(fields, meta, table)
        if flow is None:
            pkt.notes.append(f"table {table}: miss, dropped (OpenFlow 1.5 §5.4)")
            return
        flow.n_packets += 1
        flow.n_bytes += len(pkt.data)
        self.actions(pkt, meta, flow, flow.actions, depth)

    def actions(self, pkt: Packet, meta: Meta, flow: Flow, actions: list[tuple[str, Any]],
                depth: int) -> None:
        goto: int | None = None
        for i, (key, value) in enumerate(actions):
            if pkt.dropped:
                return
            if key == "drop":
                return
            if key == "output":
                self.output(pkt, meta, value["port"], flow)
            elif key == "controller":
                reason = value.get("reason", "action") if isinstance(value, dict) else "action"
                self.out.packet_ins.append(PacketIn(bytes(pkt.data), reason, flow.table,
                                                    flow.cookie, meta.get("ct_state")))
            elif key == "ct":
                rest = actions[i + 1:]
                if self.ct(pkt, meta, value, flow, depth, rest):
                    return
            elif key == "ct_clear":
                CtClear(self.of.conntrack).apply(pkt)
                meta.clear_ct()
            elif key == "resubmit":
                if set(value) - {"port", "table", "ct"}:
                    raise NotModelled(f"resubmit argument {sorted(set(value) - {'port', 'table', 'ct'})}",
                                      flow.text)
                port, table = value.get("port", ""), value.get("table", "")
                saved = meta.in_port
                if port not in ("", None):
                    meta.in_port = self._port_number(port, meta)
                self.table(pkt, meta, flow.table if table in ("", None) else int(table),
                           depth + 1, bool(value.get("ct")))
                meta.in_port = saved
            elif key == "goto_table":
                goto = int(value)
            elif key in ("set_field", "load", "move"):
                self.write(pkt, meta, key, value, flow)
            elif key in ("mod_nw_src", "mod_nw_dst"):
                self.apply(pkt, SetIPv4Addr(str(value).split("/")[0], key[-3:]))
            elif key in ("mod_dl_src", "mod_dl_dst"):
                self.apply(pkt, SetEthAddr(str(value), key[-3:]))
            elif key in ("mod_tp_src", "mod_tp_dst"):
                self.apply(pkt, SetL4Port(int(value), key[-3:]))
            else:
                raise NotModelled(f"action {key}", flow.text)
        if goto is not None:
            self.table(pkt, meta, goto, depth + 1)

    @staticmethod
    def _orig_tuple(fields: dict[str, int], meta: Meta) -> dict[str, int]:
        """resubmit(,T,ct)'s lookup (ovs-actions(7), resubmit): the packet's
        5-tuple fields swapped with the connection's original direction's."""
        if "ct_nw_proto" not in meta.values:
            raise NotModelled("resubmit(...,ct) of a packet with no connection tuple")
        proto = meta.values["ct_nw_proto"]
        if proto not in (6, 17, 132):
            raise NotModelled(f"resubmit(...,ct) of an IP protocol {proto} connection "
                              "(the model keeps ports of TCP, UDP and SCTP only)")
        swapped = dict(fields)
        six = "ipv6_src" in fields
        swapped["ipv6_src" if six else "nw_src"] = meta.values["ct_nw_src"]
        swapped["ipv6_dst" if six else "nw_dst"] = meta.values["ct_nw_dst"]
        swapped["nw_proto"] = proto
        swapped["tp_src"], swapped["tp_dst"] = meta.values["ct_tp_src"], meta.values["ct_tp_dst"]
        return swapped

    def apply(self, pkt: Packet, action: Action) -> None:
        action.apply(pkt)

    def _port_number(self, port: Any, meta: Meta) -> int:
        if isinstance(port, int):
            return port
        if str(port) == "in_port":
            return meta.in_port
        return self.of.number(str(port))

    def output(self, pkt: Packet, meta: Meta, port: Any, flow: Flow) -> None:
        ref = re.fullmatch(r"(\w+)\[(?:(\d+)\.\.(\d+))?\]", str(port))
        if ref is not None:  # output:FIELD[a..b] (ovs-actions(7), output)
            lo, hi = ref.group(2), ref.group(3)
            port = self._field_value({"field": ref.group(1), "start": None if lo is None
                                      else int(lo), "end": None if hi is None else int(hi)},
                                     meta, pkt)
        name = str(port).lower() if isinstance(port, str) else port
        if name == "normal":
            names = self.of.normal(bytes(pkt.data), self.of.ports[meta.in_port])
        elif name == "in_port":
            names = [self.of.ports[meta.in_port]]
        elif name == "controller":
            self.out.packet_ins.append(PacketIn(bytes(pkt.data), "action", flow.table,
                                                flow.cookie, meta.get("ct_state")))
            return
        elif name in ("all", "flood"):
            # The standard ports but the in-port: the reserved ones (LOCAL,
            # 0xfff8 and up) are not among them (OpenFlow 1.5 §4.5, OFPP_ALL).
            names = [p for n, p in self.of.ports.items() if n != meta.in_port and n < 0xFF00]
        elif name == "local":
            return  # the bridge's own port: no judged port
        elif isinstance(name, int):
            if name == meta.in_port:
                # ovs-actions(7), output: "if port is the packet's input port,
                # the packet is not output" (in_port must be named).
                pkt.notes.append(f"output:{name} is the in-port: not output")
                return
            if name not in self.of.ports:
                raise NotModelled(f"output to port {name}: not in the model's port map "
                                  f"{self.of.ports}", flow.text)
            names = [self.of.ports[name]]
        elif isinstance(name, str) and name in {p.lower() for p in self.of.ports.values()}:
            # A port named, not numbered (ovs-actions(7), output).
            names = [p for p in self.of.ports.values() if p.lower() == name]
            if self.of.number(names[0]) == meta.in_port:
                pkt.notes.append(f"output:{port} is the in-port: not output")
                return
        else:
            raise NotModelled(f"output to {port}", flow.text)
        for port_name in names:
            clone = pkt.copy()
            clone.notes = pkt.notes
            emit(self.out.sent.setdefault(port_name, Expected(frames=[])),
                 transmit(clone, self.tx_of(port_name)))
            pkt.notes = []

    def _field_value(self, ref: dict[str, Any], meta: Meta, pkt: Packet | None = None) -> int:
        name = ALIASES.get(ref["field"], ref["field"])
        if name == "in_port" or name in WRITABLE_META or name in CT_FIELDS:
            value = meta.get(name)
        elif pkt is not None and name in packet_fields(pkt):
            value = packet_fields(pkt)[name]
        else:
            raise NotModelled(f"reading field {ref['field']}")
        start, end = ref.get("start"), ref.get("end")
        if start is not None:
            value = (value >> start) & ((1 << (end - start + 1)) - 1)
        return value

    def write(self, pkt: Packet, meta: Meta, key: str, value: dict[str, Any],
              flow: Flow) -> None:
        dst = value["dst"]
        name = ALIASES.get(dst["field"], dst["field"])
        if key == "move":
            new, mask = self._field_value(value["src"], meta, pkt), -1
        elif key == "load":
            new, mask = int(value["value"]), -1
        else:
            v = value["value"][dst["field"]]
            if name in ("dl_src", "dl_dst"):
                self.apply(pkt, SetEthAddr(str(v), name[-3:]))
                return
            if name in ("nw_src", "nw_dst") and pkt.ipv == 4:
                self.apply(pkt, SetIPv4Addr(str(v).split("/")[0], name[-3:]))
                return
            if name in ("tp_src", "tp_dst"):
                self.apply(pkt, SetL4Port(int(getattr(v, "value", v)), name[-3:]))
                return
            new, mask = _mask_of(name, v)
        start, end = dst.get("start"), dst.get("end")
        if start is not None:
            width = ((1 << (end - start + 1)) - 1) << start
            new, mask = new << start, (mask << start) & width
        if name == "in_port":
            meta.in_port = (meta.in_port & ~mask) | (new & mask)
        elif name in WRITABLE_META:
            old = meta.get(name)
            meta.set(name, (old & ~mask) | (new & mask))
        else:
            self.write_raw(pkt, name, new, mask, f"{key} to {dst['field']}", flow)

    def write_raw(self, pkt: Packet, name: str, new: int, mask: int, what: str,
                  flow: Flow) -> None:
        """A header field no checksum covers (Ethernet addresses, ARP's fields):
        its bits under `mask` set to `new`'s."""
        at = RAW.get(name)
        if at is None and packet_fields(pkt).get("dl_type") == ETH_ARP \
                and pkt.data[12:14] == b"\x08\x06":
            at = ARP_RAW.get(name)
        if at is None:
            raise NotModelled(what, flow.text)
        ofs, size = at
        old = int.from_bytes(pkt.data[ofs:ofs + size], "big")
        full = (1 << (size * 8)) - 1
        pkt.data[ofs:ofs + size] = ((old & ~mask & full) | (new & mask & full)).to_bytes(size, "big")

    def ct(self, pkt: Packet, meta: Meta, value: dict[str, Any], flow: Flow, depth: int,
           rest: list[tuple[str, Any]]) -> bool:
        """The ct action; True when the packet went on at another table (the
        rest of this action list is the other fork's)."""
        if not isinstance(value, dict):
            value = {}  # a bare ct() or ct: zone 0, no commit, no table
        zone = value.get("zone", 0)
        zone = self._field_value(zone, meta) if isinstance(zone, dict) else int(zone)
        nat = None
        if "nat" in value:
            nat = _nat(value["nat"])
        mark = label = None
        for act in value.get("exec", []):
            (akey, aval), = act.items()
            target = ALIASES.get(aval["dst"]["field"], aval["dst"]["field"])
            if akey == "set_field":
                vm = _mask_of(target, aval["value"][aval["dst"]["field"]])
            elif akey == "move":
                vm = (self._field_value(aval["src"], meta), -1)
            elif akey == "load":
                vm = (int(aval["value"]), -1)
            else:
                raise NotModelled(f"ct exec action {akey}", flow.text)
            if target == "ct_mark":
                mark = (vm[0], vm[1] & 0xFFFFFFFF)
            elif target == "ct_label":
                label = (vm[0], vm[1] & ((1 << 128) - 1))
            else:
                raise NotModelled(f"ct exec of {target}", flow.text)
        table = value.get("table")
        action = Ct(self.of.conntrack, zone=zone, commit=bool(value.get("commit")), nat=nat,
                    mark=mark, label=label, force=bool(value.get("force")),
                    recirc=None if table is None else int(table))
        if "alg" in value:
            pkt.notes.append(f"ct alg={value['alg']}: the helper's related connections are "
                             "not modelled (the case narrows the frames it judges)")
        unknown = set(value) - CT_ARGS - CT_ARGS_NOTED
        if unknown:
            raise NotModelled(f"ct argument {sorted(unknown)[0]}", flow.text)
        if table is not None and rest:
            raise NotModelled("actions after ct(table=...) (the untracked fork)", flow.text)
        action.apply(pkt)
        if table is None:
            meta.clear_ct()  # ovs-actions(7), ct: the other fork's fields are cleared
            return False
        res = self.of.conntrack.last
        meta.clear_ct()
        meta.values["ct_state"], meta.values["ct_zone"] = res.state, zone
        conn = res.conn
        tracked = conn is not None and (res.committed or res.related)
        meta.values["ct_mark"] = conn.mark if tracked and conn is not None else 0
        meta.values["ct_label"] = conn.label if tracked and conn is not None else 0
        orig: Key | None = res.orig
        if orig is not None:
            meta.values.update(
                ct_nw_src=int(ipaddress.ip_address(orig.src)),
                ct_nw_dst=int(ipaddress.ip_address(orig.dst)), ct_nw_proto=orig.proto)
            if orig.proto in (6, 17, 132):
                meta.values.update(ct_tp_src=orig.sport, ct_tp_dst=orig.dport)
            else:
                # ct_tp_src/dst of ICMP are its type and code (ovs-fields(7));
                # the model's key keeps the echo identifier instead.
                meta.values["ct_tp_unknown"] = 1
        if not pkt.dropped:
            self.table(pkt, meta, int(table), depth + 1)
        return True


def _nat(value: Any) -> Nat:
    """ct's nat argument as ovs.flow decodes it: True for a bare nat."""
    if value is True or not value:
        return Nat()
    kind = value.get("type", "")
    addrs = value.get("addrs")
    if not kind or addrs is None:
        return Nat()
    lo, hi = str(addrs["start"]), str(addrs.get("end", addrs["start"]))
    ports = value.get("ports")
    span = None if ports is None else (int(ports["start"]), int(ports.get("end", ports["start"])))
    return Nat.of(kind, lo if lo == hi else f"{lo}-{hi}", span)
