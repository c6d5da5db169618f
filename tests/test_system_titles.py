"""Every test of upstream's system-dpdk.at and system-afxdp.at (Open vSwitch
4.0.0) is named, with its exact AT_SETUP title and its file, by at least one
pytest id; and no id names a title those files do not have."""
from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SYSTEM_DPDK = (
    "OVS-DPDK - EAL init",
    "OVS-DPDK - dpdk-lcore-mask conversion - single",
    "OVS-DPDK - dpdk-lcore-mask conversion - multi",
    "OVS-DPDK - dpdk-lcore-mask conversion - non-contig",
    "OVS-DPDK - dpdk-lcore-mask conversion - zeromask",
    "OVS-DPDK - add standard DPDK port",
    "OVS-DPDK - add vhost-user-client port",
    "OVS-DPDK - ping vhost-user ports",
    "OVS-DPDK - ping vhost-user-client ports",
    "OVS-DPDK - Ingress policing create delete phy port",
    "OVS-DPDK - Ingress policing create delete vport port",
    "OVS-DPDK - Ingress policing no policing rate",
    "OVS-DPDK - Ingress policing no policing burst",
    "OVS-DPDK - QoS create delete phy port",
    "OVS-DPDK - QoS create delete vport port",
    "OVS-DPDK - QoS no cir",
    "OVS-DPDK - QoS no cbs",
    "OVS-DPDK - MTU increase phy port",
    "OVS-DPDK - MTU decrease phy port",
    "OVS-DPDK - MTU increase vport port",
    "OVS-DPDK - MTU decrease vport port",
    "OVS-DPDK - MTU upper bound phy port",
    "OVS-DPDK - MTU lower bound phy port",
    "OVS-DPDK - MTU upper bound vport port",
    "OVS-DPDK - MTU lower bound vport port",
    "OVS-DPDK - user configured mempool",
    "OVS-DPDK - ovs-appctl dpif/offload/show",
    "OVS-DPDK - headroom expansion",
)
SYSTEM_AFXDP = (
    "AF_XDP - infinite re-addition of failed ports",
    "AF_XDP - ping between pmd and non-pmd ports",
)


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
