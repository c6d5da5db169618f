"""A flow table as ovs-ofctl reads it (ovs-ofctl(8), "Flow Syntax"),
normalised for `ovs.flow`, the `ovs` package's parser, and decoded into the
model's `Flow`s."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from datapath.model.openflow.fields import (
    ALIASES,
    DEFAULT_PRIORITY,
    INFO_KEYS,
    MODELLED_FIELDS,
    SHORTHANDS,
    NotModelled,
    mask_of,
)


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


def _split_actions(line: str) -> tuple[str, str]:
    m = re.search(r"(?:^|[\s,])actions?=", line)
    if m is None:
        raise NotModelled(f"a flow without actions: `{line}`")
    return line[:m.start()], line[m.end():]


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
                value, mask = mask_of(name, kv.value)
                match.append((name, value, mask))
        parsed.append(Flow(info.get("table", 0), priority, match,
                           [(kv.key, kv.value) for kv in of.actions_kv], line,
                           info.get("cookie", 0)))
    return parsed
