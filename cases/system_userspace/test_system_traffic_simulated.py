"""system-traffic.at's "ping over <tunnel> tunnel by simulated packets" tests
(GRE, ERSPAN v1/v2, ip6erspan v1/v2), as `make check-system-userspace` (and
check-system-tso) run them: no Linux tunnel device, OVS talks to an emulated
far end whose encapsulated packets are packet-outs into br-underlay.  The
other tunnel tests of the file are in cases/system_userspace/test_system_traffic.py.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from fixtures.system_userspace.kernel_peer import WireCheck
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, underlay, upstream
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


@dataclass(frozen=True)
class Simulated:
    """One simulated tunnel kind: its OVS interface type, port name, options and address family."""

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
    t.sb.vsctl("--", "set", "bridge", "br0", 'other-config:hwaddr="f2:ff:00:00:00:01"')
    t.add_br("br-underlay", "set", "bridge", "br-underlay",
             'other-config:hwaddr="f2:ff:00:00:00:02"')
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
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
    t.sb.ofctl(*packet_out, f"in_port=1 packet={sim.arp} actions=normal")
    for pattern in sim.arp_greps:
        wait_until(lambda: seen(pattern), 10, what=f"tcpdump to show {pattern!r}")
    assert not sim.not_yet or not seen(sim.not_yet), "an echo reply before the echo request"
    t.sb.ofctl(*packet_out, f"in_port=1 packet={sim.icmp} actions=normal")
    wait_until(lambda: seen(sim.icmp_grep), 10, what=f"tcpdump to show {sim.icmp_grep!r}")
    if wire is not None:
        wire.verify(injected=[bytes.fromhex(sim.arp), bytes.fromhex(sim.icmp)])
