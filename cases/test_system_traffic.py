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

import re
from dataclasses import dataclass

import pytest

from fixtures.kernel_peer import WireCheck
from fixtures.system_traffic import (FLAVOURS, PING_OK, Traffic, format_ping, payload, start,
                                     underlay)
from harness.control import check
from harness.wait import wait_until
from collections.abc import Callable

ST = "system-traffic.at"


def upstream(title: str):  # type: ignore[no-untyped-def]
    return pytest.mark.upstream(title, file=ST)


FLAVOUR = pytest.mark.parametrize("flavour", FLAVOURS)


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


@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t), id=t.split()[4])
                                   for t in FALLBACK])
def test_tcp_over_tunnel_software_fallback(system_traffic: Callable[..., Traffic],
                                           request: pytest.FixtureRequest, title: str) -> None:
    """check-system-tso (userspace TSO on; upstream skips it elsewhere): ovs-p0
    has tso and sg off, br0 MTU 1400; 60000 bytes over TCP from the host to
    at_ns0 leave as GSO packets into br0 and must be segmented by OVS before
    the push.  Verifies upstream's checks (payload intact, at least 20
    full-size segments in tcpdump's capture on ovs-p0 with upstream's exact
    header pattern) and every encapsulated segment against the model's
    software segmentation and push, at_ns0 counting no checksum error."""
    ovs_type, native, nargs, oport, nport, pattern = FALLBACK[title]
    t: Traffic = system_traffic("tso", native)
    start(t)
    ns = underlay(t, False)
    for feature in ("tso", "sg"):  # one side with all checksum and TSO offload disabled
        t.run(["ethtool", "-K", "ovs-p0", feature, "off"])
    check(t.sb.vsctl("del-port", "ovs-p0"))
    check(t.sb.vsctl("add-port", "br-underlay", "ovs-p0"))
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
    dump = check(t.run(["ovs-pcap", str(pcap)])).stdout
    full = len([line for line in dump.splitlines() if re.search(pattern, line)])
    assert full >= 20, f"{full} full-size segments match upstream's pattern, expected >= 20"
    wire.verify()


@FLAVOUR
@upstream("datapath - ping vlan over vxlan tunnel")
def test_ping_vlan_over_vxlan(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                              flavour: str) -> None:
    """br0 is an access port of VLAN 100, br-underlay of VLAN 42; at_ns0 reaches
    both through 802.1Q devices on its vxlan device and on p0.  Verifies
    upstream's pings (underlay, and overlay at 56, 1600 and 3200 bytes); then
    each encapsulated frame on p0 (tagged 42) against the model's push of br0's
    frame tagged 100, each frame OVS delivered to br0 (untagged) against the
    model's pop, and that no checksum error was counted."""
    t: Traffic = system_traffic(flavour, "vxlan", "vlan")
    start(t)
    ns = underlay(t, False, "172.31.2.1/24")
    t.add_ovs_tunnel("vxlan", "br0", "at_vxlan0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("vxlan", "at_vxlan1", ns, "172.31.1.100", "10.2.1.1/24",
                        ("id", "0", "dstport", "4789"))
    check(t.sb.vsctl("set", "port", "br0", "tag=100"))
    check(t.sb.vsctl("set", "port", "br-underlay", "tag=42"))
    t.add_vlan("at_vxlan1", ns, 100, "10.1.1.1/24")
    t.add_vlan("p0", ns, 42, "172.31.1.1/24")
    t.check_ping(ns, "172.31.1.100")
    wire = WireCheck.start(t, request, "vxlan", ns, csum=None, remote_dev="p0.42",
                           inner_vlan=100, outer_vlan=42)
    overlay_checks(t, ns, wire, nc=False)


# ----------------------------------------------------------------------------
# ... by simulated packets: OVS talks to an emulated Linux endpoint (packet-out)


@dataclass(frozen=True)
class Simulated:
    ovs_type: str
    port: str
    args: tuple[str, ...]
    six: bool
    arp: str  # packet-out hex: the far end's ARP request, encapsulated
    arp_greps: tuple[str, ...]  # tcpdump lines that show OVS's encapsulated ARP reply
    not_yet: str  # a reply that must not be there before the ICMP request
    icmp: str
    icmp_grep: str
    hexdump: bool = True  # tcpdump -x


SIMULATED = {
    "datapath - ping over gre tunnel by simulated packets": Simulated(
        "gre", "at_gre0", (), False,
        "f2ff00000002f2ff00000003080045000042ec2c4000402ff3bcac1f0101ac1f016400006558ffffffff"
        "fffff2ff0000000408060001080006040001f2ff000000040a0101010000000000000a010164",
        (r"IP 172.31.1.100 > 172.31.1.1: GREv0, length 46: ARP, Reply 10.1.1.100 is-at "
         r"f2:ff:00:00:00:01.* length 28",), "",
        "f2ff00000002f2ff0000000308004500007aec8e4000402ff322ac1f0101ac1f016400006558f2ff0000"
        "0001f2ff00000004080045000054548f40004001cfb30a0101010a0101640800e6e829270003e1a3435b"
        "00000000ff1a050000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d"
        "2e2f3031323334353637",
        r"IP 172.31.1.100 > 172.31.1.1: GREv0, length 102: IP 10.1.1.100 > 10.1.1.1: ICMP "
        r"echo reply,.* length 64$", hexdump=False),
    "datapath - ping over erspan v1 tunnel by simulated packets": Simulated(
        "erspan", "at_erspan0", ("options:key=1", "options:erspan_ver=1",
                                 "options:erspan_idx=7"), False,
        "f2ff00000002f2ff0000000308004500004e151d4000402fcac0ac1f0101ac1f0164100088be00000006"
        "1000000100000007fffffffffffff2ff0000000408060001080006040001f2ff000000040a0101010000"
        "000000000a010164",
        ("0x0030:  0806 0001 0800 0604 0002 f2ff 0000 0001",
         "0x0040:  0a01 0164 f2ff 0000 0004 0a01 0101"),
        r"IP 172.31.1.100 > 172.31.1.1: GREv0,.* length 122",
        "f2ff00000002f2ff0000000308004500008e70cb4000402f6ed2ac1f0101ac1f0164100088be00000005"
        "1000000100000007f2ff00000001f2ff0000000408004500005c4a3340004001da070a0101010a010164"
        "080084f238fb0001f36a6b5b0000000021870e0000000000101112131415161718191a1b1c1d1e1f2021"
        "22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
        r"IP 172.31.1.100 > 172.31.1.1: GREv0,.* length 122"),
    "datapath - ping over erspan v2 tunnel by simulated packets": Simulated(
        "erspan", "at_erspan0", ("options:key=1", "options:erspan_ver=2",
                                 "options:erspan_dir=1", "options:erspan_hwid=0x7"), False,
        "f2ff00000002f2ff00000003080045000052373d4000402fa89cac1f0101ac1f0164100088be00000006"
        "200000016f54b41700008078fffffffffffff2ff0000000408060001080006040001f2ff000000040a01"
        "01010000000000000a010164",
        ("0x0030:  0000 0001 0806 0001 0800 0604 0002 f2ff",
         "0x0040:  0000 0001 0a01 0164 f2ff 0000 0004 0a01", "0x0050:  0101"),
        r"IP 172.31.1.100 > 172.31.1.1: GREv0,.* length 126",
        "f2ff00000002f2ff0000000308004500009287e14000402f57b8ac1f0101ac1f0164100088be00000005"
        "20000001144cd5a400008078f2ff00000001f2ff0000000408004500005c38d640004001eb640a010101"
        "0a01016408005e57585f0001df6c6b5b0000000045bc050000000000101112131415161718191a1b1c1d"
        "1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
        r"IP 172.31.1.100 > 172.31.1.1: GREv0,.* length 126"),
    "datapath - ping over ip6erspan v1 tunnel by simulated packets": Simulated(
        "ip6erspan", "at_erspan0", ("options:key=123", "options:erspan_ver=1",
                                    "options:erspan_idx=0x7"), True,
        "f2ff00000002f2ff0000000386dd60008531003a2f40fc000100000000000000000000000001fc000100"
        "000000000000000000000100100088be000000051000007b00000007fffffffffffff2ff000000040806"
        "0001080006040001f2ff000000040a0101010000000000000a010164",
        ("0x0040:  0000 0001 0806 0001 0800 0604 0002 f2ff",
         "0x0050:  0000 0001 0a01 0164 f2ff 0000 0004 0a01", "0x0060:  0101"),
        r"IP6 fc00:100::100 > fc00:100::1: GREv0,.* length 114",
        "f2ff00000002f2ff0000000386dd60008531007a3c40fc000100000000000000000000000001fc000100"
        "0000000000000000000001002f00040104010100100088be000000061000407b00000007f2ff00000001"
        "f2ff0000000408004500005429b640004001fa8c0a0101010a01016408005c2c7526000118d3685b0000"
        "0000e4aa020000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
        "3031323334353637",
        r"IP6 fc00:100::100 > fc00:100::1: GREv0,.* length 114"),
    "datapath - ping over ip6erspan v2 tunnel by simulated packets": Simulated(
        "ip6erspan", "at_erspan0", ("options:key=121", "options:erspan_ver=2",
                                    "options:erspan_dir=0", "options:erspan_hwid=0x7"), True,
        "f2ff00000002f2ff0000000386dd60008531003e2f40fc000100000000000000000000000001fc000100"
        "000000000000000000000100100088be0000000620000079af514f9900008070fffffffffffff2ff0000"
        "000408060001080006040001f2ff000000040a0101010000000000000a010164",
        ("0x0040:  0004 f2ff 0000 0001 0806 0001 0800 0604",
         "0x0050:  0002 f2ff 0000 0001 0a01 0164 f2ff 0000", "0x0060:  0004 0a01 0101"),
        r"IP6 fc00:100::100 > fc00:100::1: GREv0, .* length 118",
        "f2ff00000002f2ff0000000386dd60008531007e3c40fc000100000000000000000000000001fc000100"
        "0000000000000000000001002f00040104010100100088be0000000720004079af514f9b00008070f2ff"
        "00000001f2ff00000004080045000054ffcb4000400124770a0101010a0101640800419e23ac000112d7"
        "685b000000004caf0c0000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b"
        "2c2d2e2f3031323334353637",
        r"IP6 fc00:100::100 > fc00:100::1: GREv0, .* length 118"),
}


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t),
                                                id=t.split(" over ")[1].split(" tunnel")[0]
                                                .replace(" ", "_"))
                                   for t in SIMULATED])
def test_ping_over_tunnel_by_simulated_packets(system_traffic: Callable[..., Traffic],
                                               request: pytest.FixtureRequest, flavour: str,
                                               title: str) -> None:
    """No Linux tunnel device: the far end's packets (an ARP request, then an
    ICMP echo request, both encapsulated) are packet-outs into br-underlay, and
    tcpdump in at_ns0 must show OVS's encapsulated ARP and echo replies, the
    echo reply only after the request (upstream's AT_FAIL_IF).  XT_ACCEPT is
    moot: the run's switch namespace has no firewall rules.  Beyond upstream:
    for GRE, each reply frame on p0 is compared with the model's GRE push of
    the frame br0's kernel sent, and the frames OVS delivered to br0 with the
    model's pop of the two packet-outs; no checksum error may be counted."""
    sim = SIMULATED[title]
    t: Traffic = system_traffic(flavour)
    check(t.sb.vsctl("--", "set", "bridge", "br0", 'other-config:hwaddr="f2:ff:00:00:00:01"'))
    t.add_br("br-underlay", "set", "bridge", "br-underlay",
             'other-config:hwaddr="f2:ff:00:00:00:02"')
    check(t.sb.ofctl("add-flow", "br0", "actions=normal"))
    check(t.sb.ofctl("add-flow", "br-underlay", "actions=normal"))
    ns = underlay(t, sim.six, "fc00:100::1/96" if sim.six else "",
                  "fc00:100::100/96" if sim.six else "", mac="f2:ff:00:00:00:03")
    remote = "fc00:100::1" if sim.six else "172.31.1.1"
    t.add_ovs_tunnel(sim.ovs_type, "br0", sim.port, remote, "10.1.1.100/24", *sim.args,
                     v6=sim.six)
    if sim.six:
        t.wait_ping6(ns, "fc00:100::100", 2)
    text = t.sb.rundir / "p0.pcap"
    err = t.sb.rundir / "tcpdump.err"
    t.daemonize("tcpdump", ["sh", "-c", f"exec tcpdump -n {'-x ' if sim.hexdump else ''}-i p0 "
                            f"dst host {remote} -l 2>{err}"], ns, text)
    wait_until(lambda: err.exists() and "listening on" in err.read_text(), 10,
               what="tcpdump to listen on p0")
    if sim.six:
        t.check_ping(ns, "fc00:100::100", six=True)
    else:
        t.check_ping(ns, "172.31.1.100")
    wire = WireCheck.start(t, request, "gre", ns, csum=False) if sim.ovs_type == "gre" else None

    def seen(pattern: str) -> bool:
        return bool(re.search(pattern, text.read_text(errors="replace"), re.M))
    packet_out = ["-O", "OpenFlow13", "packet-out", "br-underlay"]
    check(t.sb.ofctl(*packet_out, f"in_port=1 packet={sim.arp} actions=normal"))
    for pattern in sim.arp_greps:
        wait_until(lambda: seen(pattern), 10, what=f"tcpdump to show {pattern!r}")
    assert not sim.not_yet or not seen(sim.not_yet), "an echo reply before the echo request"
    check(t.sb.ofctl(*packet_out, f"in_port=1 packet={sim.icmp} actions=normal"))
    wait_until(lambda: seen(sim.icmp_grep), 10, what=f"tcpdump to show {sim.icmp_grep!r}")
    if wire is not None:
        wire.verify(injected=[bytes.fromhex(sim.arp), bytes.fromhex(sim.icmp)])


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
@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t),
                                                id=t.split(" over ")[1].replace(" ", "_"))
                                   for t in ERSPAN])
def test_ping_over_erspan(system_traffic: Callable[..., Traffic], flavour: str, title: str) -> None:
    """A Linux erspan/ip6erspan device as the far end: upstream's underlay ping
    and a 1200-byte (IPv4) or 56-byte (IPv6) overlay ping, all answered; the
    peer's checksum error counters must not move."""
    kind, six, oargs, nargs = ERSPAN[title]
    t: Traffic = system_traffic(flavour, kind)
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
def test_bridging_two_geneve_tunnels(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                                     flavour: str) -> None:
    """br0 bridges two Geneve tunnels to two Linux peers (at_ns0, at_ns1):
    upstream's underlay pings and overlay pings of 56, 1600 and 3200 bytes
    from at_ns0 to at_ns1's 10.1.1.2, all answered; the wire of the first
    tunnel checked with the model both ways."""
    t: Traffic = system_traffic(flavour, "geneve")
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
        check(t.sb.ofctl("add-flow", br, "actions=normal"))
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
def test_geneve_corrupted_metadata(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """A Geneve packet whose option length runs past the header (sendpkt.py in
    upstream; an AF_PACKET send here) from at_ns0: OVS must log 'Invalid Geneve
    tunnel metadata' (and nothing else unexpected), and deliver nothing to br0."""
    t: Traffic = system_traffic(
        flavour, "geneve",
        vsctl_extra=(*Traffic.br_args("br-underlay"), "--", "set", "bridge", "br0",
                     "other-config:hwaddr=f2:ff:00:00:00:01", "--", "set", "bridge",
                     "br-underlay", "other-config:hwaddr=f2:ff:00:00:00:02"))
    check(t.sb.ofctl("add-flow", "br0", "actions=normal"))
    check(t.sb.ofctl("add-flow", "br-underlay", "actions=normal"))
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
    wait_until(lambda: any("Invalid Geneve tunnel metadata" in line
                           for line in t.sb.log_lines()), 10,
               what="'Invalid Geneve tunnel metadata' in ovs-vswitchd.log")
    icmp = [c for c in br0.read() if not c.outgoing and c.frame[12:14] == b"\x08\x00"
            and c.frame[23] == 1]
    assert not icmp, f"OVS delivered the corrupted packet's inner ICMP to br0: {icmp}"
