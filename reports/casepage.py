"""The view of one case page: everything a reviewer needs to understand the outcome.

Parameters, the failure text, each step's frames (sent, expected, captured) as
per-layer field tables and hex side by side, tshark's decode with checksum
verdicts, the command transcript, the ovs-vswitchd log lines, and links to the
pcaps, the daemon logs and the reproducer.  Case pages live in `case/`, so every
link to another file of the output directory starts with `../`.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.records import Command, Step
from reports.bugpages import bug_page, status_view
from reports.index import Entry, format_seconds, message
from reports.layers import field_table

MAX_FRAMES_PER_COLUMN = 8
MAX_BYTES_PER_FRAME = 512
MAX_COMMANDS = 300
MAX_STREAM_CHARS = 4000
MAX_LONGREPR_CHARS = 40000
MAX_LOG_LINES = 400
MAX_RUNDIR_FILES = 40
MAX_PROBLEM_LINES = 20
MAX_DIFF_LINES = 80
MAX_NOTES = 40
MAX_CSUM_STATES = 16
MAX_DISSECTED_SHOWN = 16
FRAME_KINDS = ("sent", "expected", "captured")


def href(path: str) -> str:
    """A link from a case page to `path` (relative to the output directory)."""
    if "://" in path:
        return path
    if os.path.isabs(path):
        return "file://" + quote(path)
    return "../" + quote(path)


def case_view(entry: Entry, out_dir: str, known_bugs: frozenset[str] = frozenset()) -> dict[str, Any]:
    """What a case's page shows: its steps, commands, log and artifacts, and the known
    bugs it ran into (linked to their pages where the run has them)."""
    case = entry.case
    commands = case.commands[-MAX_COMMANDS:]
    log = case.log_excerpt[-MAX_LOG_LINES:]
    artifacts = dict(case.artifacts)
    rundir = artifacts.pop("run directory", "")
    steps = [step_view(n, step, artifacts) for n, step in enumerate(case.steps, 1)]
    used = {p["path"] for s in steps for p in s["pcaps"]}
    return {
        "nodeid": case.nodeid,
        "outcome": case.outcome,
        "message": message(case),
        "duration": format_seconds(case.duration),
        "upstream": case.upstream or "",
        "upstream_file": (case.upstream_file or "dpif-netdev.at") if case.upstream else "",
        "backend": case.backend,
        "run": case.run,
        "params": sorted(case.params.items()),
        "metrics": sorted((k, f"{v:g}" if isinstance(v, (int, float)) else str(v))
                          for k, v in getattr(case, "metrics", {}).items()),
        "longrepr": clip(case.longrepr, MAX_LONGREPR_CHARS),
        "compacted": case.compacted,
        "crash": case.crash,
        "steps": steps,
        "failed_steps": sum(1 for s in case.steps if not s.ok),
        "bugs": [{"key": key, "page": "../" + bug_page(key) if key in known_bugs else "",
                  **status_view(status)} for key, status in sorted(_sighted(case.steps).items())],
        "commands": [command_view(c) for c in commands],
        "commands_omitted": len(case.commands) - len(commands),
        "commands_failed": sum(1 for c in case.commands if c.rc != 0),
        "log": [{"text": line, "level": log_level(line)} for line in log],
        "log_omitted": len(case.log_excerpt) - len(log),
        "log_problems": [line for line in case.log_excerpt
                         if log_level(line) in ("warn", "err", "emer")][:MAX_PROBLEM_LINES],
        "repro": href(entry.repro) if entry.repro else "",
        "repro_name": os.path.basename(entry.repro),
        "rundir": href(rundir) if rundir else "",
        "daemon_files": rundir_files(out_dir, rundir) if rundir else [],
        "artifacts": [{"label": k, "href": href(v)} for k, v in sorted(artifacts.items()) if v not in used],
    }


def _sighted(steps: list[Step]) -> dict[str, str]:
    found: dict[str, set[str]] = {}
    for step in steps:
        for key, status in step.bugs.items():
            found.setdefault(key, set()).add(status)
    return {key: "mixed" if len(seen) > 1 else next(iter(seen)) for key, seen in found.items()}


def rundir_files(out_dir: str, rundir: str) -> list[dict[str, str]]:
    """Links to the logs (first), pcaps and other files of a kept run directory."""
    base = Path(rundir) if os.path.isabs(rundir) else Path(out_dir) / rundir
    try:
        names = sorted(p.name for p in base.iterdir() if p.is_file())
    except OSError:
        return []
    rank = {".log": 0, ".pcap": 1, ".stderr": 2}
    names.sort(key=lambda n: (rank.get(os.path.splitext(n)[1], 3), n))
    return [{"name": n, "href": href(f"{rundir}/{n}")} for n in names[:MAX_RUNDIR_FILES]]


def step_view(number: int, step: Step, artifacts: dict[str, str]) -> dict[str, Any]:
    """What one step shows: its frames side by side, the verdict, the captures."""
    decoded = {kind: [_frame_bytes(h) for h in getattr(step, kind)] for kind in FRAME_KINDS}
    expected, captured = decoded["expected"], decoded["captured"]
    columns = [
        _column("sent", step.sent, [None] * len(step.sent)),
        _column("expected", step.expected, captured),
        _column("captured", step.captured, expected),
    ]
    pcaps = []
    for kind in FRAME_KINDS:
        path = artifacts.get(f"step {number} {kind}.pcap")
        if path:
            pcaps.append({"kind": kind, "path": path, "href": href(path)})
    csum = []
    for index, state in enumerate(step.csum_state[:MAX_CSUM_STATES]):
        layers = ", ".join(f"{layer} {verdict}" for layer, verdict in state.items())
        csum.append(f"#{index}: {layers}" if layers else f"#{index}: -")
    if len(step.csum_state) > MAX_CSUM_STATES:
        csum.append(f"... {len(step.csum_state) - MAX_CSUM_STATES} more frames")
    dissected = [_dissected_frame(f) for f in step.dissection[:MAX_DISSECTED_SHOWN] if isinstance(f, dict)]
    return {
        "number": number,
        "title": step.title,
        "rx_port": step.rx_port,
        "tx_port": step.tx_port,
        "ok": step.ok,
        "columns": columns,
        "fields": _field_tables(decoded["sent"], expected, captured, step.ok),
        "count_mismatch": len(step.expected) != len(step.captured),
        "n_expected": len(step.expected),
        "n_captured": len(step.captured),
        "diff": _capped(step.diff, MAX_DIFF_LINES, "lines"),
        "csum": csum,
        "notes": _capped(step.notes, MAX_NOTES, "notes"),
        "pcaps": pcaps,
        "dissection": dissected,
        "dissection_omitted": max(0, len(step.dissection) - MAX_DISSECTED_SHOWN),
        "dissection_error": step.dissection_error,
    }


def _capped(lines: list[str], limit: int, what: str) -> list[str]:
    """The first `limit` lines, and one saying how many more there are."""
    if len(lines) <= limit:
        return list(lines)
    return [*lines[:limit], f"... {len(lines) - limit} more {what} (see pytest's report and the pcaps)"]


def _field_tables(sent: list[bytes | None], expected: list[bytes | None],
                  captured: list[bytes | None], ok: bool) -> list[dict[str, Any]]:
    """Per frame index, the layer/field table of sent, expected and captured."""
    tables = []
    count = min(max(len(expected), len(captured)), MAX_FRAMES_PER_COLUMN)
    for index in range(count):
        if len(sent) == len(expected):
            source = sent[index] if index < len(sent) else None
        else:  # one input became several frames (segmentation, flooding): show it for each
            source = sent[0] if len(sent) == 1 else None
        exp = expected[index] if index < len(expected) else None
        cap = captured[index] if index < len(captured) else None
        groups = field_table(source, exp, cap)
        differs = sum(1 for g in groups for r in g["rows"] if r["differs"])
        tables.append({"index": index, "groups": groups, "differs": differs,
                       "missing": "expected" if exp is None else "captured" if cap is None else "",
                       "open": not ok})
    return tables


def _dissected_frame(frame: dict[str, Any]) -> dict[str, Any]:
    """dissect()'s output, with every key the template reads present."""
    layers = []
    for layer in frame.get("layers") or []:
        if not isinstance(layer, dict):
            continue
        checksums = [
            {key: str(c.get(key, "")) for key in ("field", "value", "status", "calculated")}
            for c in layer.get("checksums") or [] if isinstance(c, dict)
        ]
        layers.append({"name": str(layer.get("name", "?")), "summary": str(layer.get("summary", "")),
                       "checksums": checksums})
    return {"index": frame.get("index", "?"), "layers": layers}


def _column(name: str, frames_hex: list[str], others: list[bytes | None]) -> dict[str, Any]:
    shown = frames_hex[:MAX_FRAMES_PER_COLUMN]
    frames = []
    for index, frame_hex in enumerate(shown):
        other = others[index] if index < len(others) else b""  # missing peer: all bytes differ
        frames.append(frame_view(index, frame_hex, other))
    return {"name": name, "frames": frames, "omitted": len(frames_hex) - len(shown)}


def _frame_bytes(frame_hex: str) -> bytes | None:
    try:
        return bytes.fromhex(frame_hex)
    except (ValueError, TypeError):
        return None


def frame_view(index: int, frame_hex: str, other: bytes | None) -> dict[str, Any]:
    """Hex dump lines of one frame; bytes differing from `other` are marked (None: no peer)."""
    data = _frame_bytes(frame_hex)
    if data is None:
        return {"index": index, "length": 0, "lines": [], "omitted": 0,
                "error": f"not hex: {clip(str(frame_hex), 80)}"}
    shown = data[:MAX_BYTES_PER_FRAME]
    lines = []
    for offset in range(0, len(shown), 16):
        segments: list[list[Any]] = []
        for i, byte in enumerate(shown[offset:offset + 16]):
            pos = offset + i
            differs = other is not None and (pos >= len(other) or other[pos] != byte)
            if i:
                separator = "  " if i == 8 else " "
                _push(segments, separator, differs and bool(segments) and segments[-1][1])
            _push(segments, f"{byte:02x}", differs)
        lines.append({"offset": f"{offset:04x}", "segments": segments})
    return {"index": index, "length": len(data), "lines": lines,
            "omitted": len(data) - len(shown), "error": ""}


def _push(segments: list[list[Any]], text: str, marked: bool) -> None:
    if segments and segments[-1][1] == marked:
        segments[-1][0] += text
    else:
        segments.append([text, marked])


def command_view(command: Command) -> dict[str, Any]:
    """One command as the page shows it, its output clipped."""
    return {
        "cmd": shlex.join(str(a) for a in command.argv),
        "rc": command.rc,
        "seconds": f"{command.seconds:.3f}",
        "stdout": clip(command.stdout or "", MAX_STREAM_CHARS),
        "stderr": clip(command.stderr or "", MAX_STREAM_CHARS),
    }


def clip(text: str, limit: int) -> str:
    """Keep the head and the tail of a long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} chars omitted] ...\n{text[-tail:]}"


def log_level(line: str) -> str:
    """The level of an OVS log line (`time|seq|module|LEVEL|text`), lower-case, or ''."""
    for level in ("EMER", "ERR", "WARN", "INFO", "DBG"):
        if f"|{level}|" in line:
            return level.lower()
    return ""

