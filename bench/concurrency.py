"""The main job's wall time, serial against concurrent, per area: ./ovstest bench --concurrency.

On this machine, in one go (figures, no assertions):

  1. the main job (`./ovstest suite`, or the -k selection) with -n 0, one id after
     another: its wall time, and each area's (fixtures/areas.py), which is the sum
     of its ids' durations, since nothing else ran meanwhile;
  2. the same with each worker count of --workers (default: the suite's default
     concurrency, -n auto): its wall time, and per area when its first id started
     and its last ended, and the sum of its ids' durations (more than serial: the
     ids share the cores);
  3. with --areas, each area alone with the default concurrency: its own wall time.

Prints a table, and writes every figure to OUT/concurrency.json (default
build/bench-concurrency/).  Every run's report stays in OUT/<label>/.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.areas import AREAS, area_of  # noqa: E402
from harness.concurrency import default_workers  # noqa: E402


@dataclass
class AreaFigures:
    """One area in one run."""

    ids: int = 0
    seconds: float = 0.0  # the sum of its ids' durations
    first: float = 0.0  # seconds after the run's first id started
    last: float = 0.0


@dataclass
class Run:
    """One `./ovstest suite` run of the benchmark."""

    label: str
    workers: str  # "0", "auto", "8"
    wall: float
    summary: str
    areas: dict[str, AreaFigures] = field(default_factory=dict)


def suite(label: str, workers: str, selection: list[str], out: Path) -> Run:
    """`./ovstest suite -n WORKERS SELECTION`, timed; its figures from results.json."""
    rel = (out / label).relative_to(ROOT) if (out / label).is_relative_to(ROOT) else out / label
    argv = [str(ROOT / "ovstest"), "suite", "-q", "-p", "no:cacheprovider", "-n", workers,
            f"--out-dir={rel}", *selection]
    print(f"bench: {label}: {' '.join(argv[1:])}", flush=True)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    lines = proc.stdout.strip().splitlines() or ["(no output)"]
    results = out / label / "results.json"
    if not results.is_file():
        sys.exit(f"bench: {label} wrote no results (rc {proc.returncode}):\n{proc.stdout[-2000:]}"
                 f"\n{proc.stderr[-2000:]}")
    run = Run(label, workers, round(wall, 1), lines[-1].strip("= "))
    cases = [c for c in json.loads(results.read_text())["cases"] if c.get("duration")]
    t0 = min((c["started"] for c in cases if c.get("started")), default=0.0)
    for case in cases:
        fig = run.areas.setdefault(area_of(case["nodeid"]).name, AreaFigures())
        start = case.get("started", 0.0) - t0
        end = start + case["duration"]
        fig.first = start if fig.ids == 0 else min(fig.first, start)
        fig.last = max(fig.last, end)
        fig.ids += 1
        fig.seconds += case["duration"]
    print(f"bench: {label}: {wall:.1f} s ({run.summary})", flush=True)
    return run


def table(runs: list[Run], alone: dict[str, Run]) -> list[str]:
    """The printed table: per area, serial seconds, then each concurrent run's span."""
    serial = runs[0]
    head = f"{'area':34s} {'ids':>5s} {'serial':>8s}" + "".join(
        f" {r.label:>16s}" for r in runs[1:]) + (f" {'alone':>8s}" if alone else "")
    lines = [head]
    for area in [a.name for a in AREAS] + ["other"]:
        fig = serial.areas.get(area)
        if fig is None:
            continue
        row = f"{area:34s} {fig.ids:5d} {fig.seconds:7.1f}s"
        for r in runs[1:]:
            f = r.areas.get(area, AreaFigures())
            row += f" {f.first:5.0f}-{f.last:5.0f}s/{f.seconds:5.0f}"
        if alone:
            row += f" {alone[area].wall:7.1f}s" if area in alone else f" {'':8s}"
        lines.append(row)
    lines.append(f"{'whole job (wall)':34s} {'':5s} {serial.wall:7.1f}s" + "".join(
        f" {r.wall:14.1f}s " for r in runs[1:]))
    for r in runs[1:]:
        lines.append(f"{r.label}: {serial.wall / r.wall:.2f}x faster than serial ({r.summary})")
    lines.append("(concurrent columns: first start - last end after the run's first id, "
                 "/ the sum of the area's id durations)")
    return lines


def main() -> int:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(prog="./ovstest bench --concurrency",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workers", default="auto",
                    help="comma-separated worker counts to run besides -n 0 (default: auto, "
                         f"{default_workers()} here)")
    ap.add_argument("--areas", action="store_true",
                    help="also run each area alone, with the default concurrency")
    ap.add_argument("-k", dest="select", default="", help="a pytest -k selection of the cases")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench-concurrency")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    selection = ["cases", *(["-k", args.select] if args.select else [])]
    print(f"bench: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; "
          f"-n auto is {default_workers()} workers", flush=True)
    runs = [suite("serial", "0", selection, out)]
    for workers in args.workers.split(","):
        runs.append(suite(f"n{workers}", workers, selection, out))
    alone: dict[str, Run] = {}
    if args.areas:
        for area in AREAS:
            files = sorted({c.split("::")[0] for c in _nodeids(out / "serial") if area.holds(c)})
            if files:
                alone[area.name] = suite(f"alone-{area.name.replace(' ', '_')}", "auto",
                                         [*files, *selection[1:]], out)
    for line in table(runs, alone):
        print(line)
    (out / "concurrency.json").write_text(json.dumps(
        {"runs": [asdict(r) for r in runs], "alone": {k: asdict(v) for k, v in alone.items()}},
        indent=1))
    print(f"bench: figures in {out / 'concurrency.json'}")
    return 0


def _nodeids(run_dir: Path) -> list[str]:
    return [c["nodeid"] for c in json.loads((run_dir / "results.json").read_text())["cases"]]


if __name__ == "__main__":
    sys.exit(main())
