"""system-dpdk.at's MTU tests on vhost-user client ports (Open vSwitch 4.0.0),
with dpdk-testpmd's virtio-user as the guest.  The tests on a physical port
are listed, skipped, in test_system_dpdk.py.

Each case runs upstream's commands in upstream's order and checks what
upstream checks (the MTU read back, the log line of a refused MTU), then
more: the port's mempool must hold an MTU-sized frame in one mbuf.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from fixtures.system_dpdk.macros import VHOST_CLIENT_ALLOW, OvsDpdk, upstream
from harness.vsctl import set_interface
from harness.wait import settled

pytestmark = pytest.mark.requires(backend="dpdk")


def vhost_guest(ovs: OvsDpdk, mtu_request: int | None = None):  # type: ignore[no-untyped-def]
    """br10 + dpdkvhostuserclient0 (+ mtu_request), then testpmd as its server."""
    sock = ovs.rundir / "dpdkvhostclient0"
    ovs.add_br("br10")
    ovs.add_vhost_user_client_port("br10", "dpdkvhostuserclient0", sock)
    if mtu_request is not None:
        ovs.sb.vsctl(*set_interface("dpdkvhostuserclient0", mtu_request=mtu_request))
    ovs.sb.vsctl("show")
    pmd = ovs.start_testpmd([f"--vdev=net_virtio_user,path={sock},server=1"])
    ovs.wait_virtio_ready(pmd)
    ovs.wait_vsctl("get", "Interface", "dpdkvhostuserclient0", "link_state", expect="up")
    return pmd


def mtu(ovs: OvsDpdk) -> str:
    return ovs.sb.vsctl("get", "Interface", "dpdkvhostuserclient0", "mtu").stdout


# DPDK 25.11: struct rte_mbuf is two cache lines; RTE_PKTMBUF_HEADROOM defaults to 128.
MBUF_HEADER, MBUF_HEADROOM = 128, 128


def assert_frames_fit(ovs: OvsDpdk, mtu_value: int) -> None:
    """An MTU-sized frame (+ Ethernet header, one VLAN tag, CRC) must fit one mbuf
    of the port's mempool, after the mbuf header and the headroom: OVS does not
    chain mbufs on a vhost port unless asked to.  netdev-dpdk/get-mempool-info
    dumps the mempool, whose elt_size bounds what one mbuf holds."""
    info = ovs.sb.appctl("netdev-dpdk/get-mempool-info", "dpdkvhostuserclient0").stdout
    m = re.search(r"^\s*elt_size=(\d+)$", info, re.M)
    assert m, info
    need = MBUF_HEADER + MBUF_HEADROOM + mtu_value + 14 + 4 + 4
    assert int(m.group(1)) >= need, (f"mempool elements of {m.group(1)} bytes cannot hold "
                                     f"an MTU {mtu_value} frame ({need} bytes needed)\n{info}")


def mtu_change(ovs: OvsDpdk, first: int, then: int) -> None:
    """The vport MTU sequence: the guest connects with MTU `first` (1500 is OVS's
    default, not requested), then mtu_request=`then`; after each, upstream's MTU
    check and the mempool fit."""
    ovs.allow(VHOST_CLIENT_ALLOW)
    pmd = vhost_guest(ovs, **({} if first == 1500 else {"mtu_request": first}))
    for value in (first, then):
        if value == then:
            ovs.sb.vsctl(*set_interface("dpdkvhostuserclient0", mtu_request=then))
        # Upstream reads it at once; OVS reconfigures the vhost port on its next
        # run, so the column may lag the request by a moment (it flaked in CI).
        assert settled(lambda: mtu(ovs), f"{value}\n") == f"{value}\n"
        assert_frames_fit(ovs, value)
    ovs.sb.vsctl("del-port", "br10", "dpdkvhostuserclient0")
    pmd.stop()


@upstream("OVS-DPDK - MTU increase vport port")
def test_mtu_increase_vport(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """Default MTU 1500 with the guest connected, then mtu_request=9000.

    Verifies upstream's checks (mtu 1500, then 9000).  Beyond: the port's mempool
    holds an MTU-sized frame in one mbuf at each MTU."""
    mtu_change(ovs_dpdk(), 1500, 9000)


@upstream("OVS-DPDK - MTU decrease vport port")
def test_mtu_decrease_vport(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """mtu_request=9000 before the guest connects, then 2000.

    Verifies upstream's checks (mtu 9000, then 2000).  Beyond: the mempool fits
    each MTU."""
    mtu_change(ovs_dpdk(), 9000, 2000)


BOUNDS = [
    pytest.param(9702, 9711, marks=upstream("OVS-DPDK - MTU upper bound vport port"),
                 id="upper"),
    pytest.param(68, 67, marks=upstream("OVS-DPDK - MTU lower bound vport port"), id="lower"),
]


@pytest.mark.parametrize("edge,beyond", BOUNDS)
def test_mtu_bound_vport(ovs_dpdk: Callable[..., OvsDpdk], edge: int, beyond: int) -> None:
    """mtu_request at the edge OVS allows for a vhost port (9702 or 68), then one
    step beyond (9711 or 67).

    Verifies upstream's checks (mtu EDGE; the log says 'unsupported MTU
    BEYOND').  Beyond: the refused request leaves the MTU at EDGE, and the
    'failed to set MTU' warning names the port."""
    port = "dpdkvhostuserclient0"
    ovs = ovs_dpdk()
    ovs.allow(VHOST_CLIENT_ALLOW, rf"{port}: unsupported MTU {beyond}",
              rf"failed to set MTU for network device {port}: Invalid argument")
    pmd = vhost_guest(ovs, mtu_request=edge)
    assert settled(lambda: mtu(ovs), f"{edge}\n") == f"{edge}\n"
    ovs.sb.vsctl(*set_interface(port, mtu_request=beyond))
    # Upstream greps at once; the line may come just after ovs-vsctl returns.
    ovs.log.wait(re.escape(f"{port}: unsupported MTU {beyond}"))
    assert mtu(ovs) == f"{edge}\n"
    ovs.log.wait(re.escape(f"failed to set MTU for network device {port}: Invalid argument"))
    ovs.sb.vsctl("del-port", "br10", port)
    pmd.stop()


