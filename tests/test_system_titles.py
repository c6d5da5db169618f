"""Every test of upstream's system-dpdk.at and system-afxdp.at (Open vSwitch
4.0.0) is named, with its exact AT_SETUP title and its file, by at least one
pytest id; and no id names a title those files do not have.  The
system-traffic.at reproductions name only titles of that file as
check-system-userspace lists it."""
from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from reports.upstream import FILES

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
    found = named_titles("cases/test_system_dpdk.py", "cases/test_system_dpdk_mtu.py",
                         "cases/test_system_dpdk_ping.py", "cases/test_system_afxdp.py")
    assert found["system-dpdk.at"] == set(SYSTEM_DPDK), \
        set(SYSTEM_DPDK) ^ found["system-dpdk.at"]
    assert found["system-afxdp.at"] == set(SYSTEM_AFXDP), \
        set(SYSTEM_AFXDP) ^ found["system-afxdp.at"]
    assert set(found) == {"system-dpdk.at", "system-afxdp.at"}, sorted(found)


def test_system_traffic_ids_name_titles_of_the_file() -> None:
    found = named_titles(
        "cases/test_system_traffic.py", "cases/test_system_traffic_simulated.py",
        "cases/test_system_traffic_srv6.py", "cases/test_system_traffic_truncate.py",
        "cases/test_system_traffic_l2.py", "cases/test_system_traffic_mpls.py",
        "cases/test_system_traffic_igmp.py", "cases/test_system_traffic_actions.py",
        "cases/test_system_traffic_misc.py", "cases/test_system_ct.py",
        "cases/test_system_ct_related.py", "cases/test_system_ct_http.py",
        "cases/test_system_ct_frag.py", "cases/test_system_ct_nat.py",
        "cases/test_system_ct_dnat.py", "cases/test_system_ct_nat_related.py",
        "cases/test_system_ct_limits.py")
    listed = {t.title for t in FILES["system-traffic.at"]}
    assert set(found) == {"system-traffic.at"}, sorted(found)
    titles = found["system-traffic.at"]
    assert titles <= listed, titles - listed
    # tunnels, truncate, l2, mpls, igmp, clone and drop, misc; conntrack: ping/dpctl,
    # related, http, fragments, NAT
    assert len(titles) >= 22 + 1 + 10 + 14 + 2 + 2 + 8 + 8 + 5 + 14 + 26 + 26


def test_system_route_and_interface_titles() -> None:
    """Every test of system-route.at and system-interface.at is named by an id,
    or is one check-system-userspace skips (NOT_HERE), not both."""
    from reports.system_userspace import NOT_HERE
    found = named_titles("cases/test_system_route.py", "cases/test_system_interface.py")
    assert set(found) == {"system-route.at", "system-interface.at"}, sorted(found)
    for file in found:
        listed = {t.title for t in FILES[file]}
        assert found[file] | (listed & set(NOT_HERE)) == listed, listed - found[file]
        assert not found[file] & set(NOT_HERE), found[file] & set(NOT_HERE)
