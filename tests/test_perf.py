"""The perf package's pure parts: statistics and the A/B flag, the writers, and
the parsers of what OVS, testpmd and /proc print.  No OVS runs here."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import random
import struct
from pathlib import Path

import pytest

from harness.pmdstats import parse_pmd_stats
from perf import stats
from perf.kinds import KINDS, plan_cores
from perf.ovsstats import PortCounters, counters_delta, parse_dpctl_show, summarize_threads
from perf.records import (
    CSV_HEAD,
    Point,
    Run,
    Sample,
    Topology,
    csv_text,
    load_run,
    run_json,
    write_csv,
    write_json,
)
from perf.sysstat import bpffs_mounted, group_delta, parse_proc_stat, parse_task_stat
from perf.traffic import (
    DST_IP,
    UNMATCHED_COOKIE,
    flow_frame,
    openflow_rules,
    parse_stats_all,
    parse_unmatched,
)

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent

# -- statistics and the A/B flag ---------------------------------------------------


def test_summary_median_range_and_spread() -> None:
    s = stats.summarize([10.0, None, 12.0, 8.0, 11.0])
    assert s is not None
    assert (s.n, s.median, s.lo, s.hi) == (4, 10.5, 8.0, 12.0)
    assert s.spread == pytest.approx(4.0 / 10.5)
    assert stats.summarize([None, None]) is None
    assert stats.Summary(1, 0.0, 0.0, 0.0).spread is None


def test_interleave_alternates_the_order() -> None:
    assert stats.interleave(["c", "a", "b"], 0) == ["c", "a", "b"]
    assert stats.interleave(["c", "a", "b"], 1) == ["b", "a", "c"]
    assert stats.interleave(["a", "b"], 2) == ["a", "b"]


def test_noise_band_combines_the_spreads_never_below_the_floor() -> None:
    quiet = [100.0, 100.5, 100.2]
    assert stats.noise_band(quiet, quiet) == stats.NOISE_FLOOR
    noisy = [80.0, 100.0, 120.0]
    assert stats.noise_band(quiet, noisy) == pytest.approx(math.hypot(0.5 / 100.2, 0.4))
    assert stats.noise_band([1.0, 2.0], noisy) is None  # too few repeats
    # The pooled noise of one sample, as the standard error of a ratio of medians.
    assert stats.noise_band(quiet, quiet, sigma=0.02) == pytest.approx(
        stats.Z * 0.02 * math.sqrt(2) * stats.MEDIAN_SE / math.sqrt(3))


def test_a_real_change_beyond_the_noise_is_flagged_with_its_direction() -> None:
    base, slower = [100.0, 102.0, 99.0, 101.0, 100.0], [80.0, 81.0, 79.5, 80.5, 82.0]
    v = stats.compare(base, slower)
    assert v.flagged and v.direction == "slower"
    assert v.ratio == pytest.approx(80.5 / 100.0)
    assert "beyond the noise band" in v.note
    assert stats.compare(slower, base).direction == "faster"


def test_a_change_within_the_noise_is_not_flagged() -> None:
    base, cand = [100.0, 120.0, 90.0], [110.0, 95.0, 125.0]  # spreads ~27%
    v = stats.compare(base, cand)
    assert not v.flagged and v.ratio == pytest.approx(110 / 100)
    assert "within the noise band" in v.note


def test_without_enough_repeats_nothing_is_flagged() -> None:
    v = stats.compare([100.0], [50.0])
    assert not v.flagged and v.band is None and v.ratio == 0.5
    assert "no noise estimate" in v.note


def test_a_baseline_that_forwarded_nothing() -> None:
    assert stats.compare([0.0, 0.0, 0.0], [5.0, 5.0, 5.0]).flagged
    both = stats.compare([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert not both.flagged and both.ratio is None
    assert not stats.compare([], [1.0]).flagged


def _ab_run(rng: random.Random, sigma: float, shift: float, repeats: int = 5) -> Run:
    """A run of 39 points (13 levels x 3 sizes) whose samples are noise around
    a level; the candidate's level is `shift` times the baseline's."""
    points = []
    for i in range(39):
        level = rng.uniform(1e5, 1e7)
        samples = [_sample(side, r, level * (shift if side == "candidate" else 1.0)
                           * rng.gauss(1.0, sigma))
                   for r in range(repeats) for side in ("baseline", "candidate")]
        points.append(Point("pvp", 64 + i, 1, samples))
    topo = Topology("pvp", "PVP", "ran", points=points)
    return Run("t", 0.0, False, repeats, 1.0, {}, {"baseline": "A", "candidate": "A"}, [topo])


@pytest.mark.parametrize("sigma", [0.02, 0.05])
def test_the_same_build_against_itself_flags_nothing(sigma: float) -> None:
    """Self A/B runs of 39 points and 5 repeats, in noise of 2% and 5% per
    sample: no point is ever flagged; a 25% shift of the same noise is flagged
    at most points (so the flag is not merely mute)."""
    rng = random.Random(7)
    false = [p.verdict().flagged for _ in range(60) for p in _ab_run(rng, sigma, 1.0).points()]
    assert not any(false)
    moved = [p.verdict().flagged for _ in range(5) for p in _ab_run(rng, sigma, 0.75).points()]
    assert sum(moved) > 0.9 * len(moved)
    assert all(p.verdict().direction == "slower"
               for p in _ab_run(rng, sigma, 0.75).points() if p.verdict().flagged)


def test_pooled_noise_keeps_a_lucky_point_from_flagging() -> None:
    """Three samples that happen to agree closely give a tiny spread; the noise
    pooled over the topology's points still bounds the band from below."""
    lucky = stats.compare([100.0, 100.1, 100.0], [90.0, 90.1, 90.0])
    assert lucky.flagged  # by its own spread alone, 10% looks like a change
    pooled = stats.compare([100.0, 100.1, 100.0], [90.0, 90.1, 90.0], sigma=0.05)
    assert not pooled.flagged and pooled.band is not None and pooled.band > 0.1
    assert stats.pooled_sigma([[100.0, 110.0], [50.0, 55.0]]) == pytest.approx(
        1.4826 * (10 / 105) / 2 ** 0.5)
    assert stats.pooled_sigma([[1.0]]) is None


def test_ceiling_fraction() -> None:
    assert stats.fraction(stats.summarize([2.0]), stats.summarize([8.0])) == 0.25
    assert stats.fraction(stats.summarize([2.0]), None) is None
    assert stats.fraction(stats.summarize([2.0]), stats.summarize([0.0])) is None


# -- records: perf.json and perf.csv -------------------------------------------------


def _sample(side: str, repeat: int, rx: float, **more: float | None) -> Sample:
    return Sample(side, repeat, 2.0, {"rx_pps": rx, **more}, [])


def _run() -> Run:
    point = Point("pvp", 64, 100, [
        _sample("ceiling", 0, 4e6), _sample("baseline", 0, 1e6, cycles_per_pkt=900.0),
        _sample("candidate", 0, 0.7e6), _sample("ceiling", 1, 4.2e6),
        _sample("baseline", 1, 1.02e6), _sample("candidate", 1, 0.71e6),
        _sample("ceiling", 2, 4.1e6), _sample("baseline", 2, 0.99e6),
        _sample("candidate", 2, 0.69e6)])
    quiet = Point("pvp", 1500, 100, [_sample(s, r, 5e5) for r in range(3)
                                     for s in ("baseline", "candidate")])
    topo = Topology("pvp", "PVP", "ran", sides={"ceiling": "testpmd", "baseline": "A",
                                                "candidate": "B"}, points=[point, quiet])
    skipped = Topology("afxdp-native", "AF_XDP", "skipped", reason="no AF_XDP")
    return Run("2026-01-01T00:00:00+00:00", 12.5, False, 3, 2.0, {"cpus": "2"},
               {"baseline": "A", "candidate": "B"}, [topo, skipped])


def test_json_has_samples_summaries_fractions_and_verdicts(tmp_path: Path) -> None:
    run = _run()
    data = run_json(run)
    assert data["schema"] == 1 and data["ab"] is True
    point = data["topologies"][0]["points"][0]
    assert len(point["samples"]) == 9
    assert point["summary"]["baseline"]["rx_pps"]["median"] == 1e6
    assert point["summary"]["baseline"]["ceiling_fraction"] == pytest.approx(1e6 / 4.1e6)
    assert point["summary"]["baseline"]["cycles_per_pkt"]["n"] == 1
    assert point["ab"]["flagged"] is True and point["ab"]["direction"] == "slower"
    assert data["topologies"][0]["points"][1]["ab"]["flagged"] is False
    assert data["flagged"] == ["pvp 64B 100 flows"]
    path = tmp_path / "perf.json"
    write_json(run, str(path))
    json.loads(path.read_text())  # valid JSON
    back = load_run(str(path))
    assert back.topologies[1].reason == "no AF_XDP"
    assert back.points()[0].samples[4] == run.points()[0].samples[4]
    assert run_json(back) == data


def test_csv_has_one_row_per_point_and_side(tmp_path: Path) -> None:
    run = _run()
    path = tmp_path / "perf.csv"
    write_csv(run, str(path))
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert list(rows[0]) == list(CSV_HEAD)
    assert [(r["size"], r["side"]) for r in rows] == [
        ("64", "ceiling"), ("64", "baseline"), ("64", "candidate"),
        ("1500", "baseline"), ("1500", "candidate")]
    base, cand = rows[1], rows[2]
    assert float(base["rx_pps_median"]) == 1e6 and base["n"] == "3"
    assert float(base["rx_pps_min"]) == 0.99e6 and float(base["rx_pps_max"]) == 1.02e6
    assert float(base["ceiling_fraction"]) == pytest.approx(1e6 / 4.1e6, rel=1e-5)
    assert rows[0]["ceiling_fraction"] == ""  # the ceiling against itself: nothing
    assert base["ab_ratio"] == "" and cand["ab_flagged"] == "1"
    assert float(cand["ab_ratio"]) == pytest.approx(0.7, rel=1e-5)
    assert rows[4]["ab_flagged"] == "0"
    assert csv_text(run) == path.read_text()


# -- parsers: OVS, testpmd, /proc ----------------------------------------------------

PMD_STATS = """
Time: 02:05:23.552
Measurement duration: 2.187 s

pmd thread numa_id 0 core_id 0:

  Iterations:              2047364  (1.07 us/it)
  - Used TSC cycles:    5348230612  (100.0 % of total cycles)
  - idle iterations:       2041328  ( 39.6 % of used cycles)
  - busy iterations:          6036  ( 60.4 % of used cycles)
  - sleep iterations:            0  (  0.0 % of iterations)
  Sleep time (us):               0  (  0 us/iteration avg.)
  Rx packets:               383072  (175 Kpps, 8433 cycles/pkt)
  Datapath passes:          383072  (1.00 passes/pkt)
  - PHWOL hits:                  0  (  0.0 %)
  - Simple Match hits:           0  (  0.0 %)
  - EMC hits:               373072  ( 97.4 %)
  - SMC hits:                 8000  (  2.1 %)
  - Megaflow hits:            1990  (  0.5 %, 1.00 subtbl lookups/hit)
  - Upcalls:                    10  (  0.0 %, 0.0 us/upcall)
  - Lost upcalls:                0  (  0.0 %)
  Tx packets:               383072  (175 Kpps)
  Tx batches:                11971  (32.00 pkts/batch)

Time: 02:05:23.552
Measurement duration: 2.199 s

main thread:

  Rx packets:                   20  (0 Kpps)
  Datapath passes:              20  (1.00 passes/pkt)
  - Simple Match hits:          20  (100.0 %)
  Tx packets:                    0
"""


def test_pmd_stats_per_thread_and_summary() -> None:
    threads = parse_pmd_stats(PMD_STATS)
    assert [t.name for t in threads] == ["pmd thread numa_id 0 core_id 0", "main thread"]
    pmd, main = threads
    assert pmd.is_pmd and not main.is_pmd
    assert (pmd.used_cycles, pmd.idle_pct, pmd.busy_pct) == (5348230612, 39.6, 60.4)
    assert (pmd.rx, pmd.tx, pmd.passes) == (383072, 383072, 383072)
    assert pmd.hits == {"phwol": 0, "simple": 0, "emc": 373072, "smc": 8000,
                        "megaflow": 1990, "upcall": 10, "lost_upcall": 0}
    assert (main.used_cycles, main.rx, main.hits) == (None, 20, {"simple": 20})
    dp = summarize_threads(threads)
    assert dp.rx == 383092
    assert dp.cycles_per_pkt == pytest.approx(5348230612 / 383072)  # PMD threads only
    assert dp.busy_pct == pytest.approx(60.4)
    assert dp.hit_share["emc"] == pytest.approx(373072 / 383092)
    assert dp.hit_share["simple"] == pytest.approx(20 / 383092)
    assert summarize_threads(parse_pmd_stats(PMD_STATS.split("main thread")[1])) == \
        summarize_threads([])


DPCTL = """netdev@ovs-netdev:
  lookups: hit:840320 missed:0 lost:0
  port 2: v1 (dpdkvhostuserclient: vhost-server-path=/x/a.sock)
    RX packets:670560 errors:? dropped:12 overruns:? frame:?
    TX packets:668000 errors:? dropped:2400 aborted:? carrier:?
  port 3: t1 (tap), could not retrieve stats (No such device)  port 4: v2 (dpdk)
    RX packets:5 errors:0 dropped:? overruns:0 frame:0
    TX packets:7 errors:0 dropped:1 aborted:0 carrier:0
"""


def test_dpctl_show_counters_and_deltas() -> None:
    ports = parse_dpctl_show(DPCTL)
    assert ports["v1"] == PortCounters(670560, 668000, 12, 2400)
    assert ports["t1"] == PortCounters()
    assert ports["v2"] == PortCounters(5, 7, 0, 1)
    later = {"v1": PortCounters(670660, 668100, 12, 2500), "v2": PortCounters(2, 3, 0, 0)}
    # v2 restarted (counters went back): it counts from zero.
    assert counters_delta(ports, later, ["v1", "v2"]) == PortCounters(102, 103, 0, 100)


def test_testpmd_stats_all_and_unmatched_rule() -> None:
    block = ("  ######################## NIC statistics for port {p}  ########################\n"
             "  RX-packets: {rx}   RX-missed: 0          RX-bytes:  0\n  RX-errors: 0\n"
             "  RX-nombuf:  0\n  TX-packets: {tx}   TX-errors: 0          TX-bytes:  0\n")
    text = block.format(p=0, rx=19992000, tx=19733408) + block.format(p=1, rx=5, tx=6)
    assert parse_stats_all(text) == {0: (19992000, 19733408), 1: (5, 6)}
    dump = (f" cookie={UNMATCHED_COOKIE:#x}, duration=1s, table=0, n_packets=7, n_bytes=420, "
            "priority=0 actions=drop\n cookie=0x0, n_packets=99, priority=10,udp actions=output:2")
    assert parse_unmatched(dump) == 7


def test_task_stat_comm_with_spaces_and_parentheses() -> None:
    line = "42 (pmd-c00/id:7 (x)) R 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0 100 0"
    comm, seconds = parse_task_stat(line)
    assert comm == "pmd-c00/id:7 (x)"
    assert seconds == pytest.approx(200 / os.sysconf("SC_CLK_TCK"))
    before = {1: ("pmd-c00/id:7", 1.0), 2: ("handler1", 0.5)}
    after = {1: ("pmd-c00/id:7", 2.5), 2: ("handler1", 0.75), 3: ("revalidator2", 0.25)}
    split = group_delta(before, after, lambda c: "pmd" if c.startswith("pmd") else "other")
    assert split == {"pmd": 1.5, "other": 0.5}


def test_proc_stat_machine_times() -> None:
    hz = os.sysconf("SC_CLK_TCK")
    t = parse_proc_stat("cpu  100 10 50 800 20 5 15 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert t.busy == pytest.approx(180 / hz) and t.softirq == pytest.approx(15 / hz)
    assert t.steal == pytest.approx(7 / hz) and t.idle == pytest.approx(820 / hz)
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1 2 3\n")
    assert bpffs_mounted("bpf /sys/fs/bpf bpf rw,relatime 0 0\n")
    assert not bpffs_mounted("none /sys/fs/bpf tmpfs rw 0 0\n")


# -- the traffic -----------------------------------------------------------------


@pytest.mark.parametrize("size", [64, 1500, 7000])
def test_flow_frames_carry_the_flow_at_the_frame_size(size: int) -> None:
    """The frame counts the FCS (RFC 2544), so the capture holds size - 4 bytes;
    the IPv4 header sums to 0xffff (RFC 791); UDP lengths agree (RFC 768)."""
    frame = flow_frame(7, size)
    assert len(frame) == size - 4
    assert frame[12:14] == b"\x08\x00"
    ip = frame[14:34]
    words = sum(struct.unpack("!10H", ip))
    while words >> 16:
        words = (words & 0xFFFF) + (words >> 16)
    assert words == 0xFFFF
    assert struct.unpack("!H", ip[2:4])[0] == size - 4 - 14
    assert ip[16:20] == struct.pack("!I", DST_IP + 7) == bytes([10, 253, 0, 7])
    assert struct.unpack("!HHH", frame[34:40]) == (1000, 1001, size - 4 - 34)
    with pytest.raises(ValueError):
        flow_frame(0, 40)


def test_openflow_rules_one_per_flow_and_direction() -> None:
    lines = openflow_rules(1000).splitlines()
    assert len(lines) == 2001
    assert lines[0].startswith("priority=0,cookie=0x5eed")
    assert "in_port=1,udp,nw_dst=10.253.3.231,actions=output:2" in lines[1000]
    assert lines[-1] == "priority=10,in_port=2,udp,nw_dst=10.253.3.231,actions=output:1"


def test_core_layout() -> None:
    two = plan_cores({0, 1})
    assert (two.pmd, two.ovs_other, two.gen, two.shared, two.pmd_mask) == (0, 0, 1, False,
                                                                           "0x1")
    four = plan_cores({0, 1, 2, 3})
    assert (four.ovs_other, four.pmd, four.gen, four.pmd_mask) == (0, 1, 2, "0x2")
    one = plan_cores({3})
    assert one.shared and "ONE CPU ONLY" in one.describe()
    with pytest.raises(ValueError):
        plan_cores(set())


def test_kinds_leave_out_jumbo_frames_where_they_cannot_pass() -> None:
    sizes, why = KINDS["afxdp-native"].sizes((64, 1500, 7000))
    assert sizes == (64, 1500) and "7000 B frames are not measured" in why[0]
    assert "AF_XDP" in why[0]
    assert KINDS["pvp"].sizes((64, 7000)) == ((64, 7000), [])


# -- the marker ---------------------------------------------------------------


@pytest.mark.parametrize("markexpr,selected", [(None, 0), ("perf", len(KINDS))])
def test_perf_cases_are_deselected_unless_asked_for(pytester: pytest.Pytester,
                                                   markexpr: str | None, selected: int) -> None:
    """A plain run collects the perf ids and deselects them all; -m perf selects
    one per topology."""
    pytester._monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester._monkeypatch.chdir(ROOT)
    args = [str(ROOT / "cases" / "throughput" / "test_perf.py"), "--collect-only", "-q", "-p",
            "no:cacheprovider", f"--out-dir={pytester.path / 'out'}"]
    if markexpr:
        args += ["-m", markexpr]
    result = pytester.runpytest_subprocess(*args)
    text = result.stdout.str()
    expected = (f"no tests collected ({len(KINDS)} deselected)" if not selected
                else f"{len(KINDS)} tests collected")
    assert expected in text, text[-1500:]


def test_the_bound_is_the_offered_rate_where_a_generator_feeds_the_switch() -> None:
    # tap: testpmd's net_tap reference (0.012) is below OVS (0.134): no bound at all.
    point = Point("tap", 64, 1, [_sample("ceiling", 0, 0.012e6, tx_pps=0.5e6),
                                 _sample("baseline", 0, 0.134e6, tx_pps=0.6e6)])
    bound = point.bound()
    assert bound is not None and bound[0].median == 0.6e6 and "offered" in bound[1]
    assert point.ceiling_fraction("baseline") == pytest.approx(0.134 / 0.6)
    assert all(point.ceiling_fraction(s) <= 1 for s in point.sides())  # type: ignore[operator]


def test_a_reference_ovs_beats_bounds_nothing() -> None:
    # p2p: the ports are the source (no offered rate); testpmd is the bound only while above OVS.
    below = Point("p2p", 64, 1, [_sample("ceiling", 0, 5e6), _sample("baseline", 0, 9e6)])
    assert below.bound() is None and below.ceiling_fraction("baseline") is None
    above = Point("p2p", 64, 1, [_sample("ceiling", 0, 50e6), _sample("baseline", 0, 10e6)])
    assert above.ceiling_fraction("baseline") == pytest.approx(0.2)
