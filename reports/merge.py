"""Merge results.json files of several runs (CI shards) into one results.json and report.

    python3 -m reports.merge shard1/results.json shard2/ -o merged/

A directory stands for its results.json.  The merged report is a full one: index,
matrix (with a `run` axis), case pages, reproducers and traceability.

Cases are concatenated; each keeps a label naming the run it came from, so the same
nodeid run by two shards shows twice. Artifact paths are rewritten to stay valid from
the output directory.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from harness.records import CaseRecord, RunRecord, known_bug_status
from reports.render import render

# What known_bug_status() adds to an entry's facts: recomputed over the merged cases.
BUG_STATUS_KEYS = ("status", "present", "absent", "absent_ids")


def run_labels(paths: Sequence[str]) -> list[str]:
    """Short unique labels: the folder name for `.../results.json`, else the file name."""
    labels = []
    for path in paths:
        absolute = os.path.abspath(path)
        name = os.path.basename(absolute)
        if name == "results.json":
            name = os.path.basename(os.path.dirname(absolute)) or name
        labels.append(name)
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        if labels.count(label) > 1:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label}#{seen[label]}"
        unique.append(label)
    return unique


def merge(inputs: Sequence[tuple[str, str, RunRecord]], out_dir: str) -> RunRecord:
    """Combine (label, source path, run) triples into one RunRecord for `out_dir`."""
    cases: list[CaseRecord] = []
    summaries: list[dict[str, Any]] = []
    for label, source, run in inputs:
        source_dir = os.path.dirname(os.path.abspath(source))
        for case in run.cases:
            case.run = case.run or label
            case.artifacts = {k: _relocate(v, source_dir, out_dir) for k, v in case.artifacts.items()}
            cases.append(case)
        if run.runs:  # already a merge: keep its inputs' summaries
            summaries.extend(run.runs)
        else:
            summaries.append({
                "label": label, "host": run.host, "backend": run.backend, "started": run.started,
                "duration": run.duration, "versions": dict(run.versions), "argv": list(run.argv),
                "cases": len(run.cases),
            })
    runs = [run for _, _, run in inputs]
    known: dict[str, dict[str, Any]] = {}
    for run in runs:
        for bug in run.known_bugs:  # the entry's facts as its run recorded them; status anew
            known.setdefault(str(bug.get("key")), {
                k: v for k, v in bug.items() if k not in BUG_STATUS_KEYS})
    return RunRecord(
        started=min((r.started for r in runs if r.started), default=""),
        duration=round(sum(r.duration for r in runs), 3),
        host=_join_unique(r.host for r in runs),
        backend=_join_unique(r.backend for r in runs),
        versions=combine_versions([r.versions for r in runs]),
        cases=cases,
        argv=["python3", "-m", "reports.merge", *(source for _, source, _ in inputs)],
        runs=summaries,
        ovs_source=_join_unique(r.ovs_source for r in runs if r.ovs_source),
        known_bugs=known_bug_status(list(known.values()), cases),
    )


def check_run(run: RunRecord, path: str) -> None:
    """Raise ValueError naming `path` when a field has a type merge or render cannot use."""
    def expect(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"{path}: malformed results file: {what}")

    expect(isinstance(run.started, str) and isinstance(run.host, str), "started/host not text")
    expect(isinstance(run.backend, str), "backend not text")
    expect(_is_number(run.duration), "duration not a number")
    expect(_is_text_map(run.versions), "versions not a map of text")
    expect(isinstance(run.runs, list) and all(isinstance(r, dict) for r in run.runs), "runs not a list")
    for n, case in enumerate(run.cases):
        where = f"case {n}"
        expect(isinstance(case.nodeid, str) and isinstance(case.outcome, str), f"{where}: nodeid/outcome")
        expect(_is_number(case.duration), f"{where}: duration not a number")
        expect(isinstance(case.longrepr, str) and isinstance(case.run, str), f"{where}: longrepr/run")
        expect(_is_text_map(case.params) and _is_text_map(case.artifacts), f"{where}: params/artifacts")
        expect(_is_text_list(case.log_excerpt), f"{where}: log_excerpt")
        for c in case.commands:
            expect(isinstance(c.argv, list) and _is_number(c.rc) and _is_number(c.seconds)
                   and isinstance(c.stdout, str) and isinstance(c.stderr, str), f"{where}: command")
        for s in case.steps:
            expect(all(_is_text_list(x) for x in (s.sent, s.expected, s.captured, s.diff, s.notes)),
                   f"{where}: step frames/diff/notes")
            expect(all(_is_text_map(x) for x in s.csum_state), f"{where}: step csum_state")
            expect(isinstance(s.dissection, list) and isinstance(s.dissection_error, str),
                   f"{where}: step dissection")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_text_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in value.items())


def _is_text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def combine_versions(all_versions: Sequence[dict[str, str]]) -> dict[str, str]:
    """One value per component; differing values are listed, e.g. "3.1.0, 4.0.0"."""
    values: dict[str, list[str]] = {}
    for versions in all_versions:
        for name, version in versions.items():
            seen = values.setdefault(name, [])
            if version not in seen:
                seen.append(version)
    return {name: ", ".join(seen) for name, seen in values.items()}


def _join_unique(values: Any) -> str:
    unique: list[str] = []
    for value in values:
        for part in str(value).split(", "):
            if part and part not in unique:
                unique.append(part)
    return ", ".join(unique)


def _relocate(path: str, source_dir: str, out_dir: str) -> str:
    if os.path.isabs(path) or "://" in path:
        return path
    return os.path.relpath(os.path.join(source_dir, path), os.path.abspath(out_dir))


def main(argv: Sequence[str] | None = None) -> int:
    """Merge results.json files into one run and render its report."""
    parser = argparse.ArgumentParser(prog="python3 -m reports.merge", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="results.json files (or directories holding one)")
    parser.add_argument("-o", "--out-dir", required=True, help="directory for results.json and the report")
    parser.add_argument("--all-cases", action="store_true",
                        help="write a case page for every case, passed and skipped ones too")
    args = parser.parse_args(argv)
    paths = [os.path.join(p, "results.json") if os.path.isdir(p) else p for p in args.results]
    labels = run_labels(paths)
    try:
        inputs = []
        for label, path in zip(labels, paths):
            run = RunRecord.load(path)
            check_run(run, path)
            inputs.append((label, path, run))
        merged = merge(inputs, args.out_dir)
        os.makedirs(args.out_dir, exist_ok=True)
        merged.dump(os.path.join(args.out_dir, "results.json"))
        report = render(merged, args.out_dir, all_pages=args.all_cases)
    except (ValueError, OSError) as exc:
        print(f"reports.merge: error: {exc}", file=sys.stderr)
        return 2
    print(f"merged {len(inputs)} runs, {len(merged.cases)} cases: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
