"""system-traffic.at's "datapath - clone action" and "datapath - drop
action", as `make check-system-userspace` (and check-system-tso) run them.

The drop action's upstream check, an OVS_WAIT_UNTIL_EQUAL after the ping on
the IPv4 datapath flow, reads a flow whose `used:` shows a packet hit it.
Run after the ping, as upstream does, it read `used:never` in 1 of 3 calm
runs here: the flow dumped then had been installed by an upcall of one of
the last packets, and no packet came after it (the translation fails on the
resubmit limit; our reading, not verified flow by flow, is that the
revalidator removes such flows when it re-translates them, so a later packet
upcalls and installs a new one).  Once the ping is over, no
packet will ever hit that flow, so waiting cannot help.  Ours reads the dump
while the ping runs, which is when upstream's check can only become true,
and requires the same line; the ping's own verdict is checked when it ends.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest

from fixtures.system_userspace.system_l2 import Crossings, Rule, port_tx, switched
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import Result
from harness.filters import strip_eth, strip_ptype, strip_recirc, strip_stats, strip_used
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

CLONE_FLOWS = (
    "priority=1 actions=NORMAL",
    "priority=10 in_port=1,ip,actions=clone(mod_dl_dst(50:54:00:00:00:0a),"
    "set_field:192.168.3.3->ip_dst), output:2",
    "priority=10 in_port=2,ip,actions=clone(mod_dl_src(ae:c6:7e:54:8d:4d),"
    "mod_dl_dst(50:54:00:00:00:0b),set_field:192.168.4.4->ip_dst, controller), output:1")
CLONE_PACKET_IN = ("icmp,vlan_tci=0x0000,dl_src=ae:c6:7e:54:8d:4d,dl_dst=50:54:00:00:00:0b,"
                   "nw_src=10.1.1.2,nw_dst=192.168.4.4,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,"
                   "icmp_type=0,icmp_code=0 icmp_csum: <skip>\n")


def strip_monitor_csum(text: str) -> str:
    """STRIP_MONITOR_CSUM: grep "csum:" | sed 's/csum:.*/csum: <skip>/'."""
    return "".join(re.sub(r"csum:.*", "csum: <skip>", ln) + "\n"
                   for ln in text.splitlines() if "csum:" in ln)


@FLAVOUR
@upstream("datapath - clone action")
def test_clone_action(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                      flavour: str) -> None:
    """Upstream's flows: IP from port 1 is cloned with rewritten addresses (and
    the clone dropped), then output to 2; IP from port 2 is cloned with
    rewrites and sent to the controller, then output to 1.  A ping from
    at_ns0 must be answered 3 times out of 3, and ovs-ofctl monitor must show
    the three rewritten echo replies (upstream's STRIP_MONITOR_CSUM).  Beyond
    upstream: the frames that crossed both ways are the ones sent, unchanged
    (ovs-actions(7): clone works on a copy; the original's actions go on)."""
    from harness.ofmonitor import OfctlMonitor
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_namespace("at_ns2")  # ADD_NAMESPACES(at_ns0, at_ns1, at_ns2): unused by upstream too
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24")
    t.sb.vsctl("--", "set", "interface", "ovs-p0", "ofport_request=1", "--", "set",
               "interface", "ovs-p1", "ofport_request=2")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("".join(f"{f}\n" for f in CLONE_FLOWS))
    t.sb.ofctl("add-flows", "br0", str(flows))
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False),
             switched(port_tx(t, "ovs-p1")))
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "p1", True), (ns0, "p0", False),
             switched(port_tx(t, "ovs-p0")))
    with OfctlMonitor(t.sb, "br0", "65534", "invalid_ttl") as monitor:
        t.check_ping(ns0, "10.1.1.2")
        wait_until(lambda: strip_monitor_csum(monitor.text()).count("\n") >= 3, 10,
                   what="three packet-ins from ovs-ofctl monitor", describe=monitor.text)
        got = strip_monitor_csum(monitor.exit())
    assert got == CLONE_PACKET_IN * 3, f"ofctl_monitor.log: expected\n{CLONE_PACKET_IN * 3}" \
                                       f"got\n{got}"
    assert wire.verify() >= 6


DROP_DUMP = ("recirc_id(<recirc>),in_port(2),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, "
             "used:0.0s, actions:drop\n")


def ipv4_dump(t: Traffic) -> str:
    """dpctl/dump-flows | grep "eth_type(0x0800)" | strip_ptype | strip_eth |
    strip_recirc | strip_stats | strip_used | sort."""
    out = t.sb.appctl("dpctl/dump-flows").stdout
    text = "".join(ln + "\n" for ln in out.splitlines() if "eth_type(0x0800)" in ln)
    return "".join(sorted(strip_used(strip_stats(strip_recirc(strip_eth(strip_ptype(text)))))
                          .splitlines(True)))


@FLAVOUR
@upstream("datapath - drop action")
def test_drop_action(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """IPv4 from at_ns0 runs into a chain of rules that doubles its resubmits
    at each of 64 levels, past OVS's resubmit limit: the translation fails
    and the datapath flow drops (an explicit drop action, which the
    datapath probed; upstream skips otherwise).  The pings all go
    unanswered, and the datapath flow of at_ns0's IPv4 is `actions:drop`
    and was used.  Judged: ARP crosses as NORMAL output, IPv4 does not
    cross at all."""
    t: Traffic = system_traffic(flavour)
    if not t.sb.log.grep(r"Datapath supports explicit drop action"):
        pytest.skip("OVS_CHECK_DROP_ACTION: the datapath does not support explicit drop action")
    t.sb.allow_log(r"WARN")  # OVS_TRAFFIC_VSWITCHD_STOP(["/WARN/d"])
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text("priority=100, arp, actions=normal\n"
                     "priority=100, icmp6, actions=normal\n"
                     + "".join(f"priority=0, in_port={i}, actions=resubmit:{i + 1}, "
                               f"resubmit:{i + 1}, local\n" for i in range(1, 65))
                     + "priority=0, in_port=65, actions=local\n")
    t.sb.ofctl("add-flows", "--bundle", "br0", str(flows))

    def arp_only(tx: str) -> Rule:
        normal = switched(port_tx(t, tx))
        return lambda c: normal(c) if c.frame[12:14] == b"\x08\x06" else []
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False),
             arp_only("ovs-p1"))
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "p1", True), (ns0, "p0", False),
             arp_only("ovs-p0"))
    done: list[Result] = []
    pinger = threading.Thread(target=lambda: done.append(t.run(
        ["ping", "-q", "-c", "10", "-i", "0.1", "-w", "2", "10.1.1.2"], ns0,
        rc=None)))  # its exit (1) is judged below, out of the thread
    pinger.start()
    dumps: list[str] = []

    def used_or_over() -> bool:
        dumps.append(ipv4_dump(t))
        return dumps[-1] == DROP_DUMP or not pinger.is_alive()
    try:
        # OVS_WAIT_UNTIL_EQUAL on the dump, read while the traffic that can make it
        # true runs (the module docstring says why not after it).
        wait_until(used_or_over, 10, what="the IPv4 drop flow, used")
    finally:
        pinger.join()
    assert DROP_DUMP in dumps, (f"dpctl/dump-flows while the ping ran: expected\n{DROP_DUMP}"
                                f"got, last\n{dumps[-1] if dumps else '(no dump)'}")
    assert done and done[0].rc == 1, f"ping through the drop flow: expected exit 1\n{done}"
    assert wire.verify() >= 2
