"""Traceability: each upstream test, file by file, the pytest ids reproducing it, their status.

A case names its upstream test(s) with `@pytest.mark.upstream(TITLE, file=FILE)`.
Every test of every file in reports/upstream.py gets a row, reproduced or not;
a title its file does not have (a typo, or a test of another suite) is listed
apart so it is noticed.  Records written before cases named their file count
as dpif-netdev.at.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from harness.records import OUTCOME_ORDER, outcome_rank
from reports.index import Entry, outcome_counts
from reports.system_userspace import NOT_HERE
from reports.upstream import (
    DEFAULT_FILE,
    FILES,
    RELEASE,
    SCOPE,
    UpstreamTest,
    split_titles,
)

MAX_IDS_PER_TEST = 200


def worst(outcomes: list[str]) -> str:
    """The worst outcome of a list (failed before error before ... passed)."""
    return min(outcomes, key=outcome_rank) if outcomes else ""


def _status(outcomes: list[str], title: str = "") -> str:
    """One word for a title: not reproduced ('missing', or 'not-here' when
    reports/upstream.NOT_HERE says why it cannot be), or its worst outcome."""
    if not outcomes:
        return "not-here" if title in NOT_HERE else "missing"
    return worst(outcomes)


def _by_key(entries: list[Entry]) -> dict[tuple[str, str], list[Entry]]:
    """(file, title) -> the entries naming it."""
    found: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        file = entry.case.upstream_file or DEFAULT_FILE
        for title in split_titles(entry.case.upstream):
            found.setdefault((file, title), []).append(entry)
    return found


def trace_rows(entries: list[Entry], file: str = DEFAULT_FILE
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per upstream test of `file` in suite order, rows for titles the file lacks)."""
    found = _by_key(entries)
    tests = FILES.get(file, ())
    rows = [_row(test, test.title, found.get((file, test.title), [])) for test in tests]
    known = {t.title for t in tests}
    unknown = [_row(None, title, hits) for (f, title), hits in sorted(found.items())
               if f == file and title not in known]
    return rows, unknown


def _row(test: UpstreamTest | None, title: str, found: list[Entry]) -> dict[str, Any]:
    outcomes = [e.case.outcome for e in found]
    shown = sorted(found, key=lambda e: (outcome_rank(e.case.outcome), e.case.nodeid))
    return {
        "number": test.number if test is not None else "",
        "title": title,
        "since": test.since if test is not None else "",
        "status": _status(outcomes, title),
        "reason": NOT_HERE.get(title, "") if not outcomes else "",
        "counts": [(o, n) for o, n in outcome_counts([e.case for e in found])],
        "ids": [{"nodeid": e.case.nodeid, "outcome": e.case.outcome, "page": e.page,
                 "run": e.case.run} for e in shown[:MAX_IDS_PER_TEST]],
        "ids_omitted": max(0, len(shown) - MAX_IDS_PER_TEST),
    }


def _section(file: str, rows: list[dict[str, Any]], unknown: list[dict[str, Any]]
             ) -> dict[str, Any]:
    statuses = Counter(row["status"] for row in rows)
    reproduced = sum(1 for row in rows if row["status"] not in ("missing", "not-here"))
    return {
        "file": file,
        "anchor": file.replace(".", "-"),
        "source": f"tests/{file} ({RELEASE})" + (f": {SCOPE[file]}" if file in SCOPE else ""),
        "rows": rows,
        "unknown": unknown,
        "total": len(rows),
        "reproduced": reproduced,
        "passing": sum(1 for row in rows if row["status"] == "passed"),
        "missing": sum(1 for row in rows if row["status"] == "missing"),
        "not_here": statuses["not-here"],
        "statuses": [(o, statuses[o]) for o in (*OUTCOME_ORDER, "not-here", "missing")
                     if statuses[o]],
    }


def trace_context(entries: list[Entry]) -> dict[str, Any]:
    """One section per upstream file, plus the files cases name that we do not list."""
    sections = [_section(file, *trace_rows(entries, file)) for file in FILES]
    found = _by_key(entries)
    for file in sorted({f for f, _ in found} - set(FILES)):
        rows = [_row(None, title, hits) for (f, title), hits in sorted(found.items()) if f == file]
        sections.append(_section(file, [], rows))
    total = sum(s["total"] for s in sections)
    reproduced = sum(s["reproduced"] for s in sections)
    return {
        "sections": sections,
        "total": total,
        "reproduced": reproduced,
        "passing": sum(s["passing"] for s in sections),
        "missing": sum(s["missing"] for s in sections),
        "not_here": sum(s["not_here"] for s in sections),
        "untraced": sum(1 for e in entries if not e.case.upstream),
    }
