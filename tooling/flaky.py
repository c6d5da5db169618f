"""`./ovstest flaky`: run one selection several times, shuffled, and find the flaky ids.

Stdlib only: this drives the runs from the host; each run is a pytest process
of its own in the sealed runtime (the launcher's seal), writing its report to
RUN_DIR (run-01, run-02, ...) under the flaky output directory.

Run k shuffles its ids with random.Random(seed + k) (tooling/shuffle.py).
Every run takes its ids as the suite does, several at once (-n auto, as many
workers as the selection can use: harness/concurrency.py), unless the pytest
arguments choose (-n 0: one after another).  Without --stress, runs 1..N are calm.  With
--stress, a calm reference run 0 comes first (the time without stress, and
the runs a load-dependent failure passes in), then runs 1..N under CPU
contention: one busy loop per CPU, started inside the run's sealed namespace,
so they die with it however the run ends; the even ones also with twice the
workers -n auto takes.
The verdicts are tooling/flakiness.py's; they go to flaky.json and flaky.txt.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.concurrency import AUTO, chooses_workers
from harness.runtime import LaunchError
from tooling import flakiness
from tooling.flakiness import CALM, Run

DEFAULT_RUNS = 5
DEFAULT_OUT = "reports/out-flaky"
RUN_DIR = "run-{:02d}"
CROWD = 2  # a crowded run's workers: this many times -n auto's
# Busy loops started before pytest in the seal; pytest ends up their parent and,
# as the namespace's first process, takes them down when it exits.
HOGS = 'i=0; while [ "$i" -lt "$1" ]; do (while :; do :; done) & i=$((i+1)); done; shift; exec "$@"'

# (inner argv, extra environment, host path of the run's log) -> the exit code
Seal = Callable[[list[str], dict[str, str], Path], int]


class FlakyError(LaunchError):
    """Bad options, or a run that did not get as far as results; one line, exit 2."""


@dataclass(frozen=True)
class Options:
    """`./ovstest flaky`'s options: how many runs, whether under CPU stress, the shuffle seed."""

    runs: int
    stress: bool
    seed: int


@dataclass(frozen=True)
class Plan:
    """One run to do."""

    index: int
    seed: int
    load: str
    workers: int
    scale: int = 1  # with workers AUTO: -n auto starts this many times the workers it would


def parse_options(runs: str | None, stress: bool, seed: str | None) -> Options:
    """--runs N (at least 1, default 5), --stress, --seed S (default: drawn)."""
    try:
        count = DEFAULT_RUNS if runs is None else int(runs)
    except ValueError:
        raise FlakyError(f"flaky: --runs {runs!r}: expected a whole number") from None
    if count < 1:
        raise FlakyError(f"flaky: --runs {count}: at least 1 run")
    try:
        value = random.SystemRandom().randrange(100000) if seed is None else int(seed)
    except ValueError:
        raise FlakyError(f"flaky: --seed {seed!r}: expected an integer") from None
    return Options(count, stress, value)


def pop_out_dir(extra: list[str]) -> tuple[str | None, list[str]]:
    """--out-dir DIR or --out-dir=DIR taken out of the pytest arguments."""
    rest: list[str] = []
    value: str | None = None
    args = iter(extra)
    for arg in args:
        if arg == "--out-dir":
            value = next(args, None)
            if value is None:
                raise FlakyError("--out-dir needs a directory")
        elif arg.startswith("--out-dir="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return value, rest


def plan(options: Options, pytest_args: list[str]) -> list[Plan]:
    """Runs 1..N with the default concurrency; with --stress a calm run 0 first,
    odd runs with hogs, even ones with hogs and CROWD times the workers -n auto
    takes (unless the arguments chose workers already: workers -1, as many as
    they say, in every run)."""
    own = chooses_workers(pytest_args)
    usual = -1 if own else AUTO
    if not options.stress:
        return [Plan(k, options.seed + k, CALM, usual) for k in range(1, options.runs + 1)]
    plans = [Plan(0, options.seed, CALM, usual)]
    for k in range(1, options.runs + 1):
        crowded = k % 2 == 0 and not own
        plans.append(Plan(k, options.seed + k, "hogs+2x" if crowded else "hogs", usual,
                          CROWD if crowded else 1))
    return plans


def hog_count() -> int:
    """One busy loop per CPU this process may run on."""
    return len(os.sched_getaffinity(0)) or 1


def command(p: Plan, pytest_cmd: list[str], sealed_run_dir: Path,
            hogs: int) -> tuple[list[str], dict[str, str]]:
    """The sealed run's argv and environment.  `pytest_cmd` is python3's
    arguments (-m pytest TARGETS ARGS)."""
    argv = ["python3", *pytest_cmd, "-p", "tooling.shuffle", f"--out-dir={sealed_run_dir}"]
    if p.workers == AUTO:
        argv += ["-n", "auto", *(["--auto-scale", str(p.scale)] if p.scale > 1 else [])]
    elif p.workers > 0:
        argv += ["-n", str(p.workers)]
    if p.load != CALM:
        argv = ["sh", "-c", HOGS, "hogs", str(hogs), *argv]
    env = {"OVSTEST_SHUFFLE_SEED": str(p.seed),
           "OVSTEST_SHUFFLE_ORDER": str(sealed_run_dir / "order.json")}
    return argv, env


def error_line(log: Path) -> str:
    """The line of a run's log that says why pytest stopped (its last error line)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    said = [ln for ln in lines if "error" in ln.lower()]
    return (said or lines or [""])[-1][:300]


def one_run(p: Plan, pytest_cmd: list[str], host_out: Path, sealed_out: Path,
            seal: Seal) -> Run:
    """Do one run and read what it left."""
    name = RUN_DIR.format(p.index)
    host_dir = host_out / name
    shutil.rmtree(host_dir, ignore_errors=True)
    host_dir.mkdir(parents=True)
    log = host_dir / "pytest.log"
    argv, env = command(p, pytest_cmd, sealed_out / name, hog_count())
    started = time.monotonic()
    code = seal(argv, env, log)
    seconds = time.monotonic() - started
    results = host_dir / "results.json"
    if code == 5:
        raise FlakyError(f"flaky: the selection has no ids (run {p.index}, pytest exit code 5)")
    if code not in (0, 1) or not results.exists():
        why = {2: "interrupted, or collection failed", 3: "internal error",
               4: "usage error"}.get(code, "")
        raise FlakyError(f"flaky: run {p.index} ended with pytest exit code {code}"
                         f"{f' ({why})' if why else ''}: {error_line(log)} [log: {log}]")
    try:
        outcomes = flakiness.outcomes_of(results)
    except ValueError as exc:
        raise FlakyError(f"flaky: run {p.index}: {exc}") from None
    return Run(p.index, p.seed, p.load, p.workers, round(seconds, 1), code,
               outcomes, flakiness.order_of(host_dir / "order.json"))


def drive(options: Options, pytest_cmd: list[str], host_out: Path, sealed_out: Path,
          seal: Seal) -> int:
    """All runs, then the verdicts: 0 when no id is flaky or failing, else 1."""
    user_args = pytest_cmd[2:]
    plans = plan(options, user_args)
    host_out.mkdir(parents=True, exist_ok=True)
    for old in host_out.glob("run-[0-9][0-9]"):  # an earlier invocation's runs
        shutil.rmtree(old, ignore_errors=True)
    for name in ("flaky.json", "flaky.txt"):
        (host_out / name).unlink(missing_ok=True)
    say(f"ovstest flaky: seed {options.seed}, {len(plans)} run{'s' if len(plans) > 1 else ''}"
        f"{f' ({hog_count()} hogs in runs 1..{options.runs})' if options.stress else ''}; "
        f"logs and reports in {host_out}/run-NN")
    runs: list[Run] = []
    for p in plans:
        runs.append(one_run(p, pytest_cmd, host_out, sealed_out, seal))
        say(flakiness.run_line(runs[-1]))
    verdicts = flakiness.classify(runs)
    flakiness.write(host_out, verdicts, runs, options.seed, options.stress)
    say(flakiness.timing_line(runs))
    for v in verdicts:
        if v.verdict in ("flaky", "failing"):
            say(f"{v.verdict}: {v.nodeid} ({v.failures} of {v.runs} runs failed)")
            for note in flakiness.notes(v, runs):
                say(f"  {note}")
    say(f"table: {host_out / 'flaky.txt'}; rerun this order with --seed {options.seed}")
    say(flakiness.closing_line(verdicts, runs))
    return 1 if flakiness.problems(verdicts) else 0


def say(line: str) -> None:
    """Print a line of progress at once."""
    print(line, flush=True)
    sys.stderr.flush()
