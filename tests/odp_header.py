"""Upstream's printed tunnel header templates, turned back into bytes.

ofproto/trace and dpctl/dump-flows print a tnl_push action's header as
`header(size=N,type=T,eth(...),ipv4(...)|ipv6(...),<tunnel>)`.  parse() builds
the bytes that text describes, the way a header template has them: lengths,
the IPv4 checksum, sequence numbers and timestamps zero (they are filled per
packet).  The framework's tests compare the model's headers with these bytes.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass


def split_args(text: str) -> list[str]:
    """Top-level comma-separated items of an argument list."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [item for item in out if item]


def call(item: str) -> tuple[str, str]:
    """'name(args)' -> (name, args)."""
    name, _, rest = item.partition("(")
    assert rest.endswith(")"), item
    return name, rest[:-1]


def fields(args: str) -> dict[str, str]:
    out = {}
    for item in split_args(args):
        key, eq, value = item.partition("=")
        out[key] = value if eq else ""
    return out


def num(text: str) -> int:
    return int(text, 0)


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


@dataclass(frozen=True)
class Header:
    """One parsed header of a tnl_push action: its size, type and bytes."""

    size: int
    type: int
    data: bytes


def parse(text: str, inner_type: int = 0x0800) -> Header:
    """`header(...)` -> the template bytes (`inner_type`: an SRH's next header)."""
    name, args = call(text)
    assert name == "header", text
    items = split_args(args)
    top = {k: v for k, v in (i.split("=", 1) for i in items[:2])}
    out = b""
    for item in items[2:]:
        kind, body = call(item)
        f = fields(body)
        if kind == "eth":
            out += mac(f["dst"]) + mac(f["src"]) + struct.pack("!H", num(f["dl_type"]))
        elif kind == "ipv4":
            out += struct.pack("!BBHHHBBH4s4s", 0x45, num(f["tos"]), 0, 0, num(f["frag"]),
                               num(f["ttl"]), num(f["proto"]), 0,
                               ipaddress.IPv4Address(f["src"]).packed,
                               ipaddress.IPv4Address(f["dst"]).packed)
        elif kind == "ipv6":
            out += struct.pack("!IHBB16s16s", (6 << 28) | (num(f["tclass"]) << 20)
                               | num(f["label"]), 0, num(f["proto"]), num(f["hlimit"]),
                               ipaddress.IPv6Address(f["src"]).packed,
                               ipaddress.IPv6Address(f["dst"]).packed)
        elif kind == "udp":
            out += struct.pack("!HHHH", num(f["src"]), num(f["dst"]), 0, num(f["csum"]))
        elif kind == "vxlan":
            out += struct.pack("!II", num(f["flags"]), num(f["vni"]) << 8)
        elif kind == "geneve":
            out += geneve(body)
        elif kind == "gtpu":
            out += struct.pack("!BBHI", num(f["flags"]), num(f["msgtype"]), 0, num(f["teid"]))
        elif kind == "gre":
            out += gre(body)
        elif kind == "erspan":
            out += erspan(f)
        elif kind == "srv6":
            out += srv6(body, inner_type)
        else:
            raise ValueError(f"unknown header part {kind!r}")
    return Header(num(top["size"]), num(top["type"]), out)


def geneve(body: str) -> bytes:
    items = split_args(body)
    flags = {"crit": 0x40, "oam": 0x80}
    second = sum(flags[i] for i in items if i in flags)
    vni = next(num(i.split("=")[1]) for i in items if i.startswith("vni="))
    opts = b""
    for item in items:
        if item.startswith("options("):
            for tlv in split_args(call(item)[1]):
                parts = split_args(tlv.strip("{}"))
                f = {k: v for k, v in (p.split("=") for p in parts[:3])}
                length = num(f["len"])
                opts += struct.pack("!HBB", num(f["class"]), num(f["type"]), length // 4)
                opts += num(parts[3]).to_bytes(length, "big")
    return struct.pack("!BBHI", len(opts) // 4, second, 0x6558, vni << 8) + opts


def gre(body: str) -> bytes:
    items = split_args(body)
    base = fields(items[0][1:-1])
    flags = num(base["flags"])
    out = struct.pack("!HH", flags, num(base["proto"]))
    rest = fields(",".join(items[1:]))
    if flags & 0x8000:
        out += struct.pack("!HH", num(rest.get("csum", "0")), 0)
    if flags & 0x2000:
        out += struct.pack("!I", num(rest["key"]))
    if flags & 0x1000:
        out += struct.pack("!I", num(rest["seq"]))
    return out


def erspan(f: dict[str, str]) -> bytes:
    """GRE (S only, sequence number 0 in the template) and the ERSPAN header."""
    ver, sid = num(f["ver"]), num(f["sid"])
    base = struct.pack("!HH", ver << 12, sid)
    if ver == 1:
        return struct.pack("!HHI", 0x1000, 0x88BE, 0) + base + struct.pack("!I", num(f["idx"]))
    last = ((num(f["hwid"]) & 0x3F) << 4) | (num(f["dir"]) << 3)
    return struct.pack("!HHI", 0x1000, 0x22EB, 0) + base + struct.pack("!IHH", 0, 0, last)


def srv6(body: str, inner_type: int) -> bytes:
    f = split_args(body)
    left = num(f[0].split("=")[1])
    segs = [ipaddress.IPv6Address(s).packed for s in split_args(call(f[1])[1])]
    nxt = {0x0800: 4, 0x86DD: 41}[inner_type]
    return struct.pack("!BBBBBBH", nxt, 2 * len(segs), 4, left, len(segs) - 1, 0, 0) + b"".join(
        segs)
