"""system-traffic.at's first tests, as `make check-system-userspace` (and
check-system-tso) run them: pings and HTTP between two namespaces through
br0 (actions=normal), untagged, on a VLAN and on a customer VLAN inside a
service VLAN (QinQ).

Each case keeps upstream's topology, addresses, commands (ping, curl) and
checks (ping's summary after FORMAT_PING, curl's exit status).  Beyond
upstream, every frame that crosses OVS is judged (fixtures/system_l2.py):
what went into br0 against what came out, with the model's NORMAL output
for the tx port; and, where OVS rules stand in for the kernel's VLAN
devices, each push and pop of the tags against IEEE 802.1Q/802.1ad
(datapath/model/l2tags.py).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from fixtures.system_l2 import (Crossings, TagEdge, add_tag_edge, kernel_vlan, port_tx,
                                switched, tagged, vlan_stack_probed)
from fixtures.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import check

SIZES = (None, "1600", "3200")


def two_ports(t: Traffic, six: bool) -> tuple:  # type: ignore[type-arg]
    """add-flow actions=normal, ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH p0, p1."""
    check(t.sb.ofctl("add-flow", "br0", "actions=normal"))
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    flags = ("nodad",) if six else ()
    t.add_veth("p0", ns0, "br0", "fc00::1/96" if six else "10.1.1.1/24", "", "", *flags)
    t.add_veth("p1", ns1, "br0", "fc00::2/96" if six else "10.1.1.2/24", "", "", *flags)
    return ns0, ns1


def through_br0(t: Traffic, request: pytest.FixtureRequest, ns0, ns1) -> Crossings:  # type: ignore[no-untyped-def]
    """p0 -> br0 -> p1 and back, NORMAL: the model's output for each tx port."""
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False),
             switched(port_tx(t, "ovs-p1")))
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "p1", True), (ns0, "p0", False),
             switched(port_tx(t, "ovs-p0")))
    return wire


def pings(t: Traffic, ns, dst: str, six: bool) -> None:  # type: ignore[no-untyped-def]
    for size in SIZES:
        t.check_ping(ns, dst, *(["-s", size] if size else []), six=six)


@FLAVOUR
@pytest.mark.parametrize("six", [
    pytest.param(False, marks=upstream("datapath - ping between two ports"), id="ping"),
    pytest.param(True, marks=upstream("datapath - ping6 between two ports"), id="ping6")])
def test_ping_between_two_ports(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str, six: bool) -> None:
    """Upstream's pings of 56, 1600 and 3200 bytes (fragmented by at_ns0's
    kernel at MTU 1500) from at_ns0 to at_ns1, all answered (ping6: once the
    IPv6 stack answers, upstream's OVS_WAIT_UNTIL); every fragment, reply and
    ARP/neighbour frame OVS forwarded, both ways, as the model's NORMAL output."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = two_ports(t, six)
    wire = through_br0(t, request, ns0, ns1)
    dst = "fc00::2" if six else "10.1.1.2"
    if six:
        t.wait_ping6(ns0, dst)
    pings(t, ns0, dst, six)
    assert wire.verify() >= 18  # 9 requests and 9 replies, fragments more


@FLAVOUR
@upstream("datapath - http between two ports")
def test_http_between_two_ports(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """A ping, then an HTTP server in at_ns1 (upstream's test-l7.py is Python's
    http.server on port 80) and OVS_GET_HTTP: curl from at_ns0 must exit 0.
    Every TCP segment OVS forwarded, both ways, as the model's NORMAL output
    (in the tso flavour the segments arrive with their checksums pending and
    may be TSO packets: the model finishes or segments them for the tx port)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = two_ports(t, False)
    wire = through_br0(t, request, ns0, ns1)
    t.check_ping(ns0, "10.1.1.2")
    root = t.sb.rundir / "www"
    root.mkdir()
    (root / "index.html").write_bytes(b"ovs-dpif-pytest\n" * 4096)
    t.daemonize("http server", ["python3", "-m", "http.server", "-d", str(root), "-b",
                                "10.1.1.2", "80"], ns1, t.sb.rundir / "http.out")
    t.wait_listen(ns1, 80)
    res = t.run(["curl", "10.1.1.2", "--retry", "3", "--max-time", "1",
                 "--retry-connrefused", "-v", "-o", str(t.sb.rundir / "got.html")], ns0)
    assert res.rc == 0, f"OVS_GET_HTTP failed:\n{res}"
    assert (t.sb.rundir / "got.html").read_bytes() == (root / "index.html").read_bytes()
    assert wire.verify() >= 10


# ----------------------------------------------------------------------------
# on vlan, on cvlan

VLAN = {  # the far end's tags, outermost first
    "vlan": ((0x8100, 100),),
    "cvlan": ((0x88A8, 4094), (0x8100, 100)),
}


def vlan_title(six: bool, kind: str) -> str:
    return f"datapath - {'ping6' if six else 'ping'} between two ports on {kind}"


@FLAVOUR
@pytest.mark.parametrize("six,kind", [
    pytest.param(six, kind, marks=upstream(vlan_title(six, kind)),
                 id=f"{'ping6' if six else 'ping'}-{kind}")
    for kind in VLAN for six in (False, True)])
def test_ping_between_two_ports_on_vlan(system_traffic: Callable[..., Traffic],
                                        request: pytest.FixtureRequest, flavour: str,
                                        six: bool, kind: str) -> None:
    """Upstream's pings of 56, 1600 and 3200 bytes between the VLAN devices
    of at_ns0 and at_ns1 (802.1Q VID 100; cvlan: a C-tag 100 inside an 802.1ad
    S-tag 4094, the inner device's MTU 1492), through br0's NORMAL switching
    of the tagged frames.  This kernel has no VLAN devices, so OVS rules push
    and pop the tags on a second bridge (fixtures/system_l2.py TagEdge); the
    frames on the veths into br0 are the ones upstream's devices send.
    Judged: each push and pop (IEEE 802.1Q §9.6, 802.1ad), and br0's
    forwarding of every tagged frame, unchanged.  cvlan needs OVS to parse two
    tags (upstream's OVS_CHECK_8021AD: the probed VLAN stack length, else a
    skip saying so)."""
    t: Traffic = system_traffic(flavour)
    if kind == "cvlan" and vlan_stack_probed(t) < 2:
        pytest.skip("OVS_CHECK_8021AD: ovs-vswitchd.log does not show a VLAN header stack "
                    f"length of 2 or more (probed: {vlan_stack_probed(t)})")
    native = kernel_vlan() is None
    check(t.sb.ofctl("add-flow", "br0", "actions=normal"))
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    tags = VLAN[kind]
    if six:
        addrs = ("fc00:1::1/96", "fc00:1::2/96")
    else:
        addrs = ("10.2.2.1/24", "10.2.2.2/24")
    flags = ("nodad",) if six else ()
    edges = [TagEdge("p0", ns0, tags), TagEdge("p1", ns1, tags)]
    if native:
        native_far_ends(t, edges, addrs, six, kind)
    else:
        for edge, addr in zip(edges, addrs):
            add_tag_edge(t, edge, addr, 1492 if kind == "cvlan" else None, *flags)
    wire = Crossings(t, request)
    e0, e1 = edges
    wire.hop("p0 -> br0 -> p1 (tagged)", (t.host, "ovs-p0", False), (t.host, "ovs-p1", True),
             switched(port_tx(t, "ovs-p1")))
    wire.hop("p1 -> br0 -> p0 (tagged)", (t.host, "ovs-p1", False), (t.host, "ovs-p0", True),
             switched(port_tx(t, "ovs-p0")))
    if not native:
        for edge, other in ((e0, e1), (e1, e0)):
            wire.hop(f"{edge.device} -> br-vlan -> {edge.port}: push",
                     (edge.ns, edge.device, True), (t.host, edge.port, True), tagged(edge.push))
            wire.hop(f"{edge.port} -> br-vlan -> {edge.device}: pop",
                     (t.host, edge.port, False), (edge.ns, edge.device, False),
                     tagged(edge.pop))
    dst = addrs[1].split("/")[0]
    if six or kind == "cvlan":
        t.wait_ping6(ns0, dst) if six else wait_ping(t, ns0, dst)
    pings(t, ns0, dst, six)
    assert wire.verify() >= 36


def wait_ping(t: Traffic, ns, dst: str) -> None:  # type: ignore[no-untyped-def]
    """OVS_WAIT_UNTIL([ip netns exec ns ping -c 1 dst])."""
    from harness.wait import wait_until
    wait_until(lambda: t.run(["ping", "-c", "1", "-W", "1", dst], ns, timeout=30).rc == 0, 30,
               what=f"ping {dst} to answer")


def native_far_ends(t: Traffic, edges: list[TagEdge], addrs: tuple[str, str], six: bool,
                    kind: str) -> None:
    """Upstream's own far end: ADD_VETH, then ADD_VLAN (or ADD_SVLAN and ADD_CVLAN)."""
    base = ("fc00::1/96", "fc00::2/96") if six else ("10.1.1.1/24", "10.1.1.2/24")
    svlan = ("fc00:ffff::1/96", "fc00:ffff::2/96") if six else ("10.255.2.1/24",
                                                                 "10.255.2.2/24")
    for edge, addr, plain, outer in zip(edges, addrs, base, svlan):
        t.add_veth(edge.port, edge.ns, "br0", plain)
        if kind == "vlan":
            t.add_vlan(edge.port, edge.ns, 100, addr)
            continue
        t.ip("link", "add", "link", edge.port, "name", f"{edge.port}.4094", "type", "vlan",
             "proto", "802.1ad", "id", "4094", ns=edge.ns)
        t.ip("link", "set", "dev", f"{edge.port}.4094", "up", ns=edge.ns)
        t.ip("addr", "add", "dev", f"{edge.port}.4094", outer, ns=edge.ns)
        t.ip("link", "set", f"{edge.port}.4094", "mtu", "1496", ns=edge.ns)
        t.add_vlan(f"{edge.port}.4094", edge.ns, 100, addr)
        t.ip("link", "set", f"{edge.port}.4094.100", "mtu", "1492", ns=edge.ns)
