"""Unit tests for `./ovstest flaky`: the shuffle (tooling/shuffle.py), the
verdicts (tooling/flakiness.py) and the driver (tooling/flaky.py), on synthetic
run results; no OVS."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from harness import concurrency
from harness.records import CaseRecord, RunRecord
from tooling import flakiness, flaky, launcher
from tooling.flakiness import Outcome, Run, classify, failure_message
from tooling.shuffle import shuffle_tree

A, B, C, D = (f"cases/test_m.py::test_{n}" for n in "abcd")
OTHER = "cases/test_other.py::test_x"

TRACEBACK = """    def test_a(sandbox):
>       assert got == want
E       AssertionError: frame 0: IP.chksum: expected 0x1234, got 0x0000
E       assert b'..' == b'..'
E         more detail

cases/test_m.py:12: AssertionError
----- Captured log call -----
ERROR something else"""


def run(index: int, outcomes: dict[str, str], load: str = "calm", workers: int = 0,
        order: tuple[str, ...] = ()) -> Run:
    return Run(index, 100 + index, load, workers, 10.0, 0,
               {n: Outcome(o, f"boom {index}" if o in ("failed", "error") else "")
                for n, o in outcomes.items()}, order or tuple(outcomes))


def verdict_of(verdicts: list[flakiness.Verdict], nodeid: str) -> flakiness.Verdict:
    return next(v for v in verdicts if v.nodeid == nodeid)


# --- verdicts -------------------------------------------------------------------

def test_each_id_gets_its_verdict_and_counts() -> None:
    runs = [run(1, {A: "passed", B: "failed", C: "passed", D: "xfailed", OTHER: "skipped"}),
            run(2, {A: "passed", B: "error", C: "failed", D: "xfailed", OTHER: "skipped"}),
            run(3, {A: "passed", B: "failed", C: "passed", D: "xfailed", OTHER: "skipped"})]
    verdicts = classify(runs)
    assert [(v.nodeid, v.verdict, v.runs, v.failures) for v in verdicts] == [
        (C, "flaky", 3, 1), (B, "failing", 3, 3),
        (A, "passed", 3, 0), (D, "xfailed", 3, 0), (OTHER, "skipped", 3, 0)]
    c = verdict_of(verdicts, C)
    assert (c.first_failure, c.first_failure_run) == ("boom 2", 2)
    assert (c.failed_seeds, c.passed_seeds) == ([102], [101, 103])
    b = verdict_of(verdicts, B)
    assert b.outcomes == {"failed": 2, "error": 1} and b.first_failure == "boom 1"
    assert b.load == b.order == ""  # an ordinary failure: no flake analysis
    assert flakiness.problems(verdicts) == 2
    assert flakiness.closing_line(verdicts, runs) == (
        "flaky: 5 ids x 3 runs: 1 flaky, 1 failing, 1 passed, 1 xfailed, 1 skipped")


def test_an_outcome_that_changes_without_failing_is_flaky_too() -> None:
    verdicts = classify([run(1, {A: "passed"}), run(2, {A: "xfailed"})])
    assert verdicts[0].verdict == "flaky" and verdicts[0].failures == 0
    assert verdicts[0].order == "outcome changed between runs: passed with seed 101, xfailed with seed 102"


def test_a_clean_set_of_runs_has_no_problems() -> None:
    runs = [run(k, {A: "passed", B: "passed"}) for k in (1, 2)]
    verdicts = classify(runs)
    assert flakiness.problems(verdicts) == 0
    assert flakiness.closing_line(verdicts, runs) == "flaky: 2 ids x 2 runs: 0 flaky, 0 failing, 2 passed"


def test_an_id_missing_from_a_run_counts_only_the_runs_it_was_in() -> None:
    verdicts = classify([run(1, {A: "passed", B: "passed"}), run(2, {A: "passed"})])
    assert verdict_of(verdicts, B).runs == 1 and verdict_of(verdicts, B).verdict == "passed"


# --- load and order ---------------------------------------------------------------

def test_failures_only_under_stress_are_load_dependent() -> None:
    runs = [run(0, {A: "passed"}), run(1, {A: "failed"}, load="hogs"),
            run(2, {A: "failed"}, load="hogs+n2", workers=2)]
    assert classify(runs)[0].load == "load-dependent: failed only under stress (hogs, hogs+n2)"


def test_a_failure_in_a_calm_run_is_not_the_load_alone() -> None:
    runs = [run(0, {A: "failed"}), run(1, {A: "failed"}, load="hogs"),
            run(2, {A: "passed"}, load="hogs")]
    assert classify(runs)[0].load == "not the load alone: failed under calm, hogs"
    runs = [run(0, {A: "failed"}), run(1, {A: "passed"}, load="hogs")]
    assert classify(runs)[0].load == "failed only in calm runs, passed under stress"


def test_runs_of_one_load_say_nothing_about_the_load() -> None:
    assert classify([run(1, {A: "failed"}), run(2, {A: "passed"})])[0].load == ""


def test_failing_right_after_the_same_id_is_named() -> None:
    runs = [run(1, {B: "passed", A: "failed"}, order=(C, B, A)),
            run(2, {B: "passed", A: "passed"}, order=(B, C, A)),
            run(3, {B: "passed", A: "failed"}, order=(B, A, C))]
    assert classify(runs)[0].order == (
        f"order-dependent: failed only when run right after {B}; "
        "failed in runs with seeds 101, 103, passed with 102")


def test_failing_when_run_first_is_named() -> None:
    runs = [run(1, {A: "failed"}, order=(A, B)), run(2, {A: "passed"}, order=(B, A))]
    assert classify(runs)[0].order.startswith("order-dependent: failed only when run first;")


def test_failing_after_some_earlier_id_is_named() -> None:
    runs = [run(1, {A: "failed"}, order=(OTHER, B, C, A)),
            run(2, {A: "failed"}, order=(B, OTHER, D, A)),
            run(3, {A: "passed"}, order=(B, D, A, OTHER))]
    assert classify(runs)[0].order == (
        f"order-dependent: failed only in runs where {OTHER} ran before it; "
        "failed in runs with seeds 101, 102, passed with 103")


def test_no_order_pattern_gives_the_seeds() -> None:
    runs = [run(1, {A: "failed"}, order=(B, A)), run(2, {A: "passed"}, order=(B, A))]
    assert classify(runs)[0].order == "no order pattern; failed in runs with seeds 101, passed with 102"


def test_parallel_runs_have_no_order_to_compare() -> None:
    runs = [run(1, {A: "failed"}, order=(A, B), workers=2), run(2, {A: "passed"}, order=(B, A))]
    assert classify(runs)[0].order == "failed in runs with seeds 101, passed with 102"


# --- messages, results, tables -----------------------------------------------------

def test_the_failure_message_is_pytests_first_e_lines() -> None:
    assert failure_message(TRACEBACK) == (
        "AssertionError: frame 0: IP.chksum: expected 0x1234, got 0x0000 | assert b'..' == b'..'")


def test_a_message_without_traceback_is_its_first_lines_and_is_bounded() -> None:
    assert failure_message("the shared rig could not be built\nsecond\nthird") == (
        "the shared rig could not be built | second")
    long = failure_message("E   " + "x" * 1000)
    assert len(long) == flakiness.MESSAGE_CHARS and long.endswith("...")


def test_outcomes_and_order_are_read_from_a_runs_files(tmp_path: Path) -> None:
    write_results(tmp_path, {A: "failed", B: "passed"}, order=[B, A])
    outcomes = flakiness.outcomes_of(tmp_path / "results.json")
    assert outcomes[A].outcome == "failed" and outcomes[A].message.startswith("AssertionError")
    assert outcomes[B] == Outcome("passed", "")
    assert flakiness.order_of(tmp_path / "order.json") == (B, A)
    assert flakiness.order_of(tmp_path / "missing.json") == ()


def test_the_table_lists_runs_timing_and_the_notes(tmp_path: Path) -> None:
    runs = [run(0, {A: "passed"}), Run(1, 101, "hogs", 0, 25.0, 1, {A: Outcome("failed", "boom")})]
    verdicts = classify(runs)
    flakiness.write(tmp_path, verdicts, runs, seed=100, stress=True)
    text = (tmp_path / "flaky.txt").read_text()
    assert "time per run: calm 10.0 s; hogs 25.0 s (x2.50 calm)" in text
    assert "first failure (run 1, seed 101, hogs): boom" in text
    assert "load-dependent: failed only under stress (hogs)" in text
    assert text.rstrip().endswith("flaky: 1 ids x 2 runs: 1 flaky, 0 failing, 0 passed")
    data = json.loads((tmp_path / "flaky.json").read_text())
    assert data["seed"] == 100 and data["summary"] == {"flaky": 1}
    assert data["ids"][0]["nodeid"] == A and data["timing"] == {"calm": 10.0, "hogs": 25.0}


# --- the shuffle -------------------------------------------------------------------

IDS = ([f"cases/test_m.py::test_f[{i}]" for i in range(6)]
       + [f"cases/test_m.py::TestK::test_g[{i}]" for i in range(4)]
       + [f"cases/test_n.py::test_h[{i}]" for i in range(5)] + ["cases/test_o.py::test_one"])


def shuffled(seed: int) -> list[str]:
    return [n for n, _ in shuffle_tree([(n, None) for n in IDS], random.Random(seed))]


def runs_of(order: list[str], key: str) -> int:
    """How many separate stretches the ids containing `key` form in `order`."""
    marks = [key in n for n in order]
    return sum(1 for i, m in enumerate(marks) if m and (i == 0 or not marks[i - 1]))


@pytest.mark.parametrize("seed", range(20))
def test_shuffle_keeps_modules_and_classes_together(seed: int) -> None:
    order = shuffled(seed)
    assert sorted(order) == sorted(IDS)
    for key in ("test_m.py", "test_n.py", "test_o.py", "TestK::"):
        assert runs_of(order, key) == 1, (key, order)


def test_shuffle_is_the_seeds_and_moves_modules_and_ids() -> None:
    assert shuffled(5) == shuffled(5)
    orders = {tuple(shuffled(seed)) for seed in range(20)}
    assert len(orders) == 20
    assert len({order[0].split("::")[0] for order in orders}) == 3  # modules move
    assert len({order.index("cases/test_n.py::test_h[0]") - order.index("cases/test_n.py::test_h[1]")
                for order in orders}) > 2  # ids within a module move


# --- the driver --------------------------------------------------------------------

def test_plans_alternate_the_load_under_stress() -> None:
    auto = concurrency.AUTO
    options = flaky.Options(runs=4, stress=True, seed=10)
    assert [(p.index, p.seed, p.load, p.workers, p.scale) for p in flaky.plan(options, ["cases"])] == [
        (0, 10, "calm", auto, 1), (1, 11, "hogs", auto, 1), (2, 12, "hogs+2x", auto, 2),
        (3, 13, "hogs", auto, 1), (4, 14, "hogs+2x", auto, 2)]
    assert [(p.load, p.workers) for p in flaky.plan(flaky.Options(2, False, 10), [])] == [
        ("calm", auto), ("calm", auto)]
    for chosen in (["cases", "-n", "3"], ["-n0"], ["-p", "no:xdist"]):
        own = flaky.plan(options, chosen)
        assert {p.workers for p in own} == {-1} and {p.load for p in own} == {"calm", "hogs"}


def test_the_sealed_command_wraps_pytest_in_hogs_only_under_stress() -> None:
    calm = flaky.Plan(1, 11, "calm", 0)
    argv, env = flaky.command(calm, ["-m", "pytest", "cases"], Path("/src/out/run-01"), 2)
    assert argv == ["python3", "-m", "pytest", "cases", "-p", "tooling.shuffle",
                    "--out-dir=/src/out/run-01"]
    assert env == {"OVSTEST_SHUFFLE_SEED": "11", "OVSTEST_SHUFFLE_ORDER": "/src/out/run-01/order.json"}
    argv, _ = flaky.command(flaky.Plan(2, 12, "hogs+n2", 2), ["-m", "pytest"], Path("/o"), 2)
    assert argv[:5] == ["sh", "-c", flaky.HOGS, "hogs", "2"] and argv[-2:] == ["-n", "2"]
    argv, _ = flaky.command(flaky.Plan(1, 11, "calm", concurrency.AUTO), ["-m", "pytest"], Path("/o"), 2)
    assert argv[-2:] == ["-n", "auto"]
    argv, _ = flaky.command(flaky.Plan(2, 12, "hogs+2x", concurrency.AUTO, 2), ["-m", "pytest"],
                            Path("/o"), 2)
    assert argv[-4:] == ["-n", "auto", "--auto-scale", "2"]
    argv, _ = flaky.command(flaky.Plan(1, 11, "hogs", 0), ["-m", "pytest"], Path("/o"), 2)
    assert "-n" not in argv  # 0: one id after another


@pytest.mark.parametrize("runs,seed,message", [
    ("0", None, "--runs 0: at least 1 run"), ("x", None, "--runs 'x': expected a whole number"),
    (None, "y", "--seed 'y': expected an integer")])
def test_bad_options_are_one_line(runs: str | None, seed: str | None, message: str) -> None:
    with pytest.raises(flaky.FlakyError, match=message.replace("(", r"\(")):
        flaky.parse_options(runs, False, seed)


def test_the_launcher_refuses_bad_flaky_input_before_provisioning(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert launcher.main(["flaky", "--runs", "0"]) == 2
    assert launcher.main(["suite", "--stress"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["ovstest: error: flaky: --runs 0: at least 1 run",
                   "ovstest: error: --runs and --stress are for './ovstest flaky'"]
    assert flaky.pop_out_dir(["-q", "--out-dir", "o", "-k", "x"]) == ("o", ["-q", "-k", "x"])
    assert flaky.pop_out_dir(["--out-dir=p"]) == ("p", [])


def write_results(out: Path, outcomes: dict[str, str], order: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cases = [CaseRecord(nodeid=n, outcome=o, longrepr=TRACEBACK if o == "failed" else "")
             for n, o in outcomes.items()]
    RunRecord("2025-01-01T00:00:00+00:00", 1.0, "host", "dummy", {}, cases).dump(
        str(out / "results.json"))
    (out / "order.json").write_text(json.dumps({"seed": 0, "order": order}))


def fake_seal(script: list[dict[str, str]], code: int = 0) -> flaky.Seal:
    """A seal that 'runs' pytest by writing the next scripted results."""
    def seal(argv: list[str], env: dict[str, str], log: Path) -> int:
        out = Path(next(a for a in argv if a.startswith("--out-dir=")).split("=", 1)[1])
        outcomes = script.pop(0)
        write_results(out, outcomes, list(outcomes))
        log.write_text("ERROR: usage: unrecognized arguments: --bogus\n")
        return code if code else int(any(o == "failed" for o in outcomes.values()))
    return seal


def test_drive_exits_1_for_a_flaky_id_and_writes_the_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seal = fake_seal([{A: "passed", B: "passed"}, {A: "failed", B: "passed"}])
    code = flaky.drive(flaky.Options(2, False, 7), ["-m", "pytest", "cases"], tmp_path, tmp_path, seal)
    assert code == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "flaky: 2 ids x 2 runs: 1 flaky, 0 failing, 1 passed"
    assert f"flaky: {A} (1 of 2 runs failed)" in out
    assert json.loads((tmp_path / "flaky.json").read_text())["summary"] == {"flaky": 1, "passed": 1}
    assert sorted(p.name for p in tmp_path.glob("run-*")) == ["run-01", "run-02"]


def test_drive_exits_0_when_every_run_passed(tmp_path: Path) -> None:
    (tmp_path / "run-09").mkdir()  # an earlier invocation's run goes
    seal = fake_seal([{A: "passed"}, {A: "passed"}, {A: "passed"}])
    assert flaky.drive(flaky.Options(2, True, 7), ["-m", "pytest"], tmp_path, tmp_path, seal) == 0
    assert sorted(p.name for p in tmp_path.glob("run-*")) == ["run-00", "run-01", "run-02"]


def test_a_run_pytest_refused_stops_the_hunt_with_its_error_line(tmp_path: Path) -> None:
    with pytest.raises(flaky.FlakyError, match="exit code 4 \\(usage error\\): ERROR: usage: "
                       "unrecognized arguments: --bogus"):
        flaky.drive(flaky.Options(2, False, 7), ["-m", "pytest"], tmp_path, tmp_path,
                    fake_seal([{A: "passed"}], code=4))

