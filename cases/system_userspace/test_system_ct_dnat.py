"""system-traffic.at's conntrack tests of DNAT: simple and through a
pipeline, with an additional SNAT, load balancing by a select group, and
floating IPs rewritten outside conntrack (ct_clear and a second lookup).

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
from pathlib import Path

import pytest

from datapath.backends.netns import Netns
from datapath.model.actions import Action
from datapath.model.conntrack import Conntrack, Ct, Key, Nat
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports, format_ct
from fixtures.system_userspace.system_ct_nat import (
    ARP,
    IPV4,
    NAT_MAC,
    VIP,
    Out,
    SetEthDst,
    after,
    arp_pipeline,
    arp_responder_flows,
    conntrack_keys,
    ip_dst,
    is_vip,
    nc,
    nc_send,
    wait_dump,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream

pytestmark = pytest.mark.requires(backend="tap")


def dnat_checks(t: Traffic, ns0: Netns, ns1: Netns) -> None:
    """The two curls of the DNAT tests and their dumps."""
    start_http(t, ns1)
    check_http(t, ns0, VIP)
    check_ct(t, VIP, "tcp,orig=(src=10.1.1.1,dst=10.1.1.64,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),zone=1,"
             "protoinfo=(state=<cleared>)\n")
    check_http(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,"
             "dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,"
             "dport=<cleared>),zone=1,protoinfo=(state=<cleared>)\n")


@FLAVOUR
@upstream("conntrack - simple DNAT")
def test_simple_dnat(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """ns0's connections to 10.1.1.64 are DNATed to ns1 (br0 answers ARP for
    10.1.1.64 with ns1's MAC); others from ns0 are committed as they are; from
    ns1 only established replies pass.  Both curls (virtual and real address)
    get the page; the dumps show both connections.  Beyond upstream: every
    frame through the model (RFC 826 answers, translated segments)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p1", "address", NAT_MAC, ns=ns1)
    add_flows(t, ["priority=100 in_port=1,ip,nw_dst=10.1.1.64,"
                  "action=ct(zone=1,nat(dst=10.1.1.2),commit),2",
                  "priority=10 in_port=1,ip,action=ct(commit,zone=1),2",
                  "priority=100 in_port=2,ct_state=-trk,ip,action=ct(table=0,nat,zone=1)",
                  "priority=100 in_port=2,ct_state=+trk+est,ct_zone=1,ip,action=1",
                  *arp_responder_flows("reg2=0x0a010140"), "priority=0,action=drop"])

    wire = CtWire.on(t, request, [ns0, ns1])
    dnat_checks(t, ns0, ns1)
    assert wire.verify() >= 20


@FLAVOUR
@upstream("conntrack - more complex DNAT")
def test_more_complex_dnat(system_traffic: Callable[..., Traffic],
                           request: pytest.FixtureRequest, flavour: str) -> None:
    """As 'simple DNAT', with all IP through ct(table=1,zone=1,nat) first and
    table 1 deciding by ct_state.  Both curls get the page; the dumps show
    both connections.  Beyond upstream: every frame through the model."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p1", "address", NAT_MAC, ns=ns1)
    responder = arp_responder_flows("reg2=0x0a010140")
    add_flows(t, ["table=0 priority=100 ip action=ct(table=1,zone=1,nat)",
                  "table=0 " + responder[0], "table=0 " + responder[1],
                  "table=0 priority=0 action=drop",
                  "table=1 priority=100 in_port=1 ct_state=+new ip nw_dst=10.1.1.64 "
                  "action=ct(zone=1,nat(dst=10.1.1.2),commit),2",
                  "table=1 priority=10 in_port=1 ct_state=+new ip action=ct(commit,zone=1),2",
                  "table=1 priority=100 in_port=1 ct_state=+est ct_zone=1 action=2",
                  "table=1 priority=100 in_port=2 ct_state=+est ct_zone=1 action=1",
                  "table=1 priority=0 action=drop", *responder[2:]])

    wire = CtWire.on(t, request, [ns0, ns1])
    dnat_checks(t, ns0, ns1)
    assert wire.verify() >= 20


@FLAVOUR
@upstream("conntrack - DNAT with additional SNAT")
def test_dnat_with_additional_snat(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str) -> None:
    """curl from ns0 to 172.1.1.2:8080 (routed via 10.1.1.2) is DNATed to
    10.1.1.2:80 and committed; a second ct(commit) with nat(src=10.1.1.240)
    and ct_mark/ct_label 0xac meets the committed connection: it sets the
    mark and label and adds no SNAT.  The page arrives; no connection to
    10.1.1.240; the one connection has mark=172,labels=0xac.  Beyond
    upstream: every segment through the model (the second ct finds the
    connection by the tuple its DNAT gave the packet)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("route", "add", "172.1.1.0/24", "via", "10.1.1.2", ns=ns0)
    start_http(t, ns1)
    add_flows(t, ["table=0,priority=30,in_port=1,ip,nw_dst=172.1.1.2,"
                  "actions=ct(commit,nat(dst=10.1.1.2:80),table=1)",
                  "table=0,priority=20,in_port=2,ip,actions=ct(nat),1",
                  "table=0,priority=10,arp,actions=NORMAL", "table=0,priority=1,actions=drop",
                  "table=1,ip,actions=ct(commit,nat(src=10.1.1.240),"
                  "exec(set_field:0xac->ct_mark,set_field:0xac->ct_label),table=2)",
                  "table=2,in_port=1,ip,ct_mark=0xac,ct_label=0xac,actions=2"])

    wire = CtWire.on(t, request, [ns0, ns1])
    check_http(t, ns0, "http://172.1.1.2:8080")
    check_ct(t, "10.1.1.240", "")
    check_ct(t, "10.1.1.1", "tcp,orig=(src=10.1.1.1,dst=172.1.1.2,sport=<cleared>,"
             "dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,"
             "dport=<cleared>),mark=172,labels=0xac,protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 10


LB_MAC = "80:88:88:88:88:{0}{0}"


LB_GROUP = ("group_id=234,type=select,bucket=weight=100,ct(nat(dst=10.1.1.2),commit,table=4),"
            "bucket=weight=100,ct(nat(dst=10.1.1.3),commit,table=4),"
            "bucket=weight=100,ct(nat(dst=10.1.1.4),commit,table=4)")


SERVERS = ("10.1.1.2", "10.1.1.3", "10.1.1.4")


def lb_setup(t: Traffic, n: int) -> dict[int, Netns]:
    """at_ns1..N on p1..pN (10.1.1.N, MAC 80:88:88:88:88:NN), the select group
    and the flows of the load-balancing tests."""
    spaces = {i: t.add_namespace(f"at_ns{i}") for i in range(1, n + 1)}
    for i, ns in spaces.items():
        t.add_veth(f"p{i}", ns, "br0", f"10.1.1.{i}/24")
    for i, ns in spaces.items():
        t.ip("link", "set", "dev", f"p{i}", "address", LB_MAC.format(i), ns=ns)
    t.sb.ofctl("-O", "OpenFlow15", "-vwarn", "add-group", "br0", LB_GROUP)
    responder = arp_responder_flows("reg2=0x0a010140", miss="controller")
    add_flows(t, ["table=0 priority=100 ip nw_dst=10.1.1.64 action=group:234",
                  "table=0 priority=90 ip action=ct(table=4,nat)",
                  "table=0 " + responder[0], "table=0 " + responder[1],
                  "table=0 priority=0 action=drop",
                  *(f"table=4,ip,nw_dst=10.1.1.{i} action=mod_dl_dst:{LB_MAC.format(i)},output:{i}"
                    for i in spaces),
                  "table=4 priority=0 action=drop", *responder[2:]])
    return spaces


def lb_pipeline(n: int, chosen: dict[Key, str]) -> Callable[[Arrival], Out]:
    """The load-balancing table: a connection to 10.1.1.64 takes the bucket OVS
    chose for it (read from the dump: one of the three), others are only
    tracked and NATed back; table 4 routes by the destination by then."""
    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, is_vip)
        if a.eth_type != IPV4:
            return []

        def acts(table: Conntrack) -> list[Action]:
            if ip_dst(a.frame) == VIP:
                key = a.state().key
                assert key in chosen, f"{key}: no dump of conntrack listed this connection"
                return [Ct(table, commit=True, nat=Nat.of("dst", chosen[key]))]
            return [Ct(table, nat=Nat())]
        dst = ip_dst(after(a, acts))
        i = int(dst.rsplit(".", 1)[1]) if dst.startswith("10.1.1.") else 0
        if not 1 <= i <= n:
            return [(None, acts(a.table))]
        return [(f"ovs-p{i}", [*acts(a.table), SetEthDst(LB_MAC.format(i))])]
    return pipeline


def lb_wire(t: Traffic, request: pytest.FixtureRequest, spaces: dict[int, Netns],
            chosen: dict[Key, str]) -> CtWire:
    """The judge on ovs-p1..N."""
    wire = CtWire(t, request, lb_pipeline(len(spaces), chosen))
    for i, ns in spaces.items():
        wire.add(f"ovs-p{i}", ns, f"p{i}")
    return wire


def lb_choices(t: Traffic) -> dict[Key, str]:
    """The server each connection to 10.1.1.64 went to: one of the buckets'."""
    chosen = {}
    for _, orig, reply in conntrack_keys(t):
        if orig.dst == VIP:
            assert reply.src in SERVERS, f"{orig} went to {reply.src}, in no bucket"
            chosen[orig] = reply.src
    return chosen


@FLAVOUR
@upstream("conntrack - DNAT load balancing")
def test_dnat_load_balancing(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """A select group of three buckets DNATs connections to 10.1.1.64 to
    ns2, ns3 or ns4 (br0 answers ARP for 10.1.1.64); table 4 routes by
    destination, rewriting the MAC.  50 curls from ns1 all get the page, and
    each server has at least one connection.  Beyond upstream: every frame
    of the 50 connections through the model, each connection with the bucket
    OVS chose (read from the dump, checked to be a bucket's)."""
    t: Traffic = system_traffic(flavour)
    spaces = lb_setup(t, 4)
    chosen: dict[Key, str] = {}
    wire = lb_wire(t, request, spaces, chosen)
    for i in (2, 3, 4):
        start_http(t, spaces[i])
    for _ in range(50):
        check_http(t, spaces[1], VIP)
        # Read after each: a closed connection's entry expires 30 to 45 s after
        # its last segment (the userspace conntrack's default timeout policy),
        # before the last of 50 curls on a loaded machine.
        chosen.update(lb_choices(t))
    check_ct(t, VIP, "".join(
        "tcp,orig=(src=10.1.1.1,dst=10.1.1.64,sport=<cleared>,dport=<cleared>),reply=(src="
        f"{s},dst=10.1.1.1,sport=<cleared>,dport=<cleared>),protoinfo=(state=<cleared>)\n"
        for s in SERVERS))
    assert wire.verify() >= 50 * 8


@FLAVOUR
@upstream("conntrack - DNAT load balancing with NC")
def test_dnat_load_balancing_with_nc(system_traffic: Callable[..., Traffic],
                                     request: pytest.FixtureRequest, flavour: str) -> None:
    """The same group with a fifth namespace: nine rounds of nc from ns1 and
    ns5, both from source port 4100N, to 10.1.1.64:80; every nc exits 0.
    Beyond upstream: every frame of the 18 connections through the model,
    each with the bucket OVS chose."""
    t: Traffic = system_traffic(flavour)
    spaces = lb_setup(t, 5)
    chosen: dict[Key, str] = {}
    wire = lb_wire(t, request, spaces, chosen)
    for i in (2, 3, 4):
        start_http(t, spaces[i])
    for i in range(1, 10):
        nc(t, spaces[1], "TEST1", f"4100{i}", VIP)
        nc(t, spaces[5], "TEST5", f"4100{i}", VIP)
        chosen.update(lb_choices(t))  # after each round: see test_dnat_load_balancing
    assert len(chosen) == 18, f"18 connections expected, the dump has {len(chosen)}"
    assert wire.verify() >= 18 * 6


FIP = {"10.254.254.1": "10.1.1.1", "10.254.254.2": "10.1.1.2"}


LOCAL = {v: k for k, v in FIP.items()}


GW_MAC = "f0:00:00:01:01:FE"


def fip_setup(t: Traffic) -> tuple[Netns, Netns]:
    """The namespaces, static neighbours and routes of the floating-IP tests, and
    nc -l -k 1234 in at_ns0."""
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24", "f0:00:00:01:01:01")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24", "f0:00:00:01:01:02")
    t.ip("neigh", "add", "10.1.1.2", "lladdr", "f0:00:00:01:01:02", "dev", "p0", ns=ns0)
    t.ip("neigh", "add", "10.1.1.1", "lladdr", "f0:00:00:01:01:01", "dev", "p1", ns=ns1)
    t.ip("neigh", "add", "10.1.1.254", "lladdr", GW_MAC, "dev", "p0", ns=ns0)
    t.ip("neigh", "add", "10.1.1.254", "lladdr", GW_MAC, "dev", "p1", ns=ns1)
    t.ip("route", "add", "default", "nexthop", "via", "10.1.1.254", ns=ns0)
    t.ip("route", "add", "default", "nexthop", "via", "10.1.1.254", ns=ns1)
    t.daemonize("nc -l -k 1234", ["ncat", "-l", "-k", "1234"], ns0, Path("/dev/null"))
    t.wait_listen(ns0, 1234)
    return ns0, ns1


@FLAVOUR
@upstream("conntrack - floating IP")
def test_floating_ip(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """Floating IPs 10.254.254.1/2 translated by set_field (not by conntrack):
    a connection to a floating IP is committed, rewritten to (local
    destination, floating source), ct_clear'ed and tracked and committed
    again.  nc from ns1 to 10.1.1.1:1234, then to 10.254.254.1:1234: each
    session is seen to end (TIME_WAIT or CLOSING), the second under its
    translated tuple (ct_clear took effect).  Beyond upstream: every segment
    through the model's two lookups per packet."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = fip_setup(t)
    add_flows(t, ["table=0,priority=10  ip action=ct(table=1)", "table=0,priority=1   action=drop",
                  "table=1,priority=20  ip,ct_state=+trk+est,nw_dst=10.254.254.0/24 "
                  "action=goto_table:10",
                  "table=1,priority=20  ip,ct_state=+trk+new,nw_dst=10.254.254.0/24 "
                  "action=ct(commit,table=10)",
                  "table=1,priority=10  ip,ct_state=+trk+est action=goto_table:20",
                  "table=1,priority=10  ip,ct_state=+trk+new action=ct(commit,table=20)",
                  "table=1,priority=1   ip,ct_state=+trk+inv action=drop",
                  "table=10             ip,nw_dst=10.254.254.1 "
                  "action=set_field:10.1.1.1->nw_dst,goto_table:11",
                  "table=10             ip,nw_dst=10.254.254.2 "
                  "action=set_field:10.1.1.2->nw_dst,goto_table:11",
                  "table=11             ip,nw_src=10.1.1.1 "
                  "action=set_field:10.254.254.1->nw_src,goto_table:12",
                  "table=11             ip,nw_src=10.1.1.2 "
                  "action=set_field:10.254.254.2->nw_src,goto_table:12",
                  "table=12,priority=10 ip action=ct_clear,ct(table=13)",
                  "table=12,priority=1  action=drop",
                  "table=13             ip,ct_state=+trk+est action=goto_table:20",
                  "table=13             ip,ct_state=+trk+new action=ct(commit,table=20)",
                  "table=13             ip,ct_state=+trk+inv action=drop",
                  "table=20             ip,nw_src=10.1.1.1 "
                  "action=set_field:f0:00:00:01:01:01->eth_src,goto_table:21",
                  "table=20             ip,nw_src=10.1.1.2 "
                  "action=set_field:f0:00:00:01:01:02->eth_src,goto_table:21",
                  "table=20             ip,nw_src=10.254.254.0/24 "
                  "action=set_field:f0:00:00:01:01:FE->eth_src,goto_table:21",
                  "table=21             ip,nw_dst=10.1.1.1 "
                  "action=set_field:f0:00:00:01:01:01->eth_dst,output:ovs-p0",
                  "table=21             ip,nw_dst=10.1.1.2 "
                  "action=set_field:f0:00:00:01:01:02->eth_dst,output:ovs-p1"])

    wire = CtWire.on(t, request, [ns0, ns1])

    def ended(addr: str) -> Callable[[str], str]:
        return lambda d: format_ct("".join(f"{line}\n" for line in d.splitlines()
                                           if re.search("TIME_WAIT|CLOSING", line)), addr)
    nc_send(t, ns1, "10.1.1.1", "1234")
    wait_dump(t, ended("10.1.1.2"), "tcp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,"
              "dport=<cleared>),reply=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,"
              "dport=<cleared>),protoinfo=(state=<cleared>)\n")
    nc_send(t, ns1, "10.254.254.1", "1234")
    wait_dump(t, ended("10.254.254.2"), "tcp,orig=(src=10.254.254.2,dst=10.1.1.1,"
              "sport=<cleared>,dport=<cleared>),reply=(src=10.1.1.1,dst=10.254.254.2,"
              "sport=<cleared>,dport=<cleared>),protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 12


@FLAVOUR
@upstream("conntrack - negative test for recirculation optimization")
def test_negative_recirculation_optimization(system_traffic: Callable[..., Traffic],
                                             request: pytest.FixtureRequest,
                                             flavour: str) -> None:
    """As 'floating IP' without ct_clear: a connection to a floating IP is
    committed with ct_mark 1, its addresses rewritten by set_field, and a
    second ct in the same zone must look the rewritten packet up afresh (a
    cached connection would be wrong): a new connection, committed with
    ct_mark 2.  nc from ns1 to 10.254.254.1:1234; the dump shows both
    connections with their marks.  Beyond upstream: every segment through
    the model's two lookups."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = fip_setup(t)
    add_flows(t, ["table=0,priority=10  ip action=ct(table=1)",
                  "table=1,priority=20  ip,ct_state=+trk+est,nw_dst=10.254.254.0/24 "
                  "action=goto_table:2",
                  "table=1,priority=20  ip,ct_state=+trk+new,nw_dst=10.254.254.0/24 "
                  "action=ct(commit,exec(set_field:1->ct_mark),table=2)",
                  "table=2             ip,nw_dst=10.254.254.1 "
                  "action=set_field:10.1.1.1->nw_dst,goto_table:3",
                  "table=2             ip,nw_dst=10.254.254.2 "
                  "action=set_field:10.1.1.2->nw_dst,goto_table:3",
                  "table=3             ip,nw_src=10.1.1.1 "
                  "action=set_field:10.254.254.1->nw_src,goto_table:4",
                  "table=3             ip,nw_src=10.1.1.2 "
                  "action=set_field:10.254.254.2->nw_src,goto_table:4",
                  "table=4             ip,nw_dst=10.1.1.1 "
                  "action=set_field:f0:00:00:01:01:01->eth_dst,goto_table:5",
                  "table=4             ip,nw_dst=10.1.1.2 "
                  "action=set_field:f0:00:00:01:01:02->eth_dst,goto_table:5",
                  "table=5             ip,nw_src=10.254.254.0/24 "
                  "action=set_field:f0:00:00:01:01:FE->eth_src,goto_table:6",
                  "table=6,priority=10 ip action=ct(table=7)",
                  "table=7             ip,ct_state=+trk+est action=goto_table:8",
                  "table=7             ip,ct_mark=0x0,ct_state=+trk+new "
                  "action=ct(commit,exec(set_field:2->ct_mark),table=8)",
                  "table=8             ip,nw_dst=10.1.1.1 action=output:ovs-p0",
                  "table=8             ip,nw_dst=10.1.1.2 action=output:ovs-p1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    nc_send(t, ns1, "10.254.254.1", "1234")
    check_ct(t, "10.254.254",
             "tcp,orig=(src=10.1.1.2,dst=10.254.254.1,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.254.254.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),mark=1,"
             "protoinfo=(state=<cleared>)\n"
             "tcp,orig=(src=10.254.254.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.1.1.1,dst=10.254.254.2,sport=<cleared>,dport=<cleared>),mark=2,"
             "protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 6

