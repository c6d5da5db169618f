"""A patch's changed lines, and which of them a gcovr JSON report says ran.

Stdlib only.  A patch is a unified diff (a file, `git format-patch` output, or
`git diff REV..REV` in the source tree); its changed lines are the added and
modified lines of the new side, numbered as in the new file: the tree that was
built.  A pure deletion has no line of its own on the new side; it is kept
as the line after it (the code that now runs in its place), marked so.

The coverage side reads gcovr's JSON format (`files[].file`, `files[].lines[]`
with `line_number`, `count` and `gcovr/noncode`), never gcov's own output.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FileChange:
    """The new-side lines a patch adds or changes in one file."""

    path: str  # relative to the tree's top, as gcovr names it
    added: set[int] = field(default_factory=set)
    after_deletion: set[int] = field(default_factory=set)  # a line that follows removed lines

    @property
    def lines(self) -> list[int]:
        return sorted(self.added | self.after_deletion)


def _strip(path: str) -> str | None:
    path = path.split("\t", 1)[0].strip()
    if path == "/dev/null":
        return None
    if path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_diff(text: str) -> dict[str, FileChange]:
    """{path: FileChange} for every file the diff changes on its new side.

    Hunks are read by their counts, so a removed line that looks like a header
    ("--- x") stays a removed line, and whatever follows a hunk (a mail's
    signature, the next file's header) is not taken for one."""
    changes: dict[str, FileChange] = {}
    current: FileChange | None = None
    old_left = new_left = 0
    new_line = 0
    removed_pending = False

    def flush() -> None:
        nonlocal removed_pending
        if removed_pending and current is not None:
            current.after_deletion.add(new_line)
        removed_pending = False

    for raw in text.splitlines():
        if old_left > 0 or new_left > 0:
            tag = raw[:1]
            if tag == "+":
                if current is not None:
                    current.added.add(new_line)
                new_line += 1
                new_left -= 1
                removed_pending = False
            elif tag == "-":
                old_left -= 1
                removed_pending = True
            elif tag == "\\":
                pass
            else:  # context (" ", or an empty line some mailers leave)
                flush()
                new_line += 1
                old_left -= 1
                new_left -= 1
            if old_left <= 0 and new_left <= 0:
                flush()
            continue
        if raw.startswith("+++ "):
            path = _strip(raw[4:])
            current = changes.setdefault(path, FileChange(path)) if path else None
            continue
        m = HUNK.match(raw)
        if m and current is not None:
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_left = int(m.group(4)) if m.group(4) is not None else 1
            new_line = int(m.group(3))
            if new_left == 0:  # a hunk that only removes: the next line follows it
                new_line += 1
            removed_pending = False
    return {p: c for p, c in changes.items() if c.lines}


def read_patch(spec: str, tree: Path, base: Path) -> tuple[str, str]:
    """(diff text, what it is) for `--patch FILE` (relative to `base`) or
    `--patch REV..REV` (git diff in the source tree)."""
    candidate = (base / spec).expanduser()
    if candidate.is_file():
        return candidate.read_text(errors="replace"), str(candidate)
    if ".." in spec:
        proc = subprocess.run(["git", "-C", str(tree), "diff", "--no-color", "-U0", spec],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ValueError(f"--patch {spec}: git diff in {tree} failed: "
                             f"{proc.stderr.strip() or proc.returncode}")
        return proc.stdout, f"git diff {spec} in {tree}"
    raise ValueError(f"--patch {spec}: neither a file nor a REV..REV range")


def line_counts(report: dict[str, Any]) -> dict[str, dict[int, int]]:
    """{file: {line: count}} of the code lines in a gcovr JSON report (lines
    gcovr marks as not code are left out; a line in several functions, such as
    an inlined header line, adds up)."""
    out: dict[str, dict[int, int]] = {}
    for f in report.get("files", []):
        lines = out.setdefault(f["file"], {})
        for ln in f.get("lines", []):
            if ln.get("gcovr/noncode"):
                continue
            n = int(ln["line_number"])
            lines[n] = lines.get(n, 0) + int(ln.get("count", 0))
    return out


@dataclass(frozen=True)
class LineState:
    """One changed line against one coverage report."""

    path: str
    line: int
    code: bool  # gcov knows it as code (else: comment, blank, declaration, not built)
    reached: bool


def states(changes: dict[str, FileChange], report: dict[str, Any]) -> list[LineState]:
    """Each changed line with whether the gcovr report says it ran."""
    counts = line_counts(report)
    out: list[LineState] = []
    for path, change in sorted(changes.items()):
        lines = counts.get(path, {})
        for n in change.lines:
            out.append(LineState(path, n, n in lines, lines.get(n, 0) > 0))
    return out


def reached(changes: dict[str, FileChange], report: dict[str, Any]) -> set[tuple[str, int]]:
    """The changed lines (path, line) the gcovr report says ran."""
    return {(s.path, s.line) for s in states(changes, report) if s.reached}
