"""Every test of upstream's system-dpdk.at and system-afxdp.at (Open vSwitch
4.0.0) is named, with its exact AT_SETUP title and its file, by at least one
pytest id; and no id names a title those files do not have.  Every test
of check-system-userspace's five files is named by an id of the system
modules or has its reason in NOT_HERE; and in each flavour's testsuite, every
test of system-traffic.at by an id of that flavour, or has its reason."""
from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from harness.system_userspace import not_here
from harness.upstream import FILES, TESTSUITES
from harness.upstream import Testsuite as Suite

ROOT = Path(__file__).resolve().parent.parent

SYSTEM_DPDK = tuple(t.title for t in FILES["system-dpdk.at"])
SYSTEM_AFXDP = tuple(t.title for t in FILES["system-afxdp.at"])


def named_titles(*modules: str, flavour: str | None = None) -> dict[str, set[str]]:
    """File -> the upstream titles the modules' ids name (collected, not run);
    with `flavour`, only those of ids whose flavour parameter is that."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.upstream_dump",
         "--collect-only", "-q", *modules], cwd=ROOT, capture_output=True, text=True,
        timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found: dict[str, set[str]] = defaultdict(set)
    for line in proc.stdout.splitlines():
        if line.startswith("UPSTREAM\t"):
            _, file, title, _, param = line.split("\t")
            if flavour is None or param == flavour:
                found[file].add(title)
    return found


def test_every_system_dpdk_and_afxdp_test_is_reproduced() -> None:
    found = named_titles("cases/system_dpdk/test_system_dpdk.py", "cases/system_dpdk/test_system_dpdk_mtu.py",
                         "cases/system_dpdk/test_system_dpdk_ping.py",
                         "cases/system_afxdp/test_system_afxdp.py")
    assert found["system-dpdk.at"] == set(SYSTEM_DPDK), \
        set(SYSTEM_DPDK) ^ found["system-dpdk.at"]
    assert found["system-afxdp.at"] == set(SYSTEM_AFXDP), \
        set(SYSTEM_AFXDP) ^ found["system-afxdp.at"]
    assert set(found) == {"system-dpdk.at", "system-afxdp.at"}, sorted(found)


def test_every_check_system_userspace_test_is_reproduced_or_has_its_reason() -> None:
    """All 218 of check-system-userspace, file by file: each title is named by
    an id of the system modules, or is in NOT_HERE with the reason it cannot
    run in this suite, never both; and the modules name no title the files
    do not have."""
    from harness.system_userspace import NOT_HERE, SYSTEM_USERSPACE
    modules = sorted(str(p.relative_to(ROOT)) for pattern in (
        "test_system_traffic*.py", "test_system_ct*.py", "test_system_route.py",
        "test_system_interface.py", "test_system_layer3_tunnels.py", "test_system_ptap.py")
        for p in (ROOT / "cases").rglob(pattern))
    found = named_titles(*modules)
    assert set(found) == set(SYSTEM_USERSPACE), sorted(set(found) ^ set(SYSTEM_USERSPACE))
    assert sum(len(tests) for tests in SYSTEM_USERSPACE.values()) == 218
    for file, tests in SYSTEM_USERSPACE.items():
        listed = {title for _, title in tests}
        assert found[file] <= listed, (file, found[file] - listed)
        assert not found[file] & set(NOT_HERE), (file, found[file] & set(NOT_HERE))
        assert found[file] | (listed & set(NOT_HERE)) == listed, \
            (file, listed - found[file] - set(NOT_HERE))
    assert set(NOT_HERE) <= {title for tests in SYSTEM_USERSPACE.values() for _, title in tests}


SYSTEM_MODULES = ("cases/system_userspace",)


@pytest.mark.parametrize("suite", [ts for ts in TESTSUITES if ts.flavour],
                         ids=lambda ts: ts.target)
def test_every_system_traffic_test_is_reproduced_in_each_flavour_or_has_its_reason(
        suite: Suite) -> None:
    """A title counts in the testsuite of its ids' flavour parameter (upstream.html,
    the ratio bench), known at collection: an id that picks its flavour in its
    body and skips before it does counted in check-system-userspace.  Each title
    of system-traffic.at is named by an id of the flavour, or not_here() says
    why that testsuite cannot run it, never both."""
    titles = {t.title for t in FILES["system-traffic.at"]}
    found = named_titles(*SYSTEM_MODULES, flavour=suite.flavour)["system-traffic.at"]
    reasoned = {t for t in titles if not_here(t, suite.target)}
    assert found <= titles, found - titles
    assert not found & reasoned, sorted(found & reasoned)
    assert found | reasoned == titles, sorted(titles - found - reasoned)
