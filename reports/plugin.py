"""pytest plugin: one CaseRecord per test, results.json, JUnit XML and the HTML report.

Code that has the pytest item (or `request.node`) attaches evidence with
`record_for(item)`; tests and fixtures can ask for the `case_record` fixture.
Under pytest-xdist each worker attaches the finished record, as plain JSON, to the
teardown report; the controller rebuilds it in `pytest_runtest_logreport` and is the
only process that writes files.
"""
from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from harness import teardown_trace
from harness.records import DETAIL_OUTCOMES, FAILED_OUTCOMES, CaseRecord, RunRecord, known_bug_status
from harness.runtime import host_path
from reports.failures import PCAP_DIR, dissect_failures
from reports.upstream import DEFAULT_FILE

RECORD_KEY = pytest.StashKey[CaseRecord]()
RUN_INFO_KEY = pytest.StashKey[dict[str, Any]]()

# Attributes set on teardown reports; pytest serialises report.__dict__ for xdist.
REPORT_RECORD_ATTR = "ovs_case_record"
REPORT_RUN_INFO_ATTR = "ovs_run_info"

MAX_PARAM_CHARS = 300
MAX_SECTION_CHARS = 20000


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
    links: list[tuple[str, str]] = field(default_factory=list)  # extra index links
    known_bugs: list[dict[str, Any]] = field(default_factory=list)
    order: dict[str, int] = field(default_factory=dict)  # nodeid -> its place in the collection


_STATE_KEY = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The report's options: --out-dir and the others."""
    group = parser.getgroup("reports", "OVS datapath test reports")
    group.addoption(
        "--out-dir", dest="reports_out_dir", default=None, metavar="DIR",
        help="where results.json, index.html, junit.xml and artifacts go "
             "(default: reports/out under the rootdir)",
    )
    group.addoption(
        "--report-all-cases", dest="reports_all_cases", action="store_true", default=False,
        help="write a case page for every case, passed and skipped ones too "
             "(default: failed, error and xfailed cases only)",
    )
    group.addoption(
        "--record-frames", dest="reports_record_frames", choices=("failed", "all"),
        default="failed",
        help="which cases keep their frames in results.json: failed, error and xfailed "
             "ones (default), or all (for comparing builds; a larger file)",
    )


@pytest.hookimpl(tryfirst=True)  # before junitxml reads config.option.xmlpath
def pytest_configure(config: pytest.Config) -> None:
    """Set up the report's state and output directory (and junit.xml in it)."""
    given = config.getoption("reports_out_dir")
    if given:
        out_dir = (config.invocation_params.dir / given).resolve()
    else:
        out_dir = config.rootpath / "reports" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    if hasattr(config.option, "xmlpath") and not config.option.xmlpath:
        config.option.xmlpath = str(out_dir / "junit.xml")
    config.stash[_STATE_KEY] = _State(
        out_dir=out_dir,
        started_iso=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        started=time.monotonic(),
    )
    if not _is_worker(config):
        config.pluginmanager.register(_Collector(config), "reports-collector")


def output_dir(config: pytest.Config) -> Path:
    """The run's output directory; artifact paths in records are relative to it."""
    return config.stash[_STATE_KEY].out_dir


def add_index_link(config: pytest.Config, label: str, href: str) -> None:
    """Link a page another plugin wrote into the output directory from index.html."""
    state = config.stash.get(_STATE_KEY, None)
    if state is not None:
        state.links.append((label, href))


def set_run_info(config: pytest.Config, backend: str, versions: dict[str, str],
                 ovs_source: str = "", known_bugs: list[dict[str, Any]] | None = None) -> None:
    """Store run-wide facts (backend name, component versions, which OVS ran and
    how it was chosen) for the report.

    Later calls add to earlier ones; an empty value keeps the one already set.
    """
    info = config.stash.get(RUN_INFO_KEY, None) or {"backend": "", "versions": {}}
    if backend:
        info["backend"] = backend
    if ovs_source:
        info["ovs_source"] = ovs_source
    if known_bugs is not None:
        info["known_bugs"] = known_bugs
    info["versions"].update({str(k): str(v) for k, v in versions.items()})
    config.stash[RUN_INFO_KEY] = info


def record_for(item: pytest.Item) -> CaseRecord:
    """The item's record, created on first use."""
    record = item.stash.get(RECORD_KEY, None)
    if record is None:
        callspec = getattr(item, "callspec", None)
        params = {}
        if callspec is not None:
            params = {str(k): _short(_param_text(v), MAX_PARAM_CHARS)
                      for k, v in callspec.params.items()}
        record = CaseRecord(nodeid=item.nodeid, params=params)
        item.stash[RECORD_KEY] = record
    return record


@pytest.fixture
def case_record(request: pytest.FixtureRequest) -> CaseRecord:
    """The record of the running case, for attaching commands, steps, logs and artifacts."""
    return record_for(request.node)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Where and when the case runs (its worker under pytest-xdist)."""
    record = record_for(item)
    record.worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    record.started = round(time.time(), 3)


@pytest.hookimpl(hookwrapper=True)  # old-style wrapper: works with every pluggy pytest 7.4 allows
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Record each phase of a case into its CaseRecord."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    record = record_for(item)
    _apply_phase(record, report)
    if report.when == "teardown":
        info = item.config.stash.get(RUN_INFO_KEY, None)
        record.upstream = record.upstream or _upstream_of(item)
        if record.upstream and not record.upstream_file:
            record.upstream_file = _upstream_file_of(item)
        if not record.backend and info:
            record.backend = info["backend"]
        config = item.config
        if record.outcome not in DETAIL_OUTCOMES and not config.getoption("reports_all_cases"):
            record.compact(keep_frames=config.getoption("reports_record_frames") == "all")
        setattr(report, REPORT_RECORD_ATTR, record.to_json())
        if info:
            setattr(report, REPORT_RUN_INFO_ATTR, info)


def _apply_phase(record: CaseRecord, report: pytest.TestReport) -> None:
    """Fold one phase's report into the record's outcome, duration and longrepr."""
    record.duration += report.duration
    xfail_reason = getattr(report, "wasxfail", None)
    if report.when == "setup":
        if report.failed:
            record.outcome = "error"
            record.longrepr = _failure_text(report)
        elif report.skipped:
            record.outcome = "xfailed" if xfail_reason is not None else "skipped"
            record.longrepr = _skip_text(report, xfail_reason)
    elif report.when == "call":
        if xfail_reason is not None and report.skipped:
            record.outcome = "xfailed"
            record.longrepr = _skip_text(report, xfail_reason)
        elif xfail_reason is not None and report.passed:
            record.outcome = "xpassed"
            record.longrepr = f"XPASS: {xfail_reason}" if xfail_reason else "XPASS"
        elif report.failed:
            record.outcome = "failed"
            record.longrepr = _failure_text(report)
        elif report.skipped:
            record.outcome = "skipped"
            record.longrepr = _skip_text(report, None)
        else:
            record.outcome = "passed"
    elif report.failed:  # teardown
        if record.outcome not in FAILED_OUTCOMES:
            record.outcome = "error"
        text = _failure_text(report)
        record.longrepr = f"{record.longrepr}\n\n[teardown]\n{text}" if record.longrepr else text


def _failure_text(report: pytest.TestReport) -> str:
    parts = [report.longreprtext]
    for name, content in report.sections:
        parts.append(f"----- {name} -----\n{_short(content, MAX_SECTION_CHARS)}")
    return "\n".join(parts)


def _skip_text(report: pytest.TestReport, xfail_reason: str | None) -> str:
    if xfail_reason is not None:
        reason = f"XFAIL: {xfail_reason}" if xfail_reason else "XFAIL"
        if report.longrepr is None or isinstance(report.longrepr, tuple):
            return reason
        text = report.longreprtext
        if text.rstrip().endswith("XFailed"):  # pytest.xfail(reason): the traceback repeats it
            return reason
        return f"{reason}\n{text}"
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return report.longreprtext


def _upstream_of(item: pytest.Item) -> str | None:
    """The upstream test title: user_properties, the `upstream` marker, the module's `upstream`."""
    for key, value in item.user_properties:
        if key == "upstream" and value:
            return _as_title(value)
    marker = item.get_closest_marker("upstream")
    if marker is not None and marker.args:
        return _as_title(marker.args[0])
    module = getattr(item, "module", None)
    value = getattr(module, "upstream", None)
    return _as_title(value) if value else None


def _upstream_file_of(item: pytest.Item) -> str:
    """The upstream file of the case's titles: user_properties, the marker's `file`
    keyword, the module's `upstream_file`; dpif-netdev.at by default."""
    for key, value in item.user_properties:
        if key == "upstream_file" and value:
            return str(value)
    marker = item.get_closest_marker("upstream")
    if marker is not None and marker.kwargs.get("file"):
        return str(marker.kwargs["file"])
    module = getattr(item, "module", None)
    return str(getattr(module, "upstream_file", None) or DEFAULT_FILE)


def _as_title(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value)
    return str(value)


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
                                   links=state.links)
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


def _param_text(value: object) -> str:
    """A parameter as its id would read: offload specs and enums by their short names."""
    short = getattr(value, "id", None)
    if isinstance(short, str):
        return short
    enum_value = getattr(value, "value", None)
    if isinstance(enum_value, (str, int)) and type(value).__module__ != "builtins":
        return str(enum_value)
    return str(value)


def _short(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")
