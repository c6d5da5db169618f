"""How many ids a run takes at once: the default, and whether the arguments chose.

Stdlib only: the launcher (tooling/cli.py) and the flake hunter
(tooling/flaky.py) decide on the bare host; fixtures/schedule.py, the
pytest-xdist scheduler, answers `-n auto` with the same number.
"""
from __future__ import annotations

import os

# Most ids wait on the kernel, timers and OVS's threads: on 2 cores the main
# job ran fastest with 4 workers a core (./ovstest bench --concurrency --workers
# measures it).  -n auto takes at most that many, fewer for a small selection
# (fixtures/schedule.py's auto_workers).
WORKERS_PER_CORE = 4
AUTO = -2  # a flake hunter's run that leaves the number to -n auto
CONCURRENT_MODES = ("suite", "test", "compare")  # the modes that run ids concurrently by default


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) or 1


def default_workers() -> int:
    """The most pytest-xdist workers `-n auto` starts."""
    return WORKERS_PER_CORE * cores()


def chooses_workers(pytest_args: list[str]) -> bool:
    """Whether the pytest arguments already say how many pytest-xdist workers
    (-n N, -n 0 for none, --numprocesses) or turn xdist off (-p no:xdist)."""
    for i, a in enumerate(pytest_args):
        if a in ("-n", "--numprocesses") or a.startswith("--numprocesses=") \
                or (a.startswith("-n") and not a.startswith("--")):
            return True
        if a == "-pno:xdist" or (a == "no:xdist" and i > 0 and pytest_args[i - 1] == "-p"):
            return True
    return False


def names_single_tests(pytest_args: list[str]) -> bool:
    """Whether the arguments select one or two tests by node id (PATH::NAME) and
    nothing else: a developer's rerun, which starting workers would only slow."""
    targets = [a for a in pytest_args if not a.startswith("-") and ("::" in a or a.endswith(".py")
                                                                     or "/" in a)]
    return 0 < len(targets) <= 2 and all("::" in a for a in targets)


def with_default(mode: str, pytest_args: list[str]) -> list[str]:
    """The pytest arguments with the default concurrency (-n auto) where the mode
    runs ids concurrently and the arguments do not choose (nor only list ids)."""
    if mode not in CONCURRENT_MODES or chooses_workers(pytest_args) \
            or names_single_tests(pytest_args) \
            or any(a in ("--collect-only", "--co") for a in pytest_args):
        return pytest_args
    return ["-n", "auto", *pytest_args]
