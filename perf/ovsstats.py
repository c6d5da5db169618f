"""The datapath's own counters for a measurement: pmd-stats-show's threads
(parsed by harness.pmdstats) summed up as cycles per packet, busy share and
where lookups hit, and `dpctl/show -s`'s port counters."""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.pmdstats import HIT_KEYS, ThreadStats


@dataclass(frozen=True)
class DatapathSummary:
    """A window's datapath figures, summed over the threads."""

    rx: int
    cycles_per_pkt: float | None  # PMD threads only
    busy_pct: float | None  # PMD threads only, weighted by their cycles
    hit_share: dict[str, float]  # over all threads' datapath passes


def summarize_threads(threads: list[ThreadStats]) -> DatapathSummary:
    """The datapath's figures over all threads: packets, PMD cycles and busy share, cache
    hits."""
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
    """One port's packet counters."""

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
