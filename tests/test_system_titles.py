"""Every test of upstream's system-dpdk.at and system-afxdp.at (Open vSwitch
4.0.0) is named, with its exact AT_SETUP title and its file, by at least one
pytest id; and no id names a title those files do not have.  Every test
of check-system-userspace's five files is named by an id of the system
modules or has its reason in NOT_HERE."""
from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from harness.upstream import FILES

ROOT = Path(__file__).resolve().parent.parent

SYSTEM_DPDK = tuple(t.title for t in FILES["system-dpdk.at"])
SYSTEM_AFXDP = tuple(t.title for t in FILES["system-afxdp.at"])


def named_titles(*modules: str) -> dict[str, set[str]]:
    """File -> the upstream titles the modules' ids name (collected, not run)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.upstream_dump",
         "--collect-only", "-q", *modules], cwd=ROOT, capture_output=True, text=True,
        timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found: dict[str, set[str]] = defaultdict(set)
    for line in proc.stdout.splitlines():
        if line.startswith("UPSTREAM\t"):
            _, file, title, _ = line.split("\t")
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
