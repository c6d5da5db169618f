"""The upstream marker: title, file and since reach JUnit and the results; bad markers
stop the run at collection."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.records import RunRecord

pytest_plugins = ["pytester"]

PLUGINS = ("-p", "reports.plugin", "-p", "fixtures.plugin", "-p", "no:cacheprovider")

MARKED = '''
import pytest

@pytest.mark.upstream("PMD - stats", file="pmd.at")
def test_pmd():
    pass

@pytest.mark.upstream("dpif-netdev - tso + dual tunnel encap", since="4.0")
def test_new_in_4_0():
    pass

@pytest.mark.upstream("tunnel_push_pop - tunnel drop", file="tunnel-push-pop.at")
def test_other_helper():
    pass

@pytest.mark.upstream("datapath - ping over vxlan tunnel", file="system-traffic.at")
def test_unlisted_file():
    pass
'''


def test_marker_file_reaches_junit_and_results(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest(*PLUGINS, "--junitxml", "j.xml")
    assert result.ret == 0, result.stdout.str()
    junit = (pytester.path / "j.xml").read_text()
    assert '<property name="upstream" value="PMD - stats" />' in junit
    assert '<property name="upstream_file" value="pmd.at" />' in junit
    assert '<property name="upstream_file" value="dpif-netdev.at" />' in junit
    assert '<property name="upstream_file" value="tunnel-push-pop.at" />' in junit
    run = RunRecord.load(str(pytester.path / "reports" / "out" / "results.json"))
    files = {c.nodeid.split("::")[-1]: (c.upstream, c.upstream_file) for c in run.cases}
    assert files == {"test_pmd": ("PMD - stats", "pmd.at"),
                     "test_new_in_4_0": ("dpif-netdev - tso + dual tunnel encap", "dpif-netdev.at"),
                     "test_other_helper": ("tunnel_push_pop - tunnel drop", "tunnel-push-pop.at"),
                     "test_unlisted_file": ("datapath - ping over vxlan tunnel",
                                            "system-traffic.at")}


HELPER = '''
import pytest


def upstream(title):
    """A module's own maker of the marker, as cases/system_userspace's modules import one."""
    return pytest.mark.upstream(title, file="pmd.at")


@upstream("PMD - stats")
def test_marked():
    pass


def test_ours():
    pass
'''


def test_a_function_named_upstream_is_no_title(pytester: pytest.Pytester) -> None:
    """A module's `upstream` names its title only when it is one (a string, or a
    list of them): a helper of that name says nothing of an unmarked id (the
    results once gave such ids the title "<function upstream at 0x...>")."""
    pytester.makepyfile(test_helper=HELPER)
    result = pytester.runpytest(*PLUGINS)
    assert result.ret == 0, result.stdout.str()
    run = RunRecord.load(str(pytester.path / "reports" / "out" / "results.json"))
    got = {c.nodeid.split("::")[-1]: (c.upstream, c.upstream_file) for c in run.cases}
    assert got == {"test_marked": ("PMD - stats", "pmd.at"), "test_ours": (None, None)}


@pytest.mark.parametrize("marker,complaint", [
    ('"PMD - stats"', "dpif-netdev.at has no test titled 'PMD - stats'"),
    ('"PMD - stats", file="pmd.at", since="4.0"', "new in no release after 3.7"),
    ('"dpif-netdev - tso + dual tunnel encap"', "new in 4.0"),
    ('"PMD - stats", file="pmd.at", number=1146', "only the keywords file= and since="),
], ids=["wrong_file", "wrong_since", "missing_since", "unknown_keyword"])
def test_bad_markers_are_usage_errors(pytester: pytest.Pytester, marker: str, complaint: str) -> None:
    pytester.makepyfile(test_bad=f"import pytest\n\n@pytest.mark.upstream({marker})\n"
                                 "def test_x():\n    pass\n")
    result = pytester.runpytest(*PLUGINS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert complaint in result.stderr.str()


def test_every_case_marker_names_a_known_test() -> None:
    """The collection of cases/ itself enforces it; here without OVS: every
    upstream marker in cases/ names a test of its file (dpif-netdev.at unless
    file= names another; suites traceability does not list test by test pass
    through)."""
    import importlib

    from harness.upstream import FILES
    root = Path(__file__).resolve().parent.parent / "cases"
    checked = 0
    for path in sorted(root.rglob("test_*.py")):
        module = importlib.import_module(".".join(("cases", *path.relative_to(root).with_suffix("").parts)))
        for obj in vars(module).values():
            for mark in getattr(obj, "pytestmark", []):
                if mark.name != "upstream":
                    continue
                file = mark.kwargs.get("file", "dpif-netdev.at")
                if file in FILES:
                    assert mark.args[0] in {t.title for t in FILES[file]}, \
                        f"{path.relative_to(root)}: {file}: {mark.args[0]!r}"
                    checked += 1
    assert checked > 50, checked  # markers on functions and classes (params aside)
