"""What a perf run measured: samples, points, topologies and the run; perf.json
and perf.csv (pure: no OVS, no /proc).

A Sample is one measurement window on one side (an OVS build, or the
testpmd ceiling).  Its metrics (all per second or per packet, so windows of
different lengths compare):

    rx_pps          packets per second counted at the sink
    tx_pps          packets per second the generator got onto the wire (None
                    where the source is inside the switch, p2p)
    drop_pps        tx_pps - rx_pps (>= 0), or the switch's own tx drops (p2p)
    ovs_drop_pps    drops OVS counted on its ports (dpctl/show -s)
    cycles_per_pkt  datapath cycles per received packet (pmd-stats-show)
    busy_pct        the datapath threads' processing share of their cycles
    ovs_cpu         cores ovs-vswitchd used (all its threads, from /proc)
    pmd_cpu         cores its PMD threads used
    other_cpu       cores its other threads used (main, handlers, revalidators...)
    switch_cpu      cores the switch used: ovs_cpu, or the ceiling testpmd's
    gen_cpu         cores the traffic generator used
    softirq_cpu     cores the machine spent in softirq (kernel ports' work; machine-wide)
    foreign_cpu     cores busy with processes not of this run (machine-wide, minus ours)
    pps_per_cpu     rx_pps / switch_cpu
    pps_per_busy_cpu rx_pps / (pmd_cpu * busy share + other_cpu): per core actually
                    working, not busy-polling
    emc_hit, smc_hit, megaflow_hit, simple_hit, upcall  shares of datapath passes
    unmatched       packets the per-flow OpenFlow rules did not match (must be 0)
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from perf.stats import Summary, Verdict, compare, fraction, pooled_sigma, summarize

SCHEMA = 1
METRICS = ("rx_pps", "tx_pps", "drop_pps", "ovs_drop_pps", "cycles_per_pkt", "busy_pct",
           "ovs_cpu", "pmd_cpu", "other_cpu", "switch_cpu", "gen_cpu", "softirq_cpu",
           "foreign_cpu", "pps_per_cpu", "pps_per_busy_cpu", "emc_hit", "smc_hit",
           "megaflow_hit", "simple_hit", "upcall", "unmatched")
CEILING = "ceiling"
AB_SIDES = ("baseline", "candidate")
CSV_METRICS = ("rx_pps", "tx_pps", "drop_pps", "ovs_drop_pps", "cycles_per_pkt", "busy_pct",
               "ovs_cpu", "pmd_cpu", "other_cpu", "switch_cpu", "gen_cpu", "softirq_cpu",
               "foreign_cpu", "pps_per_cpu", "pps_per_busy_cpu", "emc_hit", "smc_hit",
               "megaflow_hit")


@dataclass
class Sample:
    """One measurement window of one side."""

    side: str
    repeat: int
    seconds: float
    metrics: dict[str, float | None]
    notes: list[str] = field(default_factory=list)

    def get(self, metric: str) -> float | None:
        return self.metrics.get(metric)


@dataclass
class Point:
    """One frame size and flow count of one topology, all sides' samples."""

    kind: str
    size: int
    flows: int
    samples: list[Sample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    noise: float | None = None  # the topology's pooled A/B noise (set by Run)

    def values(self, side: str, metric: str) -> list[float]:
        return [v for s in self.samples if s.side == side
                for v in (s.get(metric),) if v is not None]

    def summary(self, side: str, metric: str) -> Summary | None:
        return summarize(self.values(side, metric))

    def sides(self) -> list[str]:
        return list(dict.fromkeys(s.side for s in self.samples))

    def bound(self) -> tuple[Summary, str] | None:
        """A measured upper bound on the rate any side can deliver at this point,
        and what it is.  Where a generator feeds the switch: the highest rate it
        got onto the wire in any window of the point (what reaches the sink
        cannot exceed what was sent; by conservation, not by assumption).
        Where the ports themselves are the source (p2p): testpmd io between the
        same ports, and only while no OVS side delivers more; a reference that
        OVS beats bounds nothing, so there is no fraction then."""
        offered = [s for side in self.sides() for s in (self.summary(side, "tx_pps"),)
                   if s is not None and s.median > 0]
        if offered:
            return max(offered, key=lambda s: s.median), "the generator's offered rate"
        ceil = self.summary(CEILING, "rx_pps")
        if ceil is None or any(s.median > ceil.median for side in self.sides() if side != CEILING
                               for s in (self.summary(side, "rx_pps"),) if s is not None):
            return None
        return ceil, "testpmd io between the same ports"

    def ceiling_fraction(self, side: str) -> float | None:
        """The side's delivered rate as a fraction of the point's bound()."""
        bound = self.bound()
        return fraction(self.summary(side, "rx_pps"), bound[0]) if bound else None

    def verdict(self, metric: str = "rx_pps") -> Verdict | None:
        if not all(side in self.sides() for side in AB_SIDES):
            return None
        return compare(self.values(AB_SIDES[0], metric), self.values(AB_SIDES[1], metric),
                       sigma=self.noise)


@dataclass
class Topology:
    """One topology kind as it ran (or why it did not)."""

    kind: str
    title: str
    status: str  # "ran", "skipped", "failed"
    reason: str = ""
    sides: dict[str, str] = field(default_factory=dict)  # side -> what it is
    layout: str = ""  # the core layout used
    points: list[Point] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def noise(self, metric: str = "rx_pps") -> float | None:
        """The relative noise of one sample of the builds, pooled over the points."""
        return pooled_sigma(p.values(side, metric) for p in self.points for side in AB_SIDES)


@dataclass
class Run:
    """A whole perf run: its settings, the builds, and every topology's points."""

    started: str
    duration: float
    quick: bool
    repeats: int
    window: float
    host: dict[str, Any]
    builds: dict[str, str]  # side -> the OVS build, described
    topologies: list[Topology] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for topo in self.topologies:
            noise = topo.noise()
            for point in topo.points:
                point.noise = noise

    @property
    def ab(self) -> bool:
        return all(side in self.builds for side in AB_SIDES)

    def points(self) -> list[Point]:
        return [p for t in self.topologies for p in t.points]


# ----------------------------------------------------------------------------
# perf.json


def point_json(point: Point) -> dict[str, Any]:
    """The raw samples and, per side, every metric's summary; the ceiling fraction
    and the A/B verdict where they apply."""
    out: dict[str, Any] = asdict(point)
    summaries: dict[str, dict[str, Any]] = {}
    for side in point.sides():
        summaries[side] = {m: s.to_json() for m in METRICS
                           for s in (point.summary(side, m),) if s is not None}
        frac = point.ceiling_fraction(side) if side != CEILING else None
        if frac is not None:
            summaries[side]["ceiling_fraction"] = frac
    out["summary"] = summaries
    bound = point.bound()
    if bound is not None:
        out["bound"] = {"pps": bound[0].median, "what": bound[1]}
    verdict = point.verdict()
    if verdict is not None:
        out["ab"] = verdict.to_json()
    return out


def run_json(run: Run) -> dict[str, Any]:
    """The run as perf.json's object."""
    data = asdict(run)
    data["schema"] = SCHEMA
    data["ab"] = run.ab
    data["metrics"] = list(METRICS)
    for topo, raw in zip(run.topologies, data["topologies"]):
        raw["points"] = [point_json(p) for p in topo.points]
    flagged = [f"{p.kind} {p.size}B {p.flows} flows" for p in run.points()
               for v in (p.verdict(),) if v is not None and v.flagged]
    data["flagged"] = flagged
    return data


def write_json(run: Run, path: str) -> None:
    """Write perf.json."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(run_json(run), f, indent=1, sort_keys=False)
        f.write("\n")


def load_run(path: str) -> Run:
    """A Run back from perf.json (the summaries are recomputed, not read)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: perf.json schema {data.get('schema')}, expected {SCHEMA}")
    topologies = []
    for t in data["topologies"]:
        points = [Point(p["kind"], p["size"], p["flows"],
                        [Sample(**s) for s in p["samples"]], list(p.get("notes", [])))
                  for p in t["points"]]
        topologies.append(Topology(**{**t, "points": points}))
    return Run(data["started"], data["duration"], data["quick"], data["repeats"],
               data["window"], data["host"], data["builds"], topologies, data.get("notes", []))


# ----------------------------------------------------------------------------
# perf.csv: one row per topology, point and side


CSV_HEAD = ("kind", "size", "flows", "side", "n", "rx_pps_min", "rx_pps_max", "rx_pps_spread",
            *(f"{m}_median" for m in CSV_METRICS), "ceiling_fraction", "ab_ratio", "ab_band",
            "ab_flagged")


def csv_rows(run: Run) -> list[dict[str, object]]:
    """perf.csv's rows: one per point and side, with its verdict."""
    rows: list[dict[str, object]] = []
    for point in run.points():
        verdict = point.verdict()
        for side in point.sides():
            rx = point.summary(side, "rx_pps")
            row: dict[str, object] = {
                "kind": point.kind, "size": point.size, "flows": point.flows, "side": side,
                "n": rx.n if rx else 0, "rx_pps_min": rx.lo if rx else None,
                "rx_pps_max": rx.hi if rx else None, "rx_pps_spread": rx.spread if rx else None}
            for metric in CSV_METRICS:
                s = point.summary(side, metric)
                row[f"{metric}_median"] = s.median if s else None
            row["ceiling_fraction"] = point.ceiling_fraction(side) if side != CEILING else None
            on_ab = verdict is not None and side == AB_SIDES[1]
            row["ab_ratio"] = verdict.ratio if on_ab and verdict else None
            row["ab_band"] = verdict.band if on_ab and verdict else None
            row["ab_flagged"] = (int(verdict.flagged) if on_ab and verdict else None)
            rows.append(row)
    return rows


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def csv_text(run: Run) -> str:
    """perf.csv's text: the header, then the rows."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEAD)
    for row in csv_rows(run):
        writer.writerow([_cell(row.get(col)) for col in CSV_HEAD])
    return buf.getvalue()


def write_csv(run: Run, path: str) -> None:
    """Write perf.csv."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(csv_text(run))
