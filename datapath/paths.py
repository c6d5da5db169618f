"""Both datapath paths, every time: the upcall that installs a flow, then the
flow itself.

dpif-netdev classifies a packet through caches before its flow table: the
simple-match table (flows that match only what every flow matches), the exact
match cache (EMC), the signature match cache (SMC), then the megaflow
classifier (dpcls); a miss goes up to ofproto (an upcall), which installs a
datapath flow.  Each path parses the packet its own way, so a case sends its
frames twice: once into a datapath without flows (the upcall path), once more
(a cache or the classifier), and checks that both produce the same frames and
that the datapath's own counters (`dpif-netdev/pmd-stats-show`) show which
path served each pass.

The caches are chosen per id (`mode_for`): EMC on (inserting every flow:
emc-insert-inv-prob=1), SMC on with EMC off, or neither (dpcls only).  Where a
port has only simple-match flows, that table serves instead (OVS documentation
Documentation/topics/dpdk/bridge.rst on EMC and SMC; simple match: NEWS 2.17).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from typing import Callable

from datapath.verdict import is_sighting
from harness.pmdstats import parse_pmd_stats, total
from harness.records import Step
from harness.sandbox import Sandbox
from harness.wait import WaitTimeout, wait_until

CACHE_MODES: dict[str, dict[str, str]] = {
    "emc": {"emc-insert-inv-prob": "1", "smc-enable": "false"},
    "smc": {"emc-insert-inv-prob": "0", "smc-enable": "true"},
    "dpcls": {"emc-insert-inv-prob": "0", "smc-enable": "false"},
}


def mode_for(nodeid: str) -> str:
    """A cache mode for an id: spread evenly and the same in every run."""
    modes = list(CACHE_MODES)
    return modes[int(hashlib.sha1(nodeid.encode()).hexdigest(), 16) % len(modes)]


def cache_config(mode: str) -> dict[str, str]:
    """The other_config settings of a datapath cache mode."""
    return dict(CACHE_MODES[mode])


@dataclass(frozen=True)
class PathStats:
    """dpif-netdev's per-path packet counters, summed over its threads."""

    received: int = 0
    passes: int = 0
    phwol: int = 0
    simple: int = 0
    emc: int = 0
    smc: int = 0
    megaflow: int = 0
    upcalls: int = 0
    lost: int = 0

    @classmethod
    def parse(cls, text: str) -> "PathStats":
        threads = parse_pmd_stats(text)
        return cls(total(threads, "rx"), total(threads, "passes"),
                   *(total(threads, key) for key in ("phwol", "simple", "emc", "smc",
                                                     "megaflow", "upcall", "lost_upcall")))

    @classmethod
    def read(cls, sb: Sandbox) -> "PathStats":
        return cls.parse(sb.appctl("dpif-netdev/pmd-stats-show").stdout)

    def __sub__(self, other: "PathStats") -> "PathStats":
        return PathStats(**{f.name: getattr(self, f.name) - getattr(other, f.name)
                            for f in fields(self)})

    @property
    def hits(self) -> int:
        return self.phwol + self.simple + self.emc + self.smc + self.megaflow

    def describe(self) -> str:
        return ", ".join(f"{f.name} {getattr(self, f.name)}" for f in fields(self)
                         if getattr(self, f.name))


class PathMismatch(AssertionError):
    """The fast path did not serve, or did not do what the upcall path did."""


def fresh(sb: Sandbox) -> None:
    """No datapath flow left: the next packet of any id takes the upcall path."""
    sb.appctl("revalidator/purge")


def both_paths(sb: Sandbox, mode: str, send: Callable[[str], list[bytes]],
               steps: list[Step]) -> list[bytes]:
    """send("upcall") into a datapath without flows, then send("fast path");
    check the counters of each, and that both sends came to the same verdict
    with the same frames.

    `send` is a send-and-expect step that records its verdict in `steps` and
    returns what left (raising where no known bug explains it).  A known bug the
    first send shows must show on the second too: the case's sighting stands
    only if the fast path deviates the same way (datapath/verdict.py)."""
    fresh(sb)
    before = PathStats.read(sb)
    first = send("upcall")
    upcall = steps[-1]
    middle, slow = _settle(sb, before, lambda d: d.passes > 0 and d.upcalls + d.lost > 0,
                           "the first send to take the upcall path")
    second = send(f"fast path ({mode})")
    fast = steps[-1]
    # Where the kernel added packets of its own to the first window, the second
    # may never reach its passes: judge() decides on what it has after the wait.
    _, fast_stats = _settle(sb, middle, lambda d: d.passes >= slow.passes,
                            "the second send to pass the datapath as often as the first",
                            strict=False)
    problems = judge(slow, fast_stats, mode)
    if is_sighting(upcall) != is_sighting(fast):
        problems.append("the upcall path " + ("deviated as a known bug and the fast path did "
                                              "not" if is_sighting(upcall) else "was right and "
                                              "the fast path deviated as a known bug"))
    elif first != second:
        problems.append(f"the fast path left other frames than the upcall path "
                        f"({len(second)} against {len(first)})")
    if problems:
        raise PathMismatch("\n".join(problems))
    return second


def judge(slow: PathStats, fast: PathStats, mode: str) -> list[str]:
    """What is wrong with the counters of the second send (`fast`), given the
    first's (`slow`) and the cache mode: it must pass the datapath as often,
    with no upcall, every pass served by the mode's cache (or simple match).

    On a real port the kernel may send packets of its own (IPv6 neighbour
    discovery, MLD, router solicitations) into either window: counted, they
    take their own upcalls, or hit any cache a flow of theirs left behind.
    Where the second window received more than the first, those extra packets
    may; ours, as many passes as the first window's, must still all be served
    by the mode's cache.  Where the first received more, the second is judged
    on its own: no upcall, every pass from the mode's cache, no more passes
    than the first."""
    problems = []
    extra = fast.received - slow.received
    if fast.upcalls + fast.lost > max(0, extra):
        problems.append(f"the second send went up again ({fast.describe()}): the flow the "
                        "first installed did not serve it")
    mine = fast.passes - (fast.upcalls + fast.lost)  # the passes served without an upcall
    passes_ok = (mine == slow.passes if extra == 0 else mine >= slow.passes if extra > 0
                 else fast.received <= mine <= slow.passes)
    if not passes_ok or fast.hits != mine:
        problems.append(f"datapath passes: first send {slow.describe()}; second {fast.describe()}")
    served = fast.simple + {"emc": fast.emc, "smc": fast.smc, "dpcls": fast.megaflow}[mode]
    if not problems and (served < slow.passes or mine - served > extra if extra > 0
                         else served != mine):
        problems.append(f"with the {mode} cache on, the second send was served by: "
                        f"{fast.describe()}")
    return problems


def _settle(sb: Sandbox, base: PathStats, done: Callable[[PathStats], bool],
            what: str, strict: bool = True) -> tuple[PathStats, PathStats]:
    """(counters, counters since `base`), once `done` holds of the latter (PMD
    threads count asynchronously); if it never does, a PathMismatch, or with
    `strict` off the counters as they are then."""
    seen: list[PathStats] = []

    def ready() -> bool:
        seen.append(PathStats.read(sb))
        return done(seen[-1] - base)
    try:
        wait_until(ready, 5.0, what=what)
    except WaitTimeout as exc:
        if strict or not seen:
            last = (seen[-1] - base).describe() if seen else "no counters"
            raise PathMismatch(f"{exc}: {last}") from None
    return seen[-1], seen[-1] - base
