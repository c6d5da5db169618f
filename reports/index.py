"""The index page's data: run summary, the failures list and the compact case table.

The page itself stays light: every case is one short JSON row (id, outcome,
duration, message, page, and an index per matrix axis), which the page's script
turns into the filterable table and the matrix; details live on case pages.
"""
from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.records import FAILED_OUTCOMES, OUTCOME_ORDER, CaseRecord, RunRecord, outcome_rank

MAX_MESSAGE_CHARS = 160
MAX_LISTED_FAILURES = 100
SHOWN_FAILURES = 10  # the rest of the listed ones sit in a collapsed block (the matrix stays on screen)
PSEUDO_AXES = ("test", "backend", "run")

# Flags of a case row: which files exist for it.
HAS_PAGE = 1
HAS_REPRO = 2


@dataclass
class Entry:
    """One case as the report lays it out: its record and the files written for it."""

    case: CaseRecord
    slug: str
    page: str = ""  # path relative to the output directory, or ""
    repro: str = ""


def format_seconds(seconds: float) -> str:
    """A duration as the report writes it: seconds, or minutes and seconds."""
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest} s"


def message(case: CaseRecord) -> str:
    """One line saying why a case did not pass.

    A skip or an xfail gives its reason (the first line).  A failure gives
    pytest's `E ` lines without the exception's module path, joined up to the
    first block of raw evidence, so a frame mismatch reads
    `FrameMismatch: ctx | frame 0: | IP.chksum: expected 0x1, got 0x2`.
    """
    text = case.longrepr.strip()
    if not text or case.outcome == "passed":
        return ""
    lines = text.splitlines()
    error_lines = [line[1:].strip() for line in lines if line.startswith("E ")]
    error_lines = [line for line in error_lines if line]
    if case.outcome not in FAILED_OUTCOMES or not error_lines:
        return _clip_line(lines[0].strip())
    error_lines[0] = re.sub(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*:)", "", error_lines[0])
    line = error_lines[0]
    for part in error_lines[1:]:
        if len(line) > MAX_MESSAGE_CHARS or part.startswith(EVIDENCE_STARTS):
            break
        line = f"{line} | {part}"
    return _clip_line(line)


# Lines after which a failure message turns into raw evidence (hex, log tails).
EVIDENCE_STARTS = ("---", "expected (", "got (", "[", "$ ")


def _clip_line(line: str) -> str:
    return line if len(line) <= MAX_MESSAGE_CHARS else line[:MAX_MESSAGE_CHARS - 3] + "..."


def test_name(nodeid: str) -> str:
    """The test function of a node id: `path::func[params]` -> `func` (with its class)."""
    parts = nodeid.split("[", 1)[0].split("::")
    return "::".join(parts[1:]) if len(parts) > 1 else parts[0]


def natural_key(text: str) -> list[Any]:
    """Sort key that orders `tx_2` before `tx_10` and numbers numerically."""
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok)
            for tok in re.split(r"(\d+)", text) if tok]


def outcome_counts(cases: list[CaseRecord]) -> list[tuple[str, int]]:
    """How many cases had each outcome, in the report's order of outcomes."""
    counts = Counter(case.outcome for case in cases)
    ordered = [(o, counts[o]) for o in OUTCOME_ORDER if counts[o]]
    return ordered + sorted((o, n) for o, n in counts.items() if o not in OUTCOME_ORDER)


def case_axes(case: CaseRecord) -> dict[str, str]:
    """The values a case has on the matrix axes: test, backend, run, then its parameters."""
    axes = {"test": test_name(case.nodeid)}
    if case.backend:
        axes["backend"] = case.backend
    if case.run:
        axes["run"] = case.run
    for name, value in case.params.items():
        axes[f"param {name}" if name in PSEUDO_AXES else name] = value
    return axes


def index_data(entries: list[Entry]) -> dict[str, Any]:
    """The JSON the index page's script reads (kept compact: one array per case)."""
    per_case = [case_axes(e.case) for e in entries]
    seen: Counter[str] = Counter(name for axes in per_case for name in axes)
    distinct = {name: len({axes[name] for axes in per_case if name in axes}) for name in seen}
    pseudo = [a for a in PSEUDO_AXES if a in seen]
    params = sorted((a for a in seen if a not in PSEUDO_AXES),
                    key=lambda a: (-seen[a], -distinct[a], a))
    names = pseudo + params
    values = {name: sorted({axes[name] for axes in per_case if name in axes}, key=natural_key)
              for name in names}
    position = {name: {v: i for i, v in enumerate(vals)} for name, vals in values.items()}
    outcomes = list(OUTCOME_ORDER) + sorted({e.case.outcome for e in entries} - set(OUTCOME_ORDER))
    code = {o: i for i, o in enumerate(outcomes)}
    titles = sorted({e.case.upstream for e in entries if e.case.upstream})
    title_index = {t: i for i, t in enumerate(titles)}
    prefixes: dict[str, int] = {}
    rows = []
    for entry, axes in zip(entries, per_case):
        case = entry.case
        flags = (HAS_PAGE if entry.page else 0) | (HAS_REPRO if entry.repro else 0)
        head, bracket, tail = case.nodeid.partition("[")
        indexes = [position[n][axes[n]] if n in axes else -1 for n in names]
        while indexes and indexes[-1] == -1:  # the page pads them back
            indexes.pop()
        rows.append([
            [prefixes.setdefault(head, len(prefixes)), bracket + tail],
            code[case.outcome], int(round(case.duration * 1000)),
            entry.slug if flags else "", flags, message(case),
            title_index.get(case.upstream or "", -1), indexes,
        ])
    varied = [n for n in params if distinct[n] > 1]
    rows_default = ["test"] if distinct.get("test", 0) > 1 else varied[:1]
    cols_default = [n for n in varied if n not in rows_default][:2]
    return {
        "outcomes": outcomes,
        "axes": [{"name": n, "values": values[n]} for n in names],
        "upstream": titles,
        "prefixes": list(prefixes),  # ids are stored as [prefix index, "[params]"]
        "pseudo": len(pseudo),  # the first axes are test/backend/run, the rest parameters
        "cases": rows,
        "defaults": {"rows": [names.index(n) for n in rows_default],
                     "cols": [names.index(n) for n in cols_default]},
    }


def embed_json(data: Any) -> str:
    """JSON safe inside <script type="application/json">: no '<' can close the element."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def run_summary(run: RunRecord) -> dict[str, Any]:
    """The run's header as the index shows it."""
    versions = dict(run.versions)
    return {
        "started": run.started,
        "duration": format_seconds(run.duration),
        "host": run.host,
        "backend": run.backend,
        "ovs": versions.pop("ovs", ""),
        "ovs_source": run.ovs_source,
        "dpdk": versions.pop("dpdk", ""),
        "versions": sorted(versions.items()),
        "argv": shlex.join(str(a) for a in run.argv),
        "runs": [_merged_run(r) for r in run.runs],
    }


def _merged_run(run: dict[str, Any]) -> dict[str, str]:
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


# What an exploration's examples came to (fixtures/explore.py counts them), in this order.
EXPLORED = ("as_the_model_says", "known_bug", "beyond_the_model", "not_expressible")


def replay_name(explorer: str) -> str:
    """The test that replays an exploration's saved regressions: test_explore_X's
    is test_X_regression (test_explore's, test_regression)."""
    return explorer.replace("test_explore", "test", 1) + "_regression"


def exploration(entries: list[Entry]) -> list[dict[str, Any]]:
    """One row per exploration case (a case whose metrics count `examples`): its
    area, outcome, how many examples ran and what they came to, what its rig
    counted (packets, frames, connections), and its saved regressions' replays
    by outcome."""
    replays: dict[tuple[str, str], Counter[str]] = {}
    for e in entries:
        module, _, name = e.case.nodeid.partition("::")
        replays.setdefault((module, name.split("[")[0]), Counter())[e.case.outcome] += 1
    rows = []
    for e in entries:
        metrics = e.case.metrics
        if "examples" not in metrics:
            continue
        module, _, name = e.case.nodeid.partition("::")
        replayed = replays.get((module, replay_name(name.split("[")[0])), Counter())
        rows.append({
            "area": e.case.params.get("area") or name, "nodeid": e.case.nodeid,
            "page": e.page, "outcome": e.case.outcome, "examples": int(metrics["examples"]),
            "came_to": [(k.replace("_", " "), int(metrics[k])) for k in EXPLORED if metrics.get(k)],
            "counted": [(k.replace("_", " "), f"{v:g}") for k, v in metrics.items()
                        if k != "examples" and k not in EXPLORED],
            "replayed": sorted(replayed.items(), key=lambda kv: outcome_rank(kv[0])),
        })
    return rows


def index_context(run: RunRecord, entries: list[Entry]) -> dict[str, Any]:
    """What index.html.j2 shows besides the script's data."""
    cases = [e.case for e in entries]
    counts = outcome_counts(cases)
    failures = [e for e in entries if e.case.outcome in (*FAILED_OUTCOMES, "xpassed")]
    return {
        "run": run_summary(run),
        "title": ", ".join(f"{n} {o}" for o, n in counts) or "no cases",
        "total": len(cases),
        "counts": counts,
        "failures": [{"nodeid": e.case.nodeid, "outcome": e.case.outcome, "page": e.page,
                      "repro": e.repro, "message": message(e.case), "run": e.case.run}
                     for e in failures[:MAX_LISTED_FAILURES]],
        "failures_omitted": max(0, len(failures) - MAX_LISTED_FAILURES),
        "shown_failures": SHOWN_FAILURES,
        "merged": any(c.run for c in cases),
        "exploration": exploration(entries),
        "data_json": embed_json(index_data(entries)),
    }
