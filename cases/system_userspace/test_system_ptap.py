"""system-userspace-packet-type-aware.at's only test, as `make
check-system-userspace` (and check-system-tso) run it: three bridges
br-in1..3 joined by OVS GRE tunnels (Ethernet ones, legacy_l3 ones, and on
br-in2 packet-type-aware ones, options:packet_type=ptap), whose underlay
bridges br-p1..3 meet on br0 through veth pairs and twist the tunnel
endpoints' addresses (each side sees a different /24).  No kernel tunnel
device: all of it is OVS and three namespaces.

The case keeps upstream's commands in order and checks everything upstream
compares: `ovs/route/show`'s user routes, the flow tables, `dpif/show`, the
pings between the namespaces (FORMAT_PING), and each flow's packet and byte
counters after each ping (upstream's `sleep 1` before them is a wait for the
counters to reach upstream's figures here).

Beyond upstream, each ping's packets are judged end to end (fixtures/
system_l2.py Crossings): every IPv4 packet one namespace sent must reach the
other unchanged from its IP header on, behind the Ethernet destination the
last bridge's flow sets (mod_dl_dst: the receiver's MAC, which the sender's
static ARP entry already used).  The source address is the sender's where
Ethernet frames cross all the way, and left open where a packet crossed as
an L3 (legacy_l3 or ptap IPv4) GRE packet: vswitch.xml only says such packets
are "represented as Ethernet frames".  The tunnel hops inside (GRE
encapsulation between OVS ports, the address twist) are out of the model's
reach here: they never leave OVS on a capturable device other than the
underlay veths, which this judge does not read.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import partial

import pytest

from fixtures.system_userspace.system_l2 import Crossings, same
from fixtures.system_userspace.system_traffic import USERSPACE_FLAVOUR, Traffic
from harness.filters import ofctl_strip
from harness.wait import settled, wait_until

pytestmark = pytest.mark.requires(backend="tap")

TITLE = "ptap - triangle bridge setup with L2 and L3 GRE tunnels"
HWADDR_BRP = {1: "aa:55:00:00:00:01", 2: "aa:55:00:00:00:02", 3: "aa:55:00:00:00:03"}
N_IP = {1: "192.168.10.10", 2: "192.168.10.20", 3: "192.168.10.30"}
N_MAC = {1: "aa:55:aa:55:00:01", 2: "aa:55:aa:55:00:02", 3: "aa:55:aa:55:00:03"}
N_OFPORT = {1: 10, 2: 20, 3: 30}

TUNNELS = (  # bridge, port, remote, ofport, packet_type
    ("br-in1", "gre12", "10.0.0.2", 1020, ""),
    ("br-in1", "gre12_l3", "10.0.0.2", 1021, "legacy_l3"),
    ("br-in1", "gre13", "10.0.0.3", 1030, ""),
    ("br-in2", "gre21", "20.0.0.1", 2010, "ptap"),
    ("br-in2", "gre23", "20.0.0.3", 2030, "ptap"),
    ("br-in3", "gre31", "30.0.0.1", 3010, ""),
    ("br-in3", "gre32", "30.0.0.2", 3020, ""),
    ("br-in3", "gre32_l3", "30.0.0.2", 3021, "legacy_l3"),
)
UNDERLAY = {1: "10.0.0.1/24", 2: "20.0.0.2/24", 3: "30.0.0.3/24"}
TWIST = {  # br-p<x>: in_port:2 flows that twist the TEP addresses
    1: ("in_port:2,ip,nw_dst:20.0.0.1,actions=mod_nw_dst:10.0.0.1,mod_nw_src:10.0.0.2,LOCAL",
        "in_port:2,ip,nw_dst:30.0.0.1,actions=mod_nw_dst:10.0.0.1,mod_nw_src:10.0.0.3,LOCAL"),
    2: ("in_port:2,ip,nw_dst:10.0.0.2,actions=mod_nw_dst:20.0.0.2,mod_nw_src:20.0.0.1,LOCAL",
        "in_port:2,ip,nw_dst:30.0.0.2,actions=mod_nw_dst:20.0.0.2,mod_nw_src:20.0.0.3,LOCAL"),
    3: ("in_port:2,ip,nw_dst:10.0.0.3,actions=mod_nw_dst:30.0.0.3,mod_nw_src:30.0.0.1,LOCAL",
        "in_port:2,ip,nw_dst:20.0.0.3,actions=mod_nw_dst:30.0.0.3,mod_nw_src:30.0.0.2,LOCAL"),
}
P_FLOWS = """\
 ip,in_port=2,nw_dst=20.0.0.1 actions=mod_nw_dst:10.0.0.1,mod_nw_src:10.0.0.2,LOCAL
 ip,in_port=2,nw_dst=30.0.0.1 actions=mod_nw_dst:10.0.0.1,mod_nw_src:10.0.0.3,LOCAL
 ip,in_port=LOCAL actions=output:2
 ip,in_port=2,nw_dst=10.0.0.2 actions=mod_nw_dst:20.0.0.2,mod_nw_src:20.0.0.1,LOCAL
 ip,in_port=2,nw_dst=30.0.0.2 actions=mod_nw_dst:20.0.0.2,mod_nw_src:20.0.0.3,LOCAL
 ip,in_port=LOCAL actions=output:2
 ip,in_port=2,nw_dst=10.0.0.3 actions=mod_nw_dst:30.0.0.3,mod_nw_src:30.0.0.1,LOCAL
 ip,in_port=2,nw_dst=20.0.0.3 actions=mod_nw_dst:30.0.0.3,mod_nw_src:30.0.0.2,LOCAL
 ip,in_port=LOCAL actions=output:2
"""
DPIF_SHOW = """\
  br-in1:
    br-in1 65534/2: (tap)
    gre12 1020/14: (gre: remote_ip=10.0.0.2)
    gre12_l3 1021/14: (gre: packet_type=legacy_l3, remote_ip=10.0.0.2)
    gre13 1030/14: (gre: remote_ip=10.0.0.3)
    ovs-n1 10/15: (system)
  br-in2:
    br-in2 65534/3: (tap)
    gre21 2010/14: (gre: packet_type=ptap, remote_ip=20.0.0.1)
    gre23 2030/14: (gre: packet_type=ptap, remote_ip=20.0.0.3)
    ovs-n2 20/16: (system)
  br-in3:
    br-in3 65534/4: (tap)
    gre31 3010/14: (gre: remote_ip=30.0.0.1)
    gre32 3020/14: (gre: remote_ip=30.0.0.2)
    gre32_l3 3021/14: (gre: packet_type=legacy_l3, remote_ip=30.0.0.2)
    ovs-n3 30/17: (system)
  br-p1:
    br-p1 65534/5: (tap)
    p1-0 2/8: (system)
  br-p2:
    br-p2 65534/6: (tap)
    p2-0 2/9: (system)
  br-p3:
    br-p3 65534/7: (tap)
    p3-0 2/10: (system)
  br0:
    br0 65534/1: (tap)
    p0-1 10/11: (system)
    p0-2 20/12: (system)
    p0-3 30/13: (system)
"""
L3_FLOWS = {
    "br-in1": (f"ip,nw_dst={N_IP[1]},actions=mod_dl_dst:{N_MAC[1]},{N_OFPORT[1]}",
               f"ip,nw_dst={N_IP[2]},actions=1020", f"ip,nw_dst={N_IP[3]},actions=1030"),
    "br-in2": (f"ip,nw_dst={N_IP[2]},actions=mod_dl_dst:{N_MAC[2]},{N_OFPORT[2]}",
               f"ip,nw_dst={N_IP[1]},actions=2010",
               f"packet_type=(1,0x800),nw_dst={N_IP[1]},actions=2010",
               f"ip,nw_dst={N_IP[3]},actions=2010",
               f"packet_type=(1,0x800),nw_dst={N_IP[3]},actions=2030"),
    "br-in3": (f"ip,nw_dst={N_IP[3]},actions=mod_dl_dst:{N_MAC[3]},{N_OFPORT[3]}",
               f"ip,nw_dst={N_IP[2]},actions=3020", f"ip,nw_dst={N_IP[1]},actions=3021"),
}
L3_TABLES = {
    "br-in1": """\
 ip,nw_dst=192.168.10.10 actions=mod_dl_dst:aa:55:aa:55:00:01,output:10
 ip,nw_dst=192.168.10.20 actions=output:1020
 ip,nw_dst=192.168.10.30 actions=output:1030
""",
    "br-in2": """\
 ip,nw_dst=192.168.10.10 actions=output:2010
 ip,nw_dst=192.168.10.20 actions=mod_dl_dst:aa:55:aa:55:00:02,output:20
 ip,nw_dst=192.168.10.30 actions=output:2010
 packet_type=(1,0x800),nw_dst=192.168.10.10 actions=output:2010
 packet_type=(1,0x800),nw_dst=192.168.10.30 actions=output:2030
""",
    "br-in3": """\
 ip,nw_dst=192.168.10.10 actions=output:3021
 ip,nw_dst=192.168.10.20 actions=output:3020
 ip,nw_dst=192.168.10.30 actions=mod_dl_dst:aa:55:aa:55:00:03,output:30
""",
}
# The counters upstream expects after each ping (ns -> destination).
COUNTS = [
    (1, 3, {
        "br-in1": """\
 n_packets=3, n_bytes=252, ip,nw_dst=192.168.10.10 actions=mod_dl_dst:aa:55:aa:55:00:01,output:10
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.30 actions=output:1030
""",
        "br-in2": """\
 n_packets=3, n_bytes=252, packet_type=(1,0x800),nw_dst=192.168.10.10 actions=output:2010
""",
        "br-in3": """\
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.10 actions=output:3021
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.30 actions=mod_dl_dst:aa:55:aa:55:00:03,output:30
"""}),
    (1, 2, {
        "br-in1": """\
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.20 actions=output:1020
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.30 actions=output:1030
 n_packets=6, n_bytes=546, ip,nw_dst=192.168.10.10 actions=mod_dl_dst:aa:55:aa:55:00:01,output:10
""",
        "br-in2": """\
 n_packets=3, n_bytes=252, packet_type=(1,0x800),nw_dst=192.168.10.10 actions=output:2010
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.10 actions=output:2010
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.20 actions=mod_dl_dst:aa:55:aa:55:00:02,output:20
""",
        "br-in3": """\
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.10 actions=output:3021
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.30 actions=mod_dl_dst:aa:55:aa:55:00:03,output:30
"""}),
    (3, 1, {
        "br-in1": """\
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.20 actions=output:1020
 n_packets=6, n_bytes=588, ip,nw_dst=192.168.10.30 actions=output:1030
 n_packets=9, n_bytes=798, ip,nw_dst=192.168.10.10 actions=mod_dl_dst:aa:55:aa:55:00:01,output:10
""",
        "br-in2": """\
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.10 actions=output:2010
 n_packets=3, n_bytes=294, ip,nw_dst=192.168.10.20 actions=mod_dl_dst:aa:55:aa:55:00:02,output:20
 n_packets=6, n_bytes=504, packet_type=(1,0x800),nw_dst=192.168.10.10 actions=output:2010
""",
        "br-in3": """\
 n_packets=6, n_bytes=588, ip,nw_dst=192.168.10.10 actions=output:3021
 n_packets=6, n_bytes=588, ip,nw_dst=192.168.10.30 actions=mod_dl_dst:aa:55:aa:55:00:03,output:30
"""}),
]
# Which direction crosses an L3 tunnel (its frames' source MAC left open).
L3_PATHS = {(3, 1)}


def strip_counts(text: str) -> str:
    """ofctl_strip | strip_n_packets | strip_n_bytes."""
    return re.sub(r"n_bytes=\d*, ", "", re.sub(r"n_packets=\d*, ", "", ofctl_strip(text)))


def table(t: Traffic, bridge: str, keep: str, counts: bool) -> str:
    """ovs-ofctl dump-flows BRIDGE | ofctl_strip [| strip_n_packets | strip_n_bytes]
    | sort | grep KEEP."""
    dump = t.sb.ofctl("dump-flows", bridge).stdout
    text = ofctl_strip(dump) if counts else strip_counts(dump)
    return "".join(ln + "\n" for ln in sorted(text.splitlines()) if keep in ln)


def ipv4_between(src: str, dst: str) -> Callable[[bytes], bool]:
    """An IPv4 frame from src to dst (the ping's requests or replies)."""
    s, d = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
    return lambda f: len(f) >= 34 and f[12:14] == b"\x08\x00" and f[26:30] == s and f[30:34] == d


def routed(t: Traffic, dev: str) -> bool:
    """ovs-appctl ovs/route/show | grep -q DEV."""
    return dev in t.sb.appctl("ovs/route/show").stdout


def mask_src(frame: bytes) -> bytes:
    """The frame with its Ethernet source zeroed (left open)."""
    return frame[:6] + b"\0" * 6 + frame[12:]


@USERSPACE_FLAVOUR
@pytest.mark.upstream(TITLE, file="system-userspace-packet-type-aware.at")
def test_ptap_triangle(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                       flavour: str) -> None:
    """Upstream's sequence and checks (module docstring): the setup and its
    dumps, then pings n1 -> n3 (L2 tunnel there, replies over the L3 tunnel
    via br-in2), n1 -> n2 (L2 tunnel to the ptap port), n3 -> n1 (L3), each
    followed by the three bridges' counters exactly as upstream has them.
    Judged: each request and reply delivered end to end (module docstring)."""
    t: Traffic = system_traffic(flavour)
    for x in (1, 2, 3):
        t.ip("link", "add", f"p{x}-0", "type", "veth", "peer", "name", f"p0-{x}")
        t.ip("link", "set", f"p{x}-0", "up")
        t.ip("link", "set", f"p0-{x}", "up")
        t.ip("link", "set", "dev", f"p{x}-0", "mtu", "3300")
        t.ip("link", "set", "dev", f"p0-{x}", "mtu", "3300")
    for x in (1, 2, 3):
        t.sb.vsctl("add-br", f"br-in{x}", "--", "set", "bridge", f"br-in{x}",
                   "datapath_type=netdev", "fail-mode=standalone")
    for x in (1, 2, 3):
        t.sb.vsctl("add-br", f"br-p{x}", "--", "set", "bridge", f"br-p{x}",
                   "datapath_type=netdev", "fail-mode=standalone",
                   f"other-config:hwaddr={HWADDR_BRP[x]}")
    for x in (1, 2, 3):
        t.sb.vsctl("add-port", f"br-p{x}", f"p{x}-0", "--", "set", "interface",
                   f"p{x}-0", "ofport_request=2")
    for x in (1, 2, 3):
        t.sb.vsctl("add-port", "br0", f"p0-{x}", "--", "set", "interface", f"p0-{x}",
                   f"ofport_request={10 * x}")
    t.sb.ofctl("del-flows", "br0")
    for x in (1, 2, 3):
        t.sb.ofctl("add-flow", "br0", f"dl_dst={HWADDR_BRP[x]},actions={10 * x}")
    for bridge in ("br-in1", "br-in2", "br-in3", "br-p1", "br-p2", "br-p3"):
        t.sb.ofctl("del-flows", bridge)
    for bridge, port, remote, ofport, ptype in TUNNELS:
        t.sb.vsctl("add-port", bridge, port, "--", "set", "interface", port, "type=gre",
                   f"options:remote_ip={remote}", f"ofport_request={ofport}",
                   *([f"options:packet_type={ptype}"] if ptype else []))
    for x in (1, 2, 3):
        t.ip("addr", "add", UNDERLAY[x], "dev", f"br-p{x}")
        t.ip("link", "set", f"br-p{x}", "up")
        wait_until(partial(routed, t, f"br-p{x}"), 10, what=f"ovs/route/show to list br-p{x}")
        net = UNDERLAY[x].split(".")[0]
        t.sb.appctl("ovs/route/add", f"{net}.0.0.0/24", f"br-p{x}")
        for y in (1, 2, 3):
            t.sb.appctl("tnl/arp/set", f"br-p{x}", f"{net}.0.0.{y}", HWADDR_BRP[y])
    routes = t.sb.appctl("ovs/route/show").stdout
    assert "".join(ln + "\n" for ln in routes.splitlines() if "User:" in ln) == (
        "User: 10.0.0.0/24 dev br-p1 SRC 10.0.0.1\n"
        "User: 20.0.0.0/24 dev br-p2 SRC 20.0.0.2\n"
        "User: 30.0.0.0/24 dev br-p3 SRC 30.0.0.3\n"), routes
    t.sb.appctl("tnl/neigh/show")
    for x in (1, 2, 3):
        t.sb.ofctl("add-flow", f"br-p{x}", "in_port:LOCAL,ip,actions=2")
        for flow in TWIST[x]:
            t.sb.ofctl("add-flow", f"br-p{x}", flow)
    dumps = "".join(table(t, f"br-p{x}", "actions", counts=False) for x in (1, 2, 3))
    assert dumps == P_FLOWS, dumps

    namespaces = {x: t.add_namespace(f"ns{x}") for x in (1, 2, 3)}
    for x, ns in namespaces.items():
        t.add_veth(f"n{x}", ns, f"br-in{x}", f"{N_IP[x]}/24", N_MAC[x])
    for x, ns in namespaces.items():  # arp -s: permanent entries
        for y in (1, 2, 3):
            if y != x:
                t.ip("neigh", "replace", N_IP[y], "lladdr", N_MAC[y], "nud", "permanent",
                     "dev", f"n{x}", ns=ns)
    for x in (1, 2, 3):
        t.sb.vsctl("set", "interface", f"ovs-n{x}", f"ofport_request={N_OFPORT[x]}")
    show = t.sb.appctl("dpif/show").stdout
    got = "".join(ln + "\n" for ln in show.splitlines() if "hit" not in ln)
    assert got == DPIF_SHOW, got

    for bridge, flows in L3_FLOWS.items():
        for flow in flows:
            t.sb.ofctl("add-flow", bridge, flow)
    for bridge, want in L3_TABLES.items():
        assert table(t, bridge, "actions", counts=False) == want

    for src, dst, counts in COUNTS:
        wire = Crossings(t, request)
        for a, b in ((src, dst), (dst, src)):
            l3 = (a, b) in L3_PATHS
            wire.hop(f"n{a} -> n{b}{' (an L3 tunnel on the way)' if l3 else ''}",
                     (namespaces[a], f"n{a}", True), (namespaces[b], f"n{b}", False),
                     same(), mask=mask_src if l3 else None,
                     keep=ipv4_between(N_IP[a], N_IP[b]))
        t.check_ping(namespaces[src], N_IP[dst])
        for bridge, want in counts.items():
            assert settled(partial(table, t, bridge, "n_packets", True), want,
                           what=f"{bridge}'s counters") == want
        assert wire.verify() == 6
