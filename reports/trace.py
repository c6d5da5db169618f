"""Traceability: each upstream test, file by file, the pytest ids reproducing it, their status.

A case names its upstream test(s) with `@pytest.mark.upstream(TITLE, file=FILE)`.
There is a section per testsuite (make target) and file (harness/upstream.py's
TESTSUITES): system-traffic.at's ids go to the testsuite of their `flavour`
parameter, an id without one to the first testsuite that has its file.
Every test of every file in harness/upstream.py gets a row, reproduced or not;
a title its file does not have (a typo, or a test of another suite) is listed
apart so it is noticed.  Records written before cases named their file count
as dpif-netdev.at.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from harness.records import OUTCOME_ORDER, outcome_rank
from harness.system_userspace import not_here
from harness.upstream import (
    DEFAULT_FILE,
    FILES,
    RELEASE,
    SCOPE,
    TESTSUITES,
    Testsuite,
    UpstreamTest,
    split_titles,
)
from reports.index import Entry, outcome_counts

MAX_IDS_PER_TEST = 200


def worst(outcomes: list[str]) -> str:
    """The worst outcome of a list (failed before error before ... passed)."""
    return min(outcomes, key=outcome_rank) if outcomes else ""


def _status(outcomes: list[str], title: str = "", target: str = "") -> str:
    """One word for a title: not reproduced ('missing', or 'not-here' when
    harness/upstream.NOT_HERE says why it cannot be), or its worst outcome."""
    if not outcomes:
        return "not-here" if not_here(title, target) else "missing"
    return worst(outcomes)


def first_suite(file: str) -> str:
    """The first testsuite (make target) that runs `file` ('' for none)."""
    return next((ts.target for ts in TESTSUITES if file in ts.files), "")


def suite_of(entry: Entry, file: str) -> str:
    """The testsuite an entry naming a test of `file` counts in: the one of its
    flavour that has the file, else the first that has it."""
    flavour = str(entry.case.params.get("flavour", ""))
    return next((ts.target for ts in TESTSUITES if file in ts.files and ts.flavour == flavour),
                first_suite(file))


def _by_key(entries: list[Entry], target: str | None = None
            ) -> dict[tuple[str, str], list[Entry]]:
    """(file, title) -> the entries naming it (those of testsuite `target`, or
    of the first testsuite with the file when None)."""
    found: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        file = entry.case.upstream_file or DEFAULT_FILE
        if suite_of(entry, file) != (first_suite(file) if target is None else target):
            continue
        for title in split_titles(entry.case.upstream):
            found.setdefault((file, title), []).append(entry)
    return found


def trace_rows(entries: list[Entry], file: str = DEFAULT_FILE, target: str | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per upstream test of `file` in suite order, rows for titles the
    file lacks), from the ids of testsuite `target` (None: the first with the file)."""
    found = _by_key(entries, target)
    tests = FILES.get(file, ())
    where = first_suite(file) if target is None else target
    rows = [_row(test, test.title, found.get((file, test.title), []), where) for test in tests]
    known = {t.title for t in tests}
    unknown = [_row(None, title, hits) for (f, title), hits in sorted(found.items())
               if f == file and title not in known]
    return rows, unknown


def _row(test: UpstreamTest | None, title: str, found: list[Entry], target: str = ""
         ) -> dict[str, Any]:
    outcomes = [e.case.outcome for e in found]
    shown = sorted(found, key=lambda e: (outcome_rank(e.case.outcome), e.case.nodeid))
    return {
        "number": test.number if test is not None else "",
        "title": title,
        "since": test.since if test is not None else "",
        "status": _status(outcomes, title, target),
        "reason": not_here(title, target) if not outcomes else _skip_reason(found),
        "counts": [(o, n) for o, n in outcome_counts([e.case for e in found])],
        "ids": [{"nodeid": e.case.nodeid, "outcome": e.case.outcome, "page": e.page,
                 "run": e.case.run} for e in shown[:MAX_IDS_PER_TEST]],
        "ids_omitted": max(0, len(shown) - MAX_IDS_PER_TEST),
    }


def _skip_reason(found: list[Entry]) -> str:
    """Why a title whose every id skipped did not run here: the first id's skip."""
    if not found or any(e.case.outcome != "skipped" for e in found):
        return ""
    text = (found[0].case.longrepr or "").strip()
    return text.splitlines()[-1] if text else ""


def _section(file: str, rows: list[dict[str, Any]], unknown: list[dict[str, Any]],
             suite: Testsuite | None = None, anchor: str = "") -> dict[str, Any]:
    statuses = Counter(row["status"] for row in rows)
    reproduced = sum(1 for row in rows if row["status"] not in ("missing", "not-here"))
    where = f" in make {suite.target}" if suite is not None else ""
    return {
        "file": file,
        "target": suite.target if suite is not None else "",
        "anchor": anchor or file.replace(".", "-"),
        "source": f"tests/{file} ({RELEASE}){where}" + (f": {SCOPE[file]}" if file in SCOPE
                                                         else ""),
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
    """One section per testsuite and file, plus the files cases name that we do not list."""
    sections = []
    seen: set[str] = set()
    for suite in TESTSUITES:
        for file in suite.files:
            anchor = file.replace(".", "-")
            if file in seen:  # a second testsuite of the file: anchored by its flavour
                anchor = f"{suite.flavour}-{anchor}"
            seen.add(file)
            sections.append(_section(file, *trace_rows(entries, file, suite.target), suite,
                                     anchor))
    found = _by_key(entries)  # every file no testsuite has: all its entries
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
