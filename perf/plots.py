"""The figures of perf.html, drawn with matplotlib (Agg, PNG files beside the page).

perf-size.png        Mpps against frame size, one panel per topology, a line per
                     side and flow count (median; bars span min..max)
perf-flows.png       Mpps against flow count, a line per side and frame size
perf-efficiency.png  packets per second per CPU core the switch used, against flows
perf-ceiling.png     each OVS side's median as a fraction of the ceiling, per point
perf-ab.png          candidate / baseline per point with its noise band; flagged red
"""
from __future__ import annotations

import os
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from perf.records import CEILING, Point, Run, Topology  # noqa: E402

COLORS = {"ceiling": "#7f7f7f", "ovs": "#1f77b4", "baseline": "#1f77b4",
          "candidate": "#d62728"}
STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def _grid(count: int) -> tuple[Figure, list[Axes]]:
    cols = min(3, max(1, count))
    rows = (count + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def _ran(run: Run) -> list[Topology]:
    return [t for t in run.topologies if t.points]


def _series(topo: Topology, x_of: Callable[[Point], int], group_of: Callable[[Point], int],
            metric: str, scale: float) -> dict[tuple[str, int], list[tuple[int, float, float,
                                                                       float]]]:
    """(side, group) -> [(x, median, min, max)] sorted by x."""
    out: dict[tuple[str, int], list[tuple[int, float, float, float]]] = {}
    for point in topo.points:
        for side in point.sides():
            s = point.summary(side, metric)
            if s is not None:
                out.setdefault((side, group_of(point)), []).append(
                    (x_of(point), s.median / scale, s.lo / scale, s.hi / scale))
    return {k: sorted(v) for k, v in out.items()}


def _lines(run: Run, path: str, metric: str, scale: float, ylabel: str, x: str,
           sides: Callable[[str], bool] = lambda s: True) -> bool:
    topos = _ran(run)
    if not topos:
        return False
    fig, axes = _grid(len(topos))
    for ax, topo in zip(axes, topos):
        by_size = x == "size"
        series = _series(topo, (lambda p: p.size) if by_size else (lambda p: p.flows),
                         (lambda p: p.flows) if by_size else (lambda p: p.size), metric, scale)
        groups = sorted({g for _, g in series})
        xs = sorted({v[0] for vals in series.values() for v in vals})
        for (side, group), vals in sorted(series.items()):
            if not sides(side):
                continue
            i = groups.index(group)
            pos = [xs.index(v[0]) if by_size else v[0] for v in vals]
            med = [v[1] for v in vals]
            err = [[m - v[2] for m, v in zip(med, vals)], [v[3] - m for m, v in zip(med, vals)]]
            label = f"{side}, {group} {'flows' if by_size else 'B'}"
            ax.errorbar(pos, med, yerr=err, color=COLORS.get(side, "#2ca02c"),
                        linestyle=STYLES[i % len(STYLES)], marker=MARKERS[i % len(MARKERS)],
                        capsize=3, label=label)
        if by_size:
            ax.set_xticks(range(len(xs)), [f"{v} B" for v in xs])
            ax.set_xlabel("frame size")
        else:
            ax.set_xscale("log")
            ax.set_xticks(xs, [str(v) for v in xs])
            ax.set_xlabel("flows (distinct 5-tuples)")
        ax.set_title(topo.kind, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _ceiling(run: Run, path: str) -> bool:
    rows: list[tuple[str, str, float]] = []
    for point in run.points():
        for side in point.sides():
            frac = point.ceiling_fraction(side) if side != CEILING else None
            if frac is not None:
                rows.append((f"{point.kind} {point.size}B {point.flows}f", side, frac))
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(rows) + 1.2))
    ax.barh(range(len(rows)), [100 * r[2] for r in rows],
            color=[COLORS.get(r[1], "#2ca02c") for r in rows])
    ax.set_yticks(range(len(rows)), [f"{r[0]} {r[1]}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(100, color="#7f7f7f", linestyle="--")
    ax.set_xlabel("% of the measured upper bound (the offered rate; p2p: testpmd on the same ports)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _ab(run: Run, path: str) -> bool:
    rows = [(f"{p.kind} {p.size}B {p.flows}f", v.ratio, v) for p in run.points()
            for v in (p.verdict(),) if v is not None and v.ratio is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows) + 2), 4))
    for i, (_, ratio, v) in enumerate(rows):
        band = v.band or 0.0
        ax.add_patch(Rectangle((i - 0.35, 1 - band), 0.7, 2 * band,
                               color="#cccccc", zorder=0))
        ax.plot(i, ratio, "o", color="#d62728" if v.flagged else "#1f77b4", zorder=2)
    ax.axhline(1.0, color="#7f7f7f", linestyle="--")
    ax.set_xticks(range(len(rows)), [r[0] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("candidate / baseline (rx pps)")
    ax.set_title("A/B: grey = noise band, red = moved beyond it", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def draw(run: Run, out_dir: str) -> list[tuple[str, str]]:
    """Write the figures; returns (file name, caption) of those drawn."""
    drawn: list[tuple[str, str]] = []
    jobs: list[tuple[str, str, Callable[[str], bool]]] = [
        ("perf-size.png", "Mpps against frame size (median; bars span min..max)",
         lambda p: _lines(run, p, "rx_pps", 1e6, "Mpps at the sink", "size")),
        ("perf-flows.png", "Mpps against flows, per port kind and xdp-mode",
         lambda p: _lines(run, p, "rx_pps", 1e6, "Mpps at the sink", "flows")),
        ("perf-efficiency.png", "Efficiency: packets per second per CPU core the switch used",
         lambda p: _lines(run, p, "pps_per_cpu", 1e6, "Mpps per core", "flows")),
        ("perf-ceiling.png", "OVS as a fraction of the ceiling", lambda p: _ceiling(run, p)),
        ("perf-ab.png", "A/B ratio per point with its noise band", lambda p: _ab(run, p)),
    ]
    for name, caption, job in jobs:
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            os.remove(path)  # an earlier run's figure must not pass for this run's
        if job(path):
            drawn.append((name, caption))
    return drawn
