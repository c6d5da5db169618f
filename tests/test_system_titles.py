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


def test_every_system_dpdk_and_afxdp_test_is_reproduced() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.upstream_dump",
         "--collect-only", "-q", "cases/test_system_dpdk.py", "cases/test_system_dpdk_mtu.py",
         "cases/test_system_dpdk_ping.py",
         "cases/test_system_afxdp.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found: dict[str, set[str]] = defaultdict(set)
    for line in proc.stdout.splitlines():
        if line.startswith("UPSTREAM\t"):
            _, file, title, _ = line.split("\t")
            found[file].add(title)
    assert found["system-dpdk.at"] == set(SYSTEM_DPDK), \
        set(SYSTEM_DPDK) ^ found["system-dpdk.at"]
    assert found["system-afxdp.at"] == set(SYSTEM_AFXDP), \
        set(SYSTEM_AFXDP) ^ found["system-afxdp.at"]
    assert set(found) == {"system-dpdk.at", "system-afxdp.at"}, sorted(found)


def test_system_traffic_ids_name_titles_of_the_file() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.upstream_dump",
         "--collect-only", "-q", "cases/test_system_traffic.py",
         "cases/test_system_traffic_simulated.py", "cases/test_system_traffic_srv6.py",
         "cases/test_system_traffic_truncate.py", "cases/test_system_traffic_l2.py",
         "cases/test_system_traffic_mpls.py", "cases/test_system_traffic_igmp.py",
         "cases/test_system_traffic_actions.py", "cases/test_system_ct.py",
         "cases/test_system_ct_related.py", "cases/test_system_ct_http.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = {tuple(line.split("\t")[1:3]) for line in proc.stdout.splitlines()
             if line.startswith("UPSTREAM\t")}
    listed = {t.title for t in FILES["system-traffic.at"]}
    assert {file for file, _ in found} == {"system-traffic.at"}
    assert {title for _, title in found} <= listed, {title for _, title in found} - listed
    # tunnels, truncate, l2, mpls, igmp, clone; conntrack: ping/dpctl, related, http
    assert len(found) >= 22 + 1 + 10 + 14 + 2 + 1 + 8 + 5 + 14
