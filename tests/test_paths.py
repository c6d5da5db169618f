"""datapath/paths.judge: the counters of the second send, on the counts of
`dpif-netdev/pmd-stats-show` as both paths leave them."""
from __future__ import annotations

import pytest

from datapath.paths import PathStats, judge

ONE_UP = PathStats(received=1, passes=1, upcalls=1)
RECIRC_UP = PathStats(received=1, passes=2, upcalls=2)


@pytest.mark.parametrize("mode,fast", [
    ("emc", PathStats(received=1, passes=1, emc=1)),
    ("smc", PathStats(received=1, passes=1, smc=1)),
    ("dpcls", PathStats(received=1, passes=1, megaflow=1)),
    ("smc", PathStats(received=1, passes=1, simple=1)),
])
def test_one_frame_served_by_the_mode_cache(mode: str, fast: PathStats) -> None:
    assert judge(ONE_UP, fast, mode) == []


@pytest.mark.parametrize("mode,fast,wrong", [
    ("emc", PathStats(received=1, passes=1, upcalls=1), "went up again"),
    ("emc", PathStats(received=1, passes=1, megaflow=1), "with the emc cache on"),
    ("smc", PathStats(received=1, passes=1, emc=1), "with the smc cache on"),
    ("dpcls", PathStats(received=1, passes=1, lost=1), "went up again"),
    # the fast path forgot to recirculate: one pass where the upcall path took two
    ("dpcls", PathStats(received=1, passes=1, megaflow=1), "datapath passes"),
])
def test_a_second_send_not_served_as_it_must_be(mode: str, fast: PathStats, wrong: str) -> None:
    first = RECIRC_UP if wrong == "datapath passes" else ONE_UP
    problems = judge(first, fast, mode)
    assert problems and wrong in problems[0]


def test_recirculation_served_twice_by_the_cache() -> None:
    assert judge(RECIRC_UP, PathStats(received=1, passes=2, emc=2), "emc") == []


def test_kernel_packets_in_the_second_window_may_go_up_or_hit_another_cache() -> None:
    # CI, tap/veth rig, IPv6 underlay: two router solicitations or MLD
    # reports from br2 arrived with our frame; one took an upcall, the other
    # a megaflow an earlier one installed.  Ours hit the SMC.
    fast = PathStats(received=3, passes=3, smc=1, megaflow=1, upcalls=1)
    assert judge(ONE_UP, fast, "smc") == []


def test_kernel_packets_do_not_excuse_ours_missing_the_mode_cache() -> None:
    fast = PathStats(received=3, passes=3, megaflow=2, upcalls=1)
    assert "with the smc cache on" in judge(ONE_UP, fast, "smc")[0]
    fast = PathStats(received=2, passes=2, upcalls=2)
    assert "went up again" in judge(ONE_UP, fast, "smc")[0]


def test_kernel_packets_in_the_first_window_judge_the_second_on_its_own() -> None:
    first = PathStats(received=2, passes=2, upcalls=2)
    assert judge(first, PathStats(received=1, passes=1, emc=1), "emc") == []
    assert "with the emc cache on" in judge(first, PathStats(received=1, passes=1, smc=1),
                                            "emc")[0]
    assert "went up again" in judge(first, PathStats(received=1, passes=1, upcalls=1),
                                    "emc")[0]


STATS = """pmd thread numa_id 0 core_id 1:
  Iterations:                  120  (0.48 us/it)
  - Used TSC cycles:        149304  (100.0 % of total cycles)
  Rx packets:                    3  (0 Kpps, 9433 cycles/pkt)
  Datapath passes:               4  (1.33 passes/pkt)
  - PHWOL hits:                  0  (  0.0 %)
  - Simple Match hits:           0  (  0.0 %)
  - EMC hits:                    1  ( 25.0 %)
  - SMC hits:                    0  (  0.0 %)
  - Megaflow hits:               1  ( 25.0 %, 1.00 subtbl lookups/hit)
  - Upcalls:                     2  ( 50.0 %, 40.0 us/upcall)
  - Lost upcalls:                0  (  0.0 %)
  Tx packets:                    3  (0 Kpps)

main thread:
  Rx packets:                    2  (0 Kpps)
  Datapath passes:               2  (1.00 passes/pkt)
  - Simple Match hits:           1  ( 50.0 %)
  - Upcalls:                     1  ( 50.0 %, 0.0 us/upcall)
  - Lost upcalls:                0  (  0.0 %)
  Tx packets:                    0
"""


def test_counters_summed_over_the_threads() -> None:
    assert PathStats.parse(STATS) == PathStats(received=5, passes=6, simple=1, emc=1,
                                               megaflow=1, upcalls=3)
