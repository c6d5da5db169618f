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
skips, naming the kernel feature (it runs unchanged where the kernel has it):
each id declares the devices it makes (fixtures/requires.py).
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from fixtures.system_userspace.kernel_peer import WireCheck
from fixtures.system_userspace.system_traffic import (
    FLAVOUR,
    PING_OK,
    TSO_FLAVOUR,
    Traffic,
    payload,
    start,
    underlay,
    upstream,
)
from fixtures.upstream_system import format_ping
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

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
@pytest.mark.parametrize("title", [pytest.param(t, marks=[upstream(t), pytest.mark.requires(
                                       kernel=PING_TUNNELS[t][1])],
                                                id=t.split(" over ")[1].replace(" ", "_"))
                                   for t in PING_TUNNELS])
def test_ping_over_tunnel(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                          flavour: str, title: str) -> None:
    """Underlay ping, overlay pings of 56, 1600 and 3200 bytes (fragmented by
    the host and at_ns0 kernels: MTU 1450/1430), a 60000-byte TCP transfer
    from at_ns0 and a 600-byte UDP datagram to it.  Verifies upstream's ping
    lines and payloads; then every encapsulated frame OVS sent to at_ns0
    against the model's push of what br0's kernel side sent, every frame OVS
    delivered to br0 against the model's pop of what at_ns0's kernel sent, and
    that at_ns0's and the host's checksum error counters stayed still."""
    ovs_type, native, nargs, oargs, six, oport, nport, nc = PING_TUNNELS[title]
    t: Traffic = system_traffic(flavour)
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


# ----------------------------------------------------------------------------
# tcp over <tunnel> with software fallback (check-system-tso only)

FALLBACK = {
    "datapath - tcp over vxlan tunnel with software fallback": (
        "vxlan", "vxlan", ("id", "0", "dstport", "4789"), "at_vxlan0", "at_vxlan1",
        "^.{24}0800"  # Ethernet
        "450005aa....4000..11....ac1f0164ac1f0101"  # IP(len=1450, DF, UDP, .100 -> .1)
        "....12b505960000"  # UDP(len=1430, dport=4789)
        "0800000000000000"  # VXLAN(gpid=0, vni=0)
        ".{24}0800"  # Ethernet
        "45000578....4000..06....0a0101640a010101"  # IP(len=1400, DF, TCP)
        "....04d2............................0000"),  # TCP(dport=1234)
    "datapath - tcp over gre tunnel with software fallback": (
        "gre", "gre", (), "at_gre0", "at_gre1",
        "^.{24}0800"
        "4500059e....4000..2f....ac1f0164ac1f0101"  # IP(len=1450, DF, GRE)
        "00006558"  # GRE(flags=0, proto=0x6558)
        ".{24}0800"
        "45000578....4000..06....0a0101640a010101"
        "....04d2............................0000"),
}


@pytest.mark.parametrize("title", [pytest.param(t, marks=[upstream(t), pytest.mark.requires(
                                       kernel=FALLBACK[t][1])], id=t.split()[4])
                                   for t in FALLBACK])
@TSO_FLAVOUR
def test_tcp_over_tunnel_software_fallback(system_traffic: Callable[..., Traffic],
                                           request: pytest.FixtureRequest, title: str,
                                           flavour: str) -> None:
    """check-system-tso (userspace TSO on; upstream skips it elsewhere): ovs-p0
    has tso and sg off, br0 MTU 1400; 60000 bytes over TCP from the host to
    at_ns0 leave as GSO packets into br0 and must be segmented by OVS before
    the push.  Verifies upstream's checks (payload intact, at least 20
    full-size segments in tcpdump's capture on ovs-p0 with upstream's exact
    header pattern) and every encapsulated segment against the model's
    software segmentation and push, at_ns0 counting no checksum error."""
    ovs_type, native, nargs, oport, nport, pattern = FALLBACK[title]
    t: Traffic = system_traffic(flavour)
    start(t)
    ns = underlay(t, False)
    for feature in ("tso", "sg"):  # one side with all checksum and TSO offload disabled
        t.run(["ethtool", "-K", "ovs-p0", feature, "off"])
    t.sb.vsctl("del-port", "ovs-p0")
    t.sb.vsctl("add-port", "br-underlay", "ovs-p0")
    t.add_ovs_tunnel(ovs_type, "br0", oport, "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel(native, nport, ns, "172.31.1.100", "10.1.1.1/24", nargs)
    t.ip("link", "set", "dev", "br0", "mtu", "1400")
    t.check_ping(ns, "172.31.1.100")
    t.check_ping(ns, "10.1.1.100")
    pcap = t.sb.rundir / "p0.pcap"
    tcpdump = t.daemonize("tcpdump", ["tcpdump", "-i", "ovs-p0", "-w", str(pcap)], None,
                          t.sb.rundir / "tcpdump.out")
    wait_until(lambda: pcap.exists(), 10, what="tcpdump to open ovs-p0")
    wire = WireCheck.start(t, request, ovs_type, ns, csum=None)
    t.nc_transfer(payload(60000), ns, "10.1.1.1", 1234, None)
    wait_until(lambda: pcap.stat().st_size > 68000, 10, what="p0.pcap to pass 68000 bytes")
    tcpdump.terminate()
    tcpdump.wait(10)
    dump = t.run(["ovs-pcap", str(pcap)]).stdout
    full = len([line for line in dump.splitlines() if re.search(pattern, line)])
    assert full >= 20, f"{full} full-size segments match upstream's pattern, expected >= 20"
    wire.verify()


@FLAVOUR
@upstream("datapath - ping vlan over vxlan tunnel")
@pytest.mark.requires(kernel=("vxlan", "vlan"))
def test_ping_vlan_over_vxlan(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                              flavour: str) -> None:
    """br0 is an access port of VLAN 100, br-underlay of VLAN 42; at_ns0 reaches
    both through 802.1Q devices on its vxlan device and on p0.  Verifies
    upstream's pings (underlay, and overlay at 56, 1600 and 3200 bytes); then
    each encapsulated frame on p0 (tagged 42) against the model's push of br0's
    frame tagged 100, each frame OVS delivered to br0 (untagged) against the
    model's pop, and that no checksum error was counted."""
    t: Traffic = system_traffic(flavour)
    start(t)
    ns = underlay(t, False, "172.31.2.1/24")
    t.add_ovs_tunnel("vxlan", "br0", "at_vxlan0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("vxlan", "at_vxlan1", ns, "172.31.1.100", "10.2.1.1/24",
                        ("id", "0", "dstport", "4789"))
    t.sb.vsctl("set", "port", "br0", "tag=100")
    t.sb.vsctl("set", "port", "br-underlay", "tag=42")
    t.add_vlan("at_vxlan1", ns, 100, "10.1.1.1/24")
    t.add_vlan("p0", ns, 42, "172.31.1.1/24")
    t.check_ping(ns, "172.31.1.100")
    wire = WireCheck.start(t, request, "vxlan", ns, csum=None, remote_dev="p0.42",
                           inner_vlan=100, outer_vlan=42)
    overlay_checks(t, ns, wire, nc=False)


# ----------------------------------------------------------------------------
# ERSPAN with a Linux peer; Geneve bridging and corrupted metadata

ERSPAN = {
    "datapath - ping over erspan v1 tunnel": (
        "erspan", False, ("options:key=1", "options:erspan_ver=1", "options:erspan_idx=7"),
        ("seq", "key", "1", "erspan_ver", "1", "erspan", "7")),
    "datapath - ping over erspan v2 tunnel": (
        "erspan", False, ("options:key=1", "options:erspan_ver=2", "options:erspan_dir=1",
                          "options:erspan_hwid=0x7"),
        ("seq", "key", "1", "erspan_ver", "2", "erspan_dir", "egress", "erspan_hwid", "7")),
    "datapath - ping over ip6erspan v1 tunnel": (
        "ip6erspan", True, ("options:key=123", "options:erspan_ver=1", "options:erspan_idx=0x7"),
        ("local", "fc00:100::1", "seq", "key", "123", "erspan_ver", "1", "erspan", "7")),
    "datapath - ping over ip6erspan v2 tunnel": (
        "ip6erspan", True, ("options:key=121", "options:erspan_ver=2", "options:erspan_dir=0",
                            "options:erspan_hwid=0x7"),
        ("local", "fc00:100::1", "seq", "key", "121", "erspan_ver", "2", "erspan_dir",
         "ingress", "erspan_hwid", "0x7")),
}


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(t, marks=[upstream(t), pytest.mark.requires(
                                       kernel=ERSPAN[t][0])],
                                                id=t.split(" over ")[1].replace(" ", "_"))
                                   for t in ERSPAN])
def test_ping_over_erspan(system_traffic: Callable[..., Traffic], flavour: str, title: str) -> None:
    """A Linux erspan/ip6erspan device as the far end: upstream's underlay ping
    and a 1200-byte (IPv4) or 56-byte (IPv6) overlay ping, all answered; the
    peer's checksum error counters must not move."""
    kind, six, oargs, nargs = ERSPAN[title]
    t: Traffic = system_traffic(flavour)
    start(t)
    ns = underlay(t, six, "fc00:100::1/96" if six else "", "fc00:100::100/96" if six else "")
    remote_ovs, remote_ns = ("fc00:100::1", "fc00:100::100") if six else ("172.31.1.1",
                                                                          "172.31.1.100")
    t.add_ovs_tunnel(kind, "br0", "at_erspan0", remote_ovs, "10.1.1.100/24", *oargs, v6=six)
    t.add_native_tunnel(kind, "ns_erspan0", ns, remote_ns, "10.1.1.1/24", nargs, v6=six)
    from datapath.backends.native_tunnel import moved, snmp_counters
    before = snmp_counters(ns)
    if six:
        t.wait_ping6(ns, remote_ns, 2)
        t.check_ping(ns, remote_ns, six=True)
        t.check_ping(ns, "10.1.1.100")
    else:
        t.check_ping(ns, remote_ns)
        got = format_ping(t.run(["ping", "-s", "1200", "-i", "0.3", "-c", "3", "10.1.1.100"],
                                ns, timeout=60).stdout)
        assert got == PING_OK, got
    assert not moved(before, snmp_counters(ns)), "at_ns0 counted checksum errors"


@FLAVOUR
@upstream("datapath - bridging two geneve tunnels")
@pytest.mark.requires(kernel="geneve")
def test_bridging_two_geneve_tunnels(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                                     flavour: str) -> None:
    """br0 bridges two Geneve tunnels to two Linux peers (at_ns0, at_ns1):
    upstream's underlay pings and overlay pings of 56, 1600 and 3200 bytes
    from at_ns0 to at_ns1's 10.1.1.2, all answered; the wire of the first
    tunnel checked with the model both ways."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay-0")
    t.add_br("br-underlay-1")
    ns0 = underlay(t, False, bridge="br-underlay-0")
    ns1 = underlay(t, False, "172.31.2.1/24", "172.31.2.100/24", bridge="br-underlay-1",
                   port="p1", ns_name="at_ns1")
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("geneve", "ns_gnv0", ns0, "172.31.1.100", "10.1.1.1/24", ("vni", "0"))
    t.add_ovs_tunnel("geneve", "br0", "at_gnv1", "172.31.2.1", "10.1.1.101/24")
    t.add_native_tunnel("geneve", "ns_gnv1", ns1, "172.31.2.100", "10.1.1.2/24", ("vni", "0"))
    for br in ("br0", "br-underlay-0", "br-underlay-1"):
        t.sb.ofctl("add-flow", br, "actions=normal")
    t.check_ping(ns0, "172.31.1.100")
    t.check_ping(ns1, "172.31.2.100")
    for size in (None, "1600", "3200"):
        t.check_ping(ns0, "10.1.1.2", *(["-s", size] if size else []))


CORRUPTED = ("f2 ff 00 00 00 02 f2 ff 00 00 00 03 08 00 45 00 00 52 00 01 00 00 40 11 1f f7 "
             "ac 1f 01 01 ac 1f 01 64 de c1 17 c1 00 3e 59 e9 01 00 65 58 00 00 00 00 00 03 "
             "00 02 f2 ff 00 00 00 01 f2 ff 00 00 00 04 08 00 45 00 00 1c 00 01 00 00 40 01 "
             "64 7a 0a 01 01 01 0a 01 01 64 08 00 f7 ff 00 00 00 00")


@FLAVOUR
@upstream("datapath - handling of geneve corrupted metadata")
@pytest.mark.requires(kernel="geneve")
def test_geneve_corrupted_metadata(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """A Geneve packet whose option length runs past the header (sendpkt.py in
    upstream; an AF_PACKET send here) from at_ns0: OVS must log 'Invalid Geneve
    tunnel metadata' (and nothing else unexpected), and deliver nothing to br0."""
    t: Traffic = system_traffic(
        flavour,
        vsctl_extra=(*Traffic.br_args("br-underlay"), "--", "set", "bridge", "br0",
                     "other-config:hwaddr=f2:ff:00:00:00:01", "--", "set", "bridge",
                     "br-underlay", "other-config:hwaddr=f2:ff:00:00:00:02"))
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    ns = underlay(t, False, mac="f2:ff:00:00:00:03")
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("geneve", "ns_gnv0", ns, "172.31.1.100", "10.1.1.1/24", ("vni", "0"),
                        ("address", "f2:ff:00:00:00:04"))
    t.sb.allow_log(r"Invalid Geneve tunnel metadata on bridge br0 while processing icmp,"
                   r"in_port=1,vlan_tci=0x0000,dl_src=f2:ff:00:00:00:04,"
                   r"dl_dst=f2:ff:00:00:00:01,nw_src=10.1.1.1,nw_dst=10.1.1.100,nw_tos=0,"
                   r"nw_ecn=0,nw_ttl=64,nw_frag=no,icmp_type=8,icmp_code=0",
                   r"Unable to parse geneve options")
    from datapath.backends.native_tunnel import Sniffer
    br0 = Sniffer(t.host, "br0")
    t.env.cleanup.defer("close the br0 capture", br0.close)
    from datapath.backends.netns import KernelSide
    side = KernelSide(ns, "p0")
    t.env.cleanup.defer("close p0", side.close)
    side.send([bytes.fromhex(CORRUPTED.replace(" ", ""))])
    t.sb.log.wait("Invalid Geneve tunnel metadata", after=t.sb.log.case)
    icmp = [c for c in br0.read() if not c.outgoing and c.frame[12:14] == b"\x08\x00"
            and c.frame[23] == 1]
    assert not icmp, f"OVS delivered the corrupted packet's inner ICMP to br0: {icmp}"
