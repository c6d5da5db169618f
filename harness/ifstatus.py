"""An Interface's status and statistics columns, read and parsed in one place.

One ovs-vsctl call, which an OVS developer can paste as the transcript shows it:

    ovs-vsctl get Interface p1 status statistics

prints the two OVSDB maps on two lines, `{key=value, key="quoted value"}`
(ovs-vsctl(8), "Database Values").  `read_interface` returns them as frozen
dataclasses: the status keys the suite reads as typed fields (the tx offload
keys as booleans, `xdp-mode`, the driver and vhost-user keys), everything in
`raw`; the statistics as integers.  A value that is not what OVSDB's schema
(vswitch.ovsschema: status is a string map, statistics an integer map) and
vswitchd.conf.db(5) say it is raises `IfStatusError` naming the key and text.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from harness.control import Result


class IfStatusError(ValueError):
    """ovs-vsctl printed something that is not the Interface column it should be."""


# One `key=value` entry of an OVSDB map: each side bare or a C-style quoted string.
_ATOM = r'"(?:[^"\\]|\\.)*"|[^",={}\s]+'
_ENTRY = re.compile(rf"\s*({_ATOM})=({_ATOM})\s*(,|$)")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


def _atom(text: str) -> str:
    if not text.startswith('"'):
        return text
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])


def parse_map(text: str) -> dict[str, str]:
    """ovs-vsctl's `{k=v, k2="v 2"}`, as a dict of strings; anything else raises."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise IfStatusError(f"not an OVSDB map: {text!r}")
    body = body[1:-1].strip()
    out: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        m = _ENTRY.match(body, pos)
        if m is None or (m.group(3) == "," and m.end() == len(body)):
            raise IfStatusError(f"malformed OVSDB map at {body[pos:].strip()!r}: {text!r}")
        key = _atom(m.group(1))
        if key in out:
            raise IfStatusError(f"key {key!r} twice in OVSDB map {text!r}")
        out[key] = _atom(m.group(2))
        pos = m.end()
    return out


def _bool(raw: Mapping[str, str], key: str) -> bool | None:
    value = raw.get(key)
    if value is None:
        return None
    if value not in ("true", "false"):
        raise IfStatusError(f"status:{key}={value!r} is not true or false")
    return value == "true"


# The tx offload keys netdev_get_status() reports (vswitchd.conf.db(5),
# Interface status), each a field of Status under its own name.
TX_OFFLOAD_KEYS = ("tx_ip_csum_offload", "tx_tcp_csum_offload", "tx_udp_csum_offload",
                   "tx_sctp_csum_offload", "tx_tcp_seg_offload", "tx_out_ip_csum_offload",
                   "tx_out_udp_csum_offload", "tx_vxlan_tso_offload", "tx_geneve_tso_offload",
                   "tx_gre_tso_offload")


@dataclass(frozen=True)
class Status:
    """The Interface status column.  A typed field is None when OVS did not
    report its key (a dummy port has no driver, OVS 4.0 gives a tap no tx keys)."""

    raw: Mapping[str, str]
    tx_ip_csum_offload: bool | None = None
    tx_tcp_csum_offload: bool | None = None
    tx_udp_csum_offload: bool | None = None
    tx_sctp_csum_offload: bool | None = None
    tx_tcp_seg_offload: bool | None = None
    tx_out_ip_csum_offload: bool | None = None
    tx_out_udp_csum_offload: bool | None = None
    tx_vxlan_tso_offload: bool | None = None
    tx_geneve_tso_offload: bool | None = None
    tx_gre_tso_offload: bool | None = None
    rx_csum_offload: bool | None = None  # DPDK ports
    xdp_mode: str | None = None  # `xdp-mode`: the mode an AF_XDP port runs in
    driver_name: str | None = None  # DPDK and kernel (ethtool) drivers
    driver_version: str | None = None
    features: int | None = None  # vhost-user: the negotiated virtio feature bits
    mode: str | None = None  # vhost-user: client or server
    connection: str | None = None  # vhost-user: the `status` key, connected/disconnected

    @classmethod
    def parse(cls, text: str) -> Status:
        """One `ovs-vsctl get Interface NAME status` line."""
        raw = parse_map(text)
        features = raw.get("features")
        if features is not None and not re.fullmatch(r"0x[0-9a-fA-F]+", features):
            raise IfStatusError(f"status:features={features!r} is not a hexadecimal bit set")
        return cls(MappingProxyType(raw), **{k: _bool(raw, k) for k in TX_OFFLOAD_KEYS},
                   rx_csum_offload=_bool(raw, "rx_csum_offload"), xdp_mode=raw.get("xdp-mode"),
                   driver_name=raw.get("driver_name"), driver_version=raw.get("driver_version"),
                   features=None if features is None else int(features, 16),
                   mode=raw.get("mode"), connection=raw.get("status"))

    def tx_offload(self, key: str) -> bool | None:
        """A tx offload key (one of TX_OFFLOAD_KEYS) by name, for tables of keys."""
        if key not in TX_OFFLOAD_KEYS:
            raise KeyError(f"{key!r} is not a tx offload status key")
        value: bool | None = getattr(self, key)
        return value

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(self.raw.items())) + "}"


# Counters vswitchd.conf.db(5) lists under Interface statistics, typed.
COUNTERS = ("rx_packets", "rx_bytes", "rx_dropped", "rx_errors",
            "tx_packets", "tx_bytes", "tx_dropped", "tx_errors")


@dataclass(frozen=True)
class Statistics:
    """The Interface statistics column.  OVS leaves out a counter the netdev
    does not keep; its typed field then reads 0 and `raw` lacks it."""

    raw: Mapping[str, int]
    rx_packets: int = 0
    rx_bytes: int = 0
    rx_dropped: int = 0
    rx_errors: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    tx_dropped: int = 0
    tx_errors: int = 0

    @classmethod
    def parse(cls, text: str) -> Statistics:
        """One `ovs-vsctl get Interface NAME statistics` line."""
        raw: dict[str, int] = {}
        for key, value in parse_map(text).items():
            if not re.fullmatch(r"-?\d+", value):
                raise IfStatusError(f"statistics:{key}={value!r} is not an integer")
            raw[key] = int(value)
        return cls(MappingProxyType(raw), **{k: raw[k] for k in COUNTERS if k in raw})

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(self.raw.items())) + "}"


@dataclass(frozen=True)
class Interface:
    """What `ovs-vsctl get Interface NAME status statistics` printed."""

    name: str
    status: Status = field(repr=False)
    statistics: Statistics = field(repr=False)

    def __str__(self) -> str:
        return f"{self.name}: status {self.status}, statistics {self.statistics}"


def parse_interface(name: str, text: str) -> Interface:
    """The two lines `ovs-vsctl get Interface NAME status statistics` prints."""
    lines = text.splitlines()
    if len(lines) != 2:
        raise IfStatusError(f"expected the status and statistics lines for {name}, got {text!r}")
    return Interface(name, Status.parse(lines[0]), Statistics.parse(lines[1]))


class _Vsctl(Protocol):
    def vsctl(self, *args: str, rc: int | None = ...) -> Result: ...


def read_interface(sb: _Vsctl, name: str) -> Interface:
    """An Interface's status and statistics, with one ovs-vsctl call."""
    return parse_interface(name, sb.vsctl("get", "Interface", name, "status", "statistics").stdout)

