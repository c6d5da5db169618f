"""The datapath's own counters: `dpif-netdev/pmd-stats-show` and `dpctl/show -s`.

pmd-stats-show (OVS 3.x and 4.0 print it like pmd-perf-show) has one section
per PMD thread and one for the main thread, which polls the ports that are not
PMD-capable (tap, system).  A PMD section has the cycle counters: used TSC
cycles, the share of them spent in idle and in busy iterations, and cycles per
packet; every section has the received packets and where their lookups hit
(simple match, EMC, SMC, megaflow, upcall).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

HIT_KEYS = {"PHWOL hits": "phwol", "Simple Match hits": "simple", "EMC hits": "emc",
            "SMC hits": "smc", "Megaflow hits": "megaflow", "Upcalls": "upcall",
            "Lost upcalls": "lost_upcall"}
_SECTION = re.compile(r"^(pmd thread .*|main thread):\s*$", re.M)


@dataclass
class ThreadStats:
    name: str
    used_cycles: int | None = None
    idle_pct: float | None = None
    busy_pct: float | None = None
    rx: int = 0
    tx: int = 0
    passes: int = 0
    hits: dict[str, int] = field(default_factory=dict)

    @property
    def is_pmd(self) -> bool:
        return self.name.startswith("pmd")


def _num(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def parse_pmd_stats(text: str) -> list[ThreadStats]:
    """One ThreadStats per section of pmd-stats-show / pmd-perf-show."""
    heads = list(_SECTION.finditer(text))
    out: list[ThreadStats] = []
    for i, head in enumerate(heads):
        body = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        t = ThreadStats(head.group(1))
        used = _num(r"Used TSC cycles:\s*(\d+)", body)
        t.used_cycles = int(used) if used is not None else None
        idle = _num(r"idle iterations:\s*\d+\s*\(\s*([\d.]+)\s*%", body)
        busy = _num(r"busy iterations:\s*\d+\s*\(\s*([\d.]+)\s*%", body)
        t.idle_pct = float(idle) if idle is not None else None
        t.busy_pct = float(busy) if busy is not None else None
        t.rx = int(_num(r"^\s*Rx packets:\s*(\d+)", body) or 0)
        t.tx = int(_num(r"^\s*Tx packets:\s*(\d+)", body) or 0)
        t.passes = int(_num(r"Datapath passes:\s*(\d+)", body) or 0)
        for label, key in HIT_KEYS.items():
            value = _num(rf"- {re.escape(label)}:\s*(\d+)", body)
            if value is not None:
                t.hits[key] = int(value)
        out.append(t)
    return out


@dataclass(frozen=True)
class DatapathSummary:
    rx: int
    cycles_per_pkt: float | None  # PMD threads only
    busy_pct: float | None  # PMD threads only, weighted by their cycles
    hit_share: dict[str, float]  # over all threads' datapath passes


def summarize_threads(threads: list[ThreadStats]) -> DatapathSummary:
    rx = sum(t.rx for t in threads)
    pmds = [t for t in threads if t.is_pmd and t.used_cycles]
    pmd_rx = sum(t.rx for t in pmds)
    used = sum(t.used_cycles or 0 for t in pmds)
    cpp = used / pmd_rx if pmds and pmd_rx else None
    busy = (sum((t.used_cycles or 0) * (t.busy_pct or 0.0) for t in pmds) / used
            if pmds and used else None)
    passes = sum(t.passes for t in threads)
    shares: dict[str, float] = {}
    if passes:
        for key in HIT_KEYS.values():
            shares[key] = sum(t.hits.get(key, 0) for t in threads) / passes
    return DatapathSummary(rx, cpp, busy, shares)


@dataclass(frozen=True)
class PortCounters:
    rx: int = 0
    tx: int = 0
    rx_dropped: int = 0
    tx_dropped: int = 0


def _count(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0


def parse_dpctl_show(text: str) -> dict[str, PortCounters]:
    """Per port name, the counters of `dpctl/show -s` ('?' counts as 0).  Parsed
    from the whole text: a port whose stats OVS could not read has no line break
    before the next port's header."""
    heads = list(re.finditer(r"port \d+: (\S+)", text))
    out: dict[str, PortCounters] = {}
    for i, head in enumerate(heads):
        body = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]

        out[head.group(1)] = PortCounters(
            _count(r"RX packets:(\d+)", body), _count(r"TX packets:(\d+)", body),
            _count(r"RX packets:\S+ errors:\S+ dropped:(\d+)", body),
            _count(r"TX packets:\S+ errors:\S+ dropped:(\d+)", body))
    return out


def counters_delta(before: dict[str, PortCounters], after: dict[str, PortCounters],
                   ports: list[str]) -> PortCounters:
    """Summed over `ports`, what the counters grew by (a restarted port counts from 0)."""
    rx = tx = rd = td = 0
    for name in ports:
        a, b = after.get(name, PortCounters()), before.get(name, PortCounters())
        rx += a.rx - b.rx if a.rx >= b.rx else a.rx
        tx += a.tx - b.tx if a.tx >= b.tx else a.tx
        rd += a.rx_dropped - b.rx_dropped if a.rx_dropped >= b.rx_dropped else a.rx_dropped
        td += a.tx_dropped - b.tx_dropped if a.tx_dropped >= b.tx_dropped else a.tx_dropped
    return PortCounters(rx, tx, rd, td)
