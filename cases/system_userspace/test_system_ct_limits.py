"""system-traffic.at's conntrack tests of the connection table's limits
(dpctl/ct-*-limits, ovs-vsctl set-zone-limit) and of a flush by port, and
ours: a NAT commit the tracker refuses (a zone limit, the connection limit, a
range without a free mapping), from a host on a veth.

Each reproduction keeps upstream's namespaces, flow tables, traffic (curl
against Python's http.server as upstream's test-l7.py, ping, nc,
packet-outs) and checks, and runs in both flavours (userspace and tso).
Beyond upstream, every frame that crosses OVS is judged where the model
reaches: the test's flow table runs through the model's connection tracker
and NAT (fixtures/system_userspace/system_ct.py's CtWire); a choice OVS makes (a NAT range's
address and port, a select group's bucket) is read from the dump, checked
to be one the flows allow, and pinned for the model.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
from scapy.layers.inet import IP
from scapy.layers.inet import UDP as UDPH
from scapy.layers.l2 import Ether

from datapath.backends.netns import KernelSide
from datapath.model.conntrack import Ct
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, ct_ports
from fixtures.system_userspace.system_ct_nat import (
    IPV4,
    UDP,
    Out,
    compose,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import check
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


@FLAVOUR
@upstream("conntrack - Flush many conntrack entries by port")
def test_flush_many_entries_by_port(system_traffic: Callable[..., Traffic],
                                    request: pytest.FixtureRequest, flavour: str) -> None:
    """21 UDP packets by packet-out from port 1 (source port 1 to ports 1-20,
    and source port 2 to port 1), each committed in zone 1: the dump lists
    the 21; a flush by ct_nw_proto=17,ct_tp_src=1 leaves only the one from
    port 2.  Beyond upstream: the 21 datagrams that leave by ovs-p1, as the
    model's zone-1 commit forwards them."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=100,in_port=1,udp,action=ct(zone=1,commit),2"])

    def pipeline(a: Arrival) -> Out:
        if a.ofport == 1 and a.eth_type == IPV4 and a.ip_proto == UDP:
            return [("ovs-p1", [Ct(a.table, zone=1, commit=True)])]
        return []

    wire = CtWire(t, request, pipeline)
    wire.add("ovs-p0", ns0, "p0")
    wire.add("ovs-p1", ns1, "p1")
    l3 = ("eth_src=50:54:00:00:00:09,eth_dst=50:54:00:00:00:0a,dl_type=0x0800,"
          "nw_src=10.1.1.1,nw_dst=10.1.1.2,nw_proto=17,nw_ttl=64,nw_frag=no")
    for sport, dport in [*((1, i) for i in range(1, 21)), (2, 1)]:
        wire.packet_out("ovs-p0", compose(t, f"{l3}, udp_src={sport},udp_dst={dport}"),
                        in_port="1")

    def dump() -> str:
        out = t.sb.appctl("dpctl/dump-conntrack", "zone=1").stdout
        return "".join(sorted(f"{line}\n" for line in out.splitlines() if "src=10.1.1.1," in line))

    def entry(sport: int, dport: int) -> str:
        return (f"udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport={sport},dport={dport}),reply=("
                f"src=10.1.1.2,dst=10.1.1.1,sport={dport},dport={sport}),zone=1\n")
    expout = "".join(sorted([*(entry(1, i) for i in range(1, 21)), entry(2, 1)]))
    assert dump() == expout, dump()
    t.sb.appctl("dpctl/flush-conntrack", "zone=1", "ct_nw_proto=17,ct_tp_src=1")
    wire.event("dpctl/flush-conntrack zone=1 ct_nw_proto=17,ct_tp_src=1",
               lambda w: w.table.conns.__setitem__(slice(None), [
                   c for c in w.table.conns
                   if not (c.zone == 1 and c.orig.proto == UDP and c.orig.sport == 1)]))
    assert dump() == entry(2, 1), dump()
    assert wire.verify() >= 21


def appctl_fails(t: Traffic, args: list[str], stderr: str) -> None:
    """AT_CHECK([ovs-appctl ARGS], [2], [ignore], [stderr]) (the ovs-appctl binary:
    its own error line is part of the check)."""
    check(t.sb.appctl_tool(*args, rc=2), stderr=stderr)


def get_limits(t: Traffic, *args: str) -> str:
    """ovs-appctl dpctl/ct-get-limits [args]."""
    return t.sb.appctl("dpctl/ct-get-limits", *args).stdout


def check_limits(t: Traffic, expected: str, *args: str) -> None:
    """AT_CHECK([ovs-appctl dpctl/ct-get-limits ARGS], [0], [expected])."""
    got = get_limits(t, *args)
    assert got == expected, f"dpctl/ct-get-limits {' '.join(args)}: expected\n{expected}got\n{got}"


def wait_limits(t: Traffic, expected: str) -> None:
    """OVS_WAIT_UNTIL_EQUAL([ovs-appctl dpctl/ct-get-limits], [expected])."""
    wait_until(lambda: get_limits(t) == expected, 10,
               what=f"dpctl/ct-get-limits to read\n{expected}", describe=lambda: get_limits(t))


@FLAVOUR
@upstream("conntrack - limit by zone")
def test_limit_by_zone(system_traffic: Callable[..., Traffic], flavour: str) -> None:
    """Upstream's sequence on dpctl/ct-set-limits, ct-get-limits and
    ct-del-limits (out-of-range values refused, the default and per-zone
    limits, the counts of committed UDP connections from packet-outs that
    stop at the limit), then the limits set through the database (ovs-vsctl
    set-zone-limit), which dpctl may no longer change.  Every output exact, as
    upstream.  The model has no connection limits: which packet-out is the
    first over a limit is the limit's to decide, so no frame is judged here
    (the dumps check which connections were committed)."""
    t: Traffic = system_traffic(flavour)
    ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,udp,action=ct(zone=1,commit),2",
                  "priority=100,in_port=2,udp,action=ct(zone=3,commit),1"])
    t.sb.allow_log(r"could not create datapath", r"\(Cannot allocate memory\) on packet")
    err = "ovs-appctl: ovs-vswitchd: server returned an error\n"
    appctl_fails(t, ["dpctl/ct-set-limits", "default=-1"],
                 "ovs-vswitchd: invalid default limit (Invalid argument)\n" + err)
    appctl_fails(t, ["dpctl/ct-set-limits", "default=4294967296"],
                 "ovs-vswitchd: invalid default limit (Invalid argument)\n" + err)
    appctl_fails(t, ["dpctl/ct-set-limits", "zone=1,limit=-1"],
                 "ovs-vswitchd: failed to parse field limit (Invalid argument)\n" + err)
    appctl_fails(t, ["dpctl/ct-set-limits", "zone=1,limit=4294967296"],
                 "ovs-vswitchd: failed to parse field limit (Invalid argument)\n" + err)
    check_limits(t, "default limit=0\n")

    def udp(src: int, dst: int, port: int) -> str:
        """UDP_PKT(src, dst, port)."""
        return (f"eth_src=50:54:00:00:00:0{src},eth_dst=50:54:00:00:00:0{dst},dl_type=0x0800,"
                f"nw_src=10.1.1.{src},nw_dst=10.1.1.{dst},nw_proto=17,nw_ttl=64,nw_frag=no,"
                f"udp_src=1,udp_dst={port}")

    def send(in_port: int, src: int, dst: int, ports: range) -> None:
        for i in ports:
            pkt = t.run(["ovs-ofctl", "compose-packet", "--bare", udp(src, dst, i)])
            t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0",
                       f"in_port={in_port} packet={pkt.stdout.strip()} "
                       "actions=resubmit(,0)")

    def conns(src: str) -> str:
        out = t.sb.appctl("dpctl/dump-conntrack").stdout
        return "".join(sorted(f"{line}\n" for line in out.splitlines()
                              if f"orig=(src={src}," in line))

    def udp_conn(src: int, dst: int, port: int, zone: int) -> str:
        return (f"udp,orig=(src=10.1.1.{src},dst=10.1.1.{dst},sport=1,dport={port}),reply=(src="
                f"10.1.1.{dst},dst=10.1.1.{src},sport={port},dport=1),zone={zone}\n")

    t.sb.appctl("dpctl/ct-set-limits", "zone=1,limit=0")
    send(1, 1, 2, range(2, 3))
    check_limits(t, "default limit=0\nzone=1,limit=0,count=0\n")
    t.sb.appctl("dpctl/ct-del-limits", "zone=1")
    t.sb.appctl("dpctl/ct-set-limits", "default=3")
    check_limits(t, "default limit=3\n")
    send(1, 1, 2, range(2, 7))
    check_limits(t, "default limit=3\nzone=1,limit=3,count=3\n", "zone=1")
    send(2, 3, 4, range(2, 7))
    check_limits(t, "default limit=3\nzone=1,limit=3,count=3\nzone=3,limit=3,count=3\n",
                 "zone=1,3")
    t.sb.appctl("dpctl/flush-conntrack")
    t.sb.appctl("dpctl/ct-set-limits", "default=10", "zone=1,limit=5", "zone=2,limit=3",
                "zone=3,limit=3", "zone=4,limit=15")
    t.sb.appctl("dpctl/ct-del-limits", "zone=2,4,5")
    check_limits(t, "default limit=10\nzone=1,limit=5,count=0\nzone=2,limit=10,count=0\n"
                 "zone=3,limit=3,count=0\nzone=4,limit=10,count=0\n", "zone=1,2,3,4")
    send(1, 1, 2, range(2, 11))
    check_limits(t, "default limit=10\nzone=1,limit=5,count=5\nzone=2,limit=10,count=0\n"
                 "zone=3,limit=3,count=0\nzone=4,limit=10,count=0\nzone=5,limit=10,count=0\n",
                 "zone=1,2,3,4,5")
    check_limits(t, "default limit=10\nzone=1,limit=5,count=5\nzone=3,limit=3,count=0\n")
    assert conns("10.1.1.1") == "".join(udp_conn(1, 2, i, 1) for i in range(2, 7))
    send(2, 3, 4, range(2, 7))
    check_limits(t, "default limit=10\nzone=1,limit=5,count=5\nzone=3,limit=3,count=3\n",
                 "zone=1,3")
    assert conns("10.1.1.3") == "".join(udp_conn(3, 4, i, 3) for i in range(2, 5))
    t.sb.appctl("dpctl/ct-set-limits", "default=15", "zone=4,limit=4")
    check_limits(t, "default limit=15\nzone=4,limit=4,count=0\n", "zone=4")
    t.sb.appctl("dpctl/ct-del-limits", "default")
    check_limits(t, "default limit=0\nzone=4,limit=4,count=0\n", "zone=4")
    t.sb.appctl("dpctl/ct-set-limits", "default=15")
    check_limits(t, "default limit=15\nzone=4,limit=4,count=0\n", "zone=4")
    t.sb.appctl("dpctl/ct-del-limits", "default", "zone=4")
    check_limits(t, "default limit=0\nzone=4,limit=0,count=0\n", "zone=4")

    # VSCTL_ADD_DATAPATH_TABLE()
    t.sb.vsctl("--", "--id=@m", "create", "Datapath", "datapath_version=0", "--", "set",
               "Open_vSwitch", ".", 'datapaths:"netdev"=@m')
    t.sb.appctl("dpctl/flush-conntrack", "zone=1")
    t.sb.appctl("dpctl/flush-conntrack", "zone=3")
    t.sb.appctl("dpctl/ct-set-limits", "default=10")
    t.sb.appctl("dpctl/ct-del-limits", "zone=3")
    check_limits(t, "default limit=10\nzone=1,limit=5,count=0\n")
    t.sb.vsctl("set-zone-limit", "netdev", "1", "3")
    t.sb.vsctl("set-zone-limit", "netdev", "3", "3")
    wait_limits(t, "default limit=10\nzone=1,limit=3,count=0\nzone=3,limit=3,count=0\n")
    send(2, 3, 4, range(2, 7))
    assert conns("10.1.1.3") == "".join(udp_conn(3, 4, i, 3) for i in range(2, 5))
    check_limits(t, "default limit=10\nzone=1,limit=3,count=0\nzone=3,limit=3,count=3\n")
    t.sb.vsctl("del-zone-limit", "netdev", "3")
    wait_limits(t, "default limit=10\nzone=1,limit=3,count=0\n")
    t.sb.vsctl("set-zone-limit", "netdev", "default", "5")
    wait_limits(t, "default limit=5\nzone=1,limit=3,count=0\n")
    t.sb.vsctl("del-zone-limit", "netdev", "default")
    wait_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    db = ("ovs-vswitchd: the zone limits are set via database, use 'ovs-vsctl "
          "{}-zone-limit <...>' instead. (Operation not permitted)\n" + err)
    appctl_fails(t, ["dpctl/ct-set-limits", "default=15", "zone=3,limit=5", "zone=1,limit=5"],
                 db.format("set"))
    check_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    appctl_fails(t, ["dpctl/ct-del-limits", "zone=1"], db.format("del"))
    check_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    t.sb.vsctl("del-zone-limit", "netdev", "1")
    t.sb.vsctl("set-zone-limit", "netdev", "default", "10")
    check_limits(t, "default limit=10\n")
    appctl_fails(t, ["dpctl/ct-set-limits", "default=15", "zone=1,limit=5"], db.format("set"))
    t.sb.vsctl("del-zone-limit", "netdev", "default")
    t.sb.appctl("dpctl/ct-set-limits", "default=15", "zone=1,limit=5")
    check_limits(t, "default limit=15\nzone=1,limit=5,count=0\n")
    t.sb.appctl("dpctl/ct-del-limits", "zone=1")
    check_limits(t, "default limit=15\n")



NS0_MAC, NS1_MAC = "f2:00:00:00:00:01", "f2:00:00:00:00:02"
# How the tracker comes to refuse the second connection: the flows' nat, the
# set-up command, and the event that marks the refusal.
REFUSALS = {
    "zone_limit": ("nat(src=10.1.1.240)", ("dpctl/ct-set-limits", "zone=1,limit=1"),
                   "conntrack_zone_full"),
    "maxconns": ("nat(src=10.1.1.240)", ("dpctl/ct-set-maxconns", "1"), "conntrack_full"),
    "exhaustion": ("nat(src=10.1.1.240:34568)", (), ""),
}


@FLAVOUR
@pytest.mark.parametrize("why", list(REFUSALS))
def test_nat_commit_refused(system_traffic: Callable[..., Traffic],
                            request: pytest.FixtureRequest, flavour: str, why: str) -> None:
    """Ours: at_ns0 (a host on a veth) sends two UDP datagrams to at_ns1 from
    source ports 1001 and 1002, through in_port=1,udp
    actions=ct(commit,zone=1,nat(src=10.1.1.240[:34568])),2.  The first
    takes the one connection the tracker admits (the zone's limit of 1, a
    maximum of 1 connection, or the range's one mapping) and leaves
    translated; the tracker refuses the second's commit (the case waits for
    conntrack_zone_full, conntrack_full, or OVS's exhaustion warning).
    Judged by the model: the second has no NAT session, so it is dropped
    (RFC 5508 REQ-8): at_ns1 gets one datagram, from 10.1.1.240.  OVS 4.0.0
    forwards the second untranslated, from 10.1.1.1 (known bug
    ct-nat-untranslated)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NS0_MAC, ns=ns0)
    t.ip("link", "set", "dev", "p1", "address", NS1_MAC, ns=ns1)
    for addr in ("10.1.1.1", "10.1.1.240"):  # at_ns1's answers need no ARP
        t.ip("neigh", "replace", addr, "lladdr", NS0_MAC, "nud", "permanent", "dev", "p1",
             ns=ns1)
    nat_text, setup, event = REFUSALS[why]
    add_flows(t, ["priority=10,arp,action=normal",
                  f"priority=100,in_port=1,udp,action=ct(commit,zone=1,{nat_text}),2",
                  "priority=0,action=drop"])
    t.sb.allow_log(r"Unable to NAT due to tuple space exhaustion")

    wire = CtWire.on(t, request, [ns0, ns1])
    if setup:
        t.sb.appctl(*setup)
        if why == "zone_limit":
            wire.event(" ".join(setup), lambda w: w.table.limits.update({1: 1}))
        else:
            wire.event(" ".join(setup), lambda w: setattr(w.table, "max_conns", 1))
    host = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close at_ns0's sender", host.close)

    def datagram(sport: int) -> bytes:
        return bytes(Ether(src=NS0_MAC, dst=NS1_MAC) / IP(src="10.1.1.1", dst="10.1.1.2")
                     / UDPH(sport=sport, dport=9) / (b"x" * 32))
    host.send([datagram(1001)])
    wait_until(lambda: "sport=1001" in t.sb.appctl("dpctl/dump-conntrack").stdout, 10,
               what="the first datagram's connection to be committed")
    host.send([datagram(1002)])
    if event:
        wait_until(lambda: t.sb.coverage(event) >= 1, 10, what=f"coverage {event} >= 1",
                   describe=lambda: str(t.sb.coverage(event)))
    else:
        t.sb.log.wait(r"Unable to NAT due to tuple space exhaustion")
    assert wire.verify() >= 1
