"""system-afxdp.at (Open vSwitch 4.0.0), and AF_XDP's modes beyond it.

The upstream tests run as upstream's system-afxdp testsuite runs them
(OVS_TRAFFIC_VSWITCHD_START with the userspace macros, ADD_VETH in its afxdp
flavour), with vswitchd in a namespace of its own standing in for init_net.
Beyond upstream: the frames of each ping are captured on both sides and
compared with the model, and each xdp-mode is set, read back from OVS and from
the kernel, and carries frames checked field by field.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends import afxdp
from datapath.backends.env import RealEnv
from datapath.backends.native_tunnel import Sniffer
from datapath.expect import send_and_expect
from datapath.model.actions import mod_tp_dst, output
from datapath.offloads import RxFlags, TxOffloads
from fixtures.frames import compose, with_ip_csum_flipped, with_l4_csum
from fixtures.records import record_for
from fixtures.upstream_system import (
    OVS_CTL_TIMEOUT,
    PathCheck,
    add_veth,
    check_path,
    format_ping,
    icmp_echo,
    ping_argv,
    run_in,
    veth_tx_off,
)
from harness.control import check
from harness.ifstatus import read_interface
from harness.vsctl import add_port, set_interface
from harness.wait import WaitTimeout, wait_until

pytestmark = pytest.mark.requires(backend="afxdp")

FILE = "system-afxdp.at"
# _ADD_BR of the userspace macros.
ADD_BR = ["datapath_type=netdev",
          "protocols=OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15",
          "fail-mode=secure"]
# OVS_TRAFFIC_VSWITCHD_STOP's allowlist (the userspace macros).
TRAFFIC_STOP_ALLOW = (
    r"netdev_linux.*obtaining netdev stats via vport failed",
    (r"dpif_netlink.*Generic Netlink family 'ovs_datapath' does not exist. The Open vSwitch "
     r"kernel module is probably not loaded."),
    r"dpif_netdev\(revalidator.*\)\|ERR\|internal error parsing flow key.*proto=2.*",
    r"dpif\(revalidator.*\)\|WARN\|netdev@ovs-netdev: failed to.*proto=2.*",
)
# An infinite re-addition loop repeats within milliseconds (each round is one
# main-loop iteration woken by the port's own netlink events); upstream watches
# for 5 s.  Absence has no event to wait on: this is an observation window.
OBSERVE_SECONDS = 2.0


def traffic_start(real_env) -> RealEnv:  # type: ignore[no-untyped-def]
    """OVS_TRAFFIC_VSWITCHD_START(): vswitchd (here, in its own namespace) and br0."""
    env: RealEnv = real_env("afxdp")
    env.sb.allow_log(*TRAFFIC_STOP_ALLOW)
    env.sb.vsctl("--", "add-br", "br0", "--", "set", "Bridge", "br0", *ADD_BR)
    return env


def afxdp_veth(env: RealEnv, name: str, ns_role: str, addr: str) -> None:
    """ADD_VETH of system-afxdp-macros.at: the OVS end is an afxdp port."""
    add_veth(env.sb, env.switch_ns, name, env.peer(ns_role), "br0", addr, ["type=afxdp"],
             offloads=veth_tx_off(env.sb, env.switch_ns))


@pytest.mark.upstream("AF_XDP - infinite re-addition of failed ports", file=FILE)
def test_infinite_readdition_of_failed_ports(real_env: Callable[..., RealEnv]) -> None:
    """An afxdp port asking for more rx queues than AF_XDP allows (n_rxq=42 > 16)
    fails once, and is not re-added over and over (dpif-netdev must not turn
    the device's flags on before it configured it: each flag change is a netlink
    event that re-applies the configuration).

    Verifies upstream's checks: ovs-vsctl exits 65 with nothing on stdout, the
    log says 'could not set configuration' exactly once.  Beyond upstream: the
    stderr and the Interface's error column name the failure, ofport is -1, no
    XDP program stays attached, and br0 is not reconfigured again and again."""
    env = traffic_start(real_env)
    sb = env.sb
    sb.ofctl("add-flow", "br0", "actions=normal")
    env.peer("at_ns0"), env.peer("at_ns1")  # ADD_NAMESPACES(at_ns0, at_ns1)
    afxdp_veth(env, "p0", "at_ns0", "10.1.1.1/24")
    sb.vsctl("del-port", "ovs-p0")
    res = check(sb.vsctl(*add_port("br0", "ovs-p0", type="afxdp", options={"n_rxq": 42}), rc=65), stdout="")
    sb.allow_log(r"ovs-p0: Too big 'n_rxq'", r"ovs-p0: could not set configuration")
    sb.log.wait("ovs-p0: could not set configuration", timeout=OVS_CTL_TIMEOUT)
    reconfigured = sb.coverage("bridge_reconfigure")
    deadline = time.monotonic() + OBSERVE_SECONDS
    while time.monotonic() < deadline:
        assert len(sb.log.grep("ovs-p0: could not set configuration")) == 1, \
            "the failed port is added again and again:\n" + "\n".join(
                sb.log.grep("ovs-p0: could not set configuration"))
        time.sleep(0.05)
    assert len(sb.log.grep("ovs-p0: could not set configuration")) == 1
    assert sb.log.grep(re.escape("ovs-p0: Too big 'n_rxq' (42 > 16)."))
    assert "Error detected while setting up 'ovs-p0': ovs-p0: could not set configuration " \
           "(Invalid argument)" in res.stderr, res.stderr
    error = sb.vsctl("get", "Interface", "ovs-p0", "error").stdout.strip()
    assert error == '"ovs-p0: could not set configuration (Invalid argument)"', error
    assert sb.vsctl("get", "Interface", "ovs-p0", "ofport").stdout.strip() == "-1"
    assert afxdp.kernel_xdp_mode(env.switch_ns, "ovs-p0") == "none"
    assert sb.coverage("bridge_reconfigure") <= reconfigured + 1, "br0 keeps reconfiguring"


@pytest.mark.upstream("AF_XDP - ping between pmd and non-pmd ports", file=FILE)
def test_ping_between_pmd_and_non_pmd_ports(real_env: Callable[..., RealEnv],
                                            request: pytest.FixtureRequest) -> None:
    """ovs-p0 is an afxdp-nonpmd port (polled by the main thread), ovs-p1 an afxdp
    port (polled by a PMD thread); br0 switches with NORMAL.

    Verifies upstream's check: 3 pings from at_ns0 to at_ns1 all answered.
    Beyond upstream: each echo request and reply that entered OVS left the other
    port exactly as the model says (unchanged: AF_XDP stamps no checksum state
    and offers no offload); ovs-p1 is on a PMD thread and ovs-p0 on none; the
    xdp mode OVS reports is the one the kernel attached."""
    env = traffic_start(real_env)
    sb = env.sb
    sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = env.peer("at_ns0"), env.peer("at_ns1")
    afxdp_veth(env, "p0", "at_ns0", "10.1.1.1/24")
    afxdp_veth(env, "p1", "at_ns1", "10.1.1.2/24")
    sb.vsctl("del-port", "ovs-p0")
    check(sb.vsctl(*add_port("br0", "ovs-p0", type="afxdp-nonpmd",
                             options={"n_rxq": 1})), stdout="", stderr="")
    at0, at1 = Sniffer(ns0, "p0"), Sniffer(ns1, "p1")
    argv = ping_argv("10.1.1.2")
    ping = run_in(sb, ns0, argv)
    assert format_ping(ping.stdout, argv) == \
        "3 packets transmitted, 3 received, 0% packet loss, time 0ms\n", ping.stdout

    def seen() -> bool:
        at0.read()
        at1.read()
        return (len(icmp_echo(at1.received, "request")) >= 3
                and len(icmp_echo(at0.received, "reply")) >= 3)
    wait_until(seen, 5, what="the captures to hold 3 requests and 3 replies")
    steps = record_for(request.node).steps
    check_path(steps, [
        (PathCheck("echo requests", "ovs-p0", "ovs-p1"),
         icmp_echo(at0.sent, "request"), icmp_echo(at1.received, "request")),
        (PathCheck("echo replies", "ovs-p1", "ovs-p0"),
         icmp_echo(at1.sent, "reply"), icmp_echo(at0.received, "reply"))],
        second_opinion=request.getfixturevalue("second_opinion"))
    rxq = sb.appctl("dpif-netdev/pmd-rxq-show").stdout
    assert "port: ovs-p1" in rxq and "port: ovs-p0" not in rxq, rxq
    for port in ("ovs-p0", "ovs-p1"):
        mode = read_interface(sb, port).status.xdp_mode
        assert mode == afxdp.kernel_xdp_mode(env.switch_ns, port), (port, mode)


# ----------------------------------------------------------------------------
# beyond upstream: the modes


# best-effort tries native-with-zerocopy first, which veth lacks (no zero-copy
# AF_XDP support), then native, which veth has.
IN_USE = {"native": "native", "generic": "generic", "best-effort": "native"}


@pytest.mark.parametrize("mode", ["native", "generic", "best-effort"])
def test_xdp_mode_in_use(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest, mode: str) -> None:
    """Two afxdp ports with options:xdp-mode=MODE on veth pairs.

    Verifies: the Interface status `xdp-mode` (the mode in use) is MODE, or
    native for best-effort on veth; the kernel attached OVS's program in that
    same mode (driver for native, skb for generic); datapath/show names the
    configured mode; and TCP/UDP frames over IPv4/IPv6, good and bad checksums,
    rewritten by mod_tp_dst, leave p2 as the model says with OVS doing every
    checksum in software (no rx flags, no tx offload)."""
    env: RealEnv = real_env("afxdp")
    sb = env.sb
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev",
             "fail-mode=secure")
    p1 = env.own(afxdp.AfxdpPort(sb, "br1", "p1", 1, env.switch_ns, env.peer("p1"), mode=mode))
    p2 = env.own(afxdp.AfxdpPort(sb, "br1", "p2", 2, env.switch_ns, env.peer("p2"), mode=mode))
    for port in (p1, p2):
        assert port.xdp_mode == IN_USE[mode], port.status
        assert port.kernel_mode() == IN_USE[mode], (port.name, port.kernel_mode())
        assert port.tx == TxOffloads() and not port.tso, port.status
    shown = sb.dpctl("show").stdout
    assert f"p1 (afxdp: n_rxq=1, xdp-mode={mode})" in shown, shown
    actions = [mod_tp_dst(2222), output("p2")]
    sb.ofctl("add-flow", "br1", "in_port=1,actions=mod_tp_dst:2222,output:2")
    steps = record_for(request.node).steps
    for l4 in ("tcp", "udp"):
        for ipv in (4, 6):
            good = compose(l4, ipv)
            frames = [good, with_l4_csum(good, 0xDEAD)]
            if ipv == 4:
                frames.append(with_ip_csum_flipped(good))
            for frame in frames:  # one per step: OVS may reorder frames of different flows
                expected = model.forward(frame, actions, p2.tx, RxFlags())
                send_and_expect(p1, [frame], p2, expected, title=f"{l4}{ipv} {mode}",
                                steps=steps)


def test_xdp_mode_switch_and_zerocopy_refusal(real_env: Callable[..., RealEnv]) -> None:
    """One afxdp port whose options:xdp-mode changes under it: native, generic,
    native-with-zerocopy (which veth cannot do), best-effort.

    Verifies after each change: status xdp-mode and the kernel's attach mode
    agree and follow the option; zero-copy fails as a configuration error (the
    Interface's error column, ofport -1, no status xdp-mode) with OVS's program
    removed from the device; best-effort brings the port back in native mode."""
    env: RealEnv = real_env("afxdp")
    sb = env.sb
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=netdev",
             "fail-mode=secure")
    port = env.own(afxdp.AfxdpPort(sb, "br1", "p1", 1, env.switch_ns, env.peer("p1"),
                                   mode="native"))
    assert (port.xdp_mode, port.kernel_mode()) == ("native", "native"), port.status
    sb.vsctl(*set_interface("p1", options={"xdp-mode": "generic"}))
    port.read_status()
    assert (port.xdp_mode, port.kernel_mode()) == ("generic", "generic"), port.status
    # The refusal's errno: EOPNOTSUPP from the zero-copy bind, or EBUSY while the
    # queue is still bound to the generic mode's socket (OVS frees a socket's umem
    # pool only once its packets are back, netdev_afxdp_sweep_unused_pools()).
    # Seen once in CI under load; either way the option is refused, as checked below.
    sb.allow_log(r"netdev_afxdp\|ERR\|xsk_socket__create failed \((Operation not supported|"
                 r"Device or resource busy)\) mode: native-with-zerocopy",
                 r"netdev_afxdp\|ERR\|p1: Failed to create AF_XDP socket on queue 0",
                 r"netdev_afxdp\|ERR\|p1: AF_XDP device reconfiguration failed",
                 r"dpif_netdev\|ERR\|Failed to set interface p1 new configuration",
                 r"ofproto\|WARN\|br1: cannot get R?STP status on nonexistent port 1",
                 r"dpif\|WARN\|netdev@ovs-netdev: failed to add p1 as port: Invalid argument",
                 r"bridge\|WARN\|could not add network device p1 to ofproto")
    sb.vsctl(*set_interface("p1", options={"xdp-mode": "native-with-zerocopy"}))

    def refused() -> str:
        error = sb.vsctl("get", "Interface", "p1", "error").stdout.strip()
        return "" if error == "[]" else error
    try:
        error = wait_until(refused, 10,
                           what="the zero-copy refusal in the Interface's error column")
    except WaitTimeout:
        pytest.fail(f"xdp-mode=native-with-zerocopy on veth did not fail; status "
                    f"{port.read_status()}, kernel {port.kernel_mode()}")
    assert "could not add network device p1 to ofproto (Invalid argument)" in error, error
    assert sb.vsctl("get", "Interface", "p1", "ofport").stdout.strip() == "-1"
    assert port.read_status().xdp_mode is None, port.status
    assert port.kernel_mode() == "none"
    sb.vsctl(*set_interface("p1", options={"xdp-mode": "best-effort"}))
    wait_until(lambda: sb.vsctl("get", "Interface", "p1", "ofport").stdout.strip()
               == "1", 10, what="p1 back on ofport 1")
    port.read_status()
    assert (port.xdp_mode, port.kernel_mode()) == ("native", "native"), port.status
