"""system-traffic.at's first tests, as `make check-system-userspace` (and
check-system-tso) run them: pings and HTTP between two namespaces through
br0 (actions=normal), untagged, on a VLAN and on a customer VLAN inside a
service VLAN (QinQ), and over an LACP bond; ping6 with IPv6 later fragments
and with IPv6 address rewrites.

Each case keeps upstream's topology, addresses, commands (ping, curl) and
checks (ping's summary after FORMAT_PING, curl's exit status).  Beyond
upstream, every frame that crosses OVS is judged (fixtures/system_userspace/system_l2.py):
what went into br0 against what came out, with the model's NORMAL output
for the tx port; and, where OVS rules stand in for the kernel's VLAN
devices, each push and pop of the tags against IEEE 802.1Q/802.1ad
(datapath/model/l2tags.py).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath.backends.native_tunnel import Captured
from datapath.offloads import TxOffloads
from fixtures.system_userspace.system_l2 import (
    Crossings,
    Outcome,
    Rule,
    TagEdge,
    add_tag_edge,
    port_tx,
    switched,
    tagged,
    through_br0,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream

pytestmark = pytest.mark.requires(backend="tap")

SIZES = (None, "1600", "3200")


def two_ports(t: Traffic, six: bool) -> tuple:  # type: ignore[type-arg]
    """add-flow actions=normal, ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH p0, p1."""
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    flags = ("nodad",) if six else ()
    t.add_veth("p0", ns0, "br0", "fc00::1/96" if six else "10.1.1.1/24", "", "", *flags)
    t.add_veth("p1", ns1, "br0", "fc00::2/96" if six else "10.1.1.2/24", "", "", *flags)
    return ns0, ns1


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
    t.run(["curl", "10.1.1.2", "--retry", "3", "--max-time", "1",
           "--retry-connrefused", "-v", "-o", str(t.sb.rundir / "got.html")], ns0)
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
@pytest.mark.requires(kernel_optional="vlan")
def test_ping_between_two_ports_on_vlan(system_traffic: Callable[..., Traffic],
                                        request: pytest.FixtureRequest, flavour: str,
                                        six: bool, kind: str) -> None:
    """Upstream's pings of 56, 1600 and 3200 bytes between the VLAN devices
    of at_ns0 and at_ns1 (802.1Q VID 100; cvlan: a C-tag 100 inside an 802.1ad
    S-tag 4094, the inner device's MTU 1492), through br0's NORMAL switching
    of the tagged frames.  Where the kernel has no VLAN devices, OVS rules push
    and pop the tags on a second bridge (fixtures/system_userspace/system_l2.py TagEdge); the
    frames on the veths into br0 are the ones upstream's devices send.
    Judged: each push and pop (IEEE 802.1Q §9.6, 802.1ad), and br0's
    forwarding of every tagged frame, unchanged.  cvlan needs OVS to parse two
    tags (upstream's OVS_CHECK_8021AD: the probed VLAN stack length, else a
    skip saying so)."""
    t: Traffic = system_traffic(flavour)
    if kind == "cvlan":
        t.check_8021ad()
    native = t.has("vlan")
    t.sb.ofctl("add-flow", "br0", "actions=normal")
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
    wait_until(lambda: t.run(["ping", "-c", "1", "-W", "1", dst], ns, timeout=30,
                             rc=None).rc == 0, 30,
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
        t.add_svlan(edge.port, edge.ns, 4094, outer)
        t.add_cvlan(f"{edge.port}.4094", edge.ns, 100, addr)


# ----------------------------------------------------------------------------
# ping over bond


def kernel_bond() -> str | None:
    """None if this kernel can make bonding devices (ADD_VETH_BOND's far end);
    else why not, probed by making one in a scratch namespace."""
    from datapath.backends.netns import Netns, unique_name
    ns = Netns(unique_name("probe"))
    try:
        proc = ns.ip("link", "add", "probe0", "type", "bond", check=False)
    finally:
        ns.delete()
    if proc.returncode == 0:
        return None
    return ("this kernel has no bonding devices (CONFIG_BONDING): 'ip link add probe0 type "
            f"bond' says {(proc.stderr or proc.stdout).strip()!r}")


BOND = ("lacp=active", "bond_mode=balance-tcp")


@FLAVOUR
@upstream("datapath - ping over bond")
def test_ping_over_bond(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                        flavour: str) -> None:
    """at_ns1 reaches br0 over two veths bonded on both sides with LACP
    (active, balance-tcp on OVS's side): once LACP lets a ping through
    (upstream's OVS_WAIT_UNTIL), upstream's pings of 56, 1600 and 3200 bytes
    are all answered.  This kernel has no bonding devices, so the far end's
    802.3ad bond is an OVS bond too, on a second bridge (br-bond, the same LACP
    and balance-tcp) with a veth into at_ns1 named as upstream's bond0; where
    the kernel has them, upstream's Linux bond is used.  Judged: every frame at_ns0 sent left
    br0 on exactly one member as the model's output, and every frame crossed
    between at_ns0 and at_ns1, both ways, unchanged (NORMAL switching)."""
    t: Traffic = system_traffic(flavour)
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    members = ("p1", "p2")
    for port in members:
        t.ip("link", "add", port, "type", "veth", "peer", "name", f"ovs-{port}")
        t.configure_veth_offloads(port)
        t.ip("link", "set", "dev", f"ovs-{port}", "up")
    if kernel_bond() is None:  # ADD_VETH_BOND as upstream
        for port in members:
            t.ip("link", "set", port, "netns", ns1.name)
        t.ip("link", "add", "name", "bond0", "type", "bond", ns=ns1)
        t.run(["sh", "-c", "echo 802.3ad > /sys/class/net/bond0/bonding/mode"], ns1)
        t.run(["sh", "-c", "echo 100 > /sys/class/net/bond0/bonding/miimon"], ns1)
        for port in members:
            t.ip("link", "set", "dev", port, "master", "bond0", ns=ns1)
    else:  # the far end's bond built by OVS
        t.add_br("br-bond")
        t.sb.ofctl("add-flow", "br-bond", "actions=normal")
        for port in members:
            t.ip("link", "set", "dev", port, "up")
        t.sb.vsctl("add-bond", "br-bond", "bond-far", *members, *BOND)
        t.ip("link", "add", "bond0", "type", "veth", "peer", "name", "v-bond0")
        t.configure_veth_offloads("bond0")
        t.ip("link", "set", "bond0", "netns", ns1.name)
        t.ip("link", "set", "dev", "v-bond0", "up")
        t.sb.vsctl("add-port", "br-bond", "v-bond0")
    t.ip("addr", "add", "10.1.1.2/24", "dev", "bond0", ns=ns1)
    t.ip("link", "set", "dev", "bond0", "up", ns=ns1)
    t.sb.vsctl("add-bond", "br0", "ovs-bond0", *(f"ovs-{p}" for p in members), *BOND)
    wait_ping(t, ns0, "10.1.1.2")
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> bond members", (ns0, "p0", True),
             [(t.host, f"ovs-{p}", True) for p in members], switched(port_tx(t, "ovs-p1")))
    wire.hop("at_ns0 -> at_ns1 (end to end)", (ns0, "p0", True), (ns1, "bond0", False),
             lambda c: [c.frame])
    wire.hop("at_ns1 -> at_ns0 (end to end)", (ns1, "bond0", True), (ns0, "p0", False),
             lambda c: [c.frame])
    pings(t, ns0, "10.1.1.2", False)
    assert wire.verify() >= 54


# ----------------------------------------------------------------------------
# ping6: IPv6 later fragments, header modify


@FLAVOUR
@upstream("datapath - ping6 between two ports IPv6 later fragments")
def test_ping6_later_fragments(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """br0 forwards (priority 1, normal) but drops tcp6 (priority 2): the
    fragments of ping6 -s 1600 and -s 3200 must not be taken for TCP.
    Upstream's pings, then its checks of `dpctl/dump-flows -m --names`: some
    ipv6 frag=later flow matches proto=44 (the fragment header's own next
    header, which is all a later fragment shows), and none matches another
    proto.  Every frame forwarded, both ways, as the model's NORMAL output."""
    t: Traffic = system_traffic(flavour)
    t.sb.ofctl("add-flow", "br0", "priority=1,actions=normal")
    t.sb.ofctl("add-flow", "br0", "priority=2,tcp6,actions=drop")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96", "", "", "nodad")
    t.add_veth("p1", ns1, "br0", "fc00::2/96", "", "", "nodad")
    wire = through_br0(t, request, ns0, ns1)
    t.wait_ping6(ns0, "fc00::2")
    pings(t, ns0, "fc00::2", True)
    dump = t.sb.appctl("dpctl/dump-flows", "-m", "--names").stdout
    later = [ln for ln in dump.splitlines() if "ipv6" in ln and "frag=later" in ln]
    assert any("proto=44" in ln for ln in later), f"no frag=later flow with proto=44:\n{dump}"
    assert all("proto=44" in ln for ln in later), f"a frag=later flow without proto=44:\n{dump}"
    assert wire.verify() >= 18


H_MAC0, H_MAC1 = "e4:11:22:33:44:55", "e4:11:22:33:44:54"


@FLAVOUR
@upstream("datapath - ping6 between two ports with header modify")
def test_ping6_header_modify(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """at_ns0 pings fc00::3, which br0 rewrites to at_ns1's fc00::2 on the way
    there (set_field ipv6_dst) and back from fc00::2 on the way back
    (set_field ipv6_src): upstream's flows (after revalidator/wait) and pings
    of 56, 1600 and 3200 bytes, all answered.  Judged: every rewritten frame
    against the model (datapath/model/ipv6addr.py: the address, and the
    ICMPv6 checksum through the pseudo-header where the packet carries it;
    a later fragment only the address), everything else as NORMAL output."""
    from datapath.model.ipv6addr import set_ipv6_addr
    t: Traffic = system_traffic(flavour)
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96", H_MAC0, "", "nodad")
    t.add_veth("p1", ns1, "br0", "fc00::2/96", H_MAC1, "", "nodad")
    t.ip("-6", "neigh", "add", "fc00::3", "lladdr", H_MAC1, "dev", "p0", ns=ns0)
    t.wait_ping6(ns0, "fc00::2")
    t.wait_ping6(ns1, "fc00::1")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text(
        "priority=100,in_port=ovs-p0,ipv6,ipv6_src=fc00::1,ipv6_dst=fc00::3,"
        "actions=set_field:fc00::2->ipv6_dst,ovs-p1\n"
        "priority=100,in_port=ovs-p1,ipv6,ipv6_src=fc00::2,ipv6_dst=fc00::1,"
        "actions=set_field:fc00::3->ipv6_src,ovs-p0\n"
        "priority=0,actions=NORMAL\n")
    t.sb.ofctl("del-flows", "br0")
    t.sb.ofctl("add-flows", "br0", str(flows))
    t.sb.appctl("revalidator/wait")

    def rewrite(field: str, match: tuple[str, str], to: str, tx: TxOffloads) -> Rule:
        normal = switched(tx)

        def rule(c: Captured) -> Outcome:
            f = c.frame
            if f[12:14] == b"\x86\xdd" and (ip6(f, 8), ip6(f, 24)) == match:
                return [set_ipv6_addr(f, field, to)]
            return normal(c)
        return rule
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False),
             rewrite("dst", ("fc00::1", "fc00::3"), "fc00::2", port_tx(t, "ovs-p1")))
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "p1", True), (ns0, "p0", False),
             rewrite("src", ("fc00::2", "fc00::1"), "fc00::3", port_tx(t, "ovs-p0")))
    pings(t, ns0, "fc00::3", True)
    assert wire.verify() >= 18


def ip6(frame: bytes, ofs: int) -> str:
    import ipaddress
    return str(ipaddress.IPv6Address(frame[14 + ofs:14 + ofs + 16]))
