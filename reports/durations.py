"""Write the durations file `--shard I/N` balances by, from earlier runs' results.

    python3 -m reports.durations reports/out/results.json [more ...] [-o reports/durations.json]

A directory stands for its results.json.  Later files win for an id two of them
timed.  The file maps each pytest id to its seconds, rounded to milliseconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from harness.records import RunRecord

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")


def durations(runs: Sequence[RunRecord]) -> dict[str, float]:
    """Each id's duration over the runs (the last run's for an id in several), skips left
    out."""
    found: dict[str, float] = {}
    for run in runs:
        for case in run.cases:
            if case.outcome != "skipped" and case.duration > 0:
                found[case.nodeid] = round(case.duration, 3)
    return dict(sorted(found.items()))


def main(argv: Sequence[str] | None = None) -> int:
    """Write the durations file from results.json files."""
    parser = argparse.ArgumentParser(prog="python3 -m reports.durations",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="results.json files (or their directories)")
    parser.add_argument("-o", "--out", default=DEFAULT_OUT, help="the durations file to write")
    args = parser.parse_args(argv)
    paths = [os.path.join(p, "results.json") if os.path.isdir(p) else p for p in args.results]
    try:
        found = durations([RunRecord.load(p) for p in paths])
    except ValueError as exc:
        print(f"reports.durations: error: {exc}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(found, f, indent=0, separators=(",", ":"))
        f.write("\n")
    print(f"{len(found)} ids, {sum(found.values()):.0f} s in all: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
