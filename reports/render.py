"""Render a RunRecord as one self-contained HTML page (jinja2, autoescaped, no external assets).

Passed and skipped cases get one table row; failed, error and xfailed cases get a
details section with the evidence: steps with hex side by side, diff lines, checksum
states, tshark verdicts, commands, log excerpt and artifact links.
"""
from __future__ import annotations

import os
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2

from reports.records import CaseRecord, Command, RunRecord, Step

TEMPLATES = Path(__file__).parent / "templates"
OUTCOME_ORDER = ("failed", "error", "xpassed", "xfailed", "skipped", "passed", "unknown")
FAILED_OUTCOMES = ("failed", "error")
DETAIL_OUTCOMES = ("failed", "error", "xfailed")

MAX_FRAMES_PER_COLUMN = 8
MAX_BYTES_PER_FRAME = 512
MAX_COMMANDS = 200
MAX_STREAM_CHARS = 4000
MAX_LONGREPR_CHARS = 40000
MAX_LOG_LINES = 400
MAX_MESSAGE_CHARS = 160


def render(run: RunRecord, out_dir: str) -> str:
    """Write `<out_dir>/index.html` for the run and return its path."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    html = env.get_template("index.html.j2").render(**build_context(run))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return path


def build_context(run: RunRecord) -> dict[str, Any]:
    """Everything the template shows, as plain data with all limits applied."""
    rank = {outcome: i for i, outcome in enumerate(OUTCOME_ORDER)}
    indexed = sorted(enumerate(run.cases), key=lambda p: (rank.get(p[1].outcome, len(rank)), p[0]))
    cases = [_case_view(number, case) for number, (_, case) in enumerate(indexed, 1)]
    counts = Counter(case.outcome for case in run.cases)
    ordered_counts = [(o, counts[o]) for o in OUTCOME_ORDER if counts[o]]
    ordered_counts += sorted((o, n) for o, n in counts.items() if o not in OUTCOME_ORDER)
    return {
        "run": {
            "started": run.started,
            "duration": format_seconds(run.duration),
            "host": run.host,
            "backend": run.backend,
            "versions": list(run.versions.items()),
            "argv": shlex.join(str(a) for a in run.argv),
            "runs": [_run_summary(r) for r in run.runs],
        },
        "title": ", ".join(f"{n} {o}" for o, n in ordered_counts) or "no cases",
        "total": len(run.cases),
        "counts": ordered_counts,
        "cases": cases,
        "failures": [c for c in cases if c["outcome"] in FAILED_OUTCOMES],
        "expected_failures": [c for c in cases if c["outcome"] == "xfailed"],
        "merged": any(c["run"] for c in cases),
    }


def format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest} s"


def _run_summary(run: dict[str, Any]) -> dict[str, str]:
    versions = run.get("versions") or {}
    return {
        "label": str(run.get("label", "")),
        "host": str(run.get("host", "")),
        "backend": str(run.get("backend", "")),
        "started": str(run.get("started", "")),
        "duration": format_seconds(float(run.get("duration") or 0)),
        "versions": ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),
        "cases": str(run.get("cases", "")),
    }


def _case_view(number: int, case: CaseRecord) -> dict[str, Any]:
    view: dict[str, Any] = {
        "anchor": f"case-{number}",
        "nodeid": case.nodeid,
        "outcome": case.outcome,
        "duration": format_seconds(case.duration),
        "upstream": case.upstream or "",
        "message": _message(case),
        "run": case.run,
        "has_details": case.outcome in DETAIL_OUTCOMES,
    }
    if not view["has_details"]:
        return view
    commands = case.commands[-MAX_COMMANDS:]
    log = case.log_excerpt[-MAX_LOG_LINES:]
    view.update({
        "backend": case.backend,
        "params": sorted(case.params.items()),
        "longrepr": clip(case.longrepr, MAX_LONGREPR_CHARS),
        "steps": [_step_view(step) for step in case.steps],
        "commands": [_command_view(c) for c in commands],
        "commands_omitted": len(case.commands) - len(commands),
        "commands_failed": sum(1 for c in case.commands if c.rc != 0),
        "log": [{"text": line, "level": log_level(line)} for line in log],
        "log_omitted": len(case.log_excerpt) - len(log),
        "artifacts": sorted(case.artifacts.items()),
    })
    return view


def _message(case: CaseRecord) -> str:
    """One line saying why a case did not pass: pytest's `E ` line, else the first line."""
    text = case.longrepr.strip()
    if not text or case.outcome == "passed":
        return ""
    lines = text.splitlines()
    error_lines = [line[1:].strip() for line in lines if line.startswith("E ")]
    line = error_lines[0] if error_lines else lines[0].strip()
    return clip(line, MAX_MESSAGE_CHARS)


def _step_view(step: Step) -> dict[str, Any]:
    expected = [_frame_bytes(h) for h in step.expected]
    captured = [_frame_bytes(h) for h in step.captured]
    columns = [
        _column("sent", step.sent, [None] * len(step.sent)),
        _column("expected", step.expected, captured),
        _column("captured", step.captured, expected),
    ]
    csum = []
    for index, state in enumerate(step.csum_state):
        layers = ", ".join(f"{layer} {verdict}" for layer, verdict in state.items())
        csum.append(f"#{index}: {layers}" if layers else f"#{index}: -")
    return {
        "title": step.title,
        "rx_port": step.rx_port,
        "tx_port": step.tx_port,
        "ok": step.ok,
        "columns": columns,
        "count_mismatch": len(step.expected) != len(step.captured),
        "n_expected": len(step.expected),
        "n_captured": len(step.captured),
        "diff": step.diff,
        "csum": csum,
        "notes": step.notes,
        "dissection": [_dissected_frame(frame) for frame in step.dissection if isinstance(frame, dict)],
        "dissection_error": step.dissection_error,
    }


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


def _command_view(command: Command) -> dict[str, Any]:
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
