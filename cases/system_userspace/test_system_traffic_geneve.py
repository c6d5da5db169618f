"""system-traffic.at's Geneve tests beyond the plain pings
(cases/system_userspace/test_system_traffic.py has those): the delete-flow regression, flow
resume with tun_metadata, a slow-path action's packet into a Geneve-over-IPv6
port, and one flow-based port bridging Geneve over IPv4 and IPv6.

Each keeps upstream's topology, flows, commands and checks.  The far end of
upstream's tunnels is the kernel's Geneve device (CONFIG_GENEVE): an id that
needs one to answer skips where the kernel has none, naming it.  The
slow_action test only captures what OVS sends towards the far end, so it runs
without the device (it makes upstream's where the kernel has it).

Beyond upstream: the slow_action packet is judged against the model's Geneve
push over IPv6 (datapath/model/tunnel.py, RFC 8926, RFC 8200 with the UDP
checksum vswitch.xml's default asks for over IPv6); the delete-flow
regression's overlay pings against the model both ways (fixtures/
kernel_peer.py WireCheck).  The flow-resume and flow-based bridging tests
check what upstream checks: their frames' tunnel metadata and per-flow tunnel
addresses are out of the judge's reach (it models one fixed tunnel port).
"""
from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends.kernel import tx_from_status
from datapath.backends.native_tunnel import Sniffer
from datapath.backends.netns import link_mac, mac_text
from datapath.model.actions import PushTunnel, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags, TxOffloads
from datapath.verdict import PortFrames, settle
from fixtures.records import record_for
from fixtures.system_userspace.kernel_peer import WireCheck, udp_src
from fixtures.system_userspace.system_traffic import (
    FLAVOUR,
    NOT_TSO_FLAVOUR,
    PING_OK,
    Traffic,
    underlay,
    upstream,
)
from fixtures.upstream_system import format_ping
from harness.control import run_tool
from harness.ifstatus import read_interface
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


def overlay_ping(t: Traffic, ns, dst: str, *opts: str) -> str:  # type: ignore[no-untyped-def]
    """ping -q -c 3 -i 0.3 OPTS DST | FORMAT_PING."""
    return format_ping(t.run(["ping", "-q", "-c", "3", "-i", "0.3", *opts, dst], ns,
                             timeout=60).stdout)


DELETE_FLOWS = ("priority=100,icmp actions=resubmit(,10)",
                "priority=0 actions=NORMAL",
                "table=10, priority=100, ip, actions=ct(table=20,zone=65520)",
                "table=20, priority=200, ip, ct_state=-new+trk, actions=resubmit(,30)",
                "table=20, priority=100, ip, ct_state=+new, actions=resubmit(,30)",
                "table=20, priority=50, ip, actions=DROP",
                "table=30, priority=100, ip, actions=ct(commit,table=40,zone=65520)",
                "table=40, actions=normal")


@FLAVOUR
@upstream("datapath - ping over geneve tunnel, delete flow regression")
@pytest.mark.requires(kernel="geneve")
def test_geneve_delete_flow_regression(system_traffic: Callable[..., Traffic],
                                       request: pytest.FixtureRequest, flavour: str) -> None:
    """ICMP through conntrack (zone 65520) over a Geneve tunnel to at_ns0's
    kernel device: the underlay and overlay pings answered; then, with the
    ct_state=+new flow deleted, a new ping (-w 2) must get nothing back (7
    sent, 0 received: its first request is a new connection again).  OVS's
    errors and warnings are allowed, as upstream's OVS_TRAFFIC_VSWITCHD_STOP
    does.  Beyond: the first overlay pings' frames against the model both
    ways."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f + "\n" for f in DELETE_FLOWS))
    t.sb.ofctl("add-flows", "br0", str(flows))
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    t.sb.allow_log(r"\|ERR\|", r"\|WARN\|")
    ns = underlay(t, False)
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("geneve", "ns_gnv0", ns, "172.31.1.100", "10.1.1.1/24", ("vni", "0"))
    t.check_ping(ns, "172.31.1.100")
    wire = WireCheck.start(t, request, "geneve", ns, csum=None)
    t.check_ping(ns, "10.1.1.100")
    wire.verify()
    t.sb.ofctl("del-flows", "br0", "ct_state=+new")
    got = overlay_ping(t, ns, "10.1.1.100", "-w", "2")
    assert got == "7 packets transmitted, 0 received, 100% packet loss, time 0ms\n", got


TLV_FLOWS = ("table=0, arp action=NORMAL",
             "table=0, in_port=LOCAL icmp action=output:at_gnv0",
             "table=0, in_port=at_gnv0 icmp action=set_field:0xa->tun_metadata0,resubmit(,1)",
             "table=1, icmp action=controller(pause), resubmit(,2)",
             "table=2, tun_metadata0=0xa, icmp action=output:LOCAL")


@FLAVOUR
@upstream("datapath - flow resume with geneve tun_metadata")
@pytest.mark.requires(kernel="geneve")
def test_geneve_flow_resume_tun_metadata(system_traffic: Callable[..., Traffic],
                                         flavour: str) -> None:
    """Each ICMP packet from the Geneve tunnel gets tun_metadata0=0xa, is
    paused to the controller (`ovs-ofctl monitor br0 resume` resumes it) and
    must still match tun_metadata0=0xa after the resume: upstream's 3 pings
    answered.  Then, under a continuous ping, three more TLV mappings are
    added; upstream sleeps a second after each and only asks that vswitchd
    survives (its log is clean at the end).  Here each wait is for the
    continuous ping to get another answer after the change: a resumed packet
    restored its frozen state under the new TLV map."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay")
    monitor = t.env.spawn("ovs-ofctl monitor br0 resume",
                          [t.sb.install.tool("ovs-ofctl"), "monitor", "br0", "resume",
                           "--no-chdir", "--pidfile"], None, cwd=t.sb.rundir, env=t.sb.env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    ns = underlay(t, False)
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("geneve", "ns_gnv0", ns, "172.31.1.100", "10.1.1.1/24", ("vni", "0"))
    t.sb.ofctl("add-tlv-map", "br0", "{class=0xffff,type=0,len=4}->tun_metadata0")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f + "\n" for f in TLV_FLOWS))
    t.sb.ofctl("add-flows", "br0", str(flows))
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    got = format_ping(t.run(["ping", "-q", "-c", "3", "10.1.1.100"], ns, timeout=60).stdout)
    assert got == PING_OK, got
    out = t.sb.rundir / "ping0.out"
    t.daemonize("ping 10.1.1.100", ["ping", "10.1.1.100"], ns, out)

    def replies() -> int:
        return len(re.findall(r"bytes from 10\.1\.1\.100", out.read_text()))
    for n, (kind, slot) in enumerate((("0x88", 1), ("0x99", 2), ("0xaa", 3))):
        t.sb.ofctl("add-tlv-map", "br0",
                   f"{{class=0xffff,type={kind},len=4}}->tun_metadata{slot}")
        seen = replies()
        wait_until(lambda seen=seen: replies() > seen, 10,  # type: ignore[misc]
                   what=f"the continuous ping to get an answer after TLV map change {n + 1}")
    # OVS_APP_EXIT_AND_WAIT([ovs-ofctl])
    ctl = t.sb.rundir / f"ovs-ofctl.{monitor.pid}.ctl"
    run_tool([t.sb.install.tool("ovs-appctl"), "-t", str(ctl), "exit"], t.sb.env,
             str(t.sb.rundir), 10, t.sb.transcript)
    try:
        monitor.wait(10)
    except subprocess.TimeoutExpired:
        monitor.send_signal(signal.SIGKILL)
        monitor.wait()
        pytest.fail("ovs-ofctl monitor did not exit on ovs-appctl exit")


SLOW_PACKET = ("fffffffffffffa163e949d8008060001080006040001fa163e949d80c0a820300000000000000a"
               "0000fe")
SLOW_PATTERN = re.compile(
    r"^[0-9a-f]{24}86dd60000000003a1140fc000000000000000000000000000100fc0000000000000000000"
    r"00000000001[0-9a-f]{4}17c1003a[0-9a-f]{4}0000655800000000fffffffffffffa163e949d800806"
    r"0001080006040001[0-9a-f]{12}0a0000f40000000000000a0000fe$")


@FLAVOUR
@upstream("datapath - slow_action on geneve6 tunnel")
@pytest.mark.requires(kernel_optional="geneve6")
def test_slow_action_on_geneve6(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """A controller packet-out of an ARP request whose sender address a
    move from xxreg0 (reg1 = 10.0.0.244) rewrites, then resubmit to table 37,
    which outputs to the Geneve-over-IPv6 port: the move makes it a
    slow-path action.  Upstream's check: tcpdump on at_ns0's p0 captures it
    as upstream's pattern has it (IPv6 fc00::100 -> fc00::1, UDP to 6081,
    Geneve VNI 0 carrying the ARP with sender 10.0.0.244).  Beyond: the frame
    is the model's Geneve push over IPv6 of the rewritten ARP (the UDP source
    port is OVS's hash: the captured one is used).  The capture does not need
    at_ns0's Geneve device; where the kernel has one, upstream's is made."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay")
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    ns = underlay(t, True)
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "fc00::1", "10.1.1.100/24", v6=True)
    if t.has("geneve6"):
        t.add_native_tunnel("geneve6", "ns_gnv0", ns, "fc00::100", "10.1.1.1/24",
                            ("vni", "0", "udp6zerocsumtx", "udp6zerocsumrx"), v6=True)
    t.sb.ofctl("add-flow", "br0", "table=37,actions=at_gnv0")
    t.wait_ping6(ns, "fc00::100")
    t.check_ping(ns, "fc00::100", six=True)
    pcap, err = t.sb.rundir / "p0.pcap", t.sb.rundir / "tcpdump_err"
    t.daemonize("tcpdump", ["sh", "-c", f"exec tcpdump -n -U -i p0 -w {pcap} 2>{err}"], ns,
                t.sb.rundir / "tcpdump.out")
    wait_until(lambda: err.exists() and "listening" in err.read_text(), 10,
               what="tcpdump to listen on p0")
    p0 = Sniffer(ns, "p0")
    t.env.cleanup.defer("close the p0 capture", p0.close)
    t.sb.ofctl("-O", "OpenFlow15", "packet-out", "br0",
               f"in_port=controller packet={SLOW_PACKET} actions=set_field:0xa0000f4->reg1,"
               "move:NXM_NX_XXREG0[64..95]->NXM_OF_ARP_SPA[],resubmit(,37)")

    def matching() -> list[str]:
        dump = t.run(["ovs-pcap", str(pcap)]).stdout
        return [line for line in dump.splitlines() if SLOW_PATTERN.match(line.strip())]
    wait_until(lambda: bool(matching()), 10, what="ovs-pcap p0.pcap to show upstream's pattern")
    # Beyond: the frame on the wire against the model.
    inner = bytearray.fromhex(SLOW_PACKET)
    inner[28:32] = bytes.fromhex("0a0000f4")  # move: reg1 -> arp_spa
    macs = mac_text(link_mac(t.host, "br-underlay")), mac_text(link_mac(ns, "p0"))
    tx = TxOffloads(tx_from_status(read_interface(t.sb, "ovs-p0").status)[0].advertised)

    def read() -> list[PortFrames]:
        p0.read()
        got = [c.frame for c in p0.frames
               if not c.outgoing and SLOW_PATTERN.match(c.frame.hex())]
        ports = [p for p in map(udp_src, got) if p is not None] or [0]
        spec = TunnelSpec("geneve", "fc00::100", "fc00::1", *macs, key=None, csum=None,
                          udp_src=ports[0])
        expected = model.forward(bytes(inner), [PushTunnel(spec, "at_gnv0"), output("p0")], tx,
                                 RxFlags())
        return [PortFrames("p0", expected, got, sent=[bytes(inner)], rx_port="controller")]
    settle(record_for(request.node).steps, read, title="packet-out -> table 37 -> at_gnv0 -> p0",
           ordered=False, second_opinion=request.getfixturevalue("second_opinion"),
           what="the Geneve frame on p0 to agree with the model").check()


FLOW_BASED = (
    "in_port=at_gnv0,tun_id=4,actions=load:0->tun_src,load:0->tun_dst,set_field:fc00::100->"
    "tun_ipv6_src,set_field:fc00::1->tun_ipv6_dst,set_field:6->tun_id,output:in_port",
    "in_port=at_gnv0,tun_id=6,actions=load:0->tun_ipv6_src,load:0->tun_ipv6_dst,set_field:"
    "172.31.1.100->tun_src,set_field:172.31.1.1->tun_dst,set_field:4->tun_id,output:in_port")


@NOT_TSO_FLAVOUR
@upstream("datapath - bridging IPv4 and IPv6 flow based geneve tunnels")
@pytest.mark.requires(kernel=("geneve", "geneve6"))
def test_bridging_ipv4_ipv6_flow_based_geneve(system_traffic: Callable[..., Traffic],
                                              flavour: str) -> None:
    """One flow-based Geneve port (remote_ip, local_ip and key from the flow)
    bridges at_ns0's Geneve over IPv4 (VNI 4) and at_ns1's over IPv6 (VNI 6):
    each flow rewrites the tunnel addresses and VNI to the other side and
    outputs back to in_port.  Upstream's underlay pings and overlay pings of
    56, 1600 and 3200 bytes from at_ns0 to at_ns1, all answered, and six used
    IPv4 tunnel datapath flows (3 fragment kinds each way).  Every flavour but
    tso: upstream's OVS_CHECK_TUNNEL_TSO skips it in check-system-tso."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay-0")
    t.add_br("br-underlay-1")
    ns0 = underlay(t, False, bridge="br-underlay-0")
    ns1 = underlay(t, True, "fc00::1/64", "fc00::100/64", bridge="br-underlay-1", port="p1",
                   ns_name="at_ns1")
    t.add_ovs_tunnel("geneve", "br0", "at_gnv0", "flow", "10.1.1.100/24",
                     "options:local_ip=flow", "options:key=flow", v6=True)
    t.add_native_tunnel("geneve", "ns_gnv0", ns0, "172.31.1.100", "10.1.1.1/24", ("vni", "4"),
                        v6=True)
    t.add_native_tunnel("geneve6", "ns_gnv1", ns1, "fc00::100", "10.1.1.2/24",
                        ("vni", "6", "udp6zerocsumtx", "udp6zerocsumrx"), v6=True)
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f + "\n" for f in FLOW_BASED))
    t.sb.ofctl("-OOpenFlow15", "add-flows", "br0", str(flows))
    t.sb.ofctl("add-flow", "br-underlay-0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay-1", "actions=normal")
    t.wait_ping6(ns1, "fc00::100", 2)
    t.check_ping(ns0, "172.31.1.100")
    t.check_ping(ns1, "fc00::100", six=True)
    for size in (None, "1600", "3200"):
        t.check_ping(ns0, "10.1.1.2", *(["-s", size] if size else []))
    dump = t.sb.appctl("dpctl/dump-flows").stdout
    used = [ln for ln in dump.splitlines() if "packets:0" not in ln
            and "eth_type(0x0800)" in ln and "tun_id" in ln]
    assert len(used) == 6, f"{len(used)} used IPv4 tunnel flows, upstream wants 6:\n{dump}"
