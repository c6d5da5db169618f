"""pytest plugin: results.json, JUnit XML and the HTML report of a run.

The records themselves are gathered by fixtures/records.py (`record_for`,
`case_record`, the run's facts); under pytest-xdist each worker attaches the
finished record to the teardown report, and the controller rebuilds it here,
in `pytest_runtest_logreport`, and is the only process that writes files.
"""
from __future__ import annotations

import shutil
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

# Loaded by -p reports.plugin alone too: asserts rewritten as in any plugin.
pytest.register_assert_rewrite("fixtures.records")
from fixtures.records import (  # noqa: F401, E402  (re-exported: the report's own users)
    LINKS_KEY,
    REPORT_RECORD_ATTR,
    REPORT_RUN_INFO_ATTR,
    RUN_INFO_KEY,
    add_index_link,
    output_dir,
    record_for,
    set_run_info,
)
from harness import teardown_trace  # noqa: E402
from harness.records import CaseRecord, RunRecord, known_bug_status  # noqa: E402
from harness.runtime import host_path  # noqa: E402
from reports.failures import PCAP_DIR, dissect_failures  # noqa: E402

# The records this report renders are gathered there (-p reports.plugin alone loads it).
pytest_plugins = ("fixtures.records",)


@dataclass
class _State:
    """What the controller gathers during the session."""

    out_dir: Path
    started_iso: str
    started: float
    cases: dict[str, CaseRecord] = field(default_factory=dict)
    report_path: str | None = None
    problem: str | None = None
    # nodeid -> the outcome its call phase reported ("" before that)
    unfinished: dict[str, str] = field(default_factory=dict)
    known_bugs: list[dict[str, Any]] = field(default_factory=list)
    order: dict[str, int] = field(default_factory=dict)  # nodeid -> its place in the collection


_STATE_KEY = pytest.StashKey[_State]()


@pytest.hookimpl(trylast=True)  # after fixtures/records.py chose the output directory
def pytest_configure(config: pytest.Config) -> None:
    """Set up the report's state, in the run's output directory."""
    config.stash[_STATE_KEY] = _State(
        out_dir=output_dir(config),
        started_iso=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        started=time.monotonic(),
    )
    if not _is_worker(config):
        config.pluginmanager.register(_Collector(config), "reports-collector")


class _Collector:
    """Controller-side hooks that gather records; a plugin object because they need the config."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = config.stash[_STATE_KEY]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A case the run was interrupted in has no teardown report (and no
        # record): remember its last phase, so that results.json still lists it.
        self.state.unfinished.setdefault(report.nodeid, "")
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.state.unfinished[report.nodeid] = (
                "xfailed" if hasattr(report, "wasxfail") and report.skipped
                else "xpassed" if hasattr(report, "wasxfail") else report.outcome)
        data = getattr(report, REPORT_RECORD_ATTR, None)
        if data is not None:
            delattr(report, REPORT_RECORD_ATTR)  # reports stay in memory; the record lives on here
            record = CaseRecord.from_json(data)
            self.state.cases.pop(record.nodeid, None)  # a rerun replaces the earlier record
            self.state.cases[record.nodeid] = record
        info = getattr(report, REPORT_RUN_INFO_ATTR, None)
        if info:  # workers' run info reaches the controller this way
            mine = self.config.stash.get(RUN_INFO_KEY, None) or {"backend": "", "versions": {}}
            set_run_info(self.config, mine["backend"] or info.get("backend", ""),
                         {**info.get("versions", {}), **mine["versions"]},
                         mine.get("ovs_source") or info.get("ovs_source", ""))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._order(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._order(ids)  # every worker collects the same ids; the first one says

    def _order(self, nodeids: Any) -> None:
        if not self.state.order:
            self.state.order = {nodeid: i for i, nodeid in enumerate(nodeids)}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            nodeid = report.nodeid or "<collection>"
            self.state.cases[nodeid] = CaseRecord(
                nodeid=nodeid, outcome="error", longrepr=f"collection failed\n{report.longreprtext}"
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write results.json and the HTML report (a case cut short by an interrupt
    included)."""
    config = session.config
    if _is_worker(config) or _STATE_KEY not in config.stash or config.option.collectonly:
        return
    state = config.stash[_STATE_KEY]
    for nodeid, outcome in state.unfinished.items():
        if nodeid not in state.cases:  # interrupted in this case: it did not finish
            # Its outcome as pytest (and junit.xml) counts it, if its test had
            # one; interrupted before that, an error.
            state.cases[nodeid] = CaseRecord(
                nodeid=nodeid, outcome=outcome or "error",
                longrepr=("the run was interrupted in this case's teardown" if outcome
                          else "the run was interrupted before this case finished"))
    # The collection's order, however the workers' completions interleaved;
    # records the collection did not list (collection errors) go last.
    listed = len(state.order)
    state.cases = dict(sorted(state.cases.items(),
                              key=lambda kv: (state.order.get(kv[0], listed), kv[0])))
    info = config.stash.get(RUN_INFO_KEY, None) or {}
    state.known_bugs = known_bug_status(info.get("known_bugs", []), list(state.cases.values()))
    backend = info.get("backend") or str(config.getoption("backend", default="") or "")
    run = RunRecord(
        started=state.started_iso,
        duration=round(time.monotonic() - state.started, 3),
        host=socket.gethostname(),
        backend=backend,
        versions=dict(info.get("versions", {})),
        ovs_source=str(info.get("ovs_source", "")),
        cases=list(state.cases.values()),
        known_bugs=state.known_bugs,
        argv=[str(a) for a in config.invocation_params.args],
    )
    with teardown_trace.step("write the reports (results.json, HTML)"):
        _write_reports(config, state, run)


def _write_reports(config: pytest.Config, state: Any, run: RunRecord) -> None:
    shutil.rmtree(state.out_dir / PCAP_DIR, ignore_errors=True)  # an earlier run's
    dissect_failures(run.cases, state.out_dir)
    run.dump(str(state.out_dir / "results.json"))
    try:
        from reports.render import render

        state.report_path = render(run, str(state.out_dir),
                                   all_pages=bool(config.getoption("reports_all_cases")),
                                   links=config.stash.get(LINKS_KEY, []))
    except Exception as exc:  # a broken report must not hide the test results
        state.problem = f"HTML report not written: {type(exc).__name__}: {exc}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Print the known bugs' status, and the report's path or why it was not written."""
    state = config.stash.get(_STATE_KEY, None)
    if state is None or _is_worker(config):
        return
    if any(b["status"] != "untested" for b in state.known_bugs):
        terminalreporter.write_sep("-", "known OVS bugs in this build")
        for bug in state.known_bugs:
            terminalreporter.write_line(f"{bug['key']}: {bug_status_text(bug)}",
                                        red=bug["status"] in ("absent", "mixed"))
    if state.report_path:
        terminalreporter.write_sep("-", f"OVS report: {host_path(state.report_path)}")
    elif state.problem:
        terminalreporter.write_sep("-", f"OVS report: {state.problem}", red=True)


def bug_status_text(bug: dict[str, Any]) -> str:
    """One known bug's status in a run, in words."""
    status, present, absent = bug["status"], bug["present"], bug["absent"]
    if status == "present":
        return f"present ({present} ids)"
    if status == "absent":
        return f"absent ({absent} ids): no longer reproduces; retire or re-scope the entry"
    if status == "mixed":
        return f"mixed: present in {present} ids, absent in {absent}"
    return "untested (no selected case runs into it)"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")
