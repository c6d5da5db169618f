"""system-dpdk.at (Open vSwitch 4.0.0) without a physical NIC: EAL and lcores,
vhost-user ports with dpdk-testpmd as the guest, MTU, mempools, policing, QoS,
dpif/offload/show.  MTU on vhost ports: test_system_dpdk_mtu.py; pings and
headroom expansion: test_system_dpdk_ping.py.

Each case runs upstream's commands in upstream's order and checks what
upstream checks (the log lines it waits for, command outputs), then more.
fixtures/system_dpdk/macros.py says where the start-up differs from upstream, and
why (no hugepages).  A test that needs a NIC bound to a DPDK driver is
skipped, saying so.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest

from fixtures.system_dpdk.macros import NEEDS_NIC, VHOST_CLIENT_ALLOW, OvsDpdk, skip_without_cpus, upstream
from harness.control import check
from harness.ifstatus import read_interface
from harness.vsctl import add_port, set_interface
from harness.wait import settled

pytestmark = pytest.mark.requires(backend="dpdk")


def eal_args(ovs: OvsDpdk) -> list[str]:
    """The EAL arguments OVS logged ("EAL ARGS: ovs-vswitchd ARG ...")."""
    line = ovs.log.wait("EAL ARGS: ")[-1]
    return line.split("EAL ARGS: ", 1)[1].rstrip(".").split()[1:]


# ----------------------------------------------------------------------------
# EAL and lcores


@upstream("OVS-DPDK - EAL init")
def test_eal_init(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """OVS_DPDK_START: dpdk-init=true before vswitchd starts.

    Verifies upstream's greps ("DPDK Enabled - initializing...", EAL lines,
    "DPDK Enabled - initialized").  Beyond: dpdk_initialized and dpdk_version
    in the database, and the EAL got dpdk-extra's arguments in order."""
    ovs = ovs_dpdk()
    for text in ("DPDK Enabled - initializing...", "EAL", "DPDK Enabled - initialized"):
        assert ovs.log.grep(re.escape(text)), text
    sb = ovs.sb
    assert sb.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized").stdout == "true\n"
    version = sb.vsctl("get", "Open_vSwitch", ".", "dpdk_version").stdout.strip()
    assert version == f'"DPDK {sb.install.dpdk_version}"', version
    args = eal_args(ovs)
    extra = ["--log-level=pmd.*:error", "--no-huge", "-m", "1024", "--no-pci", "--in-memory"]
    assert args[:len(extra)] == extra, args


LCORE_MASKS = [
    pytest.param("0x1", 1, "0@0", marks=upstream(
        "OVS-DPDK - dpdk-lcore-mask conversion - single"), id="single"),
    pytest.param("0xf", 4, "0@0,1@1,2@2,3@3", marks=upstream(
        "OVS-DPDK - dpdk-lcore-mask conversion - multi"), id="multi"),
    pytest.param("0xca", 8, "0@1,1@3,2@6,3@7", marks=upstream(
        "OVS-DPDK - dpdk-lcore-mask conversion - non-contig"), id="non-contig"),
]


@pytest.mark.parametrize("mask,cpus,lcores", LCORE_MASKS)
def test_lcore_mask_conversion(ovs_dpdk: Callable[..., OvsDpdk], mask: str, cpus: int, lcores: str) -> None:
    """dpdk-lcore-mask set before dpdk-init: OVS hands DPDK `--lcores` mapping
    lcore i to the CPU of the mask's i-th set bit.

    Verifies upstream's check (the log shows "lcores LIST") after
    CHECK_CPU_DISCOVERED(N) (skipped below N cores, as upstream).  Beyond: the
    argument after --lcores is exactly LIST (a grep for "lcores 0@0" also
    matches a longer list), and DPDK initialised."""
    ovs = ovs_dpdk(init=False)
    if cpus > 1:
        skip_without_cpus(ovs, cpus)
    else:
        ovs.log.wait(r"Discovered [0-9]* NUMA nodes and [0-9]* CPU cores")
    ovs.sb.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                 f"other_config:dpdk-lcore-mask={mask}")
    ovs.sb.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-init=true")
    ovs.log.wait(re.escape(f"lcores {lcores}"))
    args = eal_args(ovs)
    assert args[args.index("--lcores") + 1] == lcores, args
    ovs.log.wait("DPDK Enabled - initialized")


@upstream("OVS-DPDK - dpdk-lcore-mask conversion - zeromask")
def test_lcore_mask_zero(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """dpdk-lcore-mask=0x0 is refused: OVS ignores it and picks the lowest CPU
    of its own affinity, as without a mask.

    Verifies upstream's checks (the 'Ignoring ... invalid value' line, then
    "lcores 0@0").  Beyond: --lcores is exactly 0@<lowest CPU vswitchd may run
    on> (0 wherever CPU 0 is in its affinity, as upstream assumes)."""
    ovs = ovs_dpdk(init=False)
    sb = ovs.sb
    sb.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-lcore-mask=0x0")
    sb.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-init=true")
    ovs.allow(r"Ignoring database defined option")
    ovs.log.wait("Ignoring database defined option 'dpdk-lcore-mask' due to invalid value '0x0'")
    ovs.log.wait("lcores 0@0")
    assert sb.vswitchd is not None
    lowest = min(os.sched_getaffinity(sb.vswitchd.proc.pid))
    args = eal_args(ovs)
    assert args[args.index("--lcores") + 1] == f"0@{lowest}", args


# ----------------------------------------------------------------------------
# tests that need a NIC bound to a DPDK driver (OVS_DPDK_PRE_PHY_SKIP)

PHY = ["OVS-DPDK - add standard DPDK port",
       "OVS-DPDK - Ingress policing create delete phy port",
       "OVS-DPDK - QoS create delete phy port",
       "OVS-DPDK - MTU increase phy port",
       "OVS-DPDK - MTU decrease phy port",
       "OVS-DPDK - MTU upper bound phy port",
       "OVS-DPDK - MTU lower bound phy port"]


@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t),
                                                id=t.split(" - ", 1)[1].replace(" ", "_"))
                                   for t in PHY])
def test_phy_port(title: str) -> None:
    """Upstream runs these on the PCI device system-dpdk-find-device.py finds
    (OVS_DPDK_PRE_PHY_SKIP); a virtual device is not that test."""
    pytest.skip(f"{NEEDS_NIC}: OVS_DPDK_PRE_PHY_SKIP wants a PCI device bound to a "
                "DPDK-compatible driver, and this suite runs with --no-pci")


# ----------------------------------------------------------------------------
# a vhost-user client port without a guest


@upstream("OVS-DPDK - add vhost-user-client port")
def test_add_vhost_user_client_port(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """A dpdkvhostuserclient port whose server never appears.

    Verifies upstream's checks: the client socket, device and reconnection log
    lines; no mempool ("Not allocated", exit status 2).  Beyond: the Interface
    says why (status, link_state down), and the port is in the datapath."""
    ovs = ovs_dpdk()
    ovs.allow(VHOST_CLIENT_ALLOW)
    sb = ovs.sb
    sock = ovs.rundir / "dpdkvhostclient0"
    ovs.add_br("br10")
    ovs.add_vhost_user_client_port("br10", "dpdkvhostuserclient0", sock)
    sb.vsctl("show")
    check(sb.appctl("netdev-dpdk/get-mempool-info", "dpdkvhostuserclient0", rc=2), stdout="",
          stderr="Not allocated\novs-appctl: ovs-vswitchd: server returned an error\n")
    assert sb.vsctl("get", "Interface", "dpdkvhostuserclient0",
                    "link_state").stdout.strip() == "down"
    status = read_interface(sb, "dpdkvhostuserclient0").status
    assert (status.mode, status.connection) == ("client", "disconnected"), status
    assert "dpdkvhostuserclient0 (dpdkvhostuserclient" in sb.dpctl("show").stdout
    sb.vsctl("del-port", "br10", "dpdkvhostuserclient0")


# ----------------------------------------------------------------------------
# ingress policing and QoS on a vhost-user client port


POLICING = [
    pytest.param({"ingress_policing_rate": 10000, "ingress_policing_burst": 1000}, True,
                 marks=upstream("OVS-DPDK - Ingress policing create delete vport port"),
                 id="create_delete"),
    pytest.param({"ingress_policing_burst": 1000}, False,
                 marks=upstream("OVS-DPDK - Ingress policing no policing rate"),
                 id="no_rate"),
    pytest.param({"ingress_policing_rate": 10000}, False,
                 marks=upstream("OVS-DPDK - Ingress policing no policing burst"),
                 id="no_burst"),
]


@pytest.mark.parametrize("settings,remove", POLICING)
def test_ingress_policing_vport(ovs_dpdk: Callable[..., OvsDpdk], settings: dict[str, int],
                                remove: bool) -> None:
    """Ingress policing on a vhost-user client port.

    Verifies upstream's checks: no 'Could not create rte meter for ingress
    policer' line; `ovs-vsctl list interface` shows the rate and burst asked
    for (the one not set stays 0); create_delete then sets both to 0 and sees
    0 and 0.  Beyond: the values read back with `get` as well, and no error
    at all in the log."""
    ovs = ovs_dpdk()
    ovs.allow(VHOST_CLIENT_ALLOW)
    sb = ovs.sb
    ovs.add_br("br10")
    ovs.add_vhost_user_client_port("br10", "dpdkvhostuserclient0",
                                   ovs.rundir / "dpdkvhostclient0")
    sb.vsctl("set", "interface", "dpdkvhostuserclient0",
             *(f"{k}={v}" for k, v in settings.items()))
    sb.vsctl("show")
    assert not ovs.log.grep("Could not create rte meter for ingress policer")
    want = {"ingress_policing_rate": 0, "ingress_policing_burst": 0, **settings}
    if remove:
        sb.vsctl(*set_interface("dpdkvhostuserclient0", ingress_policing_rate=0,
                                ingress_policing_burst=0))
        want = {"ingress_policing_rate": 0, "ingress_policing_burst": 0}
    listing = sb.vsctl("list", "interface", "dpdkvhostuserclient0").stdout
    for key, value in want.items():
        assert re.search(rf"^{key}\s*: {value}$", listing, re.M), (key, listing)
        got = sb.vsctl("get", "interface", "dpdkvhostuserclient0", key).stdout
        assert got == f"{value}\n", (key, got)
    sb.vsctl("del-port", "br10", "dpdkvhostuserclient0")


QOS = [
    pytest.param(["other-config:cir=1250000", "other-config:cbs=2048"], True,
                 marks=upstream("OVS-DPDK - QoS create delete vport port"), id="create_delete"),
    pytest.param(["other-config:cbs=2048"], False, marks=upstream("OVS-DPDK - QoS no cir"),
                 id="no_cir"),
    pytest.param(["other-config:cir=1250000"], False, marks=upstream("OVS-DPDK - QoS no cbs"),
                 id="no_cbs"),
]


@pytest.mark.parametrize("config,valid", QOS)
def test_qos_vport(ovs_dpdk: Callable[..., OvsDpdk], config: list[str], valid: bool) -> None:
    """An egress-policer QoS on a vhost-user client port.

    Verifies upstream's checks: with cir and cbs, qos/show answers and no rte
    meter error; after `destroy QoS` + `clear Port qos`, qos/show says 'QoS not
    configured'; without cir or without cbs, 'QoS not configured' from the
    start.  Beyond: qos/show shows the type, cir and cbs of the valid one; the
    invalid ones are refused with the error upstream's allowlist names."""
    ovs = ovs_dpdk()
    ovs.allow(VHOST_CLIENT_ALLOW)
    sb = ovs.sb
    port = "dpdkvhostuserclient0"
    if not valid:  # upstream's allowlist for the refused ones
        ovs.allow(r"Could not create rte meter for egress policer",
                  rf"Failed to set QoS type egress-policer on port {port}: Invalid argument")
    ovs.add_br("br10")
    ovs.add_vhost_user_client_port("br10", port, ovs.rundir / "dpdkvhostclient0")
    check(sb.vsctl("set", "port", port, "qos=@newqos", "--", "--id=@newqos", "create", "qos",
                   "type=egress-policer", *config), stdout=None)
    shown = sb.appctl("qos/show", port).stdout
    if valid:
        assert not ovs.log.grep("Could not create rte meter for egress policer")
        assert f"QoS: {port} egress-policer" in shown, shown
        assert re.search(r"^cir: 1250000$", shown, re.M) and re.search(r"^cbs: 2048$", shown,
                                                                        re.M), shown
        sb.vsctl("destroy", "QoS", port, "--", "clear", "Port", port, "qos")
        shown = sb.appctl("qos/show", port).stdout
    else:
        ovs.log.wait(re.escape(f"Failed to set QoS type egress-policer on port {port}: "
                               "Invalid argument"))
    assert f"QoS not configured on {port}" in shown, shown
    sb.vsctl("del-port", "br10", port)


# ----------------------------------------------------------------------------
# mempools and offload providers on a net_null port


def mempool_set(ovs: OvsDpdk, mtu_value: int) -> None:
    """CHECK_MEMPOOL_PARAM([MTU], [ALL])."""
    ovs.log.wait(re.escape(f"User configured shared mempool set for: MTU {mtu_value}, NUMA ALL."))


@upstream("OVS-DPDK - user configured mempool")
def test_user_configured_mempool(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """shared-mempool-config=8000,6000,1500, then a net_null port whose MTU goes
    1500 -> 7000 -> 1500 -> 9000.

    Verifies upstream's checks: the three sizes are announced; each MTU finds
    the right configured mempool (or none for 9000) and the port requests one,
    the return to 1500 reuses the first.  Beyond: each MTU reads back, and the
    port's mempool fits an MTU-sized frame each time."""
    ovs = ovs_dpdk(init=False)
    sb = ovs.sb
    sb.vsctl("--no-wait", "set", "Open_vSwitch", ".",
             "other_config:shared-mempool-config=8000,6000,1500")
    sb.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-init=true")
    for size in (8000, 6000, 1500):
        mempool_set(ovs, size)
    sb.appctl("vlog/set", "netdev_dpdk:dbg")
    ovs.add_br("br10")
    sb.vsctl(*add_port("br10", "p1", type="dpdk", options={"dpdk-devargs": "net_null0,no-rx=1"}))
    sb.vsctl("show")
    assert ovs.log.grep(r"Found user configured shared mempool .* suitable for port with "
                        r"MTU 1500")
    assert ovs.log.grep("Port p1: Requesting a mempool")
    steps = ((7000, "Found user configured shared mempool .* suitable for port with MTU 7000",
              "Port p1: Requesting a mempool"),
             (1500, "Found user configured shared mempool .* suitable for port with MTU 1500",
              "Reusing mempool"),
             (9000, "No user configured shared mempool mbuf sizes found suitable for port with "
                    "MTU 9000", "Port p1: Requesting a mempool"))
    for value, found, then in steps:
        since = ovs.log.mark()
        sb.vsctl(*set_interface("p1", mtu_request=value))
        ovs.log.wait(found, after=since)
        ovs.log.wait(re.escape(then), after=since)
        # The mtu column follows the reconfiguration a moment later.
        assert settled(lambda: sb.vsctl("get", "Interface", "p1", "mtu").stdout,
                       f"{value}\n") == f"{value}\n"
    sb.vsctl("del-port", "br10", "p1")


@upstream("OVS-DPDK - ovs-appctl dpif/offload/show")
def test_dpif_offload_show(ovs_dpdk: Callable[..., OvsDpdk]) -> None:
    """A net_null port on a netdev bridge, hardware offload off.

    Verifies upstream's exact outputs of dpif/offload/show, text and JSON.
    Beyond: the port number shown is the one the datapath gave p1."""
    ovs = ovs_dpdk()
    sb = ovs.sb
    sb.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
    sb.vsctl(*add_port("br0", "p1", type="dpdk", options={"dpdk-devargs": "net_null0,no-rx=1"}))
    check(sb.appctl("dpif/offload/show"), stdout=(
        "Globally enabled: false\nDatapaths:\nnetdev@ovs-netdev:\n  dpdk\n"
        "  - p1: port_no: 2\n"))
    check(sb._tool([sb.install.tool("ovs-appctl"), "--format", "json", "--pretty",
                    "dpif/offload/show"]), stdout=(
        '{\n  "enabled": false,\n  "netdev@ovs-netdev": {\n    "priority": [\n'
        '      "dpdk"],\n    "providers": {\n      "dpdk": {\n        "ports": {\n'
        '          "p1": {\n            "port_no": 2}}}}}}\n'))
    assert re.search(r"port 2: p1 \(dpdk", sb.dpctl("show").stdout)

