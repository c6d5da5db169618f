"""The requires marker (fixtures/requires.py): a declared need this machine
lacks skips the id before its fixtures run, naming what is missing; a bad
marker stops the run at collection; a fixture that builds on an undeclared
need fails the case."""
from __future__ import annotations

import pytest

from datapath.backends import native_tunnel

pytest_plugins = ["pytester"]

PLUGINS = ("-p", "reports.plugin", "-p", "fixtures.plugin", "-p", "fixtures.requires",
           "-p", "no:cacheprovider")

CASES = '''
import pytest

from fixtures.requires import declared

pytestmark = pytest.mark.requires(backend="dummy")
BUILT = []


@pytest.fixture
def builds_vxlan(request):
    BUILT.append(request.node.name)
    declared(request.node, kernel="vxlan")


@pytest.mark.requires(kernel="vxlan")
def test_declared(builds_vxlan):
    assert BUILT == ["test_declared"]


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.requires(kernel=k))
                                  for k in ("vxlan", "geneve")])
def test_per_param(kind):
    pass


@pytest.mark.requires(kernel=("vxlan", "vlan"))
def test_two(builds_vxlan):
    pass


def test_undeclared(builds_vxlan):
    pass
'''

OPTIONAL = '''
import pytest

from fixtures.requires import declared, requirements

pytestmark = pytest.mark.requires(backend="dummy")


@pytest.mark.requires(kernel_optional=("geneve", "vxlan"))
def test_optional_never_skips(request):
    declared(request.node, kernel="geneve")  # may be made where the kernel has it
    assert requirements(request.node).kernel_optional == ("geneve", "vxlan")
    assert requirements(request.node).kernel == ()


@pytest.mark.requires(kernel_optional="vxlan")
def test_optional_is_not_another_kind(request):
    declared(request.node, kernel="geneve")
'''


@pytest.fixture
def fake_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel with VXLAN and 802.1Q but no Geneve, whatever this one has."""
    have = {"vxlan", "vlan"}
    monkeypatch.setattr(native_tunnel, "missing",
                        lambda kind: None if kind in have else f"no {kind} here (probe says so)")


def test_missing_need_skips_naming_it_and_undeclared_fails(pytester: pytest.Pytester,
                                                           fake_kernel: None) -> None:
    pytester.makepyfile(test_needs=CASES)
    result = pytester.runpytest_inprocess(*PLUGINS, "-rsE")
    result.assert_outcomes(passed=3, skipped=1, errors=1)
    out = result.stdout.str()
    assert "SKIPPED [1] " in out and "no geneve here (probe says so)" in out
    assert "ERROR test_needs.py::test_undeclared" in out
    assert ("the case makes a vxlan device without declaring it: add "
            "@pytest.mark.requires(kernel='vxlan')") in out


def test_optional_kernel_kinds_run_without_them(pytester: pytest.Pytester,
                                               fake_kernel: None) -> None:
    """kernel_optional: no skip where the kernel lacks the kind (geneve here),
    and it declares only the kinds it names."""
    pytester.makepyfile(test_optional=OPTIONAL)
    result = pytester.runpytest_inprocess(*PLUGINS, "-rsf")
    result.assert_outcomes(passed=1, failed=1)
    assert "the case makes a geneve device without declaring it" in result.stdout.str()


@pytest.mark.parametrize("marker,complaint", [
    ('kernel="vxlan5"', "requires(kernel='vxlan5'): no such kernel feature"),
    ('backend="ovs"', "requires(backend='ovs'): no such backend"),
    ('"vxlan"', "keywords only"),
    ('kernel=4', "a name or a tuple of names"),
    ('cpus=4', "keywords only"),
    ('kernel_optional="srv7"', "requires(kernel_optional='srv7'): no such kernel feature"),
], ids=["kind", "backend", "positional", "type", "keyword", "optional"])
def test_bad_markers_are_usage_errors(pytester: pytest.Pytester, marker: str,
                                      complaint: str) -> None:
    pytester.makepyfile(test_bad=f'''
import pytest

@pytest.mark.requires({marker})
def test_it():
    pass
''')
    result = pytester.runpytest_inprocess(*PLUGINS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert complaint in result.stderr.str() + result.stdout.str()
