"""The known OVS bugs of a run: one line each on the index, one page each with the evidence.

A run records every catalogue entry (datapath/model/bugs.py) with its facts and
its status in the run (harness.records.known_bug_status); the ids that sighted
an entry are those whose steps name it, present (OVS deviated exactly as known)
or absent (OVS behaved correctly).  The index lists each entry on one line:
key, status, severity, number of ids, title.  Its page, `bugs/<key>.html`, has
the entry's full facts, the fix and the disclosure note of export/ where they
exist, and the ids with links to their case pages.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.index import Entry

BUG_DIR = "bugs"
EXPORT_DIR = Path(__file__).resolve().parent.parent / "export"
# A run's status of an entry in the words of the report, and the badge colour it gets.
STATUS_WORDS = {"present": "present", "absent": "gone", "mixed": "mixed", "untested": "not run"}
STATUS_BADGES = {"present": "xfailed", "absent": "failed", "mixed": "failed", "untested": "skipped"}
MAX_EXPORT_CHARS = 60000


@dataclass
class Sighting:
    """One id that ran into an entry, and what it saw: present, absent or both."""

    entry: Entry
    status: str


def bug_slug(key: str) -> str:
    """The file name of an entry's page (keys are already file-safe; anything else is not)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("._") or "bug"


def bug_page(key: str) -> str:
    """An entry's page, relative to the output directory."""
    return f"{BUG_DIR}/{bug_slug(key)}.html"


def sightings(entries: list[Entry]) -> dict[str, list[Sighting]]:
    """Per entry key, the ids whose steps named it, in the report's order (worst first)."""
    seen: dict[str, list[Sighting]] = {}
    for entry in entries:
        statuses: dict[str, set[str]] = {}
        for step in entry.case.steps:
            for key, status in step.bugs.items():
                statuses.setdefault(key, set()).add(status)
        for key, found in statuses.items():
            status = "mixed" if len(found) > 1 else next(iter(found))
            seen.setdefault(key, []).append(Sighting(entry, status))
    return seen


def status_view(status: str) -> dict[str, str]:
    """A status as the report shows it: the word and its badge's outcome colour."""
    return {"status": status, "word": STATUS_WORDS.get(status, status),
            "badge": STATUS_BADGES.get(status, "skipped")}


def bug_lines(known: list[dict[str, Any]], seen: dict[str, list[Sighting]]) -> list[dict[str, Any]]:
    """The index's known-bug table: one line per entry, in the catalogue's order."""
    return [{"key": str(b.get("key", "")), "page": bug_page(str(b.get("key", ""))),
             "cls": str(b.get("cls") or "bug"), "severity": str(b.get("severity") or "-"),
             "title": str(b.get("title", "")), "ids": len(seen.get(str(b.get("key", "")), [])),
             **status_view(str(b.get("status", "untested")))}
            for b in known]


def bug_view(bug: dict[str, Any], known: list[dict[str, Any]],
             seen: list[Sighting], pages: dict[str, str]) -> dict[str, Any]:
    """What an entry's page shows.  `pages` maps a node id to its case page (for the
    cases the entry's real ports name, where this run ran them)."""
    key, root = str(bug.get("key", "")), str(bug.get("root_cause", ""))
    return {
        "key": key,
        "title": str(bug.get("title", "")),
        "facts": _facts(bug),
        "ports": _ports(bug, pages),
        "real_ports": str(bug.get("real_ports", "")),
        "root_cause": root,
        "group": [{"key": str(b["key"]), "page": "../" + bug_page(str(b["key"]))}
                  for b in known if root and b.get("root_cause") == root and b.get("key") != key],
        "exports": export_files(key, root),
        "present": int(bug.get("present") or 0),
        "absent": int(bug.get("absent") or 0),
        "sightings": [{"nodeid": s.entry.case.nodeid, "run": s.entry.case.run,
                       "outcome": s.entry.case.outcome,
                       "page": "../" + s.entry.page if s.entry.page else "",
                       **status_view(s.status)} for s in seen],
        **status_view(str(bug.get("status", "untested"))),
    }


def _facts(bug: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("class", bug.get("cls") or "bug"), ("severity", bug.get("severity")),
            ("where", bug.get("where")), ("why this class", bug.get("why")),
            ("seen on OVS", bug.get("seen_in")), ("found by", bug.get("found_by")),
            ("notes", bug.get("notes"))]
    return [(name, str(value)) for name, value in rows if value]


def _ports(bug: dict[str, Any], pages: dict[str, str]) -> list[dict[str, str]]:
    ports = bug.get("ports")
    if not isinstance(ports, list):  # a run recorded before the ports were listed one by one
        return []
    view = []
    for port in ports:
        if not isinstance(port, dict):
            continue
        case = str(port.get("case", ""))
        view.append({"kind": str(port.get("kind", "")), "how": str(port.get("how", "")),
                     "case": case, "backend": str(port.get("backend", "")),
                     "page": "../" + pages[case] if case in pages else ""})
    return view


def export_files(key: str, root_cause: str, export_dir: Path = EXPORT_DIR) -> list[dict[str, str]]:
    """The files of export/ about an entry: its group's fix (the patch, which
    carries its upstream test too) and its disclosure note (`disclosures/<key>.md`,
    the name export --series attaches)."""
    found: list[tuple[str, Path]] = []
    fix = export_dir / "fixes" / f"{root_cause}.patch"
    if root_cause and fix.is_file():
        found.append(("fix", fix))
    note = export_dir / "disclosures" / f"{key}.md"
    if key and note.is_file():
        found.append(("disclosure note", note))
    files = []
    for what, path in found:
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_EXPORT_CHARS:
            text = text[:MAX_EXPORT_CHARS] + f"\n... [{len(text) - MAX_EXPORT_CHARS} more chars]"
        files.append({"what": what, "name": f"export/{path.parent.name}/{path.name}", "text": text})
    return files
