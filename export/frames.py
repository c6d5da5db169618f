"""Frames as upstream's tests write them: hex split by layer, each layer under a
scapy-style comment (`dnl IP(src='1.1.2.88', dst='1.1.2.92', flags='DF')`).

Frames are dissected as they are on the wire (evidence.compare), never rebuilt:
a wrong checksum shows as the value the frame carries.
"""
from __future__ import annotations

from typing import Any

from evidence.compare import dissect_layers

HEX_PER_LINE = 72  # upstream's frame lines are up to about 80 characters
PAYLOAD_LAYERS = frozenset({"Raw", "Padding"})
# Fields always shown, whatever scapy's default (the values a bug report is about).
ALWAYS = frozenset({"chksum", "cksum", "checksum"})
# Fields never shown: lengths scapy computes, and version numbers.
NEVER = frozenset({"len", "ihl", "plen", "version", "dataofs", "hwlen", "hlen"})
HEX_FIELDS = frozenset({"chksum", "cksum", "checksum", "type", "id", "tos", "tc", "fl",
                        "proto_type"})


def _value(name: str, value: Any) -> str:
    """A field value as a scapy constructor argument."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int) and not hasattr(value, "flagrepr"):
        if name in HEX_FIELDS and name != "type" or (name in ("type", "proto") and value > 255):
            return f"0x{value:x}"
        return str(value)
    if hasattr(value, "flagrepr"):  # scapy FlagValue
        text = str(value)
        return repr(text) if text else str(int(value))
    if isinstance(value, (bytes, bytearray)):
        return f"0x{bytes(value).hex()}" if value else "b''"
    if isinstance(value, list):
        return f"<{len(value)} item(s)>"
    return repr(value)


def layer_text(layer: Any) -> str:
    """One layer as a scapy constructor call with the fields that matter."""
    name = type(layer).__name__
    if name in PAYLOAD_LAYERS:
        return f"{name}({len(bytes(layer.fields.get('load', b'')))} bytes)"
    args = []
    for fld in layer.fields_desc:
        if fld.name not in layer.fields or fld.name in NEVER:
            continue
        value = layer.fields[fld.name]
        default = layer.default_fields.get(fld.name)
        if fld.name not in ALWAYS and (value == default or default is None and value in (0, b"")):
            continue
        if isinstance(value, list) and not value:
            continue
        args.append(f"{fld.name}={_value(fld.name, value)}")
    return f"{name}({', '.join(args)})"


def scapy_line(data: bytes) -> str:
    """The whole frame as one scapy-style line, e.g. Ether(...)/IP(...)/ICMP(...)/Raw(64 bytes)."""
    layers = dissect_layers(bytes(data))
    return "/".join(layer_text(layer) for layer in layers) or "(empty frame)"


def layer_chunks(data: bytes) -> list[tuple[str, str]]:
    """(scapy text of the layer, its hex) for each layer, in order.  Falls back to
    one chunk when the dissection does not account for every byte."""
    data = bytes(data)
    layers = dissect_layers(data)
    chunks: list[tuple[str, str]] = []
    pos = 0
    for layer in layers:
        try:
            size = len(bytes(layer)) - len(bytes(layer.payload))
        except Exception:  # a layer scapy cannot build: the rest in one chunk
            break
        if size < 0 or pos + size > len(data):
            break
        chunks.append((layer_text(layer), data[pos:pos + size].hex()))
        pos += size
    if pos != len(data) or not chunks:
        rest = data[pos:].hex()
        if chunks and rest:
            chunks.append((f"{len(data) - pos} more bytes", rest))
        elif not chunks:
            chunks = [(scapy_line(data), data.hex())]
    return [(text, hexa) for text, hexa in chunks if hexa]


def checksums_valid(data: bytes) -> bool:
    """Whether every checksum in the frame is what scapy computes for it."""
    try:
        from scapy.layers.l2 import Ether
        from scapy.packet import Packet
        pkt = Ether(bytes(data))
        layer: Packet = pkt
        while layer:
            for name in ALWAYS:
                if name in layer.fields:
                    delattr(layer, name)  # scapy computes it again when building
            layer = layer.payload
        return bytes(pkt) == bytes(data)
    except Exception:  # a frame scapy cannot rebuild: not known to be valid
        return False


def split_hex(hexa: str, width: int = HEX_PER_LINE) -> list[str]:
    """`hexa` in lines of `width` hex digits (one empty line for no bytes)."""
    return [hexa[i:i + width] for i in range(0, len(hexa), width)] or [""]


def m4_comment(text: str) -> str:
    """A dnl line; brackets become parentheses (they are m4's quotes)."""
    return "dnl " + text.replace("[", "(").replace("]", ")").replace("\n", " ")


def at_data(name: str, data: bytes) -> list[str]:
    """AT_DATA([name], m4_join([], ...)): the frame in a file, layer by layer,
    as upstream's tunnel tests write their frames."""
    out = [f"AT_DATA([{name}], m4_join([],"]
    parts: list[str] = []
    for text, hexa in layer_chunks(data):
        parts.append(m4_comment(text))
        parts += [f"[{line}]," for line in split_hex(hexa)]
    last = max(i for i, line in enumerate(parts) if not line.startswith("dnl "))
    parts[last] = parts[last].rstrip(",")
    return out + parts + ["))"]
