"""fixtures/schedule.py: the xdist scheduler, driven by a simulated run of fake workers."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fixtures.areas import AREAS, OTHER, area_of
from fixtures.schedule import WaitAwareScheduling, plan_units

REPO = Path(__file__).resolve().parent.parent


class FakeWorker:
    """What the scheduler uses of xdist's WorkerController."""

    sent: list[int] = []  # every worker's, in the order handed out

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.queue: list[int] = []
        self.shutting_down = False
        self.busy_until = 0.0

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, "ids sent to a worker after its shutdown"
        self.queue.extend(indices)
        FakeWorker.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


class FakeConfig:
    """The options the scheduler reads, and the hook it reports a collection error to."""

    def __init__(self, **options: Any) -> None:
        self.options = {"dist": "load", "cpu_slots": None, "shard_durations": None, "alone": [],
                        **options}
        self.reports: list[Any] = []
        self.hook = SimpleNamespace(pytest_collectreport=lambda report: self.reports.append(report))

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


def ids(path: str, n: int) -> list[str]:
    return [f"{path}::test_x[{i}]" for i in range(n)]


SYSTEM = (ids("cases/system_userspace/test_system_ct_alg.py", 6)
          + ids("cases/system_userspace/test_system_traffic.py", 4))
MATRIX = ids("cases/matrices/test_tunnel_matrix.py", 200)
COLLECTION = MATRIX[:100] + SYSTEM + MATRIX[100:]


def durations(tmp_path: Path) -> Path:
    seconds = {**{n: 5.0 for n in SYSTEM[:6]}, **{n: 1.0 for n in SYSTEM[6:]},
               **{n: 0.1 for n in MATRIX}}
    path = tmp_path / "durations.json"
    path.write_text(json.dumps(seconds))
    return path


def simulate(sched: WaitAwareScheduling, workers: list[FakeWorker],
             seconds: dict[str, float]) -> tuple[list[tuple[float, float, str, str]], float, float]:
    """Run the ids as xdist's workers would: a worker starts its first queued id
    once it holds the next one (or was shut down).  Returns (start, end, worker,
    nodeid) per id, the time the last one ended, and when the last waiting id
    was handed to a worker."""
    for w in workers:
        sched.add_node(w)  # type: ignore[arg-type]
    for w in workers:
        sched.add_node_collection(w, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    ran: list[tuple[float, float, str, str]] = []
    now = 0.0
    running: dict[FakeWorker, tuple[float, int]] = {}
    waiting_given = 0.0
    while True:
        if sched.queues.any_of(False):
            waiting_given = now
        for w in workers:
            if w not in running and w.queue and (len(w.queue) >= 2 or w.shutting_down):
                running[w] = (now, w.queue[0])
        if not running:
            break
        w = min(running, key=lambda x: running[x][0] + seconds[COLLECTION[running[x][1]]])
        start, index = running.pop(w)
        now = start + seconds[COLLECTION[index]]
        w.queue.pop(0)
        ran.append((start, now, w.gateway.id, COLLECTION[index]))
        sched.mark_test_complete(w, index)  # type: ignore[arg-type]
        if sched.tests_finished:
            for x in workers:
                x.shutdown()
    return ran, now, waiting_given


def test_every_id_once_and_computing_ids_within_their_slots(tmp_path: Path) -> None:
    path = durations(tmp_path)
    seconds = json.loads(path.read_text())
    sched = WaitAwareScheduling(FakeConfig(shard_durations=str(path), cpu_slots=1),  # type: ignore[arg-type]
                                numnodes=4)
    ran, end, waiting_given = simulate(sched, [FakeWorker(f"gw{i}") for i in range(4)], seconds)
    assert sorted(r[3] for r in ran) == sorted(COLLECTION)
    assert not sched.has_pending
    # While waiting ids are left to hand out, at most one computing id runs at a time.
    assert 0 < waiting_given < end
    for start, stop, _, nodeid in ran:
        if "matrix" in nodeid and stop <= waiting_given:
            overlapping = [r for r in ran if "matrix" in r[3] and r[0] < stop and start < r[1]]
            assert len(overlapping) == 1, (nodeid, overlapping)
    # The longest ids start first: every 5 s one before any 1 s one.
    first = {n: s for s, _, _, n in ran}
    assert max(first[n] for n in SYSTEM[:6]) <= min(first[n] for n in SYSTEM[6:])
    # Four workers beat one: the serial time is the sum.
    assert end < sum(seconds.values()) / 2


def test_units_keep_a_file_together_up_to_their_length() -> None:
    seconds = [0.25] * 100 + [5.0] * 6 + [1.0] * 4 + [0.25] * 100
    units = plan_units(COLLECTION, seconds, unit_seconds=6.0)
    assert [len(u.indices) for u in units[:5]] == [24, 24, 24, 24, 4]  # 24 x 0.25 s make 6 s
    assert all(len({COLLECTION[i].split("::")[0] for i in u.indices}) == 1 for u in units)
    assert [u.computes for u in units if "system" in u.path] == [False] * len(
        [u for u in units if "system" in u.path])
    assert sorted(i for u in units for i in u.indices) == list(range(len(COLLECTION)))


def test_a_worker_that_dies_gives_back_its_ids(tmp_path: Path) -> None:
    path = durations(tmp_path)
    sched = WaitAwareScheduling(FakeConfig(shard_durations=str(path)), numnodes=2)  # type: ignore[arg-type]
    a, b = FakeWorker("gw0"), FakeWorker("gw1")
    for w in (a, b):
        sched.add_node(w)  # type: ignore[arg-type]
        sched.add_node_collection(w, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    given = list(a.queue)
    crashed = sched.remove_node(a)  # type: ignore[arg-type]
    assert crashed == COLLECTION[given[0]]
    # b gets the rest of a's ids, eventually: drain it.
    done = []
    while b.queue:
        index = b.queue.pop(0)
        done.append(index)
        sched.mark_test_complete(b, index)  # type: ignore[arg-type]
    assert set(done) == set(range(len(COLLECTION))) - {given[0]}


def test_alone_ids_are_handed_out_last(tmp_path: Path) -> None:
    """The two longest ids must run alone: each is a unit by itself, and neither
    goes to a worker before every other id has (LPT alone would take them first,
    and every worker would stand waiting for them)."""
    path = durations(tmp_path)
    seconds = json.loads(path.read_text())
    lone = SYSTEM[:2]
    units = plan_units(COLLECTION, [seconds[n] for n in COLLECTION], alone_patterns=lone)
    assert [[COLLECTION[i] for i in u.indices] for u in units if u.alone] == [[n] for n in lone]
    assert not any(u.alone for u in units if COLLECTION[u.indices[0]] not in lone)
    for patterns, last in ((list(lone), True), ([], False)):  # without them (it can fail)
        FakeWorker.sent = []
        sched = WaitAwareScheduling(FakeConfig(shard_durations=str(path), alone=patterns),  # type: ignore[arg-type]
                                    numnodes=3)
        ran, _, _ = simulate(sched, [FakeWorker(f"gw{i}") for i in range(3)], seconds)
        assert sorted(r[3] for r in ran) == sorted(COLLECTION)
        assert ({COLLECTION[i] for i in FakeWorker.sent[-2:]} == set(lone)) == last


def test_another_dist_mode_keeps_its_scheduler() -> None:
    from fixtures.schedule import pytest_xdist_make_scheduler
    assert pytest_xdist_make_scheduler(FakeConfig(dist="loadscope"), None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("path",
                         sorted(str(p.relative_to(REPO)) for p in (REPO / "cases").rglob("test_*.py")))
def test_every_case_module_is_in_an_area(path: str) -> None:
    area = area_of(f"{path}::test")
    assert area is not OTHER, f"{path}: no area of fixtures/areas.py names it"
    assert sum(a.holds(f"{path}::test") for a in AREAS) >= 1


def test_auto_workers_fit_the_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    from fixtures import schedule
    monkeypatch.setattr(schedule, "cores", lambda: 2)
    monkeypatch.setattr(schedule, "default_workers", lambda: 8)
    durations = {**{n: 5.0 for n in SYSTEM}, **{n: 0.1 for n in MATRIX}}  # 50 s waiting, 20 s computing
    auto = schedule.auto_workers
    assert auto(["cases"], durations) == 2 + 3  # two cores' computing, 50 s of waiting for three
    assert auto(["cases/matrices/test_tunnel_matrix.py"], durations) == 2
    assert auto(["cases/matrices/test_tunnel_matrix.py::test_x[3]"], durations) == 0  # one would do
    assert auto(["./cases/system_userspace/test_system_ct_alg.py"], durations) == 2  # 30 s of waiting
    assert auto(["cases/system_userspace/test_system_ct_alg.py"], {n: 60.0 for n in SYSTEM}) == 8  # at most
    assert auto(["cases"], durations, shards=6) == 2  # a sixth: 8 s waiting, 3 s computing
    assert auto(["cases/system_userspace/test_system_traffic.py"], durations) == 0
    assert auto(["cases/test_new.py"], durations) == 8  # nothing timed it: the most


def test_scheduling_starts_with_the_first_collection(tmp_path: Path) -> None:
    config = FakeConfig(shard_durations=str(durations(tmp_path)))
    sched = WaitAwareScheduling(config, numnodes=3)  # type: ignore[arg-type]
    first, late, odd = FakeWorker("gw0"), FakeWorker("gw1"), FakeWorker("gw2")
    for w in (first, late, odd):
        sched.add_node(w)  # type: ignore[arg-type]
    sched.add_node_collection(first, COLLECTION)  # type: ignore[arg-type]
    assert sched.collection_is_completed
    sched.schedule()
    assert len(first.queue) >= 2 and not late.queue
    sched.add_node_collection(late, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()  # xdist calls it again for every later collection
    assert len(late.queue) >= 2
    sched.add_node_collection(odd, COLLECTION[1:])  # type: ignore[arg-type]
    sched.schedule()
    assert not odd.queue  # a worker that collected other ids gets none, and the run fails
    assert [r.outcome for r in config.reports] == ["failed"]
