"""system-traffic.at's tunnel tests, as `make check-system-userspace` (and
check-system-tso) run them on the userspace datapath: OVS's native tunnel in
the switch namespace, a Linux tunnel device in at_ns0 as the far end.

Each case uses upstream's topology, flows, options, addresses and packets, in
upstream's order, and checks what upstream checks (ping's summary line after
FORMAT_PING, nc payloads, tcpdump lines, dpctl output, log lines).  Then more:
every frame OVS sent into at_ns0's underlay port is compared with the model's
tunnel push of what the host kernel sent into br0 (datapath/model/tunnel.py),
and every inner frame OVS delivered to br0 with the model's pop of what the
Linux tunnel device sent (datapath/model/decap.py); the peer's checksum error
counters must not move.  A test that needs a tunnel device this kernel lacks
skips, naming the kernel feature (it runs unchanged where the kernel has it).
"""
from __future__ import annotations

import pytest

from fixtures.kernel_peer import WireCheck
from fixtures.system_traffic import FLAVOURS, PING_OK, Traffic, payload

ST = "system-traffic.at"


def upstream(title: str):  # type: ignore[no-untyped-def]
    return pytest.mark.upstream(title, file=ST)


FLAVOUR = pytest.mark.parametrize("flavour", FLAVOURS)


def underlay(t: Traffic, six: bool, addr_ns: str = "", addr_br: str = "",
             mac: str = "", bridge: str = "br-underlay", port: str = "p0",
             ns_name: str = "at_ns0"):  # type: ignore[no-untyped-def]
    """ADD_BR([br-underlay]) + flows, ADD_NAMESPACES(at_ns0), ADD_VETH(p0, ...),
    the bridge's address, up: the common head of the tunnel tests."""
    ns = t.add_namespace(ns_name)
    if six:
        t.add_veth(port, ns, bridge, addr_ns or "fc00::1/64", mac, "", "nodad")
        t.ip("addr", "add", "dev", bridge, addr_br or "fc00::100/64", "nodad")
    else:
        t.add_veth(port, ns, bridge, addr_ns or "172.31.1.1/24", mac)
        t.ip("addr", "add", "dev", bridge, addr_br or "172.31.1.100/24")
    t.ip("link", "set", "dev", bridge, "up")
    return ns


def start(t: Traffic) -> None:
    t.add_br("br-underlay")
    from harness.control import check
    check(t.sb.ofctl("add-flow", "br0", "actions=normal"))
    check(t.sb.ofctl("add-flow", "br-underlay", "actions=normal"))


def overlay_checks(t: Traffic, ns, wire: WireCheck, sizes=(None, "1600", "3200"),
                   nc: bool = True, six: bool = False) -> None:  # type: ignore[no-untyped-def]
    """The overlay part every ping-over-tunnel test shares: pings of three sizes
    from at_ns0 to 10.1.1.100, then a 60000-byte TCP transfer into the host and
    a 600-byte UDP datagram out of it (nc), each checked on the wire."""
    for size in sizes:
        t.check_ping(ns, "10.1.1.100", *(["-s", size] if size else []))
    if nc:
        t.nc_transfer(payload(60000), None, "10.1.1.100", 1234, ns)
        t.nc_transfer(payload(600), ns, "10.1.1.1", 4321, None, udp=True)
    wire.verify()


# ----------------------------------------------------------------------------
# ping over <tunnel>: vxlan, vxlan6, gre, ip6gre, geneve, geneve6


PING_TUNNELS = {
    # title: (OVS type, native kind, native args, OVS args, v6, ovs port, ns port, nc)
    "datapath - ping over vxlan tunnel": ("vxlan", "vxlan", ("id", "0", "dstport", "4789"),
                                          (), False, "at_vxlan0", "at_vxlan1", True),
    "datapath - ping over vxlan6 tunnel": ("vxlan", "vxlan6",
                                           ("id", "0", "dstport", "4789", "udp6zerocsumtx",
                                            "udp6zerocsumrx"), (), True, "at_vxlan0",
                                           "at_vxlan1", True),
    "datapath - ping over gre tunnel": ("gre", "gre", (), (), False, "at_gre0", "ns_gre0", True),
    "datapath - ping over geneve tunnel": ("geneve", "geneve", ("vni", "0"), (), False,
                                           "at_gnv0", "ns_gnv0", True),
    "datapath - ping over geneve6 tunnel": ("geneve", "geneve6",
                                            ("vni", "0", "udp6zerocsumtx", "udp6zerocsumrx"),
                                            (), True, "at_gnv0", "ns_gnv0", True),
    "datapath - ping over ip6gre L2 tunnel": ("ip6gre", "ip6gre", ("local", "fc00:100::1"),
                                              ("options:packet_type=legacy_l2",), True,
                                              "at_gre0", "ns_gretap0", True),
}


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t), id=t.split(" over ")[1]
                                                .replace(" ", "_"))
                                   for t in PING_TUNNELS])
def test_ping_over_tunnel(system_traffic, request: pytest.FixtureRequest, flavour: str,
                          title: str) -> None:
    """Underlay ping, overlay pings of 56, 1600 and 3200 bytes (fragmented by
    the host and at_ns0 kernels: MTU 1450/1430), a 60000-byte TCP transfer
    from at_ns0 and a 600-byte UDP datagram to it.  Verifies upstream's ping
    lines and payloads; then every encapsulated frame OVS sent to at_ns0
    against the model's push of what br0's kernel side sent, every frame OVS
    delivered to br0 against the model's pop of what at_ns0's kernel sent, and
    that at_ns0's and the host's checksum error counters stayed still."""
    ovs_type, native, nargs, oargs, six, oport, nport, nc = PING_TUNNELS[title]
    t: Traffic = system_traffic(flavour, native)
    start(t)
    ip6gre = native == "ip6gre"
    ns = underlay(t, six, "fc00:100::1/96" if ip6gre else "",
                  "fc00:100::100/96" if ip6gre else "")
    remote_ovs = ("fc00:100::1" if ip6gre else "fc00::1") if six else "172.31.1.1"
    remote_ns = ("fc00:100::100" if ip6gre else "fc00::100") if six else "172.31.1.100"
    t.add_ovs_tunnel(ovs_type, "br0", oport, remote_ovs, "10.1.1.100/24", *oargs, v6=six)
    t.add_native_tunnel(native, nport, ns, remote_ns, "10.1.1.1/24", nargs, v6=six)
    if six:
        t.wait_ping6(ns, remote_ns, 2 if ip6gre else 1)
        t.check_ping(ns, remote_ns, six=True)
    else:
        t.check_ping(ns, "172.31.1.100")
    wire = WireCheck.start(t, request, ovs_type, ns, csum=None)
    overlay_checks(t, ns, wire, sizes=(None,) if ip6gre else (None, "1600", "3200"), nc=nc)
