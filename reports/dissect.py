"""Decode frames with tshark (through pyshark) and read its per-layer checksum verdicts.

The report uses this for the captured frames of failed steps: Wireshark's opinion on
each checksum is an independent check of both OVS and our model. pyshark runs in a
short-lived child process (this file run as a script), one per dissect() call.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import warnings
from typing import Any

DECODE_TIMEOUT = 60.0  # seconds, plus a little per frame

# Fields worth a glance, per layer; other layers show their first few fields.
SUMMARY_FIELDS = {
    "eth": ("src", "dst", "type"),
    "vlan": ("id", "etype"),
    "arp": ("opcode", "src_proto_ipv4", "dst_proto_ipv4"),
    "ip": ("src", "dst", "proto", "ttl", "len", "id", "frag_offset"),
    "ipv6": ("src", "dst", "nxt", "hlim", "plen"),
    "tcp": ("srcport", "dstport", "flags_str", "seq", "len"),
    "udp": ("srcport", "dstport", "length"),
    "icmp": ("type", "code"),
    "icmpv6": ("type", "code"),
    "vxlan": ("vni",),
    "geneve": ("vni", "proto_type"),
    "gre": ("proto", "flags_checksum"),
    "mpls": ("label", "ttl"),
    "DATA": ("data_len",),
    "data": ("len",),
}
MAX_SUMMARY_VALUE_CHARS = 48


class DissectError(Exception):
    """tshark or pyshark is unavailable, or tshark could not decode the file."""


def write_pcap(frames_hex: list[str], pcap_path: str) -> None:
    """Write the frames (hex strings) to a classic Ethernet pcap file."""
    from evidence import pcap  # not at the top: this file also runs alone as the decoder child
    frames: list[bytes] = []
    for index, frame_hex in enumerate(frames_hex):
        try:
            frames.append(bytes.fromhex(frame_hex))
        except ValueError as exc:
            raise DissectError(f"frame {index} is not hex: {exc}") from None
    os.makedirs(os.path.dirname(os.path.abspath(pcap_path)), exist_ok=True)
    pcap.write_pcap(pcap_path, frames)


def dissect(frames_hex: list[str], pcap_path: str) -> list[dict[str, Any]]:
    """Write the frames to `pcap_path`, decode them with tshark, return one dict per frame.

    Each dict is `{"index", "length", "layers"}`; each layer is
    `{"name", "summary", "checksums": [{"field", "value", "status", "calculated"}]}`
    with status one of good, bad, unverified, not present, illegal.
    """
    write_pcap(frames_hex, pcap_path)
    if not frames_hex:
        return []
    tshark = shutil.which("tshark")
    if tshark is None:
        raise DissectError("tshark not found")
    # pyshark runs in a child process: its asyncio subprocess handling leaves child
    # watchers and half-reaped processes behind, which would disturb the test process.
    from evidence.tshark import CHECKSUM_PREFS, checksum_verdict  # parent side only, as above
    command = [sys.executable, "-P", os.path.abspath(__file__), os.path.abspath(pcap_path), tshark,
               json.dumps(CHECKSUM_PREFS)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True,
                              timeout=DECODE_TIMEOUT + len(frames_hex) * 0.05)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DissectError(f"tshark failed: {exc}") from None
    try:
        answer = json.loads(proc.stdout)
    except json.JSONDecodeError:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        raise DissectError(f"decoder failed: {lines[-1]}") from None
    if not isinstance(answer, dict) or "frames" not in answer:
        raise DissectError(str(answer.get("error") if isinstance(answer, dict) else answer))
    decoded: list[dict[str, Any]] = answer["frames"]
    if len(decoded) != len(frames_hex):
        raise DissectError(f"tshark failed: decoded {len(decoded)} of {len(frames_hex)} frames")
    lengths = [len(bytes.fromhex(h)) for h in frames_hex]  # valid: write_pcap checked them
    for frame in decoded:
        if 0 <= frame["index"] < len(lengths):
            frame["length"] = lengths[frame["index"]]
        for layer in frame["layers"]:
            for checksum in layer["checksums"]:
                checksum["status"] = checksum_verdict(checksum["status"])
    return decoded


def decode_pcap(pcap_path: str, tshark: str, prefs: dict[str, str]) -> list[dict[str, Any]]:
    """Decode a pcap with pyshark in this process (the child side of dissect()), with
    these tshark preferences; each checksum's status is tshark's raw value."""
    try:
        import pyshark  # imported late: only the child needs it
    except ImportError as exc:
        raise DissectError(f"pyshark not available: {exc}") from None
    # An explicit loop keeps pyshark away from the child-watcher API that Python 3.14 removed.
    loop = asyncio.new_event_loop()
    capture = None
    try:
        capture = pyshark.FileCapture(
            pcap_path, override_prefs=dict(prefs), eventloop=loop, tshark_path=tshark
        )
        return [_frame(index, packet) for index, packet in enumerate(capture)]
    except Exception as exc:  # pyshark raises many unrelated types for a tshark failure
        raise DissectError(f"tshark failed: {type(exc).__name__}: {exc}") from None
    finally:
        if capture is not None:
            try:
                capture.close()
            except Exception:  # closing a crashed tshark must not hide the first error
                pass
        loop.close()


def _frame(index: int, packet: Any) -> dict[str, Any]:
    layers = [_layer(layer) for layer in packet.layers]
    return {"index": index, "length": 0, "layers": layers}


def _layer(layer: Any) -> dict[str, Any]:
    name = str(layer.layer_name)
    field_names = [n for n in layer.field_names if n]
    checksums = []
    for field_name in field_names:
        if not field_name.endswith("checksum_status"):
            continue
        base = field_name[: -len("_status")]
        raw_status = str(layer.get_field_value(field_name))
        checksums.append({
            "field": f"{name}.{base.replace('_', '.')}",
            "value": str(layer.get_field_value(base) or ""),
            "status": raw_status,  # dissect() names it (evidence.tshark.checksum_verdict)
            "calculated": str(layer.get_field_value(f"{base}_calculated") or ""),
        })
    return {"name": name, "summary": _summary(name, layer, field_names), "checksums": checksums}


def _summary(name: str, layer: Any, field_names: list[str]) -> str:
    wanted = SUMMARY_FIELDS.get(name)
    if wanted is None:
        wanted = tuple(n for n in field_names if not n.startswith("_ws") and "checksum" not in n)[:4]
    parts = []
    for field_name in wanted:
        value = layer.get_field_value(field_name)
        text = "" if value is None else str(value)
        if len(text) > MAX_SUMMARY_VALUE_CHARS:
            text = text[:MAX_SUMMARY_VALUE_CHARS] + "..."
        if text:
            parts.append(f"{field_name.removesuffix('_str')}={text}")
    return " ".join(parts)


def _main(argv: list[str]) -> int:
    """Child entry point: `dissect.py PCAP TSHARK PREFS_JSON` prints {"frames": [...]}
    or {"error": "..."}."""
    warnings.simplefilter("ignore")  # pyshark's teardown noise is not ours to show
    try:
        print(json.dumps({"frames": decode_pcap(argv[0], argv[1], json.loads(argv[2]))}))
    except DissectError as exc:
        print(json.dumps({"error": str(exc)}))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
