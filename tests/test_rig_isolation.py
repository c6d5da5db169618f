"""Ids that share a tunnel rig stay independent: a failing id must not poison
the next one.  Runs an inner pytest session against a real ovs-vswitchd."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent

CASES = '''
import pytest
from fixtures.tunnel import INNERS, model_actions, spec
from datapath.offloads import RxFlags, TxOffloads
from harness.control import check

INNER = INNERS["tcp4"]

def forward(tunnel_rig):
    rig, record = tunnel_rig("vxlan", 4)
    tun = spec("vxlan", 4, True)
    rig.forward(record, tun, INNER.match(), model_actions(INNER, tun),
                [INNER.frames()["good_frame"]], RxFlags(), TxOffloads())
    return rig

def test_1_fine(tunnel_rig):
    forward(tunnel_rig)

def test_2_breaks_the_rig_and_fails(tunnel_rig):
    rig = forward(tunnel_rig)
    # Sabotage behind the rig's back: a higher-priority rule that drops all.
    check(rig.sb.ofctl("add-flow", "br1", "priority=60000,actions=drop"))
    assert False, "deliberate failure"

def test_3_same_configuration_still_works(tunnel_rig):
    forward(tunnel_rig)
'''


@pytest.mark.parametrize("discard", [True, False], ids=["as_built", "without_discard"])
def test_failing_id_does_not_poison_the_next(pytester: pytest.Pytester, discard: bool,
                                             ovs_install) -> None:
    """With the rig discarded after a failure (as built), id 3 passes.  The
    control run disables the discard and shows id 3 would then fail: the test
    can tell the difference."""
    pytester.makepyfile(test_inner=CASES)
    if not discard:
        pytester.makeconftest('''
import fixtures.rig as b
b.RigPool.discard_on_failure = False
''')
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    pytester._monkeypatch.setenv("PYTHONPATH", env_path)
    result = pytester.runpytest_subprocess(
        "-p", "reports.plugin", "-p", "fixtures.plugin", "-p", "fixtures.rig",
        "-p", "no:cacheprovider", f"--out-dir={pytester.path / 'out'}", "-q")
    outcomes = result.parseoutcomes()
    if discard:
        assert outcomes == {"passed": 2, "failed": 1}, result.stdout.str()[-2000:]
        result.stdout.fnmatch_lines(["FAILED test_inner.py::test_2_breaks_the_rig_and_fails*"])
    else:
        assert outcomes == {"passed": 1, "failed": 2}, result.stdout.str()[-2000:]
        result.stdout.fnmatch_lines(["FAILED test_inner.py::test_3_same_configuration_still_works*"])
