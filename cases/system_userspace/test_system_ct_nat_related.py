"""system-traffic.at's conntrack tests of related ICMP and ICMPv6 errors
through NAT, IPv6 NAT over HTTP, and the same ICMP packet through ct twice.

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

import re
from collections.abc import Callable

import pytest

from datapath.backends.netns import KernelSide, Netns
from datapath.model.actions import Action
from datapath.model.conntrack import EST, NEW, REL, RPL, TRK, Ct, Nat
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports
from fixtures.system_userspace.system_ct_nat import (
    ICMP,
    ICMP6,
    IPV4,
    IPV6,
    NAT_MAC,
    RESPOND_F0,
    SNAT_RANGE,
    UDP,
    XX,
    Out,
    arp_responder_flows,
    check_ct_xx,
    check_flows,
    check_no_bad_checksum,
    compose,
    flows_file,
    grep_ct,
    nat_choices,
    nc_udp,
    pcap_hex,
    pin,
    start_tcpdump,
    tcpdump_read,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream, wait_dad
from harness.filters import ofctl_strip
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


@FLAVOUR
@upstream("conntrack - ICMP related with NAT")
def test_icmp_related_with_nat(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """UDP from ns0 to a closed port of ns1, SNATed into 10.1.1.240-254 with
    ct_mark 1; ns1's port unreachable comes back +rel with the connection's
    mark, its outer and embedded headers translated back to 10.1.1.1.  The
    flow counters after revalidator/purge (exact, as upstream: one request,
    one error, three ARPs), the dump, and tcpdump on ovs-p0 finding no bad
    checksum.  Beyond upstream: the datagram and the error through the model
    (RFC 5508 4.2: the embedded header translated, every checksum patched)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    add_flows(t, ["in_port=1,udp,action=ct(commit,nat(src=10.1.1.240-10.1.1.254),"
                  "exec(set_field:1->ct_mark)),2",
                  "in_port=2,icmp,ct_state=-trk,action=ct(table=0,nat)",
                  "in_port=2,icmp,nw_dst=10.1.1.1,ct_state=+trk+rel,ct_mark=1,action=1",
                  *arp_responder_flows(RESPOND_F0), "priority=0,action=drop"])

    wire = CtWire.on(t, request, [ns0, ns1])
    pcap = start_tcpdump(t, *t.wire_of("p0"), "p0")  # upstream: tcpdump -i ovs-p0
    nc_udp(t, ns0, "10.1.1.2", "10000")
    wait_until(lambda: "unreachable" in tcpdump_read(t, pcap, "icmp"), 10,
               what="ns1's port unreachable to reach ovs-p0")
    t.sb.appctl("revalidator/purge")
    check_flows(t, ofctl_strip, expected="""\
 n_packets=1, n_bytes=42, priority=10,arp actions=NORMAL
 n_packets=1, n_bytes=44, udp,in_port=1 actions=ct(commit,nat(src=10.1.1.240-10.1.1.254),exec(set_field:0x1->ct_mark)),output:2
 n_packets=1, n_bytes=72, ct_state=+rel+trk,ct_mark=0x1,icmp,in_port=2,nw_dst=10.1.1.1 actions=output:1
 n_packets=1, n_bytes=72, ct_state=-trk,icmp,in_port=2 actions=ct(table=0,nat)
 n_packets=2, n_bytes=84, priority=100,arp,arp_op=1 actions=move:NXM_OF_ARP_TPA[]->NXM_NX_REG2[],resubmit(,8),goto_table:10
 table=10, n_packets=1, n_bytes=42, priority=10,arp,arp_op=1 actions=set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:OXM_OF_PKT_REG0[0..47]->NXM_NX_ARP_SHA[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],move:NXM_NX_REG2[]->NXM_OF_ARP_SPA[],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],move:OXM_OF_PKT_REG0[0..47]->NXM_OF_ETH_SRC[],move:NXM_OF_IN_PORT[]->NXM_NX_REG3[0..15],set_field:0->in_port,output:NXM_NX_REG3[0..15]
 table=10, n_packets=1, n_bytes=42, priority=100,arp,reg0=0,reg1=0 actions=NORMAL
 table=8, n_packets=1, n_bytes=42, priority=0 actions=set_field:0->xreg0
 table=8, n_packets=1, n_bytes=42, reg2=0xa0101f0/0xfffffff0 actions=set_field:0x808888888888->xreg0
OFPST_FLOW reply (OF1.5):
""")  # noqa: E501
    check_ct_xx(t, "10.1.1.2", "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,"
                f"dport=<cleared>),reply=(src=10.1.1.2,dst={XX},sport=<cleared>,"
                "dport=<cleared>),mark=1\n", dedup=False)
    check_no_bad_checksum(t, pcap, "icmp")
    chosen = nat_choices(t, SNAT_RANGE)
    wire.pin(0, chosen)
    assert wire.verify() >= 3


def v6_ports(t: Traffic) -> tuple[Netns, Netns]:
    """ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH(p0/p1, ..., "fc00::1|2/96")
    (with duplicate address detection, as upstream here), and DAD over: until
    then the kernel sends from the link-local address (RFC 4862 §5.4), and a
    connection from it is not the one upstream's dump expects."""
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96")
    t.add_veth("p1", ns1, "br0", "fc00::2/96")
    wait_dad(t, ns0, ns1)
    return ns0, ns1


def neigh(t: Traffic, ns: Netns, addr: str, lladdr: str, dev: str) -> None:
    """NS_CHECK_EXEC([ns], [ip -6 neigh add ADDR lladdr MAC dev DEV])."""
    t.ip("-6", "neigh", "add", addr, "lladdr", lladdr, "dev", dev, ns=ns)


@FLAVOUR
@upstream("conntrack - IPv6 HTTP with SNAT")
def test_ipv6_http_with_snat(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """All IPv6 from ns0 is committed with SNAT to fc00::240-fc00::241 (ns1
    knows those addresses at ns0's MAC); from ns1 only established replies
    (and neighbour solicitations for the NAT addresses, DNATed to ns0).  curl
    from ns0 gets the page; from ns1 it times out (28).  Beyond upstream: the
    pings and segments through the model, the NAT address OVS chose checked
    to be in the range (neighbour discovery, which the kernels send when they
    will, is not judged)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = v6_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    neigh(t, ns1, "fc00::240", NAT_MAC, "p1")
    neigh(t, ns1, "fc00::241", NAT_MAC, "p1")
    add_flows(t, ["priority=1,action=drop", "priority=10,icmp6,action=normal",
                  "priority=100,in_port=1,ip6,action=ct(commit,nat(src=fc00::240-fc00::241)),2",
                  "priority=100,in_port=2,ct_state=-trk,ip6,action=ct(nat,table=0)",
                  "priority=100,in_port=2,ct_state=+trk+est,ip6,action=1",
                  *(f"priority=200,in_port=2,ct_state=+trk+new,icmp6,icmpv6_code=0,"
                    f"icmpv6_type=135,nd_target={a},action=ct(commit,nat(dst=fc00::1)),1"
                    for a in ("fc00::240", "fc00::241"))])
    nat = Nat.of("src", "fc00::240-fc00::241")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV6:
            return []
        if a.ofport == 1:
            pin(a, 0, chosen)
            return [("ovs-p1", [Ct(a.table, commit=True, nat=nat)])]
        st = a.state(0, Nat()).state
        return [("ovs-p0" if st & TRK and st & EST else None, [Ct(a.table, nat=Nat())])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    t.wait_ping6(ns0, "fc00::2")
    start_http(t, ns1, six=True)
    check_http(t, ns0, "http://[fc00::2]")
    start_http(t, ns0, six=True)
    check_http(t, ns1, "http://[fc00::1]", rc=28)
    chosen = nat_choices(t, nat)
    wire.pin(0, chosen)
    assert chosen, "no connection was translated"
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - IPv6 HTTP with DNAT")
def test_ipv6_http_with_dnat(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0's IPv6 to fc00::240 is DNATed to ns1 (static neighbours both
    sides); only established replies come back.  Pings to fc00::240 are
    answered, curl gets the page; the dump shows the ICMPv6 and TCP
    connections.  Beyond upstream: every echo and segment through the model."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = v6_ports(t)
    t.ip("-6", "link", "set", "dev", "p0", "address", "80:88:88:88:88:77", ns=ns0)
    t.ip("-6", "link", "set", "dev", "p1", "address", NAT_MAC, ns=ns1)
    neigh(t, ns0, "fc00::240", NAT_MAC, "p0")
    neigh(t, ns1, "fc00::1", "80:88:88:88:88:77", "p1")
    add_flows(t, ["priority=100 in_port=1,ip6,ipv6_dst=fc00::240,"
                  "action=ct(zone=1,nat(dst=fc00::2),commit),2",
                  "priority=100 in_port=2,ct_state=-trk,ip6,action=ct(table=0,nat,zone=1)",
                  "priority=100 in_port=2,ct_state=+trk+est,ct_zone=1,ip6,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    t.wait_ping6(ns0, "fc00::240")
    t.check_ping(ns0, "fc00::240", six=True)
    start_http(t, ns1, six=True)
    check_http(t, ns0, "http://[fc00::240]")
    check_ct(t, "fc00::1", "icmpv6,orig=(src=fc00::1,dst=fc00::240,id=<cleared>,type=128,code=0),"
             "reply=(src=fc00::2,dst=fc00::1,id=<cleared>,type=129,code=0),zone=1\n"
             "tcp,orig=(src=fc00::1,dst=fc00::240,sport=<cleared>,dport=<cleared>),"
             "reply=(src=fc00::2,dst=fc00::1,sport=<cleared>,dport=<cleared>),zone=1,"
             "protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 16


@FLAVOUR
@upstream("conntrack - IPv6 ICMP6 Related with SNAT")
def test_ipv6_icmp6_related_with_snat(system_traffic: Callable[..., Traffic],
                                      request: pytest.FixtureRequest, flavour: str) -> None:
    """UDP from ns0 (routed via fc00::2) to a closed port of ns1 is SNATed to
    fc00::240; ns1's ICMPv6 port unreachable comes back +rel and is translated
    back.  The conntrack table is flushed first; tcpdump on ovs-p0 finds no
    bad checksum (once the error is there); the dump shows the UDP
    connection.  Beyond upstream: the datagram and the error through the model
    (RFC 5508 4.2; RFC 4443 2.3: the ICMPv6 checksum over the pseudo-header)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = v6_ports(t)
    t.ip("-6", "link", "set", "dev", "p0", "address", "80:88:88:88:88:77", ns=ns0)
    t.ip("-6", "link", "set", "dev", "p1", "address", NAT_MAC, ns=ns1)
    neigh(t, ns0, "fc00::2", NAT_MAC, "p0")
    neigh(t, ns0, "fc00::3", NAT_MAC, "p0")
    neigh(t, ns1, "fc00::240", "80:88:88:88:88:77", "p1")
    neigh(t, ns1, "fc00::1", "80:88:88:88:88:77", "p1")
    t.ip("-6", "route", "add", "default", "via", "fc00::2", ns=ns0)
    add_flows(t, ["priority=100 in_port=1,ip6,action=ct(nat(src=fc00::240),commit),2",
                  "priority=100 in_port=2,ct_state=-trk,ip6,action=ct(table=0,nat)",
                  "priority=100 in_port=2,ct_state=+trk+est,ip6,action=1",
                  "priority=100 in_port=2,ct_state=+trk+rel,ip6,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    t.wait_ping6(ns0, "fc00::2")
    t.sb.appctl("dpctl/flush-conntrack")
    wire.flushed()
    pcap = start_tcpdump(t, *t.wire_of("p0"), "p0")  # upstream: tcpdump -i ovs-p0
    nc_udp(t, ns0, "fc00::2", "1", six=True)
    wait_until(lambda: "unreachable" in tcpdump_read(t, pcap, "icmp6"), 10,
               what="ns1's port unreachable to reach ovs-p0")
    check_no_bad_checksum(t, pcap, "icmp6")
    check_ct(t, "fc00::2", "udp,orig=(src=fc00::1,dst=fc00::2,sport=<cleared>,dport=<cleared>),"
             "reply=(src=fc00::2,dst=fc00::240,sport=<cleared>,dport=<cleared>)\n")
    assert wire.verify() >= 4


@FLAVOUR
@upstream("conntrack - ICMPv6 related NAT with single port")
def test_icmpv6_related_nat_single_port(system_traffic: Callable[..., Traffic],
                                        request: pytest.FixtureRequest, flavour: str) -> None:
    """A UDP packet-out from ovs-p0 ([fc00::1]:1234 -> [fc00::240]:80) is
    DNATed to [fc00::2]:8080; a port unreachable from ovs-p1 about the
    translated datagram is +rel+rpl and reaches at_ns0 translated back (its
    source fc00::240, the embedded datagram to [fc00::240]:80): the dump
    shows the connection and tcpdump in at_ns0 upstream's exact frame.
    Beyond upstream: both packets through the model (RFC 5508 4.2, RFC 4443
    2.3)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96", "f0:00:00:01:01:01", "", "nodad")
    t.add_veth("p1", ns1, "br0", "fc00::2/96", "f0:00:00:01:01:02", "", "nodad")
    add_flows(t, ["table=0,ipv6,ct_state=-trk,actions=ct(table=0,nat)",
                  "table=0,in_port=ovs-p0,ct_state=+trk+new,udp6,"
                  "actions=ct(commit,nat(dst=[fc00::2]:8080)),ovs-p1",
                  "table=0,in_port=ovs-p1,ct_state=+trk+rel+rpl,icmp6,actions=ovs-p0"])
    nat = Nat.of("dst", "fc00::2", 8080)

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV6:
            return []
        first = Ct(a.table, nat=Nat())
        st = a.state(0, Nat()).state
        if a.port == "ovs-p0" and st & TRK and st & NEW and a.ip_proto == UDP:
            return [("ovs-p1", [first, Ct(a.table, commit=True, nat=nat)])]
        if a.port == "ovs-p1" and st & REL and st & RPL and a.ip_proto == ICMP6:
            return [("ovs-p0", [first])]
        return [(None, [first])]

    wire = CtWire(t, request, pipeline)
    wire.add("ovs-p0", ns0, "p0")
    wire.add("ovs-p1", ns1, "p1")
    pcap = start_tcpdump(t, ns0, "p0", "p0")
    wire.packet_out("ovs-p0", bytes.fromhex(
        "f00000010102f0000001010186dd60066ced00151140fc000000000000000000000000000001fc000000"
        "00000000000000000000024004d20050001587d4646573745f756e72656163680a"))
    wire.packet_out("ovs-p1", bytes.fromhex(
        "f00000010101f0000001010286dd600733ed00453a40fc000000000000000000000000000002fc000000"
        "000000000000000000000001010428550000000060066ced00151140fc000000000000000000000000"
        "000001fc00000000000000000000000000000204d21f9000156ad2646573745f756e72656163680a"))
    got = "".join(sorted(f"{line}\n" for line in t.sb.appctl("dpctl/dump-conntrack")
                        .stdout.splitlines() if "orig=(src=fc00::1," in line))
    assert got == ("udp,orig=(src=fc00::1,dst=fc00::240,sport=1234,dport=80),reply=(src=fc00::2,"
                   "dst=fc00::1,sport=8080,dport=1234)\n"), got
    want = ("f00000010101f0000001010286dd600733ed00453a40fc000000000000000000000000000240fc0000"
            "00000000000000000000000001010426170000000060066ced00151140fc00000000000000000000"
            "0000000001fc00000000000000000000000000024004d20050001587d4646573745f756e72656163"
            "680a")
    wait_until(lambda: want in pcap_hex(pcap), 10, what="tcpdump in at_ns0 to hold the "
               "translated port unreachable", describe=lambda: "\n".join(pcap_hex(pcap)))
    assert wire.verify() >= 2


@FLAVOUR
@upstream("conntrack - Multiple ICMP traverse")
def test_multiple_icmp_traverse(system_traffic: Callable[..., Traffic],
                                request: pytest.FixtureRequest, flavour: str) -> None:
    """The same ICMP echo request, sent twice from p0 (upstream's sendpkt.py:
    an AF_PACKET send here), goes through ct(zone=1) and is committed in the
    default zone on its first pass, then dropped in table 2: both times +new
    (no reply ever seen).  The dump shows the one connection; table 2's +new
    rule counts both packets, the +est one none (waited for: upstream sleeps
    a second).  Beyond upstream: nothing leaves OVS, as the model's table
    says."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24", "f0:00:00:01:01:01")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24", "f0:00:00:01:01:02")
    add_flows(t, ["table=0,priority=10  ip,icmp,ct_state=-trk action=ct(zone=1,table=1)",
                  "table=0,priority=0   action=drop",
                  "table=1,priority=10  ct_state=-est+trk+new,ip,ct_zone=1,in_port=1 "
                  "action=ct(commit,table=2)",
                  "table=1,priority=10  ct_state=+est-new+trk,ct_zone=1,in_port=1 "
                  "action=resubmit(,2)",
                  "table=1,priority=0   action=drop",
                  "table=2,priority=10  ct_state=+trk+new,in_port=1 action=drop",
                  "table=2,priority=10  ct_state=+trk+est action=drop"])

    wire = CtWire.on(t, request, [ns0, ns1])
    icmp = compose(t, "eth_src=f0:00:00:01:01:01,eth_dst=f0:00:00:01:01:02,eth_type=0x0800,"
                      "nw_src=10.1.1.1,nw_dst=10.1.1.2,nw_proto=1,nw_ttl=64,nw_frag=no,"
                      "icmp_type=8,icmp_code=0", "")
    side = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close p0", side.close)
    side.send([icmp])
    side.send([icmp])

    def table2() -> str:
        text = t.sb.ofctl("dump-flows", "br0").stdout
        lines = [re.sub(r"idle_age=[0-9]*,", "idle_age=<cleared>,",
                        re.sub(r"duration=.*s,", "duration=<cleared>,", line))
                 .replace("n_bytes=70,", "n_bytes=84,")
                 for line in text.splitlines() if "table=2," in line]
        return "".join(f"{line}\n" for line in lines)
    want = (" cookie=0x0, duration=<cleared>, table=2, n_packets=2, n_bytes=84, "
            "idle_age=<cleared>, priority=10,ct_state=+new+trk,in_port=1 actions=drop\n"
            " cookie=0x0, duration=<cleared>, table=2, n_packets=0, n_bytes=0, "
            "idle_age=<cleared>, priority=10,ct_state=+est+trk actions=drop\n")
    wait_until(lambda: table2() == want, 10, what="both requests to reach table 2",
               describe=table2)
    check_ct(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0)\n")
    wire.verify()


@FLAVOUR
@upstream("conntrack - ICMP from different source related with NAT")
def test_icmp_from_different_source_related_with_nat(
        system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
        flavour: str) -> None:
    """UDP from the client to 192.168.20.20 is DNATed to the server in zone
    42.  A router's "fragmentation needed" (from 192.168.20.1, a third
    address) about the server's reply is +rel-rpl from the client's side:
    committed with nat, it reaches the server with its destination and the
    embedded datagram translated, its source left alone.  After a zone flush,
    the same from the server's side about the client's datagram is +rel+rpl
    and reaches the client translated back.  The flow counters (exact), the
    dump, and tcpdump's exact frames.  Beyond upstream: every packet through
    the model (RFC 5508 4.2: only the addresses of the connection translated)."""
    t: Traffic = system_traffic(flavour)
    client, server = t.add_namespace("client"), t.add_namespace("server")
    t.add_veth("client", client, "br0", "192.168.20.10/24", "00:00:00:00:20:10")
    t.add_veth("server", server, "br0", "192.168.10.20/24", "00:00:00:00:10:20")
    t.sb.ofctl("add-flows", "br0", str(flows_file(t, [
        "table=0,ip,actions=ct(table=1,zone=42,nat)",
        "table=1,in_port=ovs-client,ip,ct_state=+trk+new,actions=ct(commit,table=2,zone=42,"
        "nat(dst=192.168.10.20)",
        "table=1,icmp,ct_state=+trk+rel-rpl,actions=ct(commit,table=2,zone=42,nat)",
        "table=1,ip,actions=resubmit(,2)",
        "table=2,in_port=ovs-client,ip,ct_state=+trk+new,actions=output:ovs-server",
        "table=2,in_port=ovs-client,icmp,ct_state=+trk+rel,actions=output:ovs-server",
        "table=2,in_port=ovs-server,icmp,ct_state=+trk+rel,actions=output:ovs-client",
        "table=2,in_port=ovs-server,ip,ct_state=+trk+rpl,actions=output:ovs-client"])))
    dnat = Nat.of("dst", "192.168.10.20")
    other = {"ovs-client": "ovs-server", "ovs-server": "ovs-client"}

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV4:
            return []
        first = Ct(a.table, zone=42, nat=Nat())
        st = a.state(42, Nat()).state
        if a.port == "ovs-client" and st & TRK and st & NEW:
            return [("ovs-server", [first, Ct(a.table, zone=42, commit=True, nat=dnat)])]
        if a.ip_proto == ICMP and st & TRK and st & REL and not st & RPL:
            acts: list[Action] = [first, Ct(a.table, zone=42, commit=True, nat=Nat())]
            return [(other[a.port], acts)]
        if a.ip_proto == ICMP and st & TRK and st & REL:
            return [(other[a.port], [first])]
        if a.port == "ovs-server" and st & TRK and st & RPL:
            return [("ovs-client", [first])]
        return [(None, [first])]

    wire = CtWire(t, request, pipeline)
    wire.add("ovs-client", client, "client")
    wire.add("ovs-server", server, "server")
    pcap = start_tcpdump(t, server, "server", "server")
    udp = "00000000102000000000201008004500001C000040000A11C762C0A8140AC0A814140001000200080000"
    wire.packet_out("ovs-client", bytes.fromhex(udp))
    wire.packet_out("ovs-server", bytes.fromhex(
        "00000000201000000000102008004500001C000040000A11D162C0A80A14C0A8140A0002000100080000"))
    wire.packet_out("ovs-client", bytes.fromhex(
        "000000001020000000002000080045000038011F0000FF011140C0A81401C0A814140304F77800000578"
        "4500001C000040000A11C762C0A81414C0A8140A0002000100080000"))
    t.sb.appctl("revalidator/purge")
    check_flows(t, ofctl_strip, grep_v="\0", expected="""\
 n_packets=3, n_bytes=154, reset_counts ip actions=ct(table=1,zone=42,nat)
 table=1, n_packets=1, n_bytes=42, reset_counts ct_state=+new+trk,ip,in_port=1 actions=ct(commit,table=2,zone=42,nat(dst=192.168.10.20))
 table=1, n_packets=1, n_bytes=42, reset_counts ip actions=resubmit(,2)
 table=1, n_packets=1, n_bytes=70, reset_counts ct_state=+rel-rpl+trk,icmp actions=ct(commit,table=2,zone=42,nat)
 table=2, n_packets=1, n_bytes=42, reset_counts ct_state=+new+trk,ip,in_port=1 actions=output:2
 table=2, n_packets=1, n_bytes=42, reset_counts ct_state=+rpl+trk,ip,in_port=2 actions=output:1
 table=2, n_packets=1, n_bytes=70, reset_counts ct_state=+rel+trk,icmp,in_port=1 actions=output:2
 table=2, reset_counts ct_state=+rel+trk,icmp,in_port=2 actions=output:1
OFPST_FLOW reply (OF1.5):
""")  # noqa: E501
    conn = ("udp,orig=(src=192.168.20.10,dst=192.168.20.20,sport=1,dport=2),reply=(src=192.168.10.20,"
            "dst=192.168.20.10,sport=2,dport=1),zone=42\n")
    assert grep_ct(t, "192.168.20.10") == conn
    want = ("000000001020000000002000080045000038011f0000ff011b40c0a81401c0a80a140304f77800000578"
            "4500001c000040000a11d162c0a80a14c0a8140a0002000100080000")
    wait_until(lambda: want in pcap_hex(pcap), 10, what="the server's tcpdump to hold the "
               "translated error", describe=lambda: "\n".join(pcap_hex(pcap)))
    assert [h for h in pcap_hex(pcap) if "000000001020000000002000" in h] == [want]

    t.sb.appctl("dpctl/flush-conntrack", "zone=42")
    wire.event("dpctl/flush-conntrack zone=42", lambda w: w.table.conns.__setitem__(
        slice(None), [c for c in w.table.conns if c.zone != 42]))
    pcap = start_tcpdump(t, client, "client", "client")
    wire.packet_out("ovs-client", bytes.fromhex(udp))
    wire.packet_out("ovs-server", bytes.fromhex(
        "000000002010000000002000080045000038011F0000FF01114AC0A81401C0A8140A0304F77800000578"
        "4500001C000040000A11D162C0A8140AC0A80A140001000200080000"))
    t.sb.appctl("revalidator/purge")
    check_flows(t, ofctl_strip, grep_v="\0", expected="""\
 n_packets=5, n_bytes=266, reset_counts ip actions=ct(table=1,zone=42,nat)
 table=1, n_packets=1, n_bytes=70, reset_counts ct_state=+rel-rpl+trk,icmp actions=ct(commit,table=2,zone=42,nat)
 table=1, n_packets=2, n_bytes=112, reset_counts ip actions=resubmit(,2)
 table=1, n_packets=2, n_bytes=84, reset_counts ct_state=+new+trk,ip,in_port=1 actions=ct(commit,table=2,zone=42,nat(dst=192.168.10.20))
 table=2, n_packets=1, n_bytes=42, reset_counts ct_state=+rpl+trk,ip,in_port=2 actions=output:1
 table=2, n_packets=1, n_bytes=70, reset_counts ct_state=+rel+trk,icmp,in_port=1 actions=output:2
 table=2, n_packets=1, n_bytes=70, reset_counts ct_state=+rel+trk,icmp,in_port=2 actions=output:1
 table=2, n_packets=2, n_bytes=84, reset_counts ct_state=+new+trk,ip,in_port=1 actions=output:2
OFPST_FLOW reply (OF1.5):
""")  # noqa: E501
    assert grep_ct(t, "192.168.20.10") == conn
    want = ("000000002010000000002000080045000038011f0000ff011137c0a81414c0a8140a0304f77800000578"
            "4500001c000040000a11c762c0a8140ac0a814140001000200080000")
    wait_until(lambda: want in pcap_hex(pcap), 10, what="the client's tcpdump to hold the "
               "translated error", describe=lambda: "\n".join(pcap_hex(pcap)))
    assert [h for h in pcap_hex(pcap) if "000000002010000000002000" in h] == [want]
    assert wire.verify() >= 5

