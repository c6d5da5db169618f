"""Crash evidence: the backtrace a dying OVS daemon printed, with function names
and source lines where the binary carries debug information (an own build).

OVS's fatal-signal and assertion handlers print one frame a line, e.g.
`/usr/sbin/ovs-vswitchd(+0x20ef96) [0x55e81da9af96]`; gdb, run on the binary
named in each frame, turns the offset into `dp_packet_ol_send_prepare at
lib/dp-packet.c:608`.  A stripped binary keeps its raw frames.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

FRAME = re.compile(r"^(?P<obj>/\S+?)\((?P<sym>[^)]*)\)\s+\[(?P<addr>0x[0-9a-f]+)\]\s*$")
CAUSE = re.compile(r"(assertion .* failed|fatal signal|Segmentation fault|terminated by signal|"
                   r"\|EMER\|.*)", re.I)
MAX_FRAMES = 40


def backtrace(text: str) -> tuple[str, list[str]]:
    """(the line that says why, the frames of the last backtrace) in a log or stderr."""
    lines = text.splitlines()
    frames: list[str] = []
    block: list[str] = []
    for line in lines:
        if FRAME.match(line.strip()):
            block.append(line.strip())
        elif block:
            frames, block = block, []
    frames = block or frames
    cause = next((ln.strip() for ln in reversed(lines) if CAUSE.search(ln)), "")
    return cause, frames[:MAX_FRAMES]


def symbolize(frames: list[str], timeout: float = 20.0) -> list[str]:
    """Each frame with `function at file:line` appended where gdb can tell."""
    gdb = shutil.which("gdb")
    by_obj: dict[str, list[int]] = {}
    parsed = []
    for frame in frames:
        m = FRAME.match(frame)
        assert m is not None
        sym = m.group("sym")
        offset = int(sym[1:], 16) if sym.startswith("+0x") else None
        parsed.append((frame, m.group("obj"), offset))
        if offset is not None:
            by_obj.setdefault(m.group("obj"), []).append(offset)
    where: dict[tuple[str, int], str] = {}
    for obj, offsets in by_obj.items():
        if gdb is None or not Path(obj).is_file():
            continue
        known = _lines_of(obj)
        asked = sorted(set(offsets) - set(known))
        if asked:
            known.update(_gdb_lines(gdb, obj, asked, timeout))
        where.update({(obj, off): known[off] for off in offsets if known.get(off)})
    return [f"{frame}  {where[(obj, off)]}" if off is not None and (obj, off) in where
            else frame for frame, obj, off in parsed]


# What gdb said of each offset, per binary (its path, size and mtime): a known
# bug's crash repeats over hundreds of ids with the same frames, and a gdb run
# costs about a second of CPU.  "" for an offset gdb has no line for.
_LINES: dict[tuple[str, int, int], dict[int, str]] = {}


def _lines_of(obj: str) -> dict[int, str]:
    st = Path(obj).stat()
    return _LINES.setdefault((obj, st.st_size, st.st_mtime_ns), {})


def _gdb_lines(gdb: str, obj: str, offsets: list[int], timeout: float) -> dict[int, str]:
    """`function at file:line` for each offset of `obj` ("" where gdb cannot
    tell); {} when gdb could not run (asked again next time)."""
    argv = [gdb, "-batch", "-nx"]
    for off in offsets:
        argv += ["-ex", f"info line *{off:#x}"]
    try:
        out = subprocess.run([*argv, obj], capture_output=True, text=True,
                             timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    answers = [ln for ln in out.splitlines() if ln.startswith(("Line ", "No line"))]
    found = dict.fromkeys(offsets, "")
    for off, answer in zip(offsets, answers):
        m = re.match(r'Line (\d+) of "([^"]+)".*<([^+>]+)', answer)
        found[off] = f"{m.group(3)} at {m.group(2)}:{m.group(1)}" if m else ""
    return found


def crash_report(texts: list[str]) -> str:
    """The cause and the symbolized backtrace, from the daemon's log and stderr."""
    cause = ""
    frames: list[str] = []
    for text in texts:
        c, f = backtrace(text)
        cause = cause or c
        frames = frames or f
    if not cause and not frames:
        return ""
    lines = [cause] if cause else []
    if frames:
        lines += ["backtrace:", *("  " + f for f in symbolize(frames))]
    return "\n".join(lines)
