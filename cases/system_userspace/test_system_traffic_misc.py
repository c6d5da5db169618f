"""system-traffic.at's datapath and QoS odds and ends, as `make
check-system-userspace` (and check-system-tso) run them: a flow's actions
updated under traffic, TSO falling back to software segmentation, ND and
IP-fragment matches and rewrites, UFIDs traced back to their OpenFlow
rules, HTB QoS and ingress policing with 64-bit rates.

Each keeps upstream's topology, flows, packets and checks (dpctl output
after upstream's filters, ping lines, nc payloads, ovs-pcap lines, tc
output).  Then more where frames cross OVS: every frame between the
namespaces is captured on both sides and judged by the model
(fixtures/system_userspace/system_l2.py's Crossings).

"datapath - configure cache size" and "meters - datapath probe" are not
here: check-system-userspace skips them (harness/system_userspace.NOT_HERE).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import replace

import pytest

from datapath import model
from datapath.backends.native_tunnel import Captured
from datapath.backends.netns import KernelSide, Netns
from datapath.model.actions import mod_nw_src, output
from datapath.model.ipv6addr import set_ipv6_addr
from fixtures.system_userspace.kernel_peer import rx_flags
from fixtures.system_userspace.system_l2 import Crossings, port_tx, switched, through_br0
from fixtures.system_userspace.system_traffic import FLAVOUR, FLAVOURS, Traffic, payload, upstream
from harness.filters import (
    ofctl_strip,
    parse_ufid,
    strip_dp_hash,
    strip_duration,
    strip_eth,
    strip_key32,
    strip_ptype,
    strip_recirc,
    strip_stats,
    strip_used,
)
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


def lines(text: str) -> str:
    return "".join(ln + "\n" for ln in text.splitlines())


def dump_ip4(t: Traffic, *extra: tuple[str, str]) -> str:
    """dpctl/dump-flows | grep "eth_type(0x0800)" | sort | strip_recirc |
    strip_used | sed (packet_type, eth(), and `extra` substitutions)."""
    out = t.sb.appctl("dpctl/dump-flows").stdout
    text = strip_used(strip_recirc(lines("\n".join(sorted(
        ln for ln in out.splitlines() if "eth_type(0x0800)" in ln)))))
    rules = [(r",packet_type\(ns=[0-9]*,id=[0-9]*\),", ","), (r",eth\(\),", ","), *extra]
    out_lines = []
    for line in text.splitlines():
        for pat, rep in rules:
            line = re.sub(pat, rep, line, count=1)
        out_lines.append(line)
    return lines("\n".join(out_lines))


def two_ports(t: Traffic, addr0: str, addr1: str, mac0: str = "", mac1: str = "") -> \
        tuple[Netns, Netns]:
    """ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH(p0, ...), ADD_VETH(p1, ...)."""
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", addr0, mac0)
    t.add_veth("p1", ns1, "br0", addr1, mac1)
    return ns0, ns1


# ----------------------------------------------------------------------------


@FLAVOUR
@upstream("datapath - simulated flow action update")
def test_simulated_flow_action_update(system_traffic: Callable[..., Traffic],
                                      request: pytest.FixtureRequest, flavour: str) -> None:
    """Each port's traffic goes to the other port and br0; after 10 pings the
    datapath flows say so (9 packets: the first was the upcall).  The rules
    are modified to drop br0, revalidated, and the same datapath flows (their
    counters going on) output to the other port only; then back.  Judged:
    every frame between the namespaces, both ways, each time (br0's copies
    are not captured: br0 is down)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = two_ports(t, "10.1.1.1/24", "10.1.1.2/24")
    flows, flows2 = t.sb.rundir / "flows.txt", t.sb.rundir / "flows2.txt"
    flows.write_text("add in_port=ovs-p0,actions=ovs-p1,br0\n"
                     "add in_port=ovs-p1,actions=ovs-p0,br0\n")
    flows2.write_text("modify in_port=ovs-p0,actions=ovs-p1\n"
                      "modify in_port=ovs-p1,actions=ovs-p0\n")
    t.sb.ofctl("add-flows", "br0", str(flows))
    wire = through_br0(t, request, ns0, ns1)
    rounds = ((None, "756", "882", 9, ",1"), (flows2, "1596", "1862", 19, ""),
              (flows, "2436", "2842", 29, ",1"))
    for update, kernel_bytes, want_bytes, packets, br0 in rounds:
        if update is not None:
            t.sb.ofctl("add-flows", "br0", str(update))
            t.sb.appctl("revalidator/wait")
        got = t.ping(ns0, "10.1.1.2", count=10, interval="0.1")
        assert got == "10 packets transmitted, 10 received, 0% packet loss, time 0ms\n", got
        dump = dump_ip4(t, (f"bytes:{kernel_bytes}", f"bytes:{want_bytes}"))
        want = (f"recirc_id(<recirc>),in_port(2),eth_type(0x0800),ipv4(frag=no), "
                f"packets:{packets}, bytes:{want_bytes}, used:0.0s, actions:3{br0}\n"
                f"recirc_id(<recirc>),in_port(3),eth_type(0x0800),ipv4(frag=no), "
                f"packets:{packets}, bytes:{want_bytes}, used:0.0s, actions:2{br0}\n")
        assert dump == want, f"dpctl/dump-flows: expected\n{want}got\n{dump}"
    assert wire.verify() >= 60


@FLAVOUR
@upstream("datapath - netdev offload software fallback")
def test_netdev_offload_software_fallback(system_traffic: Callable[..., Traffic],
                                          request: pytest.FixtureRequest, flavour: str) -> None:
    """ovs-p1 with TSO and scatter-gather off (re-added so OVS reads that):
    3200-byte pings both ways, and a 60000-byte TCP transfer each way (nc),
    which in the tso flavour OVS must segment in software for ovs-p1.
    Judged: every frame between the namespaces against the model's output to
    each port's tx offloads (software segmentation and checksums,
    datapath/model/gso.py)."""
    t: Traffic = system_traffic(flavour)
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = two_ports(t, "10.1.1.1/24", "10.1.1.2/24")
    t.run(["ethtool", "-K", "ovs-p1", "tso", "off"])
    t.run(["ethtool", "-K", "ovs-p1", "sg", "off"])
    if t.spec.backend != "tap":
        # A PMD polls an afxdp or dpdk port: a frame it took from ovs-p1 (port 2)
        # just before the deletion reaches xlate after the bridge forgot the
        # port ("We deleted a port but there are still a few packets queued up
        # from it", ofproto-dpif-xlate.c's lookup_input_bundle).  The tap-port
        # flavours poll ovs-p1 in the main thread, between reconfigurations.
        t.sb.allow_log(r"ofproto_dpif_xlate\(pmd-.*\)\|WARN\|received packet on unknown port 2 "
                       r"on bridge br0")
    t.sb.vsctl("del-port", "ovs-p1")
    t.sb.vsctl("add-port", "br0", "ovs-p1")
    wire = through_br0(t, request, ns0, ns1)
    t.check_ping(ns0, "10.1.1.2", "-s", "3200")
    t.check_ping(ns1, "10.1.1.1", "-s", "3200")
    data = payload(60000)
    t.nc_transfer(data, ns0, "10.1.1.1", 1234, ns1)
    t.nc_transfer(data, ns1, "10.1.1.2", 1234, ns0)
    assert wire.verify() >= 12


ND_NS_PKT = ("eth_src=36:b1:ee:7c:01:03,eth_dst=36:b1:ee:7c:01:02,eth_type=0x86dd,"
             "ipv6_src=fe80::f816:3eff:fe04:6604,ipv6_dst=fe80::f816:3eff:fea7:dd0e,"
             "nw_proto=58,nw_ttl=255,nw_frag=no,icmpv6_type=136,icmpv6_code=0,"
             "nd_options_type=2,nd_tll=36:b1:ee:7c:01:03")
ND_FLOWS = ("table=0 priority=95 icmp6,icmp_type=136,nd_target=2001::1:0:9 actions=resubmit(,10)",
            "table=0 priority=95 icmp6,icmp_type=136,nd_target=2001::1:0:392 "
            "actions=resubmit(,10)",
            "table=0 priority=65 actions=resubmit(,20)",
            "table=10 actions=NORMAL",
            "table=20 actions=drop")
ND_DUMP = (
    "recirc_id(<recirc>),in_port(2),eth(src=36:b1:ee:7c:01:03,dst=36:b1:ee:7c:01:02),"
    "eth_type(0x86dd),ipv6(proto=58,frag=no),icmpv6(type=136),nd(target=2001::1:0:392), "
    "packets:0, bytes:0, used:never, actions:1,3\n"
    "recirc_id(<recirc>),in_port(2),eth_type(0x86dd),ipv6(proto=58,frag=no),icmpv6(type=136),"
    "nd(target=3000::1), packets:0, bytes:0, used:never, actions:drop\n")
ND_SRC = ipaddress.IPv6Address("fe80::f816:3eff:fe04:6604").packed


def nd_dump(t: Traffic) -> str:
    """dpctl/dump-flows | strip_stats | strip_used | strip_key32 | strip_ptype |
    strip_eth | strip_recirc | grep ",nd" | sort."""
    text = strip_recirc(strip_eth(strip_ptype(strip_key32(strip_used(strip_stats(
        t.sb.appctl("dpctl/dump-flows").stdout))))))
    return "".join(sorted(ln + "\n" for ln in text.splitlines() if ",nd" in ln))


def crafted_na(frame: bytes) -> bool:
    """The test's own neighbour advertisements (their IPv6 source), not the
    namespaces' kernels' discovery traffic."""
    return frame[12:14] == b"\x86\xdd" and frame[22:38] == ND_SRC and frame[54] == 136


@FLAVOUR
@upstream("datapath - Neighbor Discovery with loose match")
def test_nd_loose_match(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                        flavour: str) -> None:
    """Neighbour advertisements (upstream's compose-packet, sent from p0 as
    sendpkt.py does) for a target the rules match go to NORMAL, for another
    to drop: two datapath flows, the drop one matching no Ethernet fields,
    in either order once the first pair expired.  Upstream dumps right after
    sending; here the dump is taken once both flows are in (the event), then
    compared exactly.  Judged: the matching advertisement crosses to at_ns1
    unchanged (NORMAL floods it: the destination MAC is unlearnt), the other
    does not."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = two_ports(t, "2001::1:0:392/64", "2001::1:0:9/64", "36:b1:ee:7c:01:03",
                         "36:b1:ee:7c:01:02")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f + "\n" for f in ND_FLOWS))
    t.sb.ofctl("del-flows", "br0")
    t.sb.ofctl("--bundle", "add-flows", "br0", str(flows))

    def packet(target: str) -> bytes:
        out = t.run(["ovs-ofctl", "compose-packet", "--bare",
                     f"{ND_NS_PKT},nd_target={target}"]).stdout
        return bytes.fromhex(out.strip())
    matching, other = packet("2001::1:0:392"), packet("3000::1")
    tx1 = port_tx(t, "ovs-p1")

    def rule(c: Captured) -> list[bytes]:
        if c.frame[62:78] == matching[62:78]:
            return model.forward(c.frame, [output("out")], tx1, rx_flags(c)).frames
        return []
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False), rule,
             keep=crafted_na)
    side = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close p0", side.close)

    def both_in() -> str:
        dump = nd_dump(t)
        return dump if dump.count("\n") == 2 else ""
    for order in ((other, matching), (matching, other)):
        if order[0] is matching:
            wait_until(lambda: not nd_dump(t), 30, what="the ND datapath flows to expire")
        for frame in order:
            side.send([frame])
        got = wait_until(both_in, 10, what="both ND datapath flows", describe=lambda: nd_dump(t))
        assert got == ND_DUMP, f"dpctl/dump-flows: expected\n{ND_DUMP}got\n{got}"
    assert wire.verify() == 2


FRAG_ETH = "36b1ee7c010236b1ee7c0103"
FRAG4 = (FRAG_ETH + "0800" + "450000260001200040114 4c20a0101010a010102".replace(" ", "")
         + "0bc408840026e964010203040506070809 0a".replace(" ", ""))
FRAG6 = (FRAG_ETH + "86dd" + "6000000000182c40" + "fc000000000000000000000000000001"
         + "fc000000000000000000000000000002" + "110000012316ab36"
         + "0bc408840026076501020304050607 08".replace(" ", ""))
# Upstream's sed on each: the new source address and the checksums it patches.
FRAG4_OUT = FRAG4.replace("0a010101", "0b010101").replace("44c2", "43c2").replace("e964", "e864")
FRAG6_OUT = FRAG6.replace("0765", "0666").replace("fc000000000000000000000000000001",
                                                  "fc000000000000000000000000000100")


@FLAVOUR
@upstream("datapath - mod_nw_src/set_field on IP fragments")
def test_mod_nw_src_on_ip_fragments(system_traffic: Callable[..., Traffic],
                                    request: pytest.FixtureRequest, flavour: str) -> None:
    """A first IPv4 fragment (UDP header, more fragments) from 10.1.1.1 gets
    mod_nw_src=11.1.1.1, a first IPv6 fragment from fc00::1 gets
    set_field:fc00::100->ipv6_src, each sent 5 times (the first an upcall,
    then the datapath flow): tcpdump on p1 must hold upstream's rewritten
    bytes 5 times each (ovs-pcap).  Judged: every frame into at_ns1 against
    the model (datapath/model/actions.py SetIPv4Addr, ipv6addr.py: a first
    fragment carries the UDP header, whose checksum covers the address
    through the pseudo-header, RFC 768, RFC 8200 §8.1), and nothing else
    crosses (the only rules are these two)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = two_ports(t, "10.1.1.1/24", "10.1.1.2/24", "36:b1:ee:7c:01:03",
                         "36:b1:ee:7c:01:02")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("  in_port=ovs-p0,ip,nw_src=10.1.1.1 actions=mod_nw_src=11.1.1.1,ovs-p1\n"
                     "  in_port=ovs-p0,ipv6,ipv6_src=fc00::1 "
                     "actions=set_field:fc00::100->ipv6_src,ovs-p1\n")
    t.sb.ofctl("del-flows", "br0")
    t.sb.ofctl("-Oopenflow13", "add-flows", "br0", str(flows))
    pcap, err = t.sb.rundir / "p1.pcap", t.sb.rundir / "tcpdump.err"
    t.daemonize("tcpdump", ["sh", "-c", f"exec tcpdump -l -nn -xx -U -i p1 -w {pcap} 2>{err}"],
                ns1, t.sb.rundir / "tcpdump.out")
    wait_until(lambda: err.exists() and "listening" in err.read_text(), 10,
               what="tcpdump to listen on p1")
    tx1 = port_tx(t, "ovs-p1")
    v4_src, v6_src = bytes.fromhex("0a010101"), ipaddress.IPv6Address("fc00::1").packed

    def rule(c: Captured) -> list[bytes]:
        f = c.frame
        if f[12:14] == b"\x08\x00" and f[26:30] == v4_src:
            return model.forward(f, [mod_nw_src("11.1.1.1"), output("out")], tx1,
                                 rx_flags(c)).frames
        if f[12:14] == b"\x86\xdd" and f[22:38] == v6_src:
            return switched(tx1)(replace(c, frame=set_ipv6_addr(f, "src", "fc00::100")))
        return []
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False), rule)
    side = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close p0", side.close)

    def in_pcap(want: str) -> int:
        dump = t.run(["ovs-pcap", str(pcap)]).stdout
        return sum(want in line for line in dump.splitlines())
    for sent, want in ((FRAG4, FRAG4_OUT), (FRAG6, FRAG6_OUT)):
        for _ in range(5):
            side.send([bytes.fromhex(sent)])
        wait_until(lambda: in_pcap(want) == 5, 10, what=f"ovs-pcap p1.pcap to hold {want} "
                   "5 times", describe=lambda: f"{in_pcap(want)} times")
    assert wire.verify() == 10


def tc(t: Traffic, *args: str) -> str:
    return t.run(["tc", *args]).stdout


def wait_htb(t: Traffic, *devs: str) -> None:
    """OVS_WAIT_UNTIL([tc qdisc show dev DEV | grep -q htb])."""
    for dev in devs:
        wait_until(lambda: "htb" in tc(t, "qdisc", "show", "dev", dev), 10,
                   what=f"the htb qdisc on {dev}")


def htb_class(t: Traffic, dev: str, conf: str) -> None:
    """AT_CHECK([tc class show dev DEV | grep -q 'class htb .* CONF'])."""
    shown = tc(t, "class", "show", "dev", dev)
    assert re.search(f"class htb .* {conf}", shown), \
        f"tc class show dev {dev}: no 'class htb .* {conf}' in\n{shown}"


@FLAVOUR
@upstream("QoS - basic configuration")
def test_qos_basic_configuration(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """Two taps at 5 Gb/s (ethtool), one with its own noqueue qdisc, share a
    linux-htb QoS: queue 0 with a fixed max-rate, queue 1 bounded by the link
    speed; both taps get htb classes with those rates, ceilings and bursts.
    No frame crosses OVS."""
    FLAVOURS[flavour].skip_if("OVS_CHECK_TC_QDISC")
    t: Traffic = system_traffic(flavour)
    for tap in ("ovs-tap0", "ovs-tap1"):
        t.ip("tuntap", "add", tap, "mode", "tap")
    for tap in ("ovs-tap0", "ovs-tap1"):
        t.run(["ethtool", "-s", tap, "speed", "5000", "duplex", "full"])
        t.ip("link", "set", "dev", tap, "up")
    for tap in ("ovs-tap0", "ovs-tap1"):
        t.sb.vsctl("add-port", "br0", tap, "--", "set", "int", tap, "type=tap")
    tc(t, "qdisc", "add", "dev", "ovs-tap1", "root", "noqueue")
    assert "noqueue" in tc(t, "qdisc", "show", "dev", "ovs-tap1")
    t.sb.vsctl("--", "--id=@queue0", "create", "queue", "other_config:min-rate=2000000",
               "other_config:max-rate=3000000", "other_config:burst=3000000",
               "--", "--id=@queue1", "create", "queue", "other_config:min-rate=4000000",
               "other_config:burst=4000000",
               "--", "--id=@qos", "create", "qos", "type=linux-htb", "queues:0=@queue0",
               "queues:1=@queue1", "--",
               "--", "set", "port", "ovs-tap0", "qos=@qos", "--", "set", "port", "ovs-tap1",
               "qos=@qos")
    wait_htb(t, "ovs-tap0", "ovs-tap1")
    for tap in ("ovs-tap0", "ovs-tap1"):
        htb_class(t, tap, "rate 2Mbit ceil 3Mbit burst 3.....b cburst 3.....b")
        htb_class(t, tap, "rate 4Mbit ceil 5Gbit burst 5.....b cburst 5.....b")


@FLAVOUR
@upstream("QoS - 64bit")
def test_qos_64bit(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """A linux-htb QoS whose rates need 64 bits (> 34 Gb/s) on both veths:
    htb classes at 40 Gbit, ceiling 50 Gbit.  No frame crosses OVS."""
    FLAVOURS[flavour].skip_if("OVS_CHECK_TC_QDISC")
    t: Traffic = system_traffic(flavour)
    two_ports(t, "10.1.1.1/24", "10.1.1.2/24")
    t.sb.vsctl("set", "port", "ovs-p0", "qos=@qos", "--", "set", "port", "ovs-p1", "qos=@qos",
               "--", "--id=@qos", "create", "qos", "type=linux-htb",
               "other-config:max-rate=50000000000", "queues:0=@queue",
               "--", "--id=@queue", "create", "queue", "other_config:min-rate=40000000000",
               "other_config:max-rate=50000000000", "other_config:burst=5000000")
    wait_htb(t, "ovs-p0", "ovs-p1")
    for dev in ("ovs-p0", "ovs-p1"):
        htb_class(t, dev, "rate 40Gbit ceil 50Gbit burst 6.....b cburst 6.....b")


@FLAVOUR
@upstream("Ingress Policing - 64-bit")
@pytest.mark.requires(kernel="tc-police")
def test_ingress_policing_64bit(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """Ingress policing at 50 Gb/s (a rate that needs 64 bits) with a 400000
    kbit burst on a veth: its ingress filter (matchall, or basic where the
    kernel has no matchall) polices at 50Gbit with upstream's burst.  No
    frame crosses OVS."""
    FLAVOURS[flavour].skip_if("OVS_CHECK_TC_QDISC")
    t: Traffic = system_traffic(flavour)
    ns0 = t.add_namespace("ns0")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.sb.vsctl("set", "interface", "ovs-p0", "ingress_policing_rate=50000000")
    t.sb.vsctl("set", "interface", "ovs-p0", "ingress_policing_burst=400000")
    shown = tc(t, "-o", "-s", "-d", "filter", "show", "dev", "ovs-p0", "ingress")
    # sed -n 's/.*\(rate N burst N\).*/\1/; T; p; q': the first line's last such pair.
    first = next((m.group(1) for m in (re.match(r".*(rate [0-9]*[a-zA-Z]* burst [0-9]*[a-zA-Z]*)",
                                                ln) for ln in shown.splitlines()) if m), "")
    assert re.search(r"rate 50Gbit burst 7.......b", first), \
        f"tc filter show dev ovs-p0 ingress: no 'rate 50Gbit burst 7.......b' in {first!r}:\n{shown}"
    shown = tc(t, "-s", "-d", "filter", "show", "dev", "ovs-p0", "ingress")
    assert re.search(r"basic|matchall", shown), shown


UFID_GROUPS = ("group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,"
               "actions=ct(commit,table=2)\n")
UFID_FLOWS = ("table=0,arp,actions=NORMAL\n"
              "table=0,priority=100,cookie=0x1234abcd,in_port=patch1,ip,nw_dst=10.0.0.2,"
              "actions=resubmit(,4)\n"
              "table=0,priority=100,cookie=0x12345678,in_port=ovs-p1,ip,nw_dst=10.0.0.2,"
              "actions=resubmit(,1)\n"
              "table=0,priority=100,cookie=0xabcedf,in_port=ovs-p2,ip,nw_dst=10.0.0.1,"
              "actions=ct(table=3)\n"
              "table=1,priority=200,ip,actions=group:1\n"
              "table=2,ip,actions=ovs-p2,patch1\n"
              "table=3,ip,actions=ovs-p1\n"
              "table=4,ip,actions=drop\n")
UFID_FLOWS1 = ("table=0,arp,actions=drop\n"
               "table=0,actions=clone(resubmit(,1)),resubmit(,2)\n"
               "table=1,ip,actions=set_field:10.0.0.3->nw_dst,in_port\n"
               "table=2,ip,actions=in_port\n")
UFID_DUMP = (
    "recirc_id(<recirc>),in_port(ovs-p1),eth_type(0x0800),ipv4(dst=10.0.0.2,frag=no), "
    "packets:0, bytes:0, used:0.0s, actions:hash(l4(0)),recirc(<recirc>)\n"
    "recirc_id(<recirc>),in_port(ovs-p1),eth_type(0x0800),ipv4(dst=10.0.0.2,proto=1,frag=no), "
    "packets:0, bytes:0, used:0.0s, actions:ovs-p2\n"
    "recirc_id(<recirc>),in_port(ovs-p1),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, "
    "used:0.0s, actions:ct(commit),recirc(<recirc>)\n"
    "recirc_id(<recirc>),in_port(ovs-p2),eth_type(0x0800),ipv4(dst=10.0.0.1,frag=no), "
    "packets:0, bytes:0, used:0.0s, actions:ct,recirc(<recirc>)\n"
    "recirc_id(<recirc>),in_port(ovs-p2),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, "
    "used:0.0s, actions:ovs-p1\n")
# (dpctl/dump-flows -m filter, a line it must contain, what ofproto/detrace says)
DETRACES = (
    ("recirc_id(0),in_port(ovs-p1),ipv4", "",
     "br0\n"
     "  cookie=0x12345678, n_packets=3, n_bytes=294, priority=100,ip,in_port=1,nw_dst=10.0.0.2,"
     "actions=resubmit(,1)\n"
     "  table_id=1, n_packets=3, n_bytes=294, priority=200,ip,actions=group:1\n"),
    ("in_port(ovs-p1),ipv4", "ct(commit)",
     "br0\n"
     "  group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,"
     "actions=ct(commit,table=2)\n"),
    ("in_port(ovs-p1),ipv4", "actions:ovs-p2",
     "br0\n"
     "  table_id=2, n_packets=3, n_bytes=294, ip,actions=output:2,output:3\n"
     "br1\n"
     "  n_packets=3, n_bytes=294, ,actions=clone(resubmit(,1)),resubmit(,2)\n"
     "  table_id=1, n_packets=3, n_bytes=294, ip,actions=mod_nw_dst:10.0.0.3,IN_PORT\n"
     "br0\n"
     "  table_id=0, no match\n"
     "  table_id=254, priority=0,reg0=0x2,actions=drop\n"
     "br1\n"
     "  table_id=2, n_packets=3, n_bytes=294, ip,actions=IN_PORT\n"
     "br0\n"
     "  cookie=0x1234abcd, n_packets=3, n_bytes=294, priority=100,ip,in_port=3,"
     "nw_dst=10.0.0.2,actions=resubmit(,4)\n"
     "  table_id=4, n_packets=3, n_bytes=294, ip,actions=drop\n"),
    ("recirc_id(0),in_port(ovs-p2),ipv4", "ct,",
     "br0\n"
     "  cookie=0xabcedf, n_packets=3, n_bytes=294, priority=100,ip,in_port=2,nw_dst=10.0.0.1,"
     "actions=ct(table=3)\n"),
    ("in_port(ovs-p2),ipv4", "actions:ovs-p1",
     "br0\n"
     "  table_id=3, n_packets=3, n_bytes=294, ip,actions=output:1\n"),
)


@FLAVOUR
@upstream("datapath - Dump OF rules corresponding to UFID")
def test_dump_of_rules_for_ufid(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """br0 and br1 joined by patch ports; pings from at_ns0 go through a
    dp_hash select group into ct(commit) and out to at_ns1 and, through the
    patch, into br1's clone and resubmits back to br0's drop; the replies
    through ct back to at_ns0.  With the revalidators paused after an
    unrelated rule change filled their caches, the datapath flows are
    upstream's five, and `ofproto/detrace` of each one's UFID lists the
    OpenFlow rules and group (with their counters) that made it.  Judged:
    every frame between the namespaces crosses unchanged (ct only tracks)."""
    t: Traffic = system_traffic(flavour, (
        *Traffic.br_args("br1"), "--", "add-port", "br0", "patch1", "--", "set", "interface",
        "patch1", "type=patch", "options:peer=patch0", "ofport_request=3", "--", "add-port",
        "br1", "patch0", "--", "set", "interface", "patch0", "type=patch", "options:peer=patch1",
        "ofport_request=4"))
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p1", ns0, "br0", "10.0.0.1/24")
    t.add_veth("p2", ns1, "br0", "10.0.0.2/24")
    t.sb.vsctl("--", "set", "interface", "ovs-p1", "ofport_request=1", "--", "set",
               "interface", "ovs-p2", "ofport_request=2")
    files = {name: t.sb.rundir / name for name in ("groups.txt", "flows.txt", "flows1.txt")}
    for name, text in (("groups.txt", UFID_GROUPS), ("flows.txt", UFID_FLOWS),
                       ("flows1.txt", UFID_FLOWS1)):
        files[name].write_text(text)
    t.sb.ofctl("add-groups", "br0", str(files["groups.txt"]))
    t.sb.ofctl("add-flows", "br0", str(files["flows.txt"]))
    t.sb.ofctl("add-flows", "br1", str(files["flows1.txt"]))
    wire = through_br0(t, request, ns0, ns1, "p1", "p2")
    got = t.ping(ns0, "10.0.0.2", interval="0.1")
    assert got == "3 packets transmitted, 3 received, 0% packet loss, time 0ms\n", got
    t.sb.appctl("revalidator/wait")
    t.sb.ofctl("-OOpenFlow13", "add-flow", "br0", "table=15,ip,action=drop")
    t.sb.appctl("revalidator/wait")
    t.sb.appctl("revalidator/pause")
    # on_exit 'ovs-appctl revalidator/resume', for a case that stops before its own
    # resume.  Only once: a resume without a pause blocks ovs-vswitchd's main
    # thread for good (udpif_resume_revalidators() waits on the pause barrier).
    paused = [True]

    def resume() -> None:
        if paused.pop():
            t.sb.appctl("revalidator/resume")
        paused.append(False)
    t.env.cleanup.defer("revalidator/resume", resume)
    first = t.sb.appctl("dpctl/dump-flows").stdout.splitlines()[:1]
    core = re.search(r"-?[0-9]+$", first[0]) if first and "flow-dump from pmd" in first[0] \
        else None
    pmd_id = [f"pmd={core.group(0)}"] if core else []
    names = t.sb.appctl("dpctl/dump-flows", "--names").stdout
    text = strip_used(strip_stats(lines("\n".join(ln for ln in names.splitlines()
                                                  if "ipv4" in ln))))
    text = strip_recirc(strip_dp_hash(strip_duration(text))).replace(":never", ":0.0s")
    dump = "".join(sorted(strip_eth(strip_ptype(text)).splitlines(True)))
    assert dump == UFID_DUMP, f"dpctl/dump-flows --names: expected\n{UFID_DUMP}got\n{dump}"
    for flt, needle, want in DETRACES:
        listed = t.sb.appctl("dpctl/dump-flows", "-m", f"filter={flt}").stdout
        ufids = parse_ufid("".join(ln for ln in listed.splitlines(True) if needle in ln))
        assert len(ufids) == 1, f"dump-flows -m filter={flt} | grep {needle!r}: {ufids}\n{listed}"
        out = ofctl_strip(t.sb.appctl("ofproto/detrace", ufids[0], *pmd_id).stdout)
        out = re.sub(r"n_bytes=2(66|80),", "n_bytes=294,", out)
        out = re.sub(r"table_id=254, n_packets=[0-9]*, n_bytes=[0-9]*,", "table_id=254,", out)
        assert out == want, f"ofproto/detrace {ufids[0]} ({flt}): expected\n{want}got\n{out}"
    resume()
    assert wire.verify() >= 6

