"""Per-id verdicts over several runs of one selection (`./ovstest flaky`).

Stdlib only: the launcher runs this on the host, after each sealed run.

A run is what one pytest process left: every id's outcome (from its
results.json), the order its ids were drawn in (tooling/shuffle.py), the load
it ran under and how long it took.  Per id:

- "flaky": it failed (failed or error) in some runs and not in others, or its
  outcome otherwise changed between runs (passed in one, xfailed in another);
- "failing": it failed in every run, an ordinary failure, not a flake;
- else the outcome it had every time: "passed", "skipped", "xfailed", "xpassed".

For a flaky id it says whether the failures followed the load (only in runs
under stress, while a calm run passed) and the order (the same id right before
it, or some ids before it, in every failing run and in no passing one; only
runs without pytest-xdist have one order), and gives its first failure message.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.records import RunRecord

FAILED = ("failed", "error")
CALM = "calm"
VERDICT_ORDER = ("flaky", "failing", "xpassed", "xfailed", "skipped", "passed")
TALLY_ORDER = ("failed", "error", "passed", "xfailed", "skipped", "xpassed")  # a run's line
MESSAGE_CHARS = 240
LISTED_BEFORE = 3  # ids named in "failed only when ... ran before it"


@dataclass(frozen=True)
class Outcome:
    """One id in one run: its outcome, and for a failure its first message."""

    outcome: str
    message: str = ""


@dataclass(frozen=True)
class Run:
    """One pytest process of the flaky driver."""

    index: int
    seed: int
    load: str  # "calm", "hogs" (one busy loop per CPU), "hogs+nN" (and pytest -n N)
    # pytest-xdist workers (-1: as many as the pytest arguments say, -2: -n auto); 0: the ids
    # ran one after another, in `order`
    workers: int
    seconds: float  # wall time of the sealed run
    exit_code: int
    outcomes: dict[str, Outcome]
    order: tuple[str, ...] = ()  # the order drawn; () when unknown


@dataclass
class Verdict:
    """What the runs say about one id."""

    nodeid: str
    verdict: str
    runs: int
    failures: int
    outcomes: dict[str, int]
    failed_seeds: list[int] = field(default_factory=list)
    passed_seeds: list[int] = field(default_factory=list)
    first_failure: str = ""
    first_failure_run: int | None = None
    load: str = ""  # for a flaky id: how its failures followed the load
    order: str = ""  # for a flaky id: how its failures followed the order


def failure_message(longrepr: str) -> str:
    """The first line or two that say why: pytest's "E" lines, else the text's
    first lines (a pytest.fail(pytrace=False) message)."""
    text = longrepr.split("\n----- ", 1)[0]  # captured output sections follow
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    said = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    picked = [ln for ln in said if ln][:2] or [ln.strip() for ln in lines[:2]]
    message = " | ".join(picked)
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS - 3] + "..."


def outcomes_of(results: Path) -> dict[str, Outcome]:
    """Every id's outcome in one run's results.json, in the order it lists them."""
    run = RunRecord.load(str(results))
    return {case.nodeid: Outcome(case.outcome, failure_message(case.longrepr)
                                 if case.outcome in FAILED else "")
            for case in run.cases}


def order_of(path: Path) -> tuple[str, ...]:
    """The order tooling/shuffle.py wrote; () when the run wrote none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    order = data.get("order") if isinstance(data, dict) else None
    return tuple(str(n) for n in order) if isinstance(order, list) else ()


def classify(runs: list[Run]) -> list[Verdict]:
    """One verdict per id seen in any run: flaky ones first, then failing, then
    the rest, each group by node id."""
    nodeids = sorted({nodeid for run in runs for nodeid in run.outcomes})
    verdicts = [_verdict(nodeid, runs) for nodeid in nodeids]
    return sorted(verdicts, key=lambda v: VERDICT_ORDER.index(v.verdict)
                  if v.verdict in VERDICT_ORDER[:2] else len(VERDICT_ORDER))


def _verdict(nodeid: str, runs: list[Run]) -> Verdict:
    mine = [run for run in runs if nodeid in run.outcomes]
    failed = [run for run in mine if run.outcomes[nodeid].outcome in FAILED]
    passed = [run for run in mine if run.outcomes[nodeid].outcome not in FAILED]
    counts = Counter(run.outcomes[nodeid].outcome for run in mine)
    verdict = ("failing" if not passed else "flaky" if failed or len(counts) > 1
               else next(iter(counts)))
    result = Verdict(nodeid, verdict, len(mine), len(failed), dict(counts),
                     failed_seeds=[r.seed for r in failed], passed_seeds=[r.seed for r in passed])
    if failed:
        result.first_failure = failed[0].outcomes[nodeid].message
        result.first_failure_run = failed[0].index
    if verdict == "flaky" and failed:
        result.load = load_pattern(failed, passed)
        result.order = order_pattern(nodeid, failed, passed)
    elif verdict == "flaky":
        result.order = "outcome changed between runs: " + ", ".join(
            f"{run.outcomes[nodeid].outcome} with seed {run.seed}" for run in mine)
    return result


def load_pattern(failed: list[Run], passed: list[Run]) -> str:
    """How a flaky id's failures followed the load, in words ("" if the runs had one load)."""
    loads = {run.load for run in failed + passed}
    if len(loads) < 2:
        return ""
    failed_loads = sorted({run.load for run in failed})
    if CALM not in failed_loads and any(run.load == CALM for run in passed):
        return f"load-dependent: failed only under stress ({', '.join(failed_loads)})"
    if failed_loads == [CALM]:
        return "failed only in calm runs, passed under stress"
    return f"not the load alone: failed under {', '.join(failed_loads)}"


def order_pattern(nodeid: str, failed: list[Run], passed: list[Run]) -> str:
    """How a flaky id's failures followed the order of the serial runs, in words."""
    seeds = (f"failed in runs with seeds {_seeds(failed)}"
             + (f", passed with {_seeds(passed)}" if passed else ""))
    serial_failed = [_before(run, nodeid) for run in failed if run.workers == 0 and run.order]
    serial_passed = [_before(run, nodeid) for run in passed if run.workers == 0 and run.order]
    if not serial_failed or not serial_passed:
        return seeds
    last_failed = {before[-1] if before else "" for before in serial_failed}
    last_passed = {before[-1] if before else "" for before in serial_passed}
    if len(last_failed) == 1 and not last_failed & last_passed:
        previous = next(iter(last_failed))
        where = f"right after {previous}" if previous else "first"
        return f"order-dependent: failed only when run {where}; {seeds}"
    always = set.intersection(*(set(before) for before in serial_failed))
    never = always - set().union(*(set(before) for before in serial_passed))
    if never:
        named = sorted(never)
        more = f" (and {len(named) - LISTED_BEFORE} more)" if len(named) > LISTED_BEFORE else ""
        return (f"order-dependent: failed only in runs where {', '.join(named[:LISTED_BEFORE])}"
                f"{more} ran before it; {seeds}")
    return f"no order pattern; {seeds}"


def _before(run: Run, nodeid: str) -> tuple[str, ...]:
    """The ids that ran before `nodeid` in a serial run."""
    try:
        return run.order[:run.order.index(nodeid)]
    except ValueError:
        return ()


def _seeds(runs: list[Run]) -> str:
    return ", ".join(str(run.seed) for run in runs)


def problems(verdicts: list[Verdict]) -> int:
    """How many ids are flaky or failing (the exit code is 1 when any are)."""
    return sum(v.verdict in ("flaky", "failing") for v in verdicts)


def closing_line(verdicts: list[Verdict], runs: list[Run]) -> str:
    """`flaky: 24 ids x 5 runs: 0 flaky, 0 failing, 24 passed[, N xfailed...]`."""
    counts = Counter(v.verdict for v in verdicts)
    parts = [f"{counts[name]} {name}" for name in ("flaky", "failing", "passed")]
    parts += [f"{counts[name]} {name}" for name in VERDICT_ORDER[2:5] if counts[name]]
    return f"flaky: {len(verdicts)} ids x {len(runs)} runs: {', '.join(parts)}"


def timing(runs: list[Run]) -> dict[str, float]:
    """Mean wall seconds of a run per load, calm first."""
    by_load: dict[str, list[float]] = {}
    for run in sorted(runs, key=lambda r: r.load != CALM):
        by_load.setdefault(run.load, []).append(run.seconds)
    return {load: round(sum(s) / len(s), 1) for load, s in by_load.items()}


def timing_line(runs: list[Run]) -> str:
    """`time per run: calm 14.2 s; hogs 25.0 s (x1.76 calm); ...`."""
    means = timing(runs)
    calm = means.get(CALM)
    parts = []
    for load, seconds in means.items():
        ratio = f" (x{seconds / calm:.2f} calm)" if calm and load != CALM else ""
        parts.append(f"{load} {seconds:.1f} s{ratio}")
    return "time per run: " + "; ".join(parts)


def run_line(run: Run) -> str:
    """`run 1 seed 43 hogs: 21.4 s, exit 0, 15 passed, 2 xfailed`."""
    counts = Counter(o.outcome for o in run.outcomes.values())
    tally = ", ".join(f"{n} {name}" for name, n in sorted(
        counts.items(), key=lambda kv: TALLY_ORDER.index(kv[0]) if kv[0] in TALLY_ORDER else 99))
    workers = f", -n {run.workers}" if run.workers > 0 else ", -n auto" if run.workers == -2 else ""
    return (f"run {run.index} seed {run.seed} {run.load}{workers}: "
            f"{run.seconds:.1f} s, exit {run.exit_code}, {tally or 'no ids'}")


def table(verdicts: list[Verdict], runs: list[Run], seed: int) -> str:
    """flaky.txt: the runs, the time per load, then one row per id."""
    lines = [f"seed {seed}: run k shuffles with random.Random({seed} + k)", ""]
    lines += [run_line(run) for run in runs]
    lines += [timing_line(runs), "", f"{'verdict':8} {'runs':>4} {'fails':>5}  id"]
    for v in verdicts:
        lines.append(f"{v.verdict:8} {v.runs:4} {v.failures:5}  {v.nodeid}")
        lines += [f"{'':21}{note}" for note in notes(v, runs)]
    lines += ["", closing_line(verdicts, runs)]
    return "\n".join(lines) + "\n"


def notes(v: Verdict, runs: list[Run]) -> list[str]:
    """The lines under a flaky or failing id: first failure, load, order."""
    out = []
    if v.first_failure_run is not None:
        run = next(r for r in runs if r.index == v.first_failure_run)
        out.append(f"first failure (run {run.index}, seed {run.seed}, {run.load}): "
                   f"{v.first_failure or '(no message)'}")
    return out + [text for text in (v.load, v.order) if text]


def write(out: Path, verdicts: list[Verdict], runs: list[Run], seed: int,
          stress: bool) -> None:
    """flaky.json and flaky.txt into `out`."""
    data = {
        "seed": seed, "stress": stress, "timing": timing(runs),
        "runs": [{k: v for k, v in asdict(run).items() if k not in ("outcomes", "order")}
                 for run in runs],
        "summary": dict(Counter(v.verdict for v in verdicts)),
        "ids": [asdict(v) for v in verdicts],
    }
    (out / "flaky.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (out / "flaky.txt").write_text(table(verdicts, runs, seed), encoding="utf-8")
