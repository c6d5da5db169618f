"""system-dpdk.at's traffic tests (Open vSwitch 4.0.0): pings across vhost-user
ports with dpdk-testpmd as the guest, and headroom expansion under two IPv6
VXLAN encapsulations.

Upstream checks that the pings are answered (and, for the client ports, the
vhost statistics).  Beyond upstream, every echo request and reply is captured
where it entered and where it left, and the frames that left are compared
with the model field by field; for headroom expansion that is the doubly
encapsulated reply, outer headers and checksums included.
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

import pytest
from scapy.layers.inet6 import ICMPv6EchoReply, IPv6
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from datapath import model
from datapath.backends.kernel import tx_from_status
from datapath.backends.native_tunnel import Sniffer
from datapath.backends.netns import Netns, link_mac, mac_text
from datapath.model.actions import PushTunnel, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags
from datapath.verdict import conclude
from fixtures.records import record_for
from fixtures.system_dpdk.macros import FILE, OvsDpdk, lcores_for
from fixtures.upstream_system import (
    PathCheck,
    add_veth,
    check_path,
    enable_ipv6,
    format_ping,
    icmp_echo,
    run_in,
    veth_tx_off,
)
from harness.ifstatus import Statistics, read_interface
from harness.vsctl import add_port, chain, set_interface
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="dpdk")


def dpdk_veth(ovs: OvsDpdk, name: str, ns: Netns, bridge: str, addr: str) -> None:
    """ADD_VETH of system-dpdk-macros.at: the OVS end is a DPDK net_af_xdp port."""
    port = f"ovs-{name}"
    add_veth(ovs.sb, ovs.env.switch_ns, name, ns, bridge, addr,
             ["--", "set", "interface", port, "type=dpdk", "--", "set", "interface", port,
              f"options:dpdk-devargs=net_af_xdp{name},iface={port}"],
             offloads=veth_tx_off(ovs.sb, ovs.env.switch_ns))


def guest_tap(ovs: OvsDpdk, ns1: Netns) -> None:
    """Move testpmd's tap0 to ns1 and give it 172.31.110.11/24, as upstream does."""
    sw = ovs.env.switch_ns
    run_in(ovs.sb, sw, ["ip", "link", "show"])
    run_in(ovs.sb, sw, ["ip", "link", "set", "tap0", "netns", ns1.name])
    assert "tap0" in run_in(ovs.sb, ns1, ["ip", "link", "show"]).stdout
    run_in(ovs.sb, ns1, ["ip", "link", "set", "tap0", "up"])
    run_in(ovs.sb, ns1, ["ip", "addr", "add", "172.31.110.11/24", "dev", "tap0"])


def ping_both_ways(ovs: OvsDpdk, request: pytest.FixtureRequest, ns1: Netns, ns2: Netns,
                   argv: list[str], count: int, vhost: str) -> None:
    """Run upstream's ping from ns1 (tap0, behind testpmd and the vhost port) to
    ns2 (tap1, behind ovs-tap1), then compare every echo request and reply that
    crossed OVS with the model: NORMAL switching, no rx checksum flags (testpmd
    io forwarding passes no virtio offload; net_af_xdp none) and no tx offload
    (neither port offers one), so each frame must leave exactly as it entered."""
    tap0, tap1 = Sniffer(ns1, "tap0"), Sniffer(ns2, "tap1")
    run_in(ovs.sb, ns1, ["ip", "link", "show"])
    run_in(ovs.sb, ns2, ["ip", "link", "show"])
    ping = run_in(ovs.sb, ns1, argv, timeout=60)
    assert format_ping(ping.stdout).startswith(
        f"{count} packets transmitted, {count} received, 0% packet loss"), ping.stdout

    def seen() -> bool:
        tap0.read()
        tap1.read()
        return (len(icmp_echo(tap1.received, "request")) >= count
                and len(icmp_echo(tap0.received, "reply")) >= count)
    wait_until(seen, 10, what=f"{count} requests at tap1 and {count} replies at tap0")
    steps = record_for(request.node).steps
    check_path(steps, [
        (PathCheck("echo requests", vhost, "ovs-tap1"),
         icmp_echo(tap0.sent, "request"), icmp_echo(tap1.received, "request")),
        (PathCheck("echo replies", "ovs-tap1", vhost),
         icmp_echo(tap1.sent, "reply"), icmp_echo(tap0.received, "reply"))],
        second_opinion=request.getfixturevalue("second_opinion"))


@pytest.mark.upstream("OVS-DPDK - ping vhost-user ports", file=FILE)
def test_ping_vhost_user_ports(ovs_dpdk: Callable[..., OvsDpdk], request: pytest.FixtureRequest) -> None:
    """A dpdkvhostuser port (OVS is the server), testpmd's virtio-user as its
    client forwarding to a net_tap in ns1; a veth through DPDK net_af_xdp to ns2.

    Verifies upstream's checks: the server socket is bound, virtio becomes
    ready, tap0 comes up, ping -c 4 from ns1 to ns2 succeeds, and the device is
    removed once testpmd stops.  Beyond: all 4 answered, and every request and
    reply left OVS as the model says."""
    ovs = ovs_dpdk()
    ovs.allow(r"VHOST_CONFIG: \(.*dpdkvhostuser0\) recvmsg failed",
              r"VHOST_CONFIG: \(.*dpdkvhostuser0\) failed to connect: No such file or directory",
              r"dpdkvhostuser ports are considered deprecated;  please migrate to "
              r"dpdkvhostuserclient ports.",
              r"failed to enumerate system datapaths: No such file or directory")
    sb = ovs.sb
    sock = ovs.rundir / "dpdkvhostuser0"
    ovs.add_br("br10")
    ovs.add_vhost_user_port("br10", "dpdkvhostuser0", sock)
    sb.vsctl("show")
    ns1, ns2 = ovs.env.peer("ns1"), ovs.env.peer("ns2")
    dpdk_veth(ovs, "tap1", ns2, "br10", "172.31.110.12/24")
    pmd = ovs.start_testpmd([f"--vdev=net_virtio_user,path={sock}", "--vdev=net_tap0,iface=tap0"])
    ovs.wait_virtio_ready(pmd)
    ovs.wait_link_up(pmd, "tap0")
    assert pmd.alive()  # ps aux | grep testpmd
    guest_tap(ovs, ns1)
    ping_both_ways(ovs, request, ns1, ns2, ["ping", "-c", "4", "-I", "tap0", "172.31.110.12"],
                   4, "dpdkvhostuser0")
    pmd.stop()
    ovs.log.wait(re.escape(f"vHost Device '{sock}' has been removed"))
    sb.vsctl("del-port", "br10", "dpdkvhostuser0")


@pytest.mark.upstream("OVS-DPDK - ping vhost-user-client ports", file=FILE)
def test_ping_vhost_user_client_ports(ovs_dpdk: Callable[..., OvsDpdk],
                                      request: pytest.FixtureRequest) -> None:
    """A dpdkvhostuserclient port, testpmd's virtio-user the server with two
    queue pairs and two forwarding cores; a veth through net_af_xdp to ns2.

    Verifies upstream's checks: ping -i 0.1 -c 10 succeeds; once the statistics
    are refreshed, rx and tx packets and bytes are positive and equal the sums
    of the two queues' good packets and bytes.  Beyond: all 10 answered, every
    request and reply left OVS as the model says, and the port received at
    least the 10 requests and sent at least the 10 replies."""
    ovs = ovs_dpdk()
    ovs.allow(r"VHOST_CONFIG: \(.*dpdkvhostclient0\) recvmsg failed",
              r"VHOST_CONFIG: \(.*dpdkvhostclient0\) failed to connect: No such file or directory",
              r"failed to enumerate system datapaths: No such file or directory")
    sb = ovs.sb
    port = "dpdkvhostuserclient0"
    sock = ovs.rundir / "dpdkvhostclient0"
    ovs.add_br("br10")
    ovs.add_vhost_user_client_port("br10", port, sock)
    sb.vsctl("show")
    ns1, ns2 = ovs.env.peer("ns1"), ovs.env.peer("ns2")
    dpdk_veth(ovs, "tap1", ns2, "br10", "172.31.110.12/24")
    pmd = ovs.start_testpmd([f"--vdev=net_virtio_user,path={sock},queues=2,server=1",
                             "--vdev=net_tap0,iface=tap0", *lcores_for(2)],
                            ["--nb-cores", "2", "--rxq", "2", "--txq", "2"])
    ovs.wait_virtio_ready(pmd)
    ovs.wait_link_up(pmd, "tap0")
    assert pmd.alive()
    guest_tap(ovs, ns1)
    ping_both_ways(ovs, request, ns1, ns2,
                   ["ping", "-i", "0.1", "-c", "10", "-I", "tap0", "172.31.110.12"], 10, port)
    run_in(sb, ns1, ["ip", "link", "set", "tap0", "down"])

    def stats() -> Statistics:
        return read_interface(sb, port).statistics
    def refreshed() -> Statistics | None:
        now = stats()
        return now if now.rx_packets >= 10 and now.tx_packets >= 10 else None
    # Upstream sleeps 5 s (stats-update-interval); wait for the refresh instead.
    got = wait_until(refreshed, 30, what="the vhost statistics to count the pings",
                     describe=lambda: str(stats()))
    assert got is not None  # wait_until returns the first truthy value
    for way in ("rx", "tx"):
        assert got.raw[f"{way}_packets"] > 0 and got.raw[f"{way}_bytes"] > 0, got
        for unit in ("packets", "bytes"):
            queues = got.raw[f"{way}_q0_good_{unit}"] + got.raw[f"{way}_q1_good_{unit}"]
            assert got.raw[f"{way}_{unit}"] == queues, (way, unit, got)
    sb.vsctl("del-port", "br10", port)
    pmd.stop()


# ----------------------------------------------------------------------------
# headroom expansion


def numa_rxqs() -> str:
    r"""$(lscpu | awk '/NUMA node\(s\)/ { print $NF + 1 }')."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^NUMA node\(s\):\s*(\d+)", out, re.M)
    return str(int(m.group(1)) + 1 if m else 2)


def add_ovs_tunnel6(ovs: OvsDpdk, bridge: str, port: str, remote: str, addr: str,
                    key: str) -> None:
    """ADD_OVS_TUNNEL6([vxlan], BRIDGE, PORT, REMOTE, "ADDR" nodad, [options:key=KEY])."""
    sw = ovs.env.switch_ns
    ovs.sb.vsctl("add-port", bridge, port, "--", "set", "int", port, "type=vxlan",
                 f"options:remote_ip={remote}", f"options:key={key}")
    run_in(ovs.sb, sw, ["ip", "addr", "add", "dev", bridge, addr, "nodad"])
    run_in(ovs.sb, sw, ["ip", "link", "set", "dev", bridge, "up"])
    run_in(ovs.sb, sw, ["ip", "link", "set", "dev", bridge, "mtu", "1450"])
    run_in(ovs.sb, sw, ["ip", "link", "set", "dev", bridge, "mtu", "1430"])


def add_native_tunnel6(ovs: OvsDpdk, port: str, ns: Netns, remote: str, addr: str,
                       vni: str) -> None:
    """ADD_NATIVE_TUNNEL6([vxlan], PORT, NS, REMOTE, "ADDR" nodad, [id VNI dstport 4789])."""
    run_in(ovs.sb, ns, ["ip", "link", "add", "dev", port, "type", "vxlan", "remote", remote,
                        "id", vni, "dstport", "4789"])
    run_in(ovs.sb, ns, ["ip", "addr", "add", "dev", port, addr, "nodad"])
    run_in(ovs.sb, ns, ["ip", "link", "set", "dev", port, "mtu", "1450", "up"])
    run_in(ovs.sb, ns, ["ip", "link", "set", "dev", port, "mtu", "1430"])


def add_tap_port(ovs: OvsDpdk, bridge: str, port: str, vdev: str, ns: Netns,
                 addr: str) -> None:
    """A dpdk port on a net_tap vdev, its kernel side moved to NS with ADDR."""
    ovs.sb.vsctl(*chain(add_port(bridge, port, type="dpdk"),
                        set_interface(port, options={"n_rxq": numa_rxqs()}),
                        set_interface(port, options={"dpdk-devargs": f"{vdev},iface={port}"})))
    run_in(ovs.sb, ovs.env.switch_ns, ["ip", "link", "set", port, "netns", ns.name])
    run_in(ovs.sb, ns, ["ip", "link", "set", port, "up"])
    wait_until(lambda: "LOWER_UP" in ns.ip("link", "show", "dev", port).stdout, 30,
               what=f"{port} LOWER_UP")
    run_in(ovs.sb, ns, ["ip", "-6", "addr", "add", addr, "nodad", "dev", port])


def double_vxlan_replies(frames: list[bytes]) -> list[bytes]:
    """Frames that are IPv6/VXLAN/IPv6/VXLAN/IPv6 ICMPv6 echo replies."""
    out = []
    for frame in frames:
        pkt = Ether(frame)
        inner = pkt.getlayer(VXLAN, 2)
        if inner is not None and inner.haslayer(ICMPv6EchoReply):
            out.append(frame)
    return out


def udp_sports(frame: bytes) -> tuple[int, int]:
    """The UDP source ports OVS chose for the outer and the inner VXLAN headers."""
    pkt = Ether(frame)
    outer, inner = pkt.getlayer(IPv6, 1), pkt.getlayer(IPv6, 2)
    assert outer is not None and inner is not None
    return int(outer.payload.sport), int(inner.payload.sport)


@pytest.mark.upstream("OVS-DPDK - headroom expansion", file=FILE, since="4.0")
@pytest.mark.requires(kernel="vxlan6")
def test_headroom_expansion(ovs_dpdk: Callable[..., OvsDpdk], request: pytest.FixtureRequest) -> None:
    """at_ns1's replies to at_ns0 enter OVS on p2 and leave p0 inside two IPv6
    VXLAN headers (140 bytes, more than DPDK's 128-byte mbuf headroom), so OVS
    must make room in front of the packet.

    Verifies upstream's check: ping6 -c 3 from at_ns0 to fc00:2::200 is all
    answered (through the kernel's own VXLAN devices, which check what OVS
    built).  Beyond: each doubly encapsulated reply on p0 is compared field by
    field with the model's two pushes (RFC 7348 VXLAN over IPv6 with a UDP
    checksum, OVS's default there; hop limit 64; MACs of the bridges and
    next hops), the UDP source ports taken from the frame after checking they
    are in OVS's egress port range."""
    ovs = ovs_dpdk(system_route=True)
    ovs.allow(r"Failed to send start req to secondary 95",
              r"eth_dev_tap_create\(\): .*: failed to create multiq qdisc.",
              r"eth_dev_tap_create\(\):  Disabling rte flow support: No such file or directory",
              r"qdisc_create_multiq\(\): Could not add multiq qdisc \(2\): No such file or "
              r"directory",
              r"tap_nl_dump_ext_ack\(\): Specified qdisc kind is unknown")
    sb, sw = ovs.sb, ovs.env.switch_ns
    enable_ipv6(sw)  # upstream's init_net has IPv6
    for br in ("br0", "br1", "br2"):  # ADD_BR
        sb.vsctl("add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev",
                 "protocols=OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,"
                 "OpenFlow15", "fail-mode=secure")
    for br in ("br0", "br1", "br2"):
        sb.ofctl("add-flow", br, "actions=normal")
    ns0, ns1 = ovs.env.peer("at_ns0"), ovs.env.peer("at_ns1")
    for ns in (ns0, ns1):
        enable_ipv6(ns)
    run_in(sb, sw, ["ip", "link", "set", "dev", "br0", "up"])
    run_in(sb, sw, ["ip", "link", "set", "dev", "br1", "up"])
    run_in(sb, sw, ["ip", "addr", "add", "dev", "br0", "fc00::100/64", "nodad"])
    add_tap_port(ovs, "br0", "p0", "net_tap0", ns0, "fc00::1/64")
    add_ovs_tunnel6(ovs, "br1", "ovs-vxlan1", "fc00::1", "fc00:1::100/64", "0")
    add_native_tunnel6(ovs, "vxlan1", ns0, "fc00::100", "fc00:1::1/64", "0")
    add_ovs_tunnel6(ovs, "br2", "ovs-vxlan2", "fc00:1::1", "fc00:2::100/64", "1")
    add_native_tunnel6(ovs, "vxlan2", ns0, "fc00:1::100", "fc00:2::1/64", "1")
    add_tap_port(ovs, "br2", "p2", "net_tap2", ns1, "fc00:2::200/64")
    for addr in ("fc00::100", "fc00:1::100", "fc00:2::100"):
        wait_until(lambda a=addr: run_in(sb, ns0, ["ping", "-6", "-c", "1", a],  # type: ignore[misc]
                                         rc=None).rc == 0, 30, what=f"ping6 {addr}")
    p0, p2 = Sniffer(ns0, "p0"), Sniffer(ns1, "p2")
    ping = run_in(sb, ns0, ["ping", "-6", "-q", "-c", "3", "-i", "0.3", "-W", "2",
                            "fc00:2::200"])
    assert format_ping(ping.stdout) == \
        "3 packets transmitted, 3 received, 0% packet loss, time 0ms\n", ping.stdout

    def seen() -> bool:
        p0.read()
        p2.read()
        return len(double_vxlan_replies(p0.received)) >= 3
    wait_until(seen, 10, what="3 doubly encapsulated replies on p0")
    check_double_push(ovs, request, ns0, p2, p0)


def check_double_push(ovs: OvsDpdk, request: pytest.FixtureRequest, ns0: Netns,
                      p2: Sniffer, p0: Sniffer) -> None:
    """The model's frames for each reply at_ns1 sent: push VXLAN key 1 (br1's
    address to at_ns0's vxlan1 side), push VXLAN key 0 (br0's address to p0),
    out of p0 (a net_tap port: OVS completes what the port does not offload)."""
    sw = ovs.env.switch_ns
    lo, hi = (int(n) for n in re.findall(r"\d+", ovs.sb.appctl(
        "tnl/egress_port_range").stdout)[:2])
    sent = icmp_echo(p2.sent, "reply")
    arrived = double_vxlan_replies(p0.received)
    tx, _ = tx_from_status(read_interface(ovs.sb, "p0").status)
    expected = model.Expected(frames=[])
    for i, frame in enumerate(sent):
        outer_sport, inner_sport = udp_sports(arrived[i]) if i < len(arrived) else (lo, lo)
        for sport in (outer_sport, inner_sport):
            assert lo <= sport <= hi, f"UDP source port {sport} outside {lo}-{hi}"
        inner = TunnelSpec("vxlan", "fc00:1::100", "fc00:1::1", mac_text(link_mac(sw, "br1")),
                           mac_text(link_mac(ns0, "vxlan1")), key=1, udp_src=inner_sport)
        outer = TunnelSpec("vxlan", "fc00::100", "fc00::1", mac_text(link_mac(sw, "br0")),
                           mac_text(link_mac(ns0, "p0")), key=0, udp_src=outer_sport)
        expected.extend(model.forward(frame, [PushTunnel(inner, "ovs-vxlan2"),
                                              PushTunnel(outer, "ovs-vxlan1"), output("p0")],
                                      tx, RxFlags()))
    conclude(record_for(request.node).steps, expected, arrived,
             title="echo replies, doubly encapsulated", rx_port="p2", tx_port="p0", sent=sent,
             second_opinion=request.getfixturevalue("second_opinion"),
             context="p2 -> p0 (two pushes)").check()

