"""Per-layer field tables of frames, for the side-by-side view of a case page.

A frame is dissected with scapy exactly as it is on the wire (nothing rebuilt),
and each layer gets a name: its scapy class, prefixed with outer./inner./inner2.
once a class repeats (encapsulation), as the comparison in harness/ names them.
The sent, expected and captured frames of one index are then aligned by
(layer, field), and the fields where expected and captured differ are marked.
"""
from __future__ import annotations

from typing import Any

from evidence.compare import dissect_layers, layer_names

PAYLOAD_LAYERS = frozenset({"Raw", "Padding"})
MAX_VALUE_CHARS = 60
PAYLOAD_PREVIEW_BYTES = 16

Field = tuple[str, str]  # (field name, value as text)
Layer = tuple[str, list[Field]]  # (layer name, fields)


def frame_layers(data: bytes) -> list[Layer]:
    """The named layers of a frame with their field values, named as the
    comparison's diff lines name them."""
    layers = dissect_layers(data)
    return [(name, _fields(layer)) for name, layer in zip(layer_names(layers), layers)]


def _fields(layer: Any) -> list[Field]:
    if type(layer).__name__ in PAYLOAD_LAYERS:
        load = bytes(layer.fields.get("load", b""))
        more = "..." if len(load) > PAYLOAD_PREVIEW_BYTES else ""
        return [("load", f"{len(load)} bytes {load[:PAYLOAD_PREVIEW_BYTES].hex()}{more}")]
    out: list[Field] = []
    for fld in layer.fields_desc:
        value = layer.fields.get(fld.name)
        if value is None:
            continue
        try:
            text = str(fld.i2repr(layer, value))
        except Exception:  # a field scapy cannot print is shown raw
            text = repr(value)
        if len(text) > MAX_VALUE_CHARS:
            text = text[:MAX_VALUE_CHARS - 3] + "..."
        out.append((fld.name, text))
    return out


def field_table(sent: bytes | None, expected: bytes | None,
                captured: bytes | None) -> list[dict[str, Any]]:
    """Rows grouped by layer: [{"layer", "differs", "rows": [{"field", "sent", "expected",
    "captured", "differs", "changed"}]}].

    `differs`: expected and captured disagree (the defect).  `changed`: the
    expected value is not the sent one (what the datapath had to do).
    """
    decoded = [frame_layers(f) if f is not None else [] for f in (sent, expected, captured)]
    maps: list[dict[tuple[str, str], str]] = []
    order: list[tuple[str, str]] = []
    for layers in (decoded[1], decoded[2], decoded[0]):  # expected's order first
        values: dict[tuple[str, str], str] = {}
        for name, fields in layers or []:
            for fname, text in fields:
                key = (name, fname)
                values[key] = text
                if key not in order:
                    order.append(key)
        maps.append(values)
    exp, cap, snt = maps
    groups: list[dict[str, Any]] = []
    for key in order:
        if not groups or groups[-1]["layer"] != key[0]:
            groups.append({"layer": key[0], "differs": False, "rows": []})
        row: dict[str, Any] = {
            "field": key[1],
            "sent": snt.get(key, "") if sent is not None else "",
            "expected": exp.get(key, "-") if expected is not None else "",
            "captured": cap.get(key, "-") if captured is not None else "",
        }
        row["differs"] = expected is not None and captured is not None and \
            exp.get(key) != cap.get(key)
        row["changed"] = sent is not None and expected is not None and snt.get(key) != exp.get(key)
        groups[-1]["differs"] = groups[-1]["differs"] or row["differs"]
        groups[-1]["rows"].append(row)
    return groups
