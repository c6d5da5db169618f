"""The ct action as a flow states it (ovs-actions(7), ct), and the
connection tracking fields it leaves for the next lookup (ovs-fields(7),
"Connection Tracking Fields"), on the model's tracker."""
from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from datapath.model.conntrack import Conntrack, Ct, Key, Nat, Result
from datapath.model.openflow.fields import ALIASES, CT_ARGS, CT_ARGS_NOTED, Meta, NotModelled, mask_of
from datapath.model.openflow.flows import Flow

# The IP protocols whose connections the model keys by port.
PORTED = (6, 17, 132)


def ct_action(value: Any, table: Conntrack, flow: Flow,
              read: Callable[[dict[str, Any]], int]) -> Ct:
    """The model's Ct for ct's arguments as ovs.flow decodes them (a bare
    ct() is zone 0, no commit, no table); `read` reads a field reference."""
    if not isinstance(value, dict):
        value = {}
    unknown = set(value) - CT_ARGS - CT_ARGS_NOTED
    if unknown:
        raise NotModelled(f"ct argument {sorted(unknown)[0]}", flow.text)
    zone = value.get("zone", 0)
    zone = read(zone) if isinstance(zone, dict) else int(zone)
    mark = label = None
    for act in value.get("exec", []):
        (akey, aval), = act.items()
        target = ALIASES.get(aval["dst"]["field"], aval["dst"]["field"])
        if akey == "set_field":
            vm = mask_of(target, aval["value"][aval["dst"]["field"]])
        elif akey == "move":
            vm = (read(aval["src"]), -1)
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
    recirc = value.get("table")
    return Ct(table, zone=zone, commit=bool(value.get("commit")),
              nat=nat_of(value["nat"]) if "nat" in value else None, mark=mark, label=label,
              force=bool(value.get("force")), recirc=None if recirc is None else int(recirc))


def tracked(meta: Meta, res: Result, zone: int) -> None:
    """The fields ct(table=...) sets for the packet's next lookup: ct_state,
    ct_zone, the connection's mark and label (zero if it is not committed),
    and its original direction's tuple."""
    meta.values["ct_state"], meta.values["ct_zone"] = res.state, zone
    conn = res.conn
    known = conn is not None and (res.committed or res.related)
    meta.values["ct_mark"] = conn.mark if known and conn is not None else 0
    meta.values["ct_label"] = conn.label if known and conn is not None else 0
    orig: Key | None = res.orig
    if orig is None:
        return
    meta.values.update(ct_nw_src=int(ipaddress.ip_address(orig.src)),
                       ct_nw_dst=int(ipaddress.ip_address(orig.dst)), ct_nw_proto=orig.proto)
    if orig.proto in PORTED:
        meta.values.update(ct_tp_src=orig.sport, ct_tp_dst=orig.dport)
    else:
        # ct_tp_src/dst of ICMP are its type and code (ovs-fields(7)); the
        # model's key keeps the echo identifier instead.
        meta.values["ct_tp_unknown"] = 1


def orig_tuple(fields: dict[str, int], meta: Meta) -> dict[str, int]:
    """resubmit(,T,ct)'s lookup (ovs-actions(7), resubmit): the packet's
    5-tuple fields swapped with the connection's original direction's."""
    if "ct_nw_proto" not in meta.values:
        raise NotModelled("resubmit(...,ct) of a packet with no connection tuple")
    proto = meta.values["ct_nw_proto"]
    if proto not in PORTED:
        raise NotModelled(f"resubmit(...,ct) of an IP protocol {proto} connection "
                          "(the model keeps ports of TCP, UDP and SCTP only)")
    swapped = dict(fields)
    six = "ipv6_src" in fields
    swapped["ipv6_src" if six else "nw_src"] = meta.values["ct_nw_src"]
    swapped["ipv6_dst" if six else "nw_dst"] = meta.values["ct_nw_dst"]
    swapped["nw_proto"] = proto
    swapped["tp_src"], swapped["tp_dst"] = meta.values["ct_tp_src"], meta.values["ct_tp_dst"]
    return swapped


def nat_of(value: Any) -> Nat:
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
