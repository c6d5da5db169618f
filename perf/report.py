"""perf.html: the figures and, per topology, every point's figures per side.

Reads a Run (perf/records.py) and never drives anything; the page sits beside
perf.json, perf.csv and the PNG figures in the output directory.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2

from perf import plots
from perf.records import CEILING, Run, Topology, write_csv, write_json

TEMPLATE = Path(__file__).parent / "templates" / "perf.html.j2"
STYLE = Path(__file__).resolve().parent.parent / "reports" / "templates" / "report.css"

# (metric, column title, scale, digits)
COLUMNS = (("tx_pps", "offered Mpps", 1e6, 3), ("drop_pps", "lost Mpps", 1e6, 3),
           ("cycles_per_pkt", "cycles/pkt", 1, 0), ("busy_pct", "busy %", 1, 1),
           ("switch_cpu", "switch CPU", 1, 2), ("pmd_cpu", "PMD CPU", 1, 2),
           ("other_cpu", "other CPU", 1, 2), ("gen_cpu", "gen CPU", 1, 2),
           ("softirq_cpu", "softirq", 1, 2), ("foreign_cpu", "foreign", 1, 2),
           ("pps_per_cpu", "Mpps/core", 1e6, 3), ("pps_per_busy_cpu", "Mpps/busy core", 1e6, 3),
           ("emc_hit", "EMC", 0.01, 0), ("smc_hit", "SMC", 0.01, 0),
           ("megaflow_hit", "dpcls", 0.01, 0))


def _fmt(value: float | None, scale: float, digits: int) -> str:
    if value is None:
        return ""
    return f"{value / scale:,.{digits}f}"


def topology_rows(topo: Topology) -> list[dict[str, Any]]:
    """A topology's table rows for perf.html: one per point and side."""
    rows = []
    for point in topo.points:
        verdict = point.verdict()
        for side in point.sides():
            rx = point.summary(side, "rx_pps")
            row: dict[str, Any] = {
                "size": point.size, "flows": point.flows, "side": side,
                "n": rx.n if rx else 0,
                "rx": _fmt(rx.median, 1e6, 3) if rx else "",
                "range": f"{rx.lo / 1e6:.3f}..{rx.hi / 1e6:.3f}" if rx else "",
                "spread": f"{100 * rx.spread:.0f}%" if rx and rx.spread is not None else "",
                "cells": [_fmt(s.median if s else None, scale, digits)
                          for metric, _, scale, digits in COLUMNS
                          for s in (point.summary(side, metric),)],
                "fraction": "", "ab": "", "flagged": False,
                "notes": sorted({n for s in point.samples if s.side == side for n in s.notes}),
            }
            unmatched = point.summary(side, "unmatched")
            if unmatched is not None and unmatched.hi > 0:
                row["notes"].append(f"{unmatched.hi:.0f} packets missed the per-flow rules")
            frac = point.ceiling_fraction(side) if side != CEILING else None
            if frac is not None:
                row["fraction"] = f"{100 * frac:.0f}%"
            if verdict is not None and side == "candidate":
                if verdict.ratio is not None:
                    band = f" ±{100 * verdict.band:.0f}%" if verdict.band is not None else ""
                    row["ab"] = f"{verdict.ratio:.3f}{band}"
                row["flagged"] = verdict.flagged
                row["notes"].append(verdict.note)
            rows.append(row)
    return rows


def ceiling_table(run: Run) -> list[dict[str, str]]:
    """Per topology and point: the ceiling, and each OVS side in Mpps and as a fraction."""
    out = []
    for topo in run.topologies:
        for point in topo.points:
            ceil, bound = point.summary(CEILING, "rx_pps"), point.bound()
            row = {"kind": topo.kind, "point": f"{point.size} B, {point.flows} flows",
                   "ceiling": f"{ceil.median / 1e6:.3f}" if ceil else "-",
                   "bound": f"{bound[0].median / 1e6:.3f} ({bound[1]})" if bound
                   else "none measured (testpmd's reference is below OVS)", "ovs": ""}
            parts = []
            for side in point.sides():
                if side == CEILING:
                    continue
                s, frac = point.summary(side, "rx_pps"), point.ceiling_fraction(side)
                if s is not None:
                    parts.append(f"{side} {s.median / 1e6:.3f}"
                                 + (f" ({100 * frac:.0f}%)" if frac is not None else ""))
            row["ovs"] = "; ".join(parts)
            out.append(row)
    return out


def write(run: Run, out_dir: str) -> str:
    """perf.json, perf.csv, the figures and perf.html into out_dir; returns the page."""
    os.makedirs(out_dir, exist_ok=True)
    write_json(run, os.path.join(out_dir, "perf.json"))
    write_csv(run, os.path.join(out_dir, "perf.csv"))
    figures = plots.draw(run, out_dir)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)))
    flagged = [f"{p.kind} {p.size} B {p.flows} flows: {v.note}" for p in run.points()
               for v in (p.verdict(),) if v is not None and v.flagged]
    html = env.get_template(TEMPLATE.name).render(
        run=run, figures=figures, columns=[c[1] for c in COLUMNS], flagged=flagged,
        topologies=[(t, topology_rows(t)) for t in run.topologies],
        ceilings=ceiling_table(run), style=STYLE.read_text(encoding="utf-8"))
    path = os.path.join(out_dir, "perf.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return path
