"""pytest glue for `./ovstest perf`: the `perf` marker, its options, the session
that runs the topologies, and perf.html / perf.json / perf.csv at the end.

Tests marked `perf` are deselected unless the -m expression names the marker
(`-m perf`, as `./ovstest perf` passes): a plain `./ovstest suite` or `test`
never runs a benchmark.
"""
from __future__ import annotations

import os
import shutil
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

from harness.install import InstallError, OvsInstall

if TYPE_CHECKING:  # the sweep, its kinds and the report load only where perf runs
    from perf.kinds import CoreLayout
    from perf.records import Topology
    from perf.sweep import Plan

SESSION_KEY = pytest.StashKey["PerfSession"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The --perf-* options."""
    group = parser.getgroup("perf", "datapath performance (./ovstest perf)")
    group.addoption("--perf-quick", action="store_true", default=False,
                    help="one point per topology (64 B, 1 flow), one repeat (three for A/B)")
    group.addoption("--perf-baseline", default=None, metavar="OVS",
                    help="A/B: the baseline build ('runtime' for the package)")
    group.addoption("--perf-candidate", default=None, metavar="OVS",
                    help="A/B: the candidate build (may be the baseline: a noise check)")
    group.addoption("--perf-repeats", type=int, default=None, help="samples per point and side")
    group.addoption("--perf-window", type=float, default=None, help="seconds per sample")
    group.addoption("--perf-sizes", default=None, help="frame sizes, e.g. 64,1500,7000")
    group.addoption("--perf-flows", default=None, help="flow counts, e.g. 1,100,1000")
    group.addoption("--perf-no-ceiling", action="store_true", default=False,
                    help="do not measure the testpmd ceiling")


def pytest_configure(config: pytest.Config) -> None:
    """Register the perf marker."""
    config.addinivalue_line("markers", "perf: a datapath benchmark (./ovstest perf); "
                            "deselected unless -m names it")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the perf-marked cases unless -m names perf."""
    if "perf" in (config.option.markexpr or ""):
        return
    kept = [i for i in items if i.get_closest_marker("perf") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def _ints(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip()) if text else default


def make_plan(config: pytest.Config, ab: bool) -> Plan:
    """The sweep's plan from the options: sizes, flow counts, repeats, window."""
    from perf.sweep import FULL_FLOWS, FULL_SIZES, QUICK, QUICK_AB_REPEATS, Plan
    quick = bool(config.getoption("perf_quick"))
    base = QUICK if quick else Plan()
    repeats = config.getoption("perf_repeats") or (
        max(base.repeats, QUICK_AB_REPEATS) if ab else base.repeats)
    return Plan(sizes=_ints(config.getoption("perf_sizes"), base.sizes if quick else FULL_SIZES),
                flows=_ints(config.getoption("perf_flows"), base.flows if quick else FULL_FLOWS),
                repeats=repeats, window=config.getoption("perf_window") or base.window,
                warmup=base.warmup)


class PerfSession:
    """Runs the topologies the tests ask for and keeps what they measured."""

    def __init__(self, config: pytest.Config, builds: dict[str, OvsInstall]) -> None:
        from fixtures.records import output_dir
        from perf.kinds import plan_cores
        from perf.records import AB_SIDES
        self.config = config
        self.builds = builds
        self.ab = all(side in builds for side in AB_SIDES)
        self.plan = make_plan(config, self.ab)
        self.layout: CoreLayout = plan_cores(frozenset(os.sched_getaffinity(0)))
        self.out_dir = output_dir(config)
        self.workdir = self.out_dir / "perf-runs"
        self.started = time.monotonic()
        self.started_iso = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.topologies: list[Topology] = []
        self.notes: list[str] = []
        self.bpffs = ""
        self.say(f"perf: {self.layout.describe()}")
        self.say(f"perf: plan: sizes {self.plan.sizes}, flows {self.plan.flows}, "
                 f"{self.plan.repeats} repeat(s), {self.plan.window} s windows")
        for side, install in builds.items():
            self.say(f"perf: {side}: {install.describe()}; DPDK "
                     f"{install.dpdk_version or 'none (the DPDK topologies need a DPDK build)'}")

    def say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line)

    def run(self, kind_name: str) -> Topology:
        from perf.kinds import KINDS
        from perf.records import Topology
        from perf.sweep import run_topology
        from perf.sysstat import ensure_bpffs
        kind = KINDS[kind_name]
        if kind.xdp_mode and not self.bpffs:
            self.bpffs = ensure_bpffs()
            self.notes.append(self.bpffs)
        shutil.rmtree(self.workdir / kind.name, ignore_errors=True)  # an earlier run's
        try:
            topo = run_topology(kind, self.builds, self.layout, self.plan,
                                self.workdir / kind.name, self.say,
                                ceiling=not self.config.getoption("perf_no_ceiling"))
        except BaseException as exc:
            topo = Topology(kind.name, kind.title, "failed",
                            reason=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                            layout=self.layout.describe())
            self.topologies.append(topo)
            raise
        self.topologies.append(topo)
        if not self.config.getoption("keep_sandbox"):  # evidence is kept when it failed
            shutil.rmtree(self.workdir / kind.name, ignore_errors=True)
        return topo

    def finish(self) -> str | None:
        from perf import report
        from perf.records import Run
        if not self.topologies:
            return None
        host: dict[str, Any] = {
            "cpus": f"{len(self.layout.cpus)} ({','.join(map(str, self.layout.cpus))})",
            "cpu model": _cpu_model(), "kernel": os.uname().release,
            "load average at the end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "memory": "no hugepages: every DPDK process runs with --no-huge --in-memory"}
        run = Run(self.started_iso, round(time.monotonic() - self.started, 1),
                  bool(self.config.getoption("perf_quick")), self.plan.repeats,
                  self.plan.window, host,
                  {side: install.describe() for side, install in self.builds.items()},
                  self.topologies, self.notes)
        return report.write(run, str(self.out_dir))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _locate(given: str, side: str) -> OvsInstall:
    try:
        return OvsInstall.locate(None if given in ("runtime", "packaged") else given,
                                 chosen_by=f"--{side}")
    except InstallError as exc:
        raise pytest.UsageError(f"--perf-{side}: {exc}") from None


@pytest.fixture(scope="session")
def perf_session(pytestconfig: pytest.Config) -> PerfSession:
    """The session's perf run: the OVS builds to measure (A and B, or the one under
    test)."""
    session = pytestconfig.stash.get(SESSION_KEY, None)
    if session is None:
        base, cand = (pytestconfig.getoption("perf_baseline"),
                      pytestconfig.getoption("perf_candidate"))
        if bool(base) != bool(cand):
            raise pytest.UsageError("--perf-baseline and --perf-candidate go together")
        if base and cand:
            builds = {"baseline": _locate(base, "baseline"),
                      "candidate": _locate(cand, "candidate")}
        else:
            from fixtures.plugin import _install
            builds = {"ovs": _install(pytestconfig)}
        session = PerfSession(pytestconfig, builds)
        pytestconfig.stash[SESSION_KEY] = session
    return session


@pytest.hookimpl(tryfirst=True)  # before reports.plugin renders the index that links it
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the perf report and link it from the index."""
    perf = session.config.stash.get(SESSION_KEY, None)
    if perf is None:
        return
    page = perf.finish()
    if page:
        from fixtures.records import add_index_link
        add_index_link(session.config, "Performance", os.path.basename(page))
        perf.say(f"perf: {page} (perf.json, perf.csv and the figures beside it)")


