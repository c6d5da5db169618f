"""system-traffic.at's conntrack tests of HTTP through ct and of SNAT
(single addresses, ranges, port ranges, exhaustion, all-zero), as `make
check-system-userspace` (and check-system-tso) run them.

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

from datapath.model.conntrack import RPL, Ct, Nat
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports
from fixtures.system_userspace.system_ct_nat import (
    IPV4,
    NAT_MAC,
    RESPOND_F0,
    SNAT_RANGE,
    TCP_XX,
    XX,
    Out,
    arp_responder_flows,
    check_ct_xx,
    nat_choices,
    nc,
    ping1,
    wait_dump,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream

pytestmark = pytest.mark.requires(backend="tap")


@FLAVOUR
@pytest.mark.parametrize("six", [pytest.param(False, marks=upstream("conntrack - IPv4 HTTP"),
                                              id="ipv4"),
                                 pytest.param(True, marks=upstream("conntrack - IPv6 HTTP"),
                                              id="ipv6")])
def test_http(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
              flavour: str, six: bool) -> None:
    """TCP from ns0 is committed and goes to ns1; from ns1 only what conntrack
    says is established.  curl from ns0 gets the page; the connection is
    dumped; curl from ns1 times out (28: its SYN is a new connection, dropped).
    Beyond upstream: every segment through the model's tracker."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, six=six)
    tcp, icmp = ("tcp6", "icmp6") if six else ("tcp", "icmp")
    add_flows(t, ["priority=1,action=drop",
                  *([] if six else ["priority=10,arp,action=normal"]),
                  f"priority=10,{icmp},action=normal",
                  f"priority=100,in_port=1,{tcp},action=ct(commit),2",
                  f"priority=100,in_port=2,ct_state=-trk,{tcp},action=ct(table=0)",
                  f"priority=100,in_port=2,ct_state=+trk+est,{tcp},action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    if six:
        t.wait_ping6(ns0, "fc00::2")
    start_http(t, ns0, six)
    start_http(t, ns1, six)
    src, dst = ("fc00::1", "fc00::2") if six else ("10.1.1.1", "10.1.1.2")
    url = (lambda addr: f"http://[{addr}]") if six else (lambda addr: addr)
    check_http(t, ns0, url(dst))
    check_ct(t, dst, f"tcp,orig=(src={src},dst={dst},sport=<cleared>,dport=<cleared>),"
             f"reply=(src={dst},dst={src},sport=<cleared>,dport=<cleared>),"
             "protoinfo=(state=<cleared>)\n")
    check_http(t, ns1, url(src), rc=28)
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - commit, recirc")
def test_commit_recirc(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                       flavour: str) -> None:
    """Four namespaces: p0->p1 commits before recirculating, p1 is only
    tracked; p2->p3 is tracked, then committed on a second pass (metadata
    counts the passes), p3 commits.  Both curls get their page.  Beyond
    upstream: every segment through the model's tracker (a second commit of
    a committed connection changes nothing, ovs-actions(7) ct)."""
    t: Traffic = system_traffic(flavour)
    spaces = ct_ports(t, n=4)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(commit,table=0)",
                  "priority=100,in_port=1,tcp,ct_state=+trk,action=2",
                  "priority=100,in_port=2,tcp,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,tcp,ct_state=+trk,action=1",
                  "priority=100,in_port=3,tcp,ct_state=-trk,action=set_field:0->metadata,"
                  "ct(table=0)",
                  "priority=100,in_port=3,tcp,ct_state=+trk,metadata=0,"
                  "action=set_field:1->metadata,ct(commit,table=0)",
                  "priority=100,in_port=3,tcp,ct_state=+trk,metadata=1,action=4",
                  "priority=100,in_port=4,tcp,ct_state=-trk,action=ct(commit,table=0)",
                  "priority=100,in_port=4,tcp,ct_state=+trk,action=3"])

    wire = CtWire.on(t, request, spaces)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    check_http(t, spaces[0], "10.1.1.2")
    check_http(t, spaces[2], "10.1.1.4")
    assert wire.verify() >= 20


@FLAVOUR
@upstream("conntrack - simple SNAT")
def test_simple_snat(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """ns0's IP is SNATed to an address of 10.1.1.240-254 (OVS's choice: read
    from the dump, checked to be in the range); br0 answers ARP for those
    addresses with ns0's MAC.  curl gets the page; the dump shows the
    translated reply key.  Beyond upstream: every frame, each ARP answer
    (RFC 826) and each translated segment (RFC 5382)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    add_flows(t, ["in_port=1,ip,action=ct(commit,zone=1,nat(src=10.1.1.240-10.1.1.254)),2",
                  "in_port=2,ct_state=-trk,ip,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=+trk,ct_zone=1,ip,action=1",
                  *arp_responder_flows(RESPOND_F0), "priority=0,action=drop"])
    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen = nat_choices(t, SNAT_RANGE, zone=1)
    wire.pin(1, chosen)
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - SNAT with ct_mark change on reply")
def test_snat_ct_mark_on_reply(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0's ping is SNATed to 10.1.1.240 (static ARP both sides); the reply,
    NATed back, goes through a second ct in zone 1 that commits ct_mark=1 and
    must still find the connection (+rpl, mark 1) to be let out.  One ping,
    answered; the dump shows the connection with mark=1.  The reply leaves
    twice: ct(table=1) forks, and the instance that is not reinjected goes on
    to output:1 (ping -c 1 exits at the first).  (Upstream's `arp -s`
    is `ip neigh add` here: the same permanent entry.)  Beyond upstream:
    the request and the reply, each translated (the second ct finds the
    connection by the tuple its NAT gave the packet)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", "e6:66:c1:11:11:11", ns=ns0)
    t.ip("neigh", "add", "10.1.1.2", "lladdr", "e6:66:c1:22:22:22", "dev", "p0", ns=ns0)
    t.ip("link", "set", "dev", "p1", "address", "e6:66:c1:22:22:22", ns=ns1)
    t.ip("neigh", "add", "10.1.1.240", "lladdr", "e6:66:c1:11:11:11", "dev", "p1", ns=ns1)
    add_flows(t, ["in_port=1,ip,action=ct(commit,zone=1,nat(src=10.1.1.240)),2",
                  "in_port=2,ct_state=-trk,ip,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=+trk,ct_zone=1,ip,action=ct(table=1,commit,zone=1,"
                  "exec(set_field:1->ct_mark)),1",
                  "table=1,in_port=2,ct_mark=1,ct_state=+rpl,ct_zone=1,ip,action=1",
                  "priority=0,action=drop"])
    nat = Nat.of("src", "10.1.1.240")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV4:
            return []
        if a.ofport == 1:
            return [("ovs-p1", [Ct(a.table, zone=1, commit=True, nat=nat)])]
        # ct(table=1,...) forks (ovs-actions(7) ct): one instance is reinjected into
        # table 1 (out if +rpl with mark 1, which `second` stored), the original
        # continues to output:1.  Both carry the first ct's NAT.
        first = Ct(a.table, zone=1, nat=Nat())
        second = Ct(a.table, zone=1, commit=True, mark=(1, 0xFFFFFFFF))
        probe = a.state(1, Nat())
        ok = probe.state & RPL and probe.conn is not None
        return [("ovs-p0" if ok else None, [first, second]),
                ("ovs-p0", [Ct(a.table, zone=1, nat=Nat())])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    ping1(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,"
                f"code=0),reply=(src=10.1.1.2,dst={XX},id=<cleared>,type=0,code=0),zone=1,"
                "mark=1\n", dedup=False)
    assert wire.verify() >= 3


@FLAVOUR
@upstream("conntrack - SNAT with port range")
def test_snat_port_range(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                         flavour: str) -> None:
    """TCP from ns0 SNATed to 10.1.1.240-254 ports 34567-34568 (random);
    only replies to those two ports are let back.  curl gets the page; the dump
    shows the translated reply key.  Beyond upstream: the address and port
    OVS chose are in the range, and every segment is translated to them."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    add_flows(t, ["in_port=1,tcp,action=ct(commit,zone=1,"
                  "nat(src=10.1.1.240-10.1.1.254:34567-34568,random)),2",
                  "in_port=2,ct_state=-trk,tcp,tp_dst=34567,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=-trk,tcp,tp_dst=34568,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=+trk,ct_zone=1,tcp,action=1",
                  *arp_responder_flows(RESPOND_F0), "priority=0,action=drop"])
    nat = Nat.of("src", "10.1.1.240-10.1.1.254", (34567, 34568))
    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen = nat_choices(t, nat, zone=1)
    wire.pin(1, chosen)
    assert chosen, "no connection was translated"
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - SNAT with port range using ICMP")
def test_snat_port_range_icmp(system_traffic: Callable[..., Traffic],
                              request: pytest.FixtureRequest, flavour: str) -> None:
    """A ping from ns0 through nat(src=10.1.1.240-254:20000): ICMP has no
    ports, so only the address is translated (the echo identifier is kept,
    ovs-actions(7): the port range applies to TCP and UDP); answered.  Beyond
    upstream: the request and the reply, translated; the identifier
    unchanged (the judge compares every byte)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    add_flows(t, ["in_port=1,ip,action=ct(commit,zone=1,nat(src=10.1.1.240-10.1.1.254:20000)),2",
                  "in_port=2,ct_state=-trk,ip,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=+trk,ct_zone=1,action=1",
                  *arp_responder_flows(RESPOND_F0), "priority=0,action=drop"])
    nat = Nat.of("src", "10.1.1.240-10.1.1.254", 20000)
    wire = CtWire.on(t, request, [ns0, ns1])
    ping1(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,"
                f"code=0),reply=(src=10.1.1.2,dst={XX},id=<cleared>,type=0,code=0),zone=1\n",
                dedup=False)
    chosen = nat_choices(t, nat, zone=1)
    wire.pin(1, chosen)
    assert wire.verify() >= 2


@FLAVOUR
@upstream("conntrack - SNAT with port range with exhaustion")
def test_snat_port_range_exhaustion(system_traffic: Callable[..., Traffic],
                                    request: pytest.FixtureRequest, flavour: str) -> None:
    """A packet-out SYN (10.1.1.1:123 -> 10.1.1.2:80) takes the only mapping
    nat(src=10.1.1.240:34568) has; curl from ns0 then needs a second mapping
    and gets none: it times out (28), and the table still holds the one
    connection.  Beyond upstream, every frame through the model: each of
    curl's SYNs has no NAT session, so it is dropped (RFC 5508 REQ-8: a NAT
    that cannot establish a session drops the packet), and nothing of it
    reaches ns1.  OVS 4.0.0 sends the SYNs on untranslated, from 10.1.1.1
    (known bug ct-nat-untranslated: a NAT bypass), which upstream's check
    cannot tell: the server's answers to 10.1.1.1 are dropped by the table
    (tp_dst is not 34568), so curl times out either way."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    t.ip("link", "set", "dev", "p1", "address", "80:89:89:89:89:89", ns=ns1)
    add_flows(t, ["in_port=1,tcp,action=ct(commit,zone=1,nat(src=10.1.1.240:34568)),2",
                  "in_port=2,ct_state=-trk,tcp,tp_dst=34568,action=ct(table=0,zone=1,nat)",
                  "in_port=2,ct_state=+trk,ct_zone=1,tcp,action=1",
                  *arp_responder_flows(RESPOND_F0), "priority=0,action=drop"])
    t.sb.allow_log(r"Unable to NAT due to tuple space exhaustion",
                   r"Dropped .* log messages in last .* seconds",
                   r"\|WARN\|.* execute ct.* failed")

    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    syn = compose_syn()
    wire.inject("LOCAL", syn, "ct(commit,zone=1,nat(src=10.1.1.240:34568))")
    t.sb.ofctl("packet-out", "br0",
               f"packet={syn.hex()} actions=ct(commit,zone=1,nat(src=10.1.1.240:34568))")
    one = ("tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
           "reply=(src=10.1.1.2,dst=10.1.1.240,sport=<cleared>,dport=<cleared>),zone=1,"
           "protoinfo=(state=<cleared>)\n")
    check_ct(t, "10.1.1.2", one)
    check_http(t, ns0, "10.1.1.2", rc=28)
    check_ct(t, "10.1.1.2", one)
    assert wire.verify() >= 1


def compose_syn() -> bytes:
    """ovs-ofctl compose-packet --bare "eth_src=80:88:88:88:88:88,
    eth_dst=80:89:89:89:89:89,dl_type=0x0800,nw_src=10.1.1.1,nw_dst=10.1.1.2,
    nw_proto=6,nw_ttl=64,nw_frag=no,tcp_flags=syn,tcp_src=123,tcp_dst=80"."""
    from scapy.layers.inet import IP
    from scapy.layers.inet import TCP as TCPH
    from scapy.layers.l2 import Ether
    return bytes(Ether(src=NAT_MAC, dst="80:89:89:89:89:89")
                 / IP(src="10.1.1.1", dst="10.1.1.2", ttl=64, id=0, flags=0)
                 / TCPH(sport=123, dport=80, flags="S", seq=0, ack=0, window=0))


@FLAVOUR
@upstream("conntrack - more complex SNAT")
def test_more_complex_snat(system_traffic: Callable[..., Traffic],
                           request: pytest.FixtureRequest, flavour: str) -> None:
    """All IP through ct(table=1,zone=1,nat); a new connection from ns0 is
    committed with SNAT to 10.1.1.240-254, established ones pass both ways,
    everything else is dropped.  curl gets the page; the dump shows the
    translated reply key.  Beyond upstream: every frame through the model."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("link", "set", "dev", "p0", "address", NAT_MAC, ns=ns0)
    add_flows(t, ["priority=100 ip action=ct(table=1,zone=1,nat)",
                  "priority=100 arp arp_op=1 action=move:OXM_OF_ARP_TPA[]->NXM_NX_REG2[],"
                  "resubmit(,8),goto_table:10",
                  "priority=10 arp action=normal", "priority=0 action=drop",
                  "table=1 priority=100 in_port=1 ip ct_state=+trk+new-est "
                  "action=ct(commit,zone=1,nat(src=10.1.1.240-10.1.1.254)),2",
                  "table=1 priority=100 in_port=1 ip ct_state=+trk-new+est action=2",
                  "table=1 priority=100 in_port=2 ip ct_state=+trk-new+est action=1",
                  "table=1 priority=0 action=drop",
                  *[f for f in arp_responder_flows("priority=100 " + RESPOND_F0)
                    if f.startswith("table=")]])

    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen = nat_choices(t, SNAT_RANGE, zone=1)
    wire.pin(1, chosen)
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - all-zero IP SNAT")
def test_all_zero_ip_snat(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                          flavour: str) -> None:
    """nat(src=0.0.0.0) SNATs only on a collision (ovs-actions(7)): nc from
    ns0 port 30000 to 10.1.1.2:80 is not translated; from port 30001 to
    172.1.1.2:80 (DNATed to 10.1.1.2) and then from port 30001 to 10.1.1.2:80
    directly, the second's reply key collides with the first's, so its source
    port is translated.  The dumps show the three connections in TIME_WAIT
    (each waited for: the client's last ACK crosses OVS after nc exits).
    Beyond upstream: every segment, translated or not, through the model."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    t.ip("route", "add", "172.1.1.0/24", "via", "10.1.1.2", ns=ns0)
    start_http(t, ns1)
    add_flows(t, ["table=0,priority=30,ct_state=-trk,ip,action=ct(table=0)",
                  "table=0,priority=20,ct_state=-rpl,ip,nw_dst=10.1.1.0/24,"
                  "actions=ct(commit,nat(src=0.0.0.0),table=10)",
                  "table=0,priority=20,ct_state=+rpl,ip,nw_dst=10.1.1.0/24,actions=resubmit(,10)",
                  "table=0,priority=20,ip,nw_dst=172.1.1.2,"
                  "actions=ct(commit,nat(dst=10.1.1.2),table=10)",
                  "table=0,priority=10,arp,action=normal", "table=0,priority=1,action=drop",
                  "table=10,priority=20,ct_state=+rpl,ip,nw_dst=10.1.1.0/24 actions=ct(table=20,nat)",
                  "table=10,priority=10,ip,nw_dst=10.1.1.0/24 actions=resubmit(,20)",
                  "table=20,priority=10,ip,nw_dst=10.1.1.1,action=1",
                  "table=20,priority=10,ip,nw_dst=10.1.1.2,action=2"])
    zero = Nat.of("src", "0.0.0.0")

    wire = CtWire.on(t, request, [ns0, ns1])
    nc(t, ns0, "TEST", "30000", "10.1.1.2")
    wait_dump(t, lambda d: "".join(f"{line}\n" for line in d.splitlines()
                                   if "orig=(src=10.1.1.1," in line),
              "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=30000,dport=80),reply=(src=10.1.1.2,"
              "dst=10.1.1.1,sport=80,dport=30000),protoinfo=(state=TIME_WAIT)\n")
    nc(t, ns0, "TEST2", "30001", "172.1.1.2")
    nc(t, ns0, "TEST3", "30001", "10.1.1.2")

    def masked(dump: str) -> str:
        r"""| grep 30001 | grep "orig=.src=10\.1\.1\.1," | sed -e
        's/port=30001/port=<clnt_s_port>/g' -e 's/sport=80,dport=[0-9]+/sport=80,
        dport=<rnd_port>/g' | sort."""
        lines = [re.sub(r"sport=80,dport=[0-9]+", "sport=80,dport=<rnd_port>",
                        line.replace("port=30001", "port=<clnt_s_port>"))
                 for line in dump.splitlines() if "30001" in line and "orig=(src=10.1.1.1," in line]
        return "".join(f"{line}\n" for line in sorted(lines))
    wait_dump(t, masked,
              "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<clnt_s_port>,dport=80),reply=(src="
              "10.1.1.2,dst=10.1.1.1,sport=80,dport=<rnd_port>),protoinfo=(state=TIME_WAIT)\n"
              "tcp,orig=(src=10.1.1.1,dst=172.1.1.2,sport=<clnt_s_port>,dport=80),reply=(src="
              "10.1.1.2,dst=10.1.1.1,sport=80,dport=<clnt_s_port>),protoinfo=(state=TIME_WAIT)\n")
    chosen = nat_choices(t, zero)
    wire.pin(0, chosen)
    assert len(chosen) == 1, f"exactly the colliding connection is SNATed: {chosen}"
    assert wire.verify() >= 20

