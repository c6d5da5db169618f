"""Typed ovs-vsctl commands: the database edits cases repeat, spelt once.

Each function returns the arguments of one ovs-vsctl command, columns in the
order the caller names them, so a transcript shows the command a case used
to write out by hand:

    sb.vsctl(*add_port("br0", "p1", type="dummy", ofport_request=1))
    # ovs-vsctl add-port br0 p1 -- set Interface p1 type=dummy ofport_request=1
    sb.vsctl(*chain(add_port("br0", "p1", type="dummy"),
                    set_interface("p1", options={"tx_pcap": "p1.pcap"})))

A keyword names a column; a mapping value sets keys of a map column
(`options={"n_rxq": 2}` -> `options:n_rxq=2`); True/False are written as
OVSDB's true/false, a path as its text.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Union

Scalar = Union[str, int, bool, "os.PathLike[str]"]
Column = Union[Scalar, Mapping[str, Scalar]]


def value_text(value: Scalar) -> str:
    """A scalar as ovs-vsctl reads it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def columns(**cols: Column) -> list[str]:
    """`COLUMN=VALUE` and `COLUMN:KEY=VALUE` arguments, in the order given."""
    out: list[str] = []
    for name, value in cols.items():
        if isinstance(value, Mapping):
            out += [f"{name}:{key}={value_text(v)}" for key, v in value.items()]
        else:
            out.append(f"{name}={value_text(value)}")
    return out


def set_record(table: str, record: str, **cols: Column) -> list[str]:
    """`set TABLE RECORD COLUMNS...`."""
    return ["set", table, record, *columns(**cols)]


def set_interface(name: str, **cols: Column) -> list[str]:
    """`set Interface NAME COLUMNS...`, e.g. options={"tx_pcap": "p1.pcap"}."""
    return set_record("Interface", name, **cols)


def set_bridge(name: str, **cols: Column) -> list[str]:
    """`set Bridge NAME COLUMNS...`."""
    return set_record("Bridge", name, **cols)


def set_open_vswitch(**cols: Column) -> list[str]:
    """`set Open_vSwitch . COLUMNS...`, e.g. other_config={"hw-offload": True}."""
    return set_record("Open_vSwitch", ".", **cols)


def add_port(bridge: str, name: str, **cols: Column) -> list[str]:
    """`add-port BRIDGE NAME`, then `-- set Interface NAME COLUMNS...` when
    columns are given (type, options, ofport_request, ...)."""
    if not cols:
        return ["add-port", bridge, name]
    return ["add-port", bridge, name, "--", *set_interface(name, **cols)]


def chain(*commands: list[str]) -> list[str]:
    """Several commands as one ovs-vsctl transaction (joined by `--`)."""
    out: list[str] = []
    for command in commands:
        out += ["--", *command] if out else command
    return out
