"""The one rule for an id's end on its sandboxes (fixtures/case_scope.py):
the outcome function, what it makes of every pytest outcome in a real
session, and that no other module reads pytest's reports for itself."""
from __future__ import annotations

import io
import json
import os
import tokenize
from pathlib import Path

import pytest

from fixtures.case_scope import TRUSTED, CaseOutcome, outcome

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent


def report(when: str, result: str, wasxfail: str | None = None) -> pytest.TestReport:
    rep = pytest.TestReport(f"t.py::{when}", ("t.py", 0, when), {}, result, None, when)
    if wasxfail is not None:
        rep.wasxfail = wasxfail  # type: ignore[attr-defined]
    return rep


SETUP_OK = report("setup", "passed")


@pytest.mark.parametrize("setup, call, expected", [
    (SETUP_OK, report("call", "passed"), CaseOutcome.PASSED),
    (SETUP_OK, report("call", "failed"), CaseOutcome.FAILED),
    (SETUP_OK, report("call", "skipped"), CaseOutcome.SKIPPED),
    # pytest's xfail: "skipped" with the reason; not fired: "passed" with it
    (SETUP_OK, report("call", "skipped", "known bug"), CaseOutcome.XFAILED),
    (SETUP_OK, report("call", "passed", "known bug"), CaseOutcome.XPASSED),
    (SETUP_OK, report("call", "failed", "known bug"), CaseOutcome.FAILED),
    (report("setup", "failed"), None, CaseOutcome.ERROR),
    (report("setup", "skipped"), None, CaseOutcome.SKIPPED),
    (report("setup", "skipped", "known bug"), None, CaseOutcome.XFAILED),
    (SETUP_OK, None, CaseOutcome.NOT_RUN),
    (None, None, CaseOutcome.NOT_RUN),
], ids=["passed", "failed", "skipped", "xfailed", "xpassed", "xfail_failed", "setup_error",
        "setup_skip", "setup_xfail", "interrupted", "nothing"])
def test_outcome(setup: pytest.TestReport | None, call: pytest.TestReport | None,
                 expected: CaseOutcome) -> None:
    assert outcome(setup, call) is expected


def test_the_rule() -> None:
    """Written down in fixtures/case_scope.py's docstring: only an id that passed,
    xpassed or skipped leaves a sandbox the next id may use."""
    assert TRUSTED == {CaseOutcome.PASSED, CaseOutcome.XPASSED, CaseOutcome.SKIPPED}
    assert set(CaseOutcome) - TRUSTED == {CaseOutcome.FAILED, CaseOutcome.XFAILED,
                                          CaseOutcome.ERROR, CaseOutcome.NOT_RUN}


INNER = '''
import json, os
import pytest
from fixtures.case_scope import case_scope

@pytest.fixture
def judged(request):
    with case_scope(request) as case:
        yield
        with open(os.environ["VERDICTS"], "a") as out:
            out.write(json.dumps([request.node.name, case.outcome.value, case.trusted]) + "\\n")

@pytest.fixture
def skips_in_setup(judged):
    pytest.skip("a later fixture finds the precondition false")

@pytest.fixture
def breaks_in_setup(judged):
    raise RuntimeError("a later fixture breaks")

@pytest.fixture
def problem_at_end(request):
    with case_scope(request) as case:
        yield
        case.report("found at the end of this id", ["a line the log scan does not forgive"])
        with open(os.environ["VERDICTS"], "a") as out:
            out.write(json.dumps([request.node.name, case.outcome.value, case.trusted]) + "\\n")

def test_passes(judged): pass
def test_fails(judged): assert False
def test_skips(judged): pytest.skip("not expressible")
@pytest.mark.xfail(reason="known bug", strict=True)
def test_xfails(judged): assert False
def test_xfails_imperatively(judged): pytest.xfail("known bug fired")
@pytest.mark.xfail(reason="known bug", strict=False)
def test_xpasses(judged): pass
@pytest.mark.xfail(reason="known bug", strict=True)
def test_xpasses_strictly(judged): pass
def test_skips_in_setup(skips_in_setup): pass
def test_breaks_in_setup(breaks_in_setup): pass
def test_problem_at_end(problem_at_end): pass
'''

EXPECTED = {  # name: (outcome, trusted)
    "test_passes": ("passed", True),
    "test_fails": ("failed", False),
    "test_skips": ("skipped", True),
    "test_xfails": ("xfailed", False),
    "test_xfails_imperatively": ("xfailed", False),
    "test_xpasses": ("xpassed", True),
    "test_xpasses_strictly": ("failed", False),
    "test_skips_in_setup": ("skipped", True),
    "test_breaks_in_setup": ("error", False),
    "test_problem_at_end": ("passed", False),  # and an error at its teardown, saying why
}


def test_outcomes_in_a_session(pytester: pytest.Pytester) -> None:
    """The hook keeps the reports on the item, and a fixture's teardown sees the
    id's outcome: every kind of outcome, in a real (inner) pytest session."""
    pytester.makepyfile(test_inner=INNER)
    verdicts = pytester.path / "verdicts.jsonl"
    pytester._monkeypatch.setenv("VERDICTS", str(verdicts))
    pytester._monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess(
        "-p", "reports.plugin", "-p", "fixtures.case_scope", "-p", "no:cacheprovider",
        f"--out-dir={pytester.path / 'out'}", "-q")
    assert result.parseoutcomes() == {"passed": 2, "failed": 2, "skipped": 2, "xfailed": 2,
                                      "xpassed": 1, "errors": 2}, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_problem_at_end*",
                                 "*found at the end of this id:*"])
    got = {name: (value, trusted) for name, value, trusted in
           map(json.loads, verdicts.read_text().splitlines())}
    assert got == EXPECTED


# What only fixtures/case_scope.py may read or write: pytest's reports of an id
# (and their xfail mark), the hook that keeps them, the record's log excerpt,
# --keep-sandbox.  Token-level, so comments and docstrings may name them.
OWNED_NAMES = {"rep_call", "wasxfail", "pytest_runtest_makereport", "log_excerpt",
               "keep_sandbox"}
OWNED_ATTRIBUTES = {"failed", "passed", "skipped"}  # of a report
SCANNED = ("fixtures", "cases", "datapath", "harness", "perf")
OWNER = Path("fixtures/case_scope.py")
# Not an id's end: the record's own field; perf's topologies, which are no ids;
# the case record's phases as the report shows them (no sandbox decision).
ALLOWED = {(Path("harness/records.py"), "log_excerpt"),
           (Path("perf/plugin.py"), "keep_sandbox"),
           *((Path("fixtures/records.py"), name) for name in (
               "pytest_runtest_makereport", "wasxfail", "report.failed", "report.passed",
               "report.skipped"))}


def owned_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of every use in `source` of what only the owner may use."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NAME and tok.string in OWNED_NAMES:
            found.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and any(n in tok.string for n in OWNED_NAMES) \
                and not (i > 0 and tokens[i - 1].type in (tokenize.INDENT, tokenize.NEWLINE)):
            found.append((tok.start[0], tok.string))  # getattr(rep, "wasxfail"), not a docstring
        elif tok.type == tokenize.NAME and tok.string in OWNED_ATTRIBUTES and i > 1 \
                and tokens[i - 1].string == "." and tokens[i - 2].string in ("rep", "report"):
            found.append((tok.start[0], f"{tokens[i - 2].string}.{tok.string}"))
    return found


def test_owned_uses_are_found() -> None:
    """The scan below can fail: the copies the rule replaced are found."""
    copies = '''
def teardown(request, record, sb):
    """Reads rep_call (a docstring may say so)."""
    rep = getattr(request.node, "rep_call", None)
    failed = rep is not None and (rep.failed or hasattr(rep, "wasxfail"))
    record.log_excerpt = sb.log_lines()[-300:]
    if not rep.passed or request.config.getoption("keep_sandbox"):
        pass
'''
    assert owned_uses(copies) == [(4, '"rep_call"'), (5, "rep.failed"), (5, '"wasxfail"'),
                                  (6, "log_excerpt"), (7, "rep.passed"), (7, '"keep_sandbox"')]


def test_the_rule_exists_once() -> None:
    offenders = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel == OWNER:
                continue
            offenders += [f"{rel}:{line}: {what}" for line, what in owned_uses(path.read_text())
                          if not any(rel == p and name in what for p, name in ALLOWED)]
    assert not offenders, ("only fixtures/case_scope.py decides what an id's outcome means "
                           "for its sandboxes:\n" + "\n".join(offenders))
    assert owned_uses((ROOT / OWNER).read_text()), "the owner itself uses what it owns"


def test_a_rig_serves_on_after_an_xfail_only_on_bugs_confined_to_the_frames() -> None:
    from datapath.model import bugs
    from datapath.verdict import ABSENT, PRESENT
    from fixtures.case_scope import only_frames_bugs
    from harness.records import Step

    def step(**seen: str) -> Step:
        return Step(title="t", rx_port="p1", tx_port="p2", sent=[], expected=[], captured=[],
                    ok=not seen, bugs=seen)
    frames, state = bugs.GRE_CSUM_AT_PUSH, bugs.NEIGH_SNOOP_CACHED
    assert frames.frames_only and not state.frames_only and not bugs.L4_PARTIAL_NOT_TCP_UDP.frames_only
    assert only_frames_bugs([step(**{frames.key: PRESENT})])
    assert only_frames_bugs([step(), step(**{frames.key: PRESENT, state.key: ABSENT})])
    assert not only_frames_bugs([step(**{frames.key: PRESENT}), step(**{state.key: PRESENT})])
    assert not only_frames_bugs([step(**{"no-such-bug": PRESENT})])
    assert not only_frames_bugs([step()])  # an xfail no known bug explains: not vouched for
