"""`dpif-netdev/pmd-stats-show`, parsed once for everyone who reads it.

OVS 3.x and 4.0 print pmd-stats-show like pmd-perf-show: one section per PMD
thread and one for the main thread, which polls the ports that are not
PMD-capable (tap, system).  A PMD section has the cycle counters: used TSC
cycles, the share of them spent in idle and in busy iterations; every section
has the received packets, the datapath passes and where their lookups hit
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
    """One section of pmd-stats-show: a thread's name, cycles and counters."""

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


def total(threads: list[ThreadStats], key: str) -> int:
    """A counter summed over the threads: "rx", "tx", "passes" or a HIT_KEYS value."""
    if key in ("rx", "tx", "passes"):
        return sum(getattr(t, key) for t in threads)
    return sum(t.hits.get(key, 0) for t in threads)
