"""system-traffic.at's conntrack tests of HTTP through ct, of NAT (SNAT,
DNAT, ranges, related ICMP errors, load balancing, floating IPs) and of the
connection table's limits and flushes, as `make check-system-userspace` (and
check-system-tso) run them: upstream's namespaces, flow tables, traffic
(curl against Python's http.server as upstream's test-l7.py, ping, nc,
packet-outs) and checks (dpctl/dump-conntrack | FORMAT_CT, FORMAT_PING,
curl's exit code, flow counters).  Beyond upstream, every frame that crosses
OVS is judged where the model reaches: the test's flow table runs through
the model's connection tracker and NAT (fixtures/system_ct.CtWire); a NAT
range's choice is read from the dump, checked to be one the range allows
(ovs-actions(7) nat) and pinned for the model.
"""
from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from datapath import model
from datapath.backends.netns import KernelSide, Netns
from datapath.model.actions import Action, mod_nw_dst, mod_nw_src, output
from datapath.model.conntrack import EST, INV, NEW, REL, RPL, TRK, Conntrack, Ct, CtClear, Key, Nat
from datapath.offloads import TxOffloads
from fixtures.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports, dump_ct, format_ct
from fixtures.system_ct_nat import (
    ARP,
    NAT_MAC,
    InjectedWire,
    SetEthDst,
    SetEthSrc,
    arp_pipeline,
    arp_responder_flows,
    check_http,
    check_no_bad_checksum,
    compose,
    conntrack_keys,
    in_range,
    nat_choices,
    pin,
    start_http,
    start_tcpdump,
    tcpdump_read,
)
from fixtures.system_traffic import FLAVOUR, NC_EOF_OPT, Traffic, format_ping, upstream
from harness.control import check
from harness.filters import ofctl_strip
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

IPV4, IPV6 = 0x0800, 0x86DD
ICMP, TCP, UDP, ICMP6 = 1, 6, 17, 58
Out = list[tuple[str | None, list[Action]]]
XX = "10.1.1.2XX"
PING1 = "1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"


def sed_xx(text: str) -> str:
    """sed -e 's/dst=10.1.1.2[45][0-9]/dst=10.1.1.2XX/' (upstream's mask of the
    address a 10.1.1.240-254 range chose)."""
    return re.sub(r"dst=10\.1\.1\.2[45][0-9]", "dst=10.1.1.2XX", text)


def uniq(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for i, line in enumerate(lines) if i == 0 or lines[i - 1] != line)


def check_ct_xx(t: Traffic, addr: str, expected: str, dedup: bool = True) -> None:
    """AT_CHECK([ovs-appctl dpctl/dump-conntrack | FORMAT_CT(addr) | sed -e
    's/dst=10.1.1.2[[45]][[0-9]]/dst=10.1.1.2XX/' [| uniq]], [0], [expected])."""
    got = sed_xx(dump_ct(t, addr))
    got = uniq(got) if dedup else got
    assert got == expected, f"dpctl/dump-conntrack | FORMAT_CT({addr}) | sed: expected\n" \
        f"{expected}got\n{got}"


def ping1(t: Traffic, ns: Netns, dst: str) -> None:
    """NS_CHECK_EXEC([ns], [ping -c 1 dst | FORMAT_PING], [0], [1 packets
    transmitted, 1 received, 0% packet loss, time 0ms])."""
    got = format_ping(t.run(["ping", "-c", "1", dst], ns, timeout=60).stdout)
    assert got == PING1, f"ping -c 1 {dst}: expected {PING1!r}, got {got!r}"


def ip_dst(frame: bytes) -> str:
    """An IPv4 frame's destination address."""
    return str(ipaddress.IPv4Address(frame[30:34]))


def after(a: Arrival, acts: Callable[[Conntrack], list[Action]]) -> bytes:
    """The frame as the actions leave it (on a copy of the table)."""
    probe = copy.deepcopy(a.table)
    return model.forward(a.frame, [*acts(probe), output("probe")], TxOffloads(), a.rx).frames[0]


def nc(t: Traffic, ns: Netns, text: str, sport: str, dst: str, port: str = "80") -> None:
    """NS_CHECK_EXEC([ns], [echo "TEXT" | nc -p SPORT DST PORT > nc.log])."""
    data = t.sb.rundir / f"nc-{sport}-{dst}.in"
    data.write_text(f"{text}\n")
    res = t.run(["nc", "-p", sport, dst, port], ns, input_path=data)
    assert res.rc == 0, f"nc -p {sport} {dst} {port}:\n{res}"


def wait_dump(t: Traffic, transform: Callable[[str], str], expected: str) -> None:
    """dpctl/dump-conntrack through upstream's filters, until it reads `expected`."""
    def now() -> str:
        return transform(check(t.sb.appctl("dpctl/dump-conntrack")).stdout)
    wait_until(lambda: now() == expected, 10, what=f"dpctl/dump-conntrack to read\n{expected}",
               describe=now)


def nc_udp(t: Traffic, ns: Netns, dst: str, port: str, six: bool = False) -> None:
    """NS_CHECK_EXEC([ns], [echo a | nc [-6] $NC_EOF_OPT -u DST PORT])."""
    data = t.sb.rundir / "a.in"
    data.write_text("a\n")
    res = t.run(["ncat", *(["-6"] if six else []), *NC_EOF_OPT, "-u", dst, port], ns,
                input_path=data)
    assert res.rc == 0, f"nc -u {dst} {port}:\n{res}"


def check_flows(t: Traffic, *filters: Callable[[str], str], expected: str,
                grep_v: str = "drop") -> None:
    """AT_CHECK([ovs-ofctl -O OpenFlow15 dump-flows br0 | FILTERS | sort | grep -v
    drop], [0], [expected])."""
    text = check(t.sb.ofctl("-O", "OpenFlow15", "dump-flows", "br0")).stdout
    for f in filters:
        text = f(text)
    got = "".join(f"{line}\n" for line in sorted(text.splitlines()) if grep_v not in line)
    assert got == expected, f"dump-flows: expected\n{expected}got\n{got}"


def normal(a: Arrival) -> Out:
    return [(port, []) for port in a.normal()]


# ----------------------------------------------------------------------------
# HTTP through ct

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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP and not six:
            return normal(a)
        if a.eth_type != (IPV6 if six else IPV4):
            return []
        if a.ip_proto == (ICMP6 if six else ICMP):
            return normal(a)
        if a.ip_proto != TCP:
            return []
        if a.ofport == 1:
            return [("ovs-p1", [Ct(a.table, commit=True)])]
        st = a.state().state
        return [("ovs-p0" if st & TRK and st & EST else None, [Ct(a.table)])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return normal(a)
        if a.eth_type != IPV4:
            return []
        if a.ip_proto == ICMP:
            return normal(a)
        if a.ip_proto != TCP:
            return []
        port = {1: "ovs-p1", 2: "ovs-p0", 3: "ovs-p3", 4: "ovs-p2"}[a.ofport]
        acts: dict[int, list[Action]] = {
            1: [Ct(a.table, commit=True)], 2: [Ct(a.table)],
            3: [Ct(a.table), Ct(a.table, commit=True)], 4: [Ct(a.table, commit=True)]}
        return [(port, acts[a.ofport])]

    wire = CtWire.on(t, request, spaces, pipeline)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    check_http(t, spaces[0], "10.1.1.2")
    check_http(t, spaces[2], "10.1.1.4")
    assert wire.verify() >= 20


# ----------------------------------------------------------------------------
# SNAT

TCP_XX = ("tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
          f"reply=(src=10.1.1.2,dst={XX},sport=<cleared>,dport=<cleared>),zone=1,"
          "protoinfo=(state=<cleared>)\n")
SNAT_RANGE = Nat.of("src", "10.1.1.240-10.1.1.254")
RESPOND_F0 = "reg2=0x0a0101f0/0xfffffff0"  # table 8: 10.1.1.240-255 is NAT_MAC's
OWNED_F0 = in_range("10.1.1.240", "10.1.1.255")


def snat_pipeline(nat: Nat, chosen: dict[Key, tuple[str, int]], proto: int | None = None,
                  reply_ports: tuple[int, ...] = ()) -> Callable[[Arrival], Out]:
    """in_port=1,[proto] -> ct(commit,zone=1,nat(...)),2; in_port=2 [proto,
    tp_dst in reply_ports] ct_state=-trk -> ct(table=0,zone=1,nat), then
    +trk,ct_zone=1 -> 1; the ARP responder for 10.1.1.240/28."""
    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, OWNED_F0)
        if a.eth_type != IPV4 or (proto is not None and a.ip_proto != proto):
            return []
        if a.ofport == 1:
            pin(a, 1, chosen)
            return [("ovs-p1", [Ct(a.table, zone=1, commit=True, nat=nat)])]
        if reply_ports and int.from_bytes(a.frame[36:38], "big") not in reply_ports:
            return []
        return [("ovs-p0", [Ct(a.table, zone=1, nat=Nat())])]
    return pipeline


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
    chosen: dict[Key, tuple[str, int]] = {}
    wire = CtWire.on(t, request, [ns0, ns1], snat_pipeline(SNAT_RANGE, chosen))
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen.update(nat_choices(t, SNAT_RANGE, zone=1))
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
    is `ip neigh add` here: the runtime has no net-tools.)  Beyond upstream:
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
    chosen: dict[Key, tuple[str, int]] = {}
    wire = CtWire.on(t, request, [ns0, ns1],
                     snat_pipeline(nat, chosen, TCP, reply_ports=(34567, 34568)))
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen.update(nat_choices(t, nat, zone=1))
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
    chosen: dict[Key, tuple[str, int]] = {}
    wire = CtWire.on(t, request, [ns0, ns1], snat_pipeline(nat, chosen))
    ping1(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,"
                f"code=0),reply=(src=10.1.1.2,dst={XX},id=<cleared>,type=0,code=0),zone=1\n",
                dedup=False)
    chosen.update(nat_choices(t, nat, zone=1))
    assert wire.verify() >= 2


@FLAVOUR
@upstream("conntrack - SNAT with port range with exhaustion")
def test_snat_port_range_exhaustion(system_traffic: Callable[..., Traffic],
                                    request: pytest.FixtureRequest, flavour: str) -> None:
    """A packet-out SYN (10.1.1.1:123 -> 10.1.1.2:80) takes the only mapping
    nat(src=10.1.1.240:34568) has; curl from ns0 then needs a second mapping
    and gets none: it times out (28), and the table still holds the one
    connection.  The model has no NAT exhaustion (it has one mapping per
    connection and no limit on how many share it), and what becomes of a
    packet whose commit finds no mapping is documented nowhere (OVS sends
    ns0's SYNs on untranslated; the reply is dropped): the judge takes the ARP
    frames only."""
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

    wire = CtWire.on(t, request, [ns0, ns1], lambda a: arp_pipeline(a, OWNED_F0))
    wire.judged = lambda frame: frame[12:14] == b"\x08\x06"
    start_http(t, ns1)
    syn = compose_syn()
    check(t.sb.ofctl("packet-out", "br0",
                     f"packet={syn.hex()} actions=ct(commit,zone=1,nat(src=10.1.1.240:34568))"))
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
    chosen: dict[Key, tuple[str, int]] = {}

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, OWNED_F0)
        if a.eth_type != IPV4:
            return []
        first = Ct(a.table, zone=1, nat=Nat())
        st = a.state(1, Nat()).state
        if a.ofport == 1 and st & TRK and st & NEW and not st & EST:
            pin(a, 1, chosen)
            return [("ovs-p1", [first, Ct(a.table, zone=1, commit=True, nat=SNAT_RANGE)])]
        if st & TRK and st & EST and not st & NEW and a.ofport in (1, 2):
            return [({1: "ovs-p1", 2: "ovs-p0"}[a.ofport], [first])]
        return [(None, [first])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct_xx(t, "10.1.1.2", TCP_XX)
    chosen.update(nat_choices(t, SNAT_RANGE, zone=1))
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
    zero, dnat = Nat.of("src", "0.0.0.0"), Nat.of("dst", "10.1.1.2")
    chosen: dict[Key, tuple[str, int]] = {}
    subnet = in_range("10.1.1.0", "10.1.1.255")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return normal(a)
        if a.eth_type != IPV4:
            return []
        dst, rpl = ip_dst(a.frame), a.state().state & RPL

        def acts(table: Conntrack) -> list[Action]:
            if subnet(dst) and not rpl:
                return [Ct(table), Ct(table, commit=True, nat=zero)]
            if subnet(dst):
                return [Ct(table), Ct(table, nat=Nat())]
            if dst == "172.1.1.2":
                return [Ct(table), Ct(table, commit=True, nat=dnat)]
            return [Ct(table)]
        if subnet(dst) and not rpl:
            pin(a, 0, chosen)
        # table 20: by the destination the packet has by then
        port = {"10.1.1.1": "ovs-p0", "10.1.1.2": "ovs-p1"}.get(ip_dst(after(a, acts)))
        return [(port, acts(a.table))]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
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
    chosen.update(nat_choices(t, zero))
    assert len(chosen) == 1, f"exactly the colliding connection is SNATed: {chosen}"
    assert wire.verify() >= 20


# ----------------------------------------------------------------------------
# DNAT

VIP = "10.1.1.64"
DNAT_VIP = Nat.of("dst", "10.1.1.2")


def is_vip(addr: str) -> bool:
    """table=8,reg2=0x0a010140: the responder answers for 10.1.1.64 only."""
    return addr == VIP


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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, is_vip)
        if a.eth_type != IPV4:
            return []
        if a.ofport == 1:
            nat = DNAT_VIP if ip_dst(a.frame) == VIP else None
            return [("ovs-p1", [Ct(a.table, zone=1, commit=True, nat=nat)])]
        st = a.state(1, Nat()).state
        return [("ovs-p0" if st & TRK and st & EST else None, [Ct(a.table, zone=1, nat=Nat())])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, is_vip)
        if a.eth_type != IPV4:
            return []
        first = Ct(a.table, zone=1, nat=Nat())
        st = a.state(1, Nat()).state
        if a.ofport == 1 and st & NEW:
            nat = DNAT_VIP if ip_dst(a.frame) == VIP else None
            return [("ovs-p1", [first, Ct(a.table, zone=1, commit=True, nat=nat)])]
        if st & EST and a.ofport in (1, 2):
            return [({1: "ovs-p1", 2: "ovs-p0"}[a.ofport], [first])]
        return [(None, [first])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
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
    dnat, snat = Nat.of("dst", "10.1.1.2", 80), Nat.of("src", "10.1.1.240")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return normal(a)
        if a.eth_type != IPV4:
            return []
        if a.ofport == 1 and ip_dst(a.frame) == "172.1.1.2":
            return [("ovs-p1", [Ct(a.table, commit=True, nat=dnat),
                                Ct(a.table, commit=True, nat=snat, mark=(0xAC, 0xFFFFFFFF),
                                   label=(0xAC, (1 << 128) - 1))])]
        if a.ofport == 2:
            return [("ovs-p0", [Ct(a.table, nat=Nat())])]
        return []

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    check_http(t, ns0, "http://172.1.1.2:8080")
    check_ct(t, "10.1.1.240", "")
    check_ct(t, "10.1.1.1", "tcp,orig=(src=10.1.1.1,dst=172.1.1.2,sport=<cleared>,"
             "dport=<cleared>),reply=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,"
             "dport=<cleared>),mark=172,labels=0xac,protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 10


# ----------------------------------------------------------------------------
# related ICMP errors

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
    chosen: dict[Key, tuple[str, int]] = {}

    def pipeline(a: Arrival) -> Out:
        if a.eth_type == ARP:
            return arp_pipeline(a, OWNED_F0)
        if a.eth_type != IPV4:
            return []
        if a.ofport == 1 and a.ip_proto == UDP:
            pin(a, 0, chosen)
            return [("ovs-p1", [Ct(a.table, commit=True, nat=SNAT_RANGE, mark=(1, 0xFFFFFFFF))])]
        if a.ofport == 2 and a.ip_proto == ICMP:
            st = a.state(0, Nat())
            ok = (st.state & REL and st.conn is not None and st.conn.mark == 1
                  and ip_dst(after(a, lambda table: [Ct(table, nat=Nat())])) == "10.1.1.1")
            return [("ovs-p0" if ok else None, [Ct(a.table, nat=Nat())])]
        return []

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    pcap = start_tcpdump(t, None, "ovs-p0", "p0")
    nc_udp(t, ns0, "10.1.1.2", "10000")
    wait_until(lambda: "unreachable" in tcpdump_read(t, pcap, "icmp"), 10,
               what="ns1's port unreachable to reach ovs-p0")
    check(t.sb.appctl("revalidator/purge"))
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
    chosen.update(nat_choices(t, SNAT_RANGE))
    assert wire.verify() >= 3


# ----------------------------------------------------------------------------
# IPv6 NAT

def v6_ports(t: Traffic) -> tuple[Netns, Netns]:
    """ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH(p0/p1, ..., "fc00::1|2/96")
    (with duplicate address detection, as upstream here)."""
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "fc00::1/96")
    t.add_veth("p1", ns1, "br0", "fc00::2/96")
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
    chosen: dict[Key, tuple[str, int]] = {}

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
    chosen.update(nat_choices(t, nat))
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
    nat = Nat.of("dst", "fc00::2")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV6:
            return []
        if a.ofport == 1:
            dst = str(ipaddress.IPv6Address(a.frame[38:54]))
            return [("ovs-p1", [Ct(a.table, zone=1, commit=True, nat=nat)])] \
                if dst == "fc00::240" else []
        st = a.state(1, Nat()).state
        return [("ovs-p0" if st & TRK and st & EST else None, [Ct(a.table, zone=1, nat=Nat())])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
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
    nat = Nat.of("src", "fc00::240")

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV6:
            return []
        if a.ofport == 1:
            return [("ovs-p1", [Ct(a.table, commit=True, nat=nat)])]
        st = a.state(0, Nat()).state
        ok = st & TRK and st & (EST | REL)
        return [("ovs-p0" if ok else None, [Ct(a.table, nat=Nat())])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    t.wait_ping6(ns0, "fc00::2")
    check(t.sb.appctl("dpctl/flush-conntrack"))
    wire.flushed()
    pcap = start_tcpdump(t, None, "ovs-p0", "p0")
    nc_udp(t, ns0, "fc00::2", "1", six=True)
    wait_until(lambda: "unreachable" in tcpdump_read(t, pcap, "icmp6"), 10,
               what="ns1's port unreachable to reach ovs-p0")
    check_no_bad_checksum(t, pcap, "icmp6")
    check_ct(t, "fc00::2", "udp,orig=(src=fc00::1,dst=fc00::2,sport=<cleared>,dport=<cleared>),"
             "reply=(src=fc00::2,dst=fc00::240,sport=<cleared>,dport=<cleared>)\n")
    assert wire.verify() >= 4


# ----------------------------------------------------------------------------
# packet-outs

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

    wire = InjectedWire(t, request, pipeline)
    wire.add("ovs-p0", ns0, "p0")
    wire.add("ovs-p1", ns1, "p1")
    l3 = ("eth_src=50:54:00:00:00:09,eth_dst=50:54:00:00:00:0a,dl_type=0x0800,"
          "nw_src=10.1.1.1,nw_dst=10.1.1.2,nw_proto=17,nw_ttl=64,nw_frag=no")
    for sport, dport in [*((1, i) for i in range(1, 21)), (2, 1)]:
        wire.packet_out("ovs-p0", compose(t, f"{l3}, udp_src={sport},udp_dst={dport}"), "1")

    def dump() -> str:
        out = check(t.sb.appctl("dpctl/dump-conntrack", "zone=1")).stdout
        return "".join(sorted(f"{line}\n" for line in out.splitlines() if "src=10.1.1.1," in line))

    def entry(sport: int, dport: int) -> str:
        return (f"udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport={sport},dport={dport}),reply=("
                f"src=10.1.1.2,dst=10.1.1.1,sport={dport},dport={sport}),zone=1\n")
    expout = "".join(sorted([*(entry(1, i) for i in range(1, 21)), entry(2, 1)]))
    assert dump() == expout, dump()
    check(t.sb.appctl("dpctl/flush-conntrack", "zone=1", "ct_nw_proto=17,ct_tp_src=1"))
    wire.event("dpctl/flush-conntrack zone=1 ct_nw_proto=17,ct_tp_src=1",
               lambda w: w.table.conns.__setitem__(slice(None), [
                   c for c in w.table.conns
                   if not (c.zone == 1 and c.orig.proto == UDP and c.orig.sport == 1)]))
    assert dump() == entry(2, 1), dump()
    assert wire.verify() >= 21


def pcap_hex(path: Path) -> list[str]:
    """ovs-pcap PCAP: each frame as hex (the runtime has no ovs-pcap; scapy reads it)."""
    from scapy.utils import rdpcap
    try:
        return [bytes(p).hex() for p in rdpcap(str(path))]
    except (OSError, EOFError, ValueError):
        return []  # tcpdump has not written a whole header yet


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

    wire = InjectedWire(t, request, pipeline)
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
    got = "".join(sorted(f"{line}\n" for line in check(t.sb.appctl("dpctl/dump-conntrack"))
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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV4 or a.ip_proto != ICMP:
            return []
        st = a.state(1).state
        if a.ofport == 1 and st & NEW:
            return [(None, [Ct(a.table, zone=1), Ct(a.table, commit=True)])]
        return [(None, [Ct(a.table, zone=1)])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    icmp = compose(t, "eth_src=f0:00:00:01:01:01,eth_dst=f0:00:00:01:01:02,eth_type=0x0800,"
                      "nw_src=10.1.1.1,nw_dst=10.1.1.2,nw_proto=1,nw_ttl=64,nw_frag=no,"
                      "icmp_type=8,icmp_code=0", "")
    side = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close p0", side.close)
    side.send([icmp])
    side.send([icmp])

    def table2() -> str:
        text = check(t.sb.ofctl("dump-flows", "br0")).stdout
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
    check(t.sb.ofctl("add-flows", "br0", str(flows_file(t, [
        "table=0,ip,actions=ct(table=1,zone=42,nat)",
        "table=1,in_port=ovs-client,ip,ct_state=+trk+new,actions=ct(commit,table=2,zone=42,"
        "nat(dst=192.168.10.20)",
        "table=1,icmp,ct_state=+trk+rel-rpl,actions=ct(commit,table=2,zone=42,nat)",
        "table=1,ip,actions=resubmit(,2)",
        "table=2,in_port=ovs-client,ip,ct_state=+trk+new,actions=output:ovs-server",
        "table=2,in_port=ovs-client,icmp,ct_state=+trk+rel,actions=output:ovs-server",
        "table=2,in_port=ovs-server,icmp,ct_state=+trk+rel,actions=output:ovs-client",
        "table=2,in_port=ovs-server,ip,ct_state=+trk+rpl,actions=output:ovs-client"]))))
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

    wire = InjectedWire(t, request, pipeline)
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
    check(t.sb.appctl("revalidator/purge"))
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

    check(t.sb.appctl("dpctl/flush-conntrack", "zone=42"))
    wire.event("dpctl/flush-conntrack zone=42", lambda w: w.table.conns.__setitem__(
        slice(None), [c for c in w.table.conns if c.zone != 42]))
    pcap = start_tcpdump(t, client, "client", "client")
    wire.packet_out("ovs-client", bytes.fromhex(udp))
    wire.packet_out("ovs-server", bytes.fromhex(
        "000000002010000000002000080045000038011F0000FF01114AC0A81401C0A8140A0304F77800000578"
        "4500001C000040000A11D162C0A8140AC0A80A140001000200080000"))
    check(t.sb.appctl("revalidator/purge"))
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


def flows_file(t: Traffic, flows: list[str]) -> Path:
    """AT_DATA([flows.txt], ...)."""
    path = t.sb.rundir / "flows.txt"
    path.write_text("".join(f"{f}\n" for f in flows))
    return path


def grep_ct(t: Traffic, addr: str) -> str:
    """ovs-appctl dpctl/dump-conntrack | grep "ADDR"."""
    return "".join(f"{line}\n" for line in check(t.sb.appctl("dpctl/dump-conntrack"))
                   .stdout.splitlines() if addr in line)


# ----------------------------------------------------------------------------
# limits

def appctl_fails(t: Traffic, args: list[str], stderr: str) -> None:
    """AT_CHECK([ovs-appctl ARGS], [2], [ignore], [stderr]) (the ovs-appctl binary:
    its own error line is part of the check)."""
    res = t.sb._tool([t.sb.install.tool("ovs-appctl"), *args])
    assert (res.rc, res.stderr) == (2, stderr), f"ovs-appctl {' '.join(args)}:\n{res}"


def get_limits(t: Traffic, *args: str) -> str:
    """ovs-appctl dpctl/ct-get-limits [args]."""
    return check(t.sb.appctl("dpctl/ct-get-limits", *args)).stdout


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
            pkt = check(t.run(["ovs-ofctl", "compose-packet", "--bare", udp(src, dst, i)]))
            check(t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0",
                             f"in_port={in_port} packet={pkt.stdout.strip()} "
                             "actions=resubmit(,0)"))

    def conns(src: str) -> str:
        out = check(t.sb.appctl("dpctl/dump-conntrack")).stdout
        return "".join(sorted(f"{line}\n" for line in out.splitlines()
                              if f"orig=(src={src}," in line))

    def udp_conn(src: int, dst: int, port: int, zone: int) -> str:
        return (f"udp,orig=(src=10.1.1.{src},dst=10.1.1.{dst},sport=1,dport={port}),reply=(src="
                f"10.1.1.{dst},dst=10.1.1.{src},sport={port},dport=1),zone={zone}\n")

    check(t.sb.appctl("dpctl/ct-set-limits", "zone=1,limit=0"))
    send(1, 1, 2, range(2, 3))
    check_limits(t, "default limit=0\nzone=1,limit=0,count=0\n")
    check(t.sb.appctl("dpctl/ct-del-limits", "zone=1"))
    check(t.sb.appctl("dpctl/ct-set-limits", "default=3"))
    check_limits(t, "default limit=3\n")
    send(1, 1, 2, range(2, 7))
    check_limits(t, "default limit=3\nzone=1,limit=3,count=3\n", "zone=1")
    send(2, 3, 4, range(2, 7))
    check_limits(t, "default limit=3\nzone=1,limit=3,count=3\nzone=3,limit=3,count=3\n",
                 "zone=1,3")
    check(t.sb.appctl("dpctl/flush-conntrack"))
    check(t.sb.appctl("dpctl/ct-set-limits", "default=10", "zone=1,limit=5", "zone=2,limit=3",
                      "zone=3,limit=3", "zone=4,limit=15"))
    check(t.sb.appctl("dpctl/ct-del-limits", "zone=2,4,5"))
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
    check(t.sb.appctl("dpctl/ct-set-limits", "default=15", "zone=4,limit=4"))
    check_limits(t, "default limit=15\nzone=4,limit=4,count=0\n", "zone=4")
    check(t.sb.appctl("dpctl/ct-del-limits", "default"))
    check_limits(t, "default limit=0\nzone=4,limit=4,count=0\n", "zone=4")
    check(t.sb.appctl("dpctl/ct-set-limits", "default=15"))
    check_limits(t, "default limit=15\nzone=4,limit=4,count=0\n", "zone=4")
    check(t.sb.appctl("dpctl/ct-del-limits", "default", "zone=4"))
    check_limits(t, "default limit=0\nzone=4,limit=0,count=0\n", "zone=4")

    # VSCTL_ADD_DATAPATH_TABLE()
    check(t.sb.vsctl("--", "--id=@m", "create", "Datapath", "datapath_version=0", "--", "set",
                     "Open_vSwitch", ".", 'datapaths:"netdev"=@m'))
    check(t.sb.appctl("dpctl/flush-conntrack", "zone=1"))
    check(t.sb.appctl("dpctl/flush-conntrack", "zone=3"))
    check(t.sb.appctl("dpctl/ct-set-limits", "default=10"))
    check(t.sb.appctl("dpctl/ct-del-limits", "zone=3"))
    check_limits(t, "default limit=10\nzone=1,limit=5,count=0\n")
    check(t.sb.vsctl("set-zone-limit", "netdev", "1", "3"))
    check(t.sb.vsctl("set-zone-limit", "netdev", "3", "3"))
    wait_limits(t, "default limit=10\nzone=1,limit=3,count=0\nzone=3,limit=3,count=0\n")
    send(2, 3, 4, range(2, 7))
    assert conns("10.1.1.3") == "".join(udp_conn(3, 4, i, 3) for i in range(2, 5))
    check_limits(t, "default limit=10\nzone=1,limit=3,count=0\nzone=3,limit=3,count=3\n")
    check(t.sb.vsctl("del-zone-limit", "netdev", "3"))
    wait_limits(t, "default limit=10\nzone=1,limit=3,count=0\n")
    check(t.sb.vsctl("set-zone-limit", "netdev", "default", "5"))
    wait_limits(t, "default limit=5\nzone=1,limit=3,count=0\n")
    check(t.sb.vsctl("del-zone-limit", "netdev", "default"))
    wait_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    db = ("ovs-vswitchd: the zone limits are set via database, use 'ovs-vsctl "
          "{}-zone-limit <...>' instead. (Operation not permitted)\n" + err)
    appctl_fails(t, ["dpctl/ct-set-limits", "default=15", "zone=3,limit=5", "zone=1,limit=5"],
                 db.format("set"))
    check_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    appctl_fails(t, ["dpctl/ct-del-limits", "zone=1"], db.format("del"))
    check_limits(t, "default limit=0\nzone=1,limit=3,count=0\n")
    check(t.sb.vsctl("del-zone-limit", "netdev", "1"))
    check(t.sb.vsctl("set-zone-limit", "netdev", "default", "10"))
    check_limits(t, "default limit=10\n")
    appctl_fails(t, ["dpctl/ct-set-limits", "default=15", "zone=1,limit=5"], db.format("set"))
    check(t.sb.vsctl("del-zone-limit", "netdev", "default"))
    check(t.sb.appctl("dpctl/ct-set-limits", "default=15", "zone=1,limit=5"))
    check_limits(t, "default limit=15\nzone=1,limit=5,count=0\n")
    check(t.sb.appctl("dpctl/ct-del-limits", "zone=1"))
    check_limits(t, "default limit=15\n")


# ----------------------------------------------------------------------------
# load balancing

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
    check(t.sb.ofctl("-O", "OpenFlow15", "-vwarn", "add-group", "br0", LB_GROUP))
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
                server = chosen.get(key, SERVERS[0]) if key is not None else SERVERS[0]
                return [Ct(table, commit=True, nat=Nat.of("dst", server))]
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
    check_ct(t, VIP, "".join(
        "tcp,orig=(src=10.1.1.1,dst=10.1.1.64,sport=<cleared>,dport=<cleared>),reply=(src="
        f"{s},dst=10.1.1.1,sport=<cleared>,dport=<cleared>),protoinfo=(state=<cleared>)\n"
        for s in SERVERS))
    chosen.update(lb_choices(t))
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
    chosen.update(lb_choices(t))
    assert len(chosen) == 18, f"18 connections expected, the dump has {len(chosen)}"
    assert wire.verify() >= 18 * 6


# ----------------------------------------------------------------------------
# floating IPs: addresses rewritten outside conntrack

FIP = {"10.254.254.1": "10.1.1.1", "10.254.254.2": "10.1.1.2"}
LOCAL = {v: k for k, v in FIP.items()}
FIP_MAC = {"10.1.1.1": "f0:00:00:01:01:01", "10.1.1.2": "f0:00:00:01:01:02"}
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


def ip_src(frame: bytes) -> str:
    """An IPv4 frame's source address."""
    return str(ipaddress.IPv4Address(frame[26:30]))


def last_state(a: Arrival, acts: Callable[[Conntrack], list[Action]]) -> int:
    """ct_state after the actions (on a copy of the table)."""
    probe = copy.deepcopy(a.table)
    model.forward(a.frame, acts(probe), TxOffloads(), a.rx)
    return probe.last.state


def nc_send(t: Traffic, ns: Netns, dst: str, port: str) -> None:
    """NS_CHECK_EXEC([ns], [echo "foobar" | nc $NC_EOF_OPT DST PORT])."""
    data = t.sb.rundir / "foobar.in"
    data.write_text("foobar\n")
    res = t.run(["ncat", *NC_EOF_OPT, dst, port], ns, input_path=data)
    assert res.rc == 0, f"nc {dst} {port}:\n{res}"


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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV4:
            return []
        src, dst = ip_src(a.frame), ip_dst(a.frame)

        def tracked(table: Conntrack) -> list[Action]:
            st = last_state(a, lambda probe: [Ct(probe)])
            return [Ct(table), *([Ct(table, commit=True)] if st & NEW else [])]
        st = a.state().state
        if not st & (NEW | EST) or st & INV:
            return [(None, [Ct(a.table)])]
        if dst in FIP:
            if src not in LOCAL:
                return [(None, tracked(a.table))]
            src, dst = LOCAL[src], FIP[dst]

            def translated(table: Conntrack) -> list[Action]:
                return [*tracked(table), mod_nw_dst(dst), mod_nw_src(src), CtClear(table),
                        Ct(table)]
            st2 = last_state(a, translated)
            if not st2 & (NEW | EST) or st2 & INV:
                return [(None, translated(a.table))]
            acts = [*translated(a.table), *([Ct(a.table, commit=True)] if st2 & NEW else [])]
        else:
            acts = tracked(a.table)
        eth_src = FIP_MAC.get(src, GW_MAC if src.startswith("10.254.254.") else None)
        if eth_src is None or dst not in FIP_MAC:
            return [(None, acts)]
        out = {"10.1.1.1": "ovs-p0", "10.1.1.2": "ovs-p1"}[dst]
        return [(out, [*acts, SetEthSrc(eth_src), SetEthDst(FIP_MAC[dst])])]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)

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

    def pipeline(a: Arrival) -> Out:
        if a.eth_type != IPV4:
            return []
        src, dst = ip_src(a.frame), ip_dst(a.frame)
        st = a.state().state
        if dst not in FIP or src not in LOCAL or not st & (NEW | EST) or st & INV:
            return [(None, [Ct(a.table)])]
        src, dst = LOCAL[src], FIP[dst]

        def rewritten(table: Conntrack) -> list[Action]:
            mark1 = [Ct(table, commit=True, mark=(1, 0xFFFFFFFF))] if st & NEW else []
            return [Ct(table), *mark1, mod_nw_dst(dst), mod_nw_src(src),
                    SetEthDst(FIP_MAC[dst]), SetEthSrc(GW_MAC), Ct(table)]
        probe = copy.deepcopy(a.table)
        model.forward(a.frame, rewritten(probe), TxOffloads(), a.rx)
        st2, mark = probe.last.state, (probe.last.conn.mark if probe.last.committed
                                       and probe.last.conn is not None else 0)
        acts = rewritten(a.table)
        if st2 & TRK and st2 & NEW and mark == 0:
            acts.append(Ct(a.table, commit=True, mark=(2, 0xFFFFFFFF)))
        elif not (st2 & TRK and st2 & EST):
            return [(None, acts)]
        return [({"10.1.1.1": "ovs-p0", "10.1.1.2": "ovs-p1"}[dst], acts)]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    nc_send(t, ns1, "10.254.254.1", "1234")
    check_ct(t, "10.254.254",
             "tcp,orig=(src=10.1.1.2,dst=10.254.254.1,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.254.254.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),mark=1,"
             "protoinfo=(state=<cleared>)\n"
             "tcp,orig=(src=10.254.254.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),"
             "reply=(src=10.1.1.1,dst=10.254.254.2,sport=<cleared>,dport=<cleared>),mark=2,"
             "protoinfo=(state=<cleared>)\n")
    assert wire.verify() >= 6
