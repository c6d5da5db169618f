"""Traceability: each upstream dpif-netdev.at test, the pytest ids reproducing it, their status.

A case names its upstream test(s) with `@pytest.mark.upstream(TITLE)`.  Every one
of the 48 upstream tests gets a row, reproduced or not; a title no upstream
test has (a typo, or a test of another suite) is listed apart so it is noticed.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from reports.index import Entry, outcome_counts
from reports.records import OUTCOME_ORDER, outcome_rank
from reports.upstream import SOURCE, TITLES, UPSTREAM_TESTS, split_titles

MAX_IDS_PER_TEST = 200


def worst(outcomes: list[str]) -> str:
    """The worst outcome of a list (failed before error before ... passed)."""
    return min(outcomes, key=outcome_rank) if outcomes else ""


def _status(outcomes: list[str]) -> str:
    """One word for a title: not reproduced, or its worst outcome."""
    if not outcomes:
        return "missing"
    return worst(outcomes)


def trace_rows(entries: list[Entry]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per upstream test in suite order, rows for titles upstream does not have)."""
    by_title: dict[str, list[Entry]] = {}
    for entry in entries:
        for title in split_titles(entry.case.upstream):
            by_title.setdefault(title, []).append(entry)
    rows = [_row(number, title, by_title.get(title, [])) for number, title in UPSTREAM_TESTS]
    unknown = [_row(None, title, found) for title, found in sorted(by_title.items())
               if title not in TITLES]
    return rows, unknown


def _row(number: int | None, title: str, found: list[Entry]) -> dict[str, Any]:
    outcomes = [e.case.outcome for e in found]
    shown = sorted(found, key=lambda e: (outcome_rank(e.case.outcome), e.case.nodeid))
    return {
        "number": number if number is not None else "",
        "title": title,
        "status": _status(outcomes),
        "counts": [(o, n) for o, n in outcome_counts([e.case for e in found])],
        "ids": [{"nodeid": e.case.nodeid, "outcome": e.case.outcome, "page": e.page,
                 "run": e.case.run} for e in shown[:MAX_IDS_PER_TEST]],
        "ids_omitted": max(0, len(shown) - MAX_IDS_PER_TEST),
    }


def trace_context(entries: list[Entry]) -> dict[str, Any]:
    rows, unknown = trace_rows(entries)
    statuses = Counter(row["status"] for row in rows)
    reproduced = sum(1 for row in rows if row["status"] != "missing")
    return {
        "source": SOURCE,
        "rows": rows,
        "unknown": unknown,
        "total": len(rows),
        "reproduced": reproduced,
        "missing": len(rows) - reproduced,
        "statuses": [(o, statuses[o]) for o in (*OUTCOME_ORDER, "missing") if statuses[o]],
        "untraced": sum(1 for e in entries if not e.case.upstream),
    }
