"""The sweep of one topology: every side built once, then point by point (flow
count, then frame size) every side configured and measured `repeats` times,
interleaved (ABBA...), each window taken with the other sides parked.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.install import OvsInstall
from perf.ceiling import CeilingSide
from perf.kinds import CoreLayout, Kind
from perf.ovsside import OvsSide
from perf.records import CEILING, Point, Topology
from perf.sides import Side, Unavailable
from perf.stats import interleave

FULL_SIZES = (64, 1500, 7000)
FULL_FLOWS = (1, 100, 1000)


@dataclass(frozen=True)
class Plan:
    """What the sweep measures: frame sizes, flow counts, repeats, and how long."""

    sizes: tuple[int, ...] = FULL_SIZES
    flows: tuple[int, ...] = FULL_FLOWS
    repeats: int = 5
    window: float = 2.0  # seconds measured per sample
    warmup: float = 1.0  # seconds of traffic before each window

    def points(self, kind: Kind) -> tuple[list[tuple[int, int]], list[str]]:
        sizes, left_out = kind.sizes(self.sizes)
        return [(f, s) for f in self.flows for s in sizes], left_out


QUICK = Plan(sizes=(64,), flows=(1,), repeats=1, window=1.0, warmup=0.5)
QUICK_AB_REPEATS = 3  # an A/B needs a noise estimate even when quick


Progress = Callable[[str], None]


def run_topology(kind: Kind, builds: dict[str, OvsInstall], layout: CoreLayout, plan: Plan,
                 workdir: Path, progress: Progress = print, ceiling: bool = True) -> Topology:
    """Measure one topology on every build that can run it, and its ceiling.

    A build that cannot run the kind (no DPDK, no AF_XDP, the mode refused) is
    left out with the reason; when no build can, the topology is 'skipped'.
    Anything else that goes wrong propagates (after cleaning up)."""
    started = time.monotonic()
    topo = Topology(kind.name, kind.title, "ran", layout=layout.describe(),
                    notes=list(kind.notes))
    points, left_out = plan.points(kind)
    topo.notes += left_out
    sides: dict[str, Side] = {}
    try:
        first_flows = points[0][0] if points else 1
        candidates: list[Side] = [OvsSide(label, kind, layout, workdir / label, install)
                                  for label, install in builds.items()]
        if ceiling:  # built last: not at all where no build can run the kind
            candidates.append(CeilingSide(CEILING, kind, layout, workdir / CEILING))
        for side in candidates:
            if side.label == CEILING and not sides:
                break
            try:
                side.build(first_flows)
            except Unavailable as exc:
                topo.notes.append(f"{side.label}: left out: {exc}")
                topo.notes += side.close()
                continue
            except BaseException:
                side.close()
                raise
            side.park()
            sides[side.label] = side
            topo.sides[side.label] = side.description
            progress(f"{kind.name}: {side.label} ready ({side.description})")
        if not any(label != CEILING for label in sides):
            topo.status = "skipped"
            topo.reason = "; ".join(n for n in topo.notes if ": left out: " in n) or \
                "no build can run it"
            return topo
        labels = sorted(sides, key=lambda label: label != CEILING)  # the ceiling first
        for flows, size in points:
            point = Point(kind.name, size, flows)
            for label in labels:
                side = sides[label]
                side.resume()
                try:
                    side.configure(size, flows)
                finally:
                    side.park()
            for repeat in range(plan.repeats):
                for label in interleave(labels, repeat):
                    side = sides[label]
                    side.resume()
                    try:
                        sample = side.measure(repeat, plan.warmup, plan.window)
                    finally:
                        side.park()
                    point.samples.append(sample)
            topo.points.append(point)
            point.noise = topo.noise()
            progress(point_line(point))
    finally:
        for side in sides.values():
            problems = side.close()
            topo.notes += [f"{side.label}: {p}" for p in problems]
            topo.notes += [f"{side.label}: {n}" for n in side.notes]
            for line in getattr(side, "log_notes", []):
                topo.notes.append(f"{side.label} log: {line}")
        topo.seconds = round(time.monotonic() - started, 1)
    return topo


def point_line(point: Point) -> str:
    """One progress line: each side's median rate, and its fraction of the bound."""
    parts = []
    for side in point.sides():
        s = point.summary(side, "rx_pps")
        text = f"{side} {s.median / 1e6:.3f} Mpps" if s else f"{side} -"
        frac = point.ceiling_fraction(side) if side != CEILING else None
        if frac is not None:
            text += f" ({100 * frac:.0f}% of the bound)"
        parts.append(text)
    verdict = point.verdict()
    if verdict is not None and verdict.ratio is not None:
        parts.append(f"B/A {verdict.ratio:.3f}" + (" FLAGGED" if verdict.flagged else ""))
    return f"{point.kind} {point.size}B {point.flows} flows: " + ", ".join(parts)
