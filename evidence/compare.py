"""Field-by-field comparison of Ethernet frames, for readable mismatch reports.

Frames are dissected with scapy exactly as they are on the wire: nothing is
rebuilt, so a wrong checksum or length shows up as the value that was sent.
Each differing field becomes one line named by its layer path, for example
``outer.UDP.chksum: expected 0x454d, got 0x0000``.

Layer paths: in a frame without encapsulation every layer is named by its
scapy class (``IP.chksum``).  When a layer class occurs again (the inner
Ether of VXLAN, the inner IP of GRE or IP-in-IP), that layer and everything
after it is one level deeper, and every layer of the frame gets a prefix:
``outer.``, ``inner.``, ``inner2.``...  So in Ether/IP/UDP/VXLAN/Ether/IPv6/UDP
the IPv6 header is ``inner.IPv6`` even though IPv6 occurs only once.  Raw and
Padding are never prefixed (scapy puts them at the end of the chain whatever
header they belong to).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

import scapy.contrib.erspan  # noqa: F401  (binds GRE 0x88be/0x22eb -> ERSPAN II/III)
import scapy.contrib.geneve  # noqa: F401  (binds UDP dport 6081 -> GENEVE)
import scapy.layers.inet  # noqa: F401  (IP, TCP, UDP, ICMP)
import scapy.layers.inet6  # noqa: F401  (IPv6)
import scapy.layers.vxlan  # noqa: F401  (binds UDP port 4789 -> VXLAN)
from scapy.fields import (
    ConditionalField,
    Emph,
    FlagValue,
    MultipleTypeField,
)
from scapy.layers.l2 import Ether
from scapy.packet import NoPayload, Packet, Raw

__all__ = [
    "FrameMismatch",
    "assert_frames_equal",
    "compare_frames",
    "diff_frames",
    "frame_summary",
]

# Integer fields printed in hex although scapy declares them as plain ints.
_HEX_NAMES = frozenset({"id", "chksum", "cksum", "checksum", "flags", "tos", "tc", "fl"})
# Hex-declared fields that people configure and read in decimal (tunnel keys).
_DECIMAL_NAMES = frozenset({"vni", "key"})
# Payload-like layers whose bytes are summarised rather than printed.
_PAYLOAD_LAYERS = frozenset({"Raw", "Padding"})
_SHORT_BYTES = 16
_MAX_REPR = 120


def dissect_layers(data: bytes) -> list[Packet]:
    """Return the layers of ``data`` as dissected by ``Ether()``, never rebuilt."""
    if not data:
        return []
    try:
        pkt: Packet = Ether(data)
    except Exception:  # scapy cannot even parse the Ethernet header
        pkt = Raw(load=data)
    layers: list[Packet] = []
    layer: Packet = pkt
    while not isinstance(layer, NoPayload):
        layers.append(layer)
        layer = layer.payload
    return layers


def _nesting_levels(layers: list[Packet]) -> list[int]:
    """Encapsulation depth of each layer: a repeated class starts a new level.

    Ether/IP/UDP/VXLAN/Ether/IPv6/UDP gives 0,0,0,0,1,1,1: the inner Ether
    repeats a class of level 0, so it and everything after it is level 1.
    """
    levels = []
    level = 0
    seen: set[type] = set()
    for layer in layers:
        cls = type(layer)
        if cls in seen and cls.__name__ not in _PAYLOAD_LAYERS:
            level += 1
            seen = set()
        seen.add(cls)
        levels.append(level)
    return levels


def _layer_names(layers: list[Packet], tunnelled: bool) -> list[str]:
    """Name each layer; in tunnelled frames prefix outer/inner/inner2..."""
    names = []
    for layer, level in zip(layers, _nesting_levels(layers)):
        cls = type(layer).__name__
        if not tunnelled or cls in _PAYLOAD_LAYERS:
            names.append(cls)
        else:
            prefix = ("outer", "inner")[level] if level < 2 else f"inner{level}"
            names.append(f"{prefix}.{cls}")
    return names


def layer_names(layers: list[Packet]) -> list[str]:
    """Layer names as the diff lines use them (outer./inner. only in tunnels)."""
    return _layer_names(layers, any(_nesting_levels(layers)))


def _stack_text(layers: list[Packet]) -> str:
    return "/".join(type(layer).__name__ for layer in layers) or "(empty)"


def _concrete_field(fld: Any, layer: Packet) -> Any:
    """Unwrap scapy field wrappers (Emph, ConditionalField, MultipleTypeField)."""
    while True:
        if isinstance(fld, MultipleTypeField):
            try:
                fld = fld._find_fld_pkt(layer)
            except Exception:  # private scapy API; fall back to the default variant
                fld = fld.dflt
        elif isinstance(fld, (Emph, ConditionalField)):
            fld = fld.fld
        else:
            return fld


def _field_bits(fld: Any) -> int:
    """Width of a fixed-size field in bits (0 when unknown)."""
    size = getattr(fld, "sz", 0) or 0
    return round(float(size) * 8)


def _format_int(name: str, value: int, fld: Any) -> str:
    """Format an integer field: hex for checksums/flags/ids, else decimal."""
    is_hex = type(fld).__name__.startswith("X") or name in _HEX_NAMES
    if name in _DECIMAL_NAMES or not is_hex:
        return str(value)
    bits = _field_bits(fld)
    digits = max(1, math.ceil(bits / 4)) if bits else 1
    return f"0x{value:0{digits}x}"


def _format_value(name: str, value: Any, fld: Any, layer: Packet) -> str:
    """Render one field value for a diff line."""
    if value is None:
        return "absent"
    if isinstance(value, FlagValue):
        text = _format_int(name, int(value), fld)
        names = str(value)
        return f"{text} ({names})" if names else text
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return _format_int(name, value, fld)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return f"0x{bytes(value).hex()}" if value else "(empty)"
    try:
        text = str(fld.i2repr(layer, value))
    except Exception:
        text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _diff_bytes(path: str, expected: bytes, got: bytes) -> str:
    """Summarise a byte-string difference in one line."""
    common = min(len(expected), len(got))
    differing = [i for i in range(common) if expected[i] != got[i]]
    where = ""
    if differing:
        first = differing[0]
        where = (
            f"first at offset {first} "
            f"(expected 0x{expected[first]:02x}, got 0x{got[first]:02x})"
        )
    if len(expected) == len(got):
        return f"{path}: {len(differing)} bytes differ, {where}"
    head = f"{path}: expected {len(expected)} bytes, got {len(got)} bytes"
    if not differing:
        return f"{head} (common prefix identical)"
    return f"{head}; {len(differing)} bytes of the common part differ, {where}"


def _diff_layer(name: str, expected: Packet, got: Packet) -> list[str]:
    """Lines for the fields of one layer (not its payload) that differ."""
    lines = []
    for fld in expected.fields_desc:
        fname = fld.name
        exp_val = expected.fields.get(fname)
        got_val = got.fields.get(fname)
        if exp_val == got_val and type(exp_val) is type(got_val):
            continue
        path = f"{name}.{fname}"
        if type(expected).__name__ in _PAYLOAD_LAYERS or (
            isinstance(exp_val, (bytes, bytearray))
            and isinstance(got_val, (bytes, bytearray))
            and max(len(exp_val), len(got_val)) > _SHORT_BYTES
        ):
            lines.append(_diff_bytes(path, bytes(exp_val or b""), bytes(got_val or b"")))
            continue
        exp_text = _format_value(fname, exp_val, _concrete_field(fld, expected), expected)
        got_text = _format_value(fname, got_val, _concrete_field(fld, got), got)
        if exp_text == got_text:  # e.g. equal values of different Python types
            continue
        lines.append(f"{path}: expected {exp_text}, got {got_text}")
    return lines


def _first_byte_difference(expected: bytes, got: bytes) -> str:
    """Fallback line naming the first differing byte offset."""
    common = min(len(expected), len(got))
    for i in range(common):
        if expected[i] != got[i]:
            return (
                f"bytes: first difference at offset {i} "
                f"(expected 0x{expected[i]:02x}, got 0x{got[i]:02x})"
            )
    return f"bytes: first difference at offset {common} (one frame ends there)"


def diff_frames(expected: bytes, got: bytes) -> list[str]:
    """Describe how ``got`` differs from ``expected``, one line per field.

    Returns [] when the bytes are identical; otherwise a non-empty list: a
    ``layers:`` line if the layer stacks differ, a ``length:`` line if the
    frame lengths differ, then the differing fields in wire order.
    """
    expected, got = bytes(expected), bytes(got)
    if expected == got:
        return []
    exp_layers, got_layers = dissect_layers(expected), dissect_layers(got)
    lines: list[str] = []
    if [type(x) for x in exp_layers] != [type(x) for x in got_layers]:
        lines.append(f"layers: expected {_stack_text(exp_layers)}, got {_stack_text(got_layers)}")
    if len(expected) != len(got):
        lines.append(f"length: expected {len(expected)} bytes, got {len(got)} bytes")
    tunnelled = any(max(_nesting_levels(x), default=0) for x in (exp_layers, got_layers))
    names = _layer_names(exp_layers, tunnelled)
    for name, exp_layer, got_layer in zip(names, exp_layers, got_layers):
        if type(exp_layer) is not type(got_layer):
            break
        lines.extend(_diff_layer(name, exp_layer, got_layer))
    if not lines:
        lines.append(_first_byte_difference(expected, got))
    return lines


def frame_summary(data: bytes) -> str:
    """A one-line scapy summary of a frame plus its length."""
    layers = dissect_layers(bytes(data))
    try:
        text = layers[0].summary() if layers else "(empty)"
    except Exception:
        text = _stack_text(layers)
    return f"{text} ({len(data)} bytes)"


def _order_permutation(expected: Sequence[bytes], got: Sequence[bytes]) -> list[int] | None:
    """If ``got`` is a reordering of ``expected``, map got index -> expected index."""
    if len(expected) != len(got) or Counter(expected) != Counter(got):
        return None
    unused: dict[bytes, list[int]] = {}
    for index, frame in enumerate(expected):
        unused.setdefault(frame, []).append(index)
    return [unused[frame].pop(0) for frame in got]


def _drops_and_extras(
    expected: Sequence[bytes], got: Sequence[bytes]
) -> tuple[list[int], list[int]] | None:
    """If the sequences differ only by dropped and added frames, name them.

    Returns (expected indexes missing from got, got indexes not expected),
    or None when some frame was changed rather than dropped or added.
    """
    matcher = SequenceMatcher(a=list(expected), b=list(got), autojunk=False)
    missing: list[int] = []
    extra: list[int] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "replace":
            return None
        if tag == "delete":
            missing.extend(range(a0, a1))
        elif tag == "insert":
            extra.extend(range(b0, b1))
    return missing, extra


def compare_frames(expected: Sequence[bytes], got: Sequence[bytes]) -> list[str]:
    """Compare two frame sequences exactly (count and order); [] means equal.

    When the counts differ and the other frames match in order, only the
    missing (expected index) and extra (got index) frames are listed;
    otherwise frames are diffed index by index.
    """
    expected = [bytes(f) for f in expected]
    got = [bytes(f) for f in got]
    if expected == got:
        return []
    permutation = _order_permutation(expected, got)
    if permutation is not None:
        return [
            "same frames, different order: "
            f"got[i] = expected[p[i]] with p = {permutation}"
        ]
    lines: list[str] = []
    if len(expected) != len(got):
        lines.append(f"frame count: expected {len(expected)}, got {len(got)}")
        aligned = _drops_and_extras(expected, got)
        if aligned is not None:
            missing, extra = aligned
            lines.extend(
                f"frame {i}: missing, expected {frame_summary(expected[i])}" for i in missing
            )
            lines.extend(
                f"frame {i}: unexpected extra frame {frame_summary(got[i])}" for i in extra
            )
            return lines
    for index in range(max(len(expected), len(got))):
        if index >= len(got):
            lines.append(f"frame {index}: missing, expected {frame_summary(expected[index])}")
        elif index >= len(expected):
            lines.append(f"frame {index}: unexpected extra frame {frame_summary(got[index])}")
        elif expected[index] != got[index]:
            lines.append(f"frame {index}:")
            lines.extend(f"  {line}" for line in diff_frames(expected[index], got[index]))
    return lines


class FrameMismatch(AssertionError):
    """Expected and captured frames differ; str() lists fields first, then hex."""

    def __init__(
        self,
        expected: Sequence[bytes],
        got: Sequence[bytes],
        lines: list[str] | None = None,
        context: str = "",
    ) -> None:
        self.expected = [bytes(f) for f in expected]
        self.got = [bytes(f) for f in got]
        self.lines = compare_frames(self.expected, self.got) if lines is None else list(lines)
        self.context = context
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.context] if self.context else []
        parts.extend(self.lines or ["frames differ"])
        for label, frames in (("expected", self.expected), ("got", self.got)):
            parts.append(f"{label} ({len(frames)} frames):")
            parts.extend(f"  [{i}] {frame.hex()}" for i, frame in enumerate(frames))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.expected, self.got, self.lines, self.context))


def assert_frames_equal(
    expected: Sequence[bytes], got: Sequence[bytes], context: str = ""
) -> None:
    """Raise :class:`FrameMismatch` unless ``got`` equals ``expected`` exactly."""
    lines = compare_frames(expected, got)
    if lines:
        raise FrameMismatch(expected, got, lines, context)
