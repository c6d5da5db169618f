"""Datapath throughput and efficiency (seeds 002 and 003): `./ovstest perf`.

One id per topology (perf/kinds.py): the sweep of frame sizes and flow counts on
every build that can run it, interleaved with the ceiling (testpmd forwarding
on the same ports, OVS removed).  The figures go to perf.html, perf.json and
perf.csv; no test asserts a rate.  What a test does verify is that the
measurement is sound: every planned sample was taken on every side, traffic
reached the sink, and every packet matched the per-flow rules (so the datapath
worked on the flows the point claims).

Deselected unless `-m perf` (perf/plugin.py).
"""
from __future__ import annotations

import pytest

from perf.kinds import ORDER
from perf.plugin import PerfSession
from perf.records import Topology


def check_topology(topo: Topology, repeats: int) -> list[str]:
    """What makes a topology's figures unusable: missing samples, no traffic,
    packets that missed the per-flow rules."""
    problems: list[str] = []
    sides = [s for s in topo.sides]
    if not topo.points:
        problems.append("no point was measured")
    for point in topo.points:
        where = f"{point.size} B, {point.flows} flows"
        for side in sides:
            got = [s for s in point.samples if s.side == side]
            if len(got) != repeats:
                problems.append(f"{where}: {side} has {len(got)} samples, planned {repeats}")
            if got and not any((s.get("rx_pps") or 0) > 0 for s in got):
                problems.append(f"{where}: no packet reached the sink on {side} "
                                f"({'; '.join(n for s in got for n in s.notes)})")
            missed = max((s.get("unmatched") or 0 for s in got), default=0)
            if missed:
                problems.append(f"{where}: {side}: {missed:.0f} packets missed the per-flow "
                                "rules (the traffic is not the flows the point claims)")
    return problems


@pytest.mark.perf
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("kind", ORDER)
def test_perf(kind: str, perf_session: PerfSession) -> None:
    """Sweep one topology on every build that can run it and on the ceiling;
    the figures are in perf.html.  Skips, naming why, where no build can run the
    topology here (no DPDK build, no AF_XDP, the xdp-mode refused); fails where
    the measurement itself is broken."""
    topo = perf_session.run(kind)
    if topo.status == "skipped":
        pytest.skip(f"{kind}: {topo.reason}")
    problems = check_topology(topo, perf_session.plan.repeats)
    assert not problems, f"{kind}:\n" + "\n".join(problems)
