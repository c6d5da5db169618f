"""One packet's way through a flow table: lookup, the actions, ct and the
outputs (ovs-actions(7)), on the model's packet and connection tracker."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from datapath.model import Expected, emit, hooks, receive
from datapath.model.actions import SetIPv4Addr, SetL4Port
from datapath.model.conntrack import Conntrack, CtClear, state_text
from datapath.model.openflow.ct import ct_action, orig_tuple, tracked
from datapath.model.openflow.fields import (
    ALIASES,
    ARP_RAW,
    CT_FIELDS,
    RAW,
    RESUBMIT_LIMIT,
    WRITABLE_META,
    Meta,
    NotModelled,
    mask_of,
    packet_fields,
)
from datapath.model.openflow.flows import Flow, parse_flows
from datapath.model.packet import Packet
from datapath.model.send import transmit
from datapath.offloads import RxFlags, TxOffloads


@dataclass
class PacketIn:
    """What a `controller` action sends the controller (ovs-actions(7))."""

    frame: bytes
    reason: str
    table: int
    cookie: int
    ct_state: int


@dataclass
class Outcome:
    """What one packet through the pipeline comes to."""

    sent: dict[str, Expected]
    packet_ins: list[PacketIn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The known bugs the packet ran into on its way (the known-bug layer's, where
    # one is installed), wherever it went or was dropped.
    bugs: list[Any] = field(default_factory=list)


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
        walk = _Walk(self, out, tx_of)
        meta = Meta(self.number(in_port))
        if actions is None:
            walk.table(pkt, meta, 0, 0)
        else:
            (flow,) = parse_flows([f"actions={actions}"])
            walk.actions(pkt, meta, flow, flow.actions, 0)
        if pkt.dropped:
            out.notes += pkt.notes
        out.bugs = list(pkt.bugs)
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
    # Set when a ct without table= translated the packet (NAT) in this pass: the
    # flow that did, and the original values of the fields it changed; what a
    # later lookup of the same pass sees is documented both ways (below).
    translated: str = ""
    untranslated: dict[str, int] = field(default_factory=dict)

    def table(self, pkt: Packet, meta: Meta, table: int, depth: int,
              swap_ct: bool = False) -> None:
        if depth > RESUBMIT_LIMIT:
            raise NotModelled(f"more than {RESUBMIT_LIMIT} nested table lookups")
        fields = packet_fields(pkt)
        if swap_ct:
            fields = orig_tuple(fields, meta)
        flow = self.of.lookup(fields, meta, table)
        if self.translated and self.of.lookup({**fields, **self.untranslated}, meta,
                                               table) is not flow:
            # ovs-actions(7), ct: after ct without table=, "the original instance of
            # the packet continues independent processing", yet the frame that
            # leaves is the translated one (system-traffic.at's NAT tests): which
            # headers a lookup of this pass matches, the documentation does not
            # say, and here the two would pick different flows.
            raise NotModelled(f"a lookup in table {table} after {self.translated} translated "
                              "the packet without table=, where the original and the "
                              "translated headers match different flows")
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
                unknown = sorted(set(value) - {"port", "table", "ct"})
                if unknown:
                    raise NotModelled(f"resubmit argument {unknown[0]}", flow.text)
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
                SetIPv4Addr(str(value).split("/")[0], key[-3:]).apply(pkt)
            elif key in ("mod_dl_src", "mod_dl_dst"):
                new, mask = mask_of("dl" + key[-4:], value)
                self.write_raw(pkt, "dl" + key[-4:], new, mask, key, flow)
            elif key in ("mod_tp_src", "mod_tp_dst"):
                SetL4Port(int(value), key[-3:]).apply(pkt)
            else:
                raise NotModelled(f"action {key}", flow.text)
        if goto is not None:
            self.table(pkt, meta, goto, depth + 1)

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
        named = {p.lower(): n for n, p in self.of.ports.items()}
        if isinstance(name, str) and name in named:
            name = named[name]  # a port named, not numbered (ovs-actions(7), output)
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
            if name in ("nw_src", "nw_dst") and pkt.ipv == 4:
                SetIPv4Addr(str(v).split("/")[0], name[-3:]).apply(pkt)
                return
            if name in ("tp_src", "tp_dst"):
                SetL4Port(int(getattr(v, "value", v)), name[-3:]).apply(pkt)
                return
            new, mask = mask_of(name, v)
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
        if at is None and pkt.data[12:14] == b"\x08\x06":  # an untagged ARP frame
            at = ARP_RAW.get(name)
        if at is None:
            raise NotModelled(what, flow.text)
        ofs, size = at
        old = int.from_bytes(pkt.data[ofs:ofs + size], "big")
        full = (1 << (size * 8)) - 1
        pkt.data[ofs:ofs + size] = ((old & ~mask & full) | (new & mask & full)).to_bytes(size, "big")

    def ct(self, pkt: Packet, meta: Meta, value: Any, flow: Flow, depth: int,
           rest: list[tuple[str, Any]]) -> bool:
        """The ct action; True when the packet went on at another table (the
        rest of this action list is the other fork's)."""
        action = ct_action(value, self.of.conntrack, flow,
                           lambda ref: self._field_value(ref, meta))
        if action.recirc is not None and rest:
            raise NotModelled("actions after ct(table=...) (the untracked fork)", flow.text)
        if isinstance(value, dict) and "alg" in value:
            pkt.notes.append(f"ct alg={value['alg']}: the helper's related connections are "
                             "not modelled (the case narrows the frames it judges)")
        before = bytes(pkt.data)
        action.apply(pkt)
        res = self.of.conntrack.last
        # The known-bug layer (datapath/model/hooks.py): the state, or a related
        # error's bytes, the datapath under test gives instead.
        other = hooks.active().ct_state(pkt, res)
        if other is not None:
            bug, res.state = other
            if bug not in pkt.bugs:
                pkt.bugs.append(bug)
            pkt.notes.append(f"conntrack: the datapath under test gives {state_text(res.state)} "
                             f"(known: {bug.key})")
        if res.related and bytes(pkt.data) != before:
            hooks.active().ct_related_translated(pkt, before, res)
        meta.clear_ct()  # ovs-actions(7), ct: the other fork's fields are cleared
        if action.recirc is None:
            if bytes(pkt.data) != before:
                was, now = packet_fields(Packet.parse(before)), packet_fields(pkt)
                self.translated = flow.text
                self.untranslated.update({k: v for k, v in was.items() if now.get(k) != v})
            return False
        self.translated, self.untranslated = "", {}  # it re-enters the pipeline translated
        tracked(meta, res, action.zone)
        if not pkt.dropped:
            self.table(pkt, meta, action.recirc, depth + 1)
        return True
