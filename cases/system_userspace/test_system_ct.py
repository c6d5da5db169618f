"""system-traffic.at's conntrack tests, as `make check-system-userspace` (and
check-system-tso) run them: two namespaces on br0, upstream's flow table with
ct actions, upstream's traffic and checks (ping | FORMAT_PING, dpctl/dump-
conntrack | FORMAT_CT).  Beyond upstream, every frame that crosses OVS is
judged: upstream's flow table itself, as the test installs it, runs through
the model's OpenFlow pipeline (datapath/model/openflow/) and its connection
tracker in the order the frames met OVS (fixtures/system_userspace/system_ct.py's
CtWire).
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath.backends.netns import Netns
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_ct import CtWire, add_flows, check_ct, ct_ports, format_ct
from fixtures.system_userspace.system_ct_macros import (
    UDP_1_2,
    UDP_2_1,
    check_grep_ct,
    check_lost,
    grep_ct,
    monitor,
    packet_in_states,
    wait_packet_ins,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import Result, check
from harness.filters import ofctl_strip

pytestmark = pytest.mark.requires(backend="tap")


@FLAVOUR
@upstream("conntrack - IPv4 ping")
def test_ipv4_ping(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                   flavour: str) -> None:
    """Any ICMP from ns0 is committed and goes to ns1; from ns1 only what
    conntrack says is established.  ns0's pings are answered; the connection
    is dumped, flushed by its tuple, gone; ns1's pings then die (a new
    connection from ns1 is not let through).  Beyond upstream: each request
    and reply through the model's tracker, and nothing from ns1 leaking out."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,icmp,action=ct(commit),2",
                  "priority=100,in_port=2,icmp,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,icmp,ct_state=+trk+est,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    t.check_ping(ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0)\n")
    t.sb.appctl("dpctl/flush-conntrack", "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2")
    wire.flushed()
    check_ct(t, "10.1.1.2", "")
    check_lost(t, ns1, "10.1.1.1")
    assert wire.verify() >= 6


# ----------------------------------------------------------------------------
# packet-out and the controller

@FLAVOUR
@upstream("conntrack - controller")
def test_controller(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                    flavour: str) -> None:
    """Three crafted UDP packets by packet-out: an unsolicited reply from port 2
    (ct(table=0): +trk+new, matches nothing, dropped), a request from port 1
    (ct(commit),controller) and the reply again (+est+rpl: controller).  The
    monitor must show exactly the last two.  Beyond upstream: the judge
    replays the three through the model's tracker and no frame may leave by
    either port (every path ends at the controller or a drop), and the
    packet-in's ct_state is the model's."""
    t: Traffic = system_traffic(flavour)
    t.sb.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg", "ofproto_dpif_upcall:dbg")
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,udp,action=ct(commit),controller",
                  "priority=100,in_port=2,ct_state=-trk,udp,action=ct(table=0)",
                  "priority=100,in_port=2,ct_state=+trk+est,udp,action=controller"])

    wire = CtWire.on(t, request, [ns0, ns1])
    mon = monitor(t)
    for ofport, pkt, actions in ((2, UDP_2_1, "ct(table=0)"), (1, UDP_1_2, "ct(commit),controller"),
                                 (2, UDP_2_1, "ct(table=0)")):
        wire.inject(f"ovs-p{ofport - 1}", pkt, actions)
        t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0", str(ofport), actions, pkt)
    log = wait_packet_ins(mon, 2)
    assert log == (
        "NXT_PACKET_IN2 (xid=0x0): total_len=42 in_port=1 (via action) data_len=42 (unbuffered)\n"
        "udp,vlan_tci=0x0000,dl_src=50:54:00:00:00:09,dl_dst=50:54:00:00:00:0a,nw_src=10.1.1.1,"
        "nw_dst=10.1.1.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=2 udp_csum:0\n"
        "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=42 ct_state=est|rpl|trk,ct_nw_src=10.1.1.1,"
        "ct_nw_dst=10.1.1.2,ct_nw_proto=17,ct_tp_src=1,ct_tp_dst=2,ip,in_port=2 (via action) "
        "data_len=42 (unbuffered)\n"
        "udp,vlan_tci=0x0000,dl_src=50:54:00:00:00:09,dl_dst=50:54:00:00:00:0a,nw_src=10.1.1.2,"
        "nw_dst=10.1.1.1,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=2,tp_dst=1 udp_csum:0\n"), \
        f"ofctl_monitor.log:\n{log}"
    assert wire.verify() == 0
    # The second packet-in follows the third packet's ct(table=0) (the model's
    # third lookup); the first follows no recirculation, so carries no state.
    model = [None, wire.table.results[2].text]
    assert packet_in_states(log) == model, f"ct_state in the packet-ins, the model's: {model}"


@FLAVOUR
@upstream("conntrack - force commit")
def test_force_commit(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                      flavour: str) -> None:
    """Port 1 commits with force; port 2's +est packets commit with force too,
    which ends the connection and starts one in their direction (ovs-actions(7)
    `force`): the monitor shows the reply as +new+trk, the table holds
    10.1.1.2 -> 10.1.1.1; one more packet from port 1 turns it back.  Beyond
    upstream: the model replays the four packets, nothing may leave by a
    port, and the packet-in's ct_state is the model's."""
    t: Traffic = system_traffic(flavour)
    t.sb.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg", "ofproto_dpif_upcall:dbg")
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,udp,action=ct(force,commit),controller",
                  "priority=100,in_port=2,ct_state=-trk,udp,action=ct(table=0)",
                  "priority=100,in_port=2,ct_state=+trk+est,udp,action=ct(force,commit,table=1)",
                  "table=1,in_port=2,ct_state=+trk,udp,action=controller"])

    wire = CtWire.on(t, request, [ns0, ns1])
    mon = monitor(t)
    wire.packet_out("ovs-p1", UDP_2_1, "-O", "OpenFlow13", in_port="2")
    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    wire.packet_out("ovs-p1", UDP_2_1, "-O", "OpenFlow13", in_port="2")
    t.sb.appctl("revalidator/purge")
    log = wait_packet_ins(mon, 2)
    assert log == (
        "NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len=42 in_port=1 (via action) data_len=42 "
        "(unbuffered)\n"
        "udp,vlan_tci=0x0000,dl_src=50:54:00:00:00:09,dl_dst=50:54:00:00:00:0a,nw_src=10.1.1.1,"
        "nw_dst=10.1.1.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=2 udp_csum:0\n"
        "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=42 ct_state=new|trk,"
        "ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.1,ct_nw_proto=17,ct_tp_src=2,ct_tp_dst=1,ip,"
        "in_port=2 (via action) data_len=42 (unbuffered)\n"
        "udp,vlan_tci=0x0000,dl_src=50:54:00:00:00:09,dl_dst=50:54:00:00:00:0a,nw_src=10.1.1.2,"
        "nw_dst=10.1.1.1,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=2,tp_dst=1 udp_csum:0\n"), \
        f"ofctl_monitor.log:\n{log}"
    check_grep_ct(t, r"orig=.src=10\.1\.1\.2,", "udp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=2,"
                  "dport=1),reply=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2)\n")
    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    t.sb.appctl("revalidator/purge")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.1,", "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1,"
                  "dport=2),reply=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1)\n")
    assert wire.verify() == 0
    # The second packet-in follows the third packet's ct(force,commit,table=1),
    # the model's fourth ct: the connection turned round, +new.
    model = [None, wire.table.results[3].text]
    assert packet_in_states(log) == model, f"ct_state in the packet-ins, the model's: {model}"


CT1 = ("udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1,dport=2),reply=(src=10.1.1.2,dst=10.1.1.1,"
       "sport=2,dport=1),mark=170\n")
CT2 = ("udp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=2,dport=1),reply=(src=10.1.1.1,dst=10.1.1.2,"
       "sport=1,dport=2),zone=5,labels=0xaa00000000\n")
SCTP_1_2 = ("50540000000a50540000000908004500003400010000408464410a0101010a01010200010002000000009178"
            "f7d30100001470e18ccc00000000000a000a00000000")
SCTP_2_1 = ("50540000000950540000000a08004500003400010000408464410a0101020a01010100020001000000009"
            "8f29e470100001470e18ccc00000000000a000a00000000")


def flush_sequence(t: Traffic, wire: CtWire, ns1: Netns, flush: str, dp: str) -> None:
    """One pass of `conntrack - ct flush` with FLUSH_CMD `flush`."""

    def flush_cmd(*args: str, rc: int | None = 0) -> Result:
        if flush == "ofctl":
            return t.sb.ofctl("ct-flush", "br0", *args, rc=rc)
        return t.sb.appctl("dpctl/flush-conntrack", *((dp,) if flush == "dpctl-dp" else ()), *args,
                           rc=rc)

    def flushes(*args: str) -> None:
        flush_cmd(*args)

    def both() -> None:
        wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
        wire.packet_out("ovs-p1", UDP_2_1, "-O", "OpenFlow13", in_port="2")
        check_grep_ct(t, r"10\.1\.1\.1,", CT1 + CT2, sort=True)

    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.1,", CT1)
    flushes("ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.1,ct_nw_proto=17,ct_tp_src=2,ct_tp_dst=1")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.1,", "")
    wire.packet_out("ovs-p1", UDP_2_1, "-O", "OpenFlow13", in_port="2")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.2,", CT2)
    flushes("zone=5", "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=17,ct_tp_src=1,ct_tp_dst=2")
    check_ct(t, "10.1.1.2", "")

    t.check_ping(ns1, "10.1.1.1")  # ICMP
    out = grep_ct(t, r"orig=.src=10\.1\.1\.2,")
    assert format_ct(out, "10.1.1.1") == (
        "icmp,orig=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=8,code=0),reply=(src=10.1.1.1,"
        "dst=10.1.1.2,id=<cleared>,type=0,code=0),zone=5,labels=0xaa00000000\n"), out
    icmp_id = out.split(",")[3].split("=")[1]
    flushes("zone=5", f"ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.1,ct_nw_proto=1,icmp_id={icmp_id},"
            "icmp_type=8,icmp_code=0")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.2,", "")

    for first, second in (("ct_nw_proto=17,ct_tp_src=1", "ct_nw_proto=17,ct_tp_src=2"),
                          ("ct_nw_proto=17,ct_tp_dst=2", "ct_nw_proto=17,ct_tp_dst=1"),
                          ("ct_nw_src=10.1.1.1", "ct_nw_src=10.1.1.2"),
                          ("ct_nw_dst=10.1.1.2", "ct_nw_dst=10.1.1.1")):
        both()
        flushes(first)
        check_grep_ct(t, r"10\.1\.1\.1,", CT2)
        flushes(second)
        check_grep_ct(t, r"10\.1\.1\.1,", "")

    both()  # the reply direction's source
    flushes("", "ct_nw_src=10.1.1.2")
    check_grep_ct(t, r"10\.1\.1\.1,", CT2)
    flushes("zone=5", "", "ct_nw_src=10.1.1.1")
    check_grep_ct(t, r"10\.1\.1\.1,", "")

    both()  # without arguments
    flushes()
    check_grep_ct(t, r"10\.1\.1\.1,", "")

    # SCTP, by ports.
    wire.packet_out("ovs-p0", SCTP_1_2, "-O", "OpenFlow13", in_port="1")
    wire.packet_out("ovs-p1", SCTP_2_1, "-O", "OpenFlow13", in_port="2")

    def sctp() -> str:
        return "".join(sorted(re.sub(r",protoinfo=.*$", "", line) + "\n"
                              for line in grep_ct(t, r"10\.1\.1\.1,").splitlines()))
    sctp1 = CT1.replace("udp,", "sctp,")
    sctp2 = CT2.replace("udp,", "sctp,")
    assert sctp() == sctp1 + sctp2, sctp()
    flushes("ct_nw_src=10.1.1.1,ct_nw_proto=132,ct_tp_src=1,ct_tp_dst=2")
    assert sctp() == sctp2, sctp()
    flushes("ct_nw_src=10.1.1.2,ct_nw_proto=132,ct_tp_src=2,ct_tp_dst=1")
    check_grep_ct(t, r"10\.1\.1\.1,", "")

    for first, second in (("mark=0xaa", "labels=0xaa00000000"),
                          ("mark=2/2", "labels=0x0200000000/0x0200000000")):
        both()
        flushes(first)
        check_grep_ct(t, r"10\.1\.1\.1,", CT2)
        flushes(second)
        check_grep_ct(t, r"10\.1\.1\.1,", "")

    for args, message in ((("zone=invalid", "ct_nw_src=10.1.1.1", "ct_nw_dst=10.1.1.1"),
                           "failed to parse zone"),
                          (("zone=1", "ct_nw_src=10.1.1.1,invalid=invalid", "ct_nw_dst=10.1.1.1"),
                           "invalid conntrack tuple field: invalid"),
                          (("zone=1", "ct_nw_src=invalid", "ct_nw_dst=10.1.1.1"),
                           "failed to parse field ct_nw_src"),
                          (("zone=1", "ct_nw_src=10.1.1.1", "ct_nw_dst=10.1.1.1", "invalid"),
                           "invalid arguments"),
                          (("zone=1", "mark=1", "labels=1", "ct_nw_src=10.1.1.1",
                            "ct_nw_dst=10.1.1.1", "invalid", "invalid"),
                           "command takes at most 6 arguments"),
                          (("mark=invalid",), "failed to parse mark"),
                          (("labels=invalid",), "failed to parse labels")):
        # the tool's exit on a bad argument (upstream ignores it): ovs-ofctl's fatal
        # error, ovs-appctl's "server returned an error"
        res = flush_cmd(*args, rc=1 if flush == "ofctl" else 2)
        assert message in res.stderr, f"{' '.join(args)}: expected {message!r} in\n{res}"

    both()  # by zone
    flushes("zone=5")
    check_grep_ct(t, r"10\.1\.1\.1,", CT1)
    wire.packet_out("ovs-p1", UDP_2_1, "-O", "OpenFlow13", in_port="2")
    flushes("zone=0")
    check_grep_ct(t, r"10\.1\.1\.1,", CT2)
    flushes()
    check_grep_ct(t, r"10\.1\.1\.1,", "")


@FLAVOUR
@upstream("conntrack - ct flush")
def test_ct_flush(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                  flavour: str) -> None:
    """Everything from port 1 is committed with ct_mark 0xaa and goes to 2;
    from port 2, committed in zone 5 with ct_label 0xaa00000000 and goes to
    1.  As upstream, the sequence runs three times, once with each FLUSH_CMD
    (dpctl/flush-conntrack, the same naming the datapath, ovs-ofctl ct-flush).
    Flushes by tuple, by zone, by either direction's source, by ports, of
    SCTP, by mark and label (masked), the refusals of bad arguments.
    Beyond upstream: every frame that left by a port (each packet-out and
    the pings go through ct(commit) and out, unchanged) is judged; which
    connections a partial flush removes only shows in ct_state, which no
    flow here reads, so the model is not told of them."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,ip,action=ct(commit,exec(set_field:0xaa->ct_mark)),2",
                  "priority=100,in_port=2,ip,action=ct(zone=5,commit,exec(set_field:"
                  "0xaa00000000->ct_label)),1"])
    dp = t.sb.appctl("dpctl/dump-dps").stdout.strip()

    wire = CtWire.on(t, request, [ns0, ns1])
    for flush in ("dpctl", "dpctl-dp", "ofctl"):
        flush_sequence(t, wire, ns1, flush, dp)
    assert wire.verify() >= 30


# ----------------------------------------------------------------------------
# ping, dpctl

PING_FLOWS = ["priority=1,action=drop", "priority=10,arp,action=normal",
              "priority=100,in_port=1,icmp,action=ct(commit),2",
              "priority=100,in_port=2,icmp,ct_state=-trk,action=ct(table=0)",
              "priority=100,in_port=2,icmp,ct_state=+trk+est,action=1"]


def appctl_err(t: Traffic, expected: str, *args: str) -> None:
    """AT_CHECK([ovs-appctl ARGS], [2], [], [expected])."""
    check(t.sb.appctl(*args, rc=2), stdout="", stderr=expected)


def appctl_out(t: Traffic, expected: str, *args: str) -> None:
    """AT_CHECK([ovs-appctl ARGS], [], [expected])."""
    res = t.sb.appctl(*args)
    assert res.stdout == expected, f"{' '.join(args)}: expected {expected!r}, got {res.stdout!r}"


@FLAVOUR
@upstream("conntrack - get_nconns and get/set_maxconns")
def test_get_nconns_maxconns(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """After IPv4 ping's first ping (one connection): the refusals of a bad
    datapath name and a malformed limit, ct-get-nconns 1, the default limit
    3000000, set 10, read 10; after a flush 0 connections, the limit kept."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, PING_FLOWS)
    wire = CtWire.on(t, request, [ns0, ns1])
    t.check_ping(ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=<cleared>,type=8,code=0),"
             "reply=(src=10.1.1.2,dst=10.1.1.1,id=<cleared>,type=0,code=0)\n")
    server = "ovs-appctl: ovs-vswitchd: server returned an error\n"
    malformed = "ovs-vswitchd: maxconns missing or malformed (Invalid argument)\n" + server
    no_dp = "ovs-vswitchd: datapath not found (Invalid argument)\n" + server
    appctl_err(t, malformed, "dpctl/ct-set-maxconns", "one-bad-dp")
    appctl_err(t, malformed, "dpctl/ct-set-maxconns", "a")
    appctl_err(t, no_dp, "dpctl/ct-set-maxconns", "one-bad-dp", "10")
    appctl_err(t, no_dp, "dpctl/ct-get-maxconns", "one-bad-dp")
    appctl_err(t, no_dp, "dpctl/ct-get-nconns", "one-bad-dp")
    appctl_out(t, "1\n", "dpctl/ct-get-nconns")
    appctl_out(t, "3000000\n", "dpctl/ct-get-maxconns")
    appctl_out(t, "setting maxconns successful\n", "dpctl/ct-set-maxconns", "10")
    appctl_out(t, "10\n", "dpctl/ct-get-maxconns")
    t.sb.appctl("dpctl/flush-conntrack")
    wire.flushed()
    appctl_out(t, "0\n", "dpctl/ct-get-nconns")
    appctl_out(t, "10\n", "dpctl/ct-get-maxconns")
    assert wire.verify() >= 6


@FLAVOUR
@upstream("conntrack - IPv6 ping")
def test_ipv6_ping(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                   flavour: str) -> None:
    """Echo requests and replies go to table 1, the rest (neighbour discovery)
    by NORMAL.  After a first ping6 and a flush, ns1's pings die, ns0's are
    answered; the connection is dumped, flushed by its tuple, gone.  Beyond
    upstream: each echo through the model's tracker."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, six=True)
    add_flows(t, ["table=0,priority=10,icmp6,icmp_type=128,action=goto_table:1",
                  "table=0,priority=10,icmp6,icmp_type=129,action=goto_table:1",
                  "table=0,priority=1,action=normal",
                  "table=1,priority=100,in_port=1,icmp6,action=ct(commit),2",
                  "table=1,priority=100,in_port=2,icmp6,ct_state=-trk,action=ct(table=0)",
                  "table=1,priority=100,in_port=2,icmp6,ct_state=+trk+est,action=1",
                  "table=1,priority=1,action=drop"])

    wire = CtWire.on(t, request, [ns0, ns1])
    t.wait_ping6(ns0, "fc00::2")
    t.sb.appctl("dpctl/flush-conntrack")
    wire.flushed()
    check_lost(t, ns1, "fc00::1", six=True)
    t.check_ping(ns0, "fc00::2", six=True)
    check_ct(t, "fc00::2", "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=<cleared>,type=128,code=0),"
             "reply=(src=fc00::2,dst=fc00::1,id=<cleared>,type=129,code=0)\n")
    t.sb.appctl("dpctl/flush-conntrack", "ct_ipv6_src=fc00::1,ct_ipv6_dst=fc00::2")
    wire.flushed()
    check_ct(t, "fc00::2", "")
    assert wire.verify() >= 8


@FLAVOUR
@upstream("conntrack - new connections")
def test_new_connections(system_traffic: Callable[..., Traffic],
                         request: pytest.FixtureRequest, flavour: str) -> None:
    """+new TCP and UDP from port 1 are committed and dropped; only +est goes
    through.  A committed connection seen from one direction only stays +new
    (ovs-fields(7) `est`): ns0's HTTP get fails (curl 28), and three UDP
    packets from port 1 never hit the +est flow (n_packets stays out of
    ofctl_strip's output).  Beyond upstream: no TCP or UDP frame leaves."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["table=0, priority=1,action=drop", "table=0, priority=10,arp,action=normal",
                  "table=0, priority=100,tcp,action=ct(table=1)",
                  "table=0, priority=100,udp,action=ct(table=1)",
                  "table=1, priority=100,in_port=1,tcp,ct_state=+trk+new,action=ct(commit)",
                  "table=1, priority=100,in_port=1,udp,ct_state=+trk+new,action=ct(commit)",
                  "table=1, priority=100,in_port=1,ct_state=+trk+est,action=2",
                  "table=1, priority=100,in_port=2,ct_state=+trk+est,action=1"])
    t.sb.appctl("vlog/set", "dbg")

    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2", 28)
    est_flow = ("NXST_FLOW reply:\n"
                " table=1, priority=100,ct_state=+est+trk,in_port=1 actions=output:2\n")

    def est_flows() -> str:
        return ofctl_strip(t.sb.ofctl("dump-flows", "br0",
                                      "table=1 in_port=1,ct_state=+trk+est").stdout)
    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    assert est_flows() == est_flow, est_flows()
    wire.packet_out("ovs-p0", UDP_1_2, "-O", "OpenFlow13", in_port="1")
    assert est_flows() == est_flow, est_flows()
    assert wire.verify() >= 2  # the ARP exchange; no TCP or UDP


@FLAVOUR
@upstream("conntrack - generic IP protocol")
def test_generic_ip_protocol(system_traffic: Callable[..., Traffic],
                             request: pytest.FixtureRequest, flavour: str) -> None:
    """A VRRP packet (IP protocol 112, to 224.0.0.18) by packet-out from port
    1: tracked and committed with ports 0.  Beyond upstream: the model tracks
    it too, and the commit (no output) lets nothing out."""
    t: Traffic = system_traffic(flavour)
    t.sb.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg", "ofproto_dpif_upcall:dbg")
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["table=0, priority=1,action=drop", "table=0, priority=10,arp,action=normal",
                  "table=0, priority=100,ip,action=ct(table=1)",
                  "table=1, priority=100,in_port=1,ip,ct_state=+trk+new,action=ct(commit)",
                  "table=1, priority=100,in_port=1,ct_state=+trk+est,action=normal"])

    wire = CtWire.on(t, request, [ns0, ns1])
    wire.packet_out("ovs-p0", "01005e00001200005e000101080045c0002800000000ff7019cdc0a8001ee00000"
                    "12210164010001ba52c0a800010000000000000000000000000000", "-O", "OpenFlow13",
                    in_port="1")
    check_grep_ct(t, r"orig=.src=192\.168\.0\.30,", "112,orig=(src=192.168.0.30,dst=224.0.0.18,"
                  "sport=0,dport=0),reply=(src=224.0.0.18,dst=192.168.0.30,sport=0,dport=0)\n")
    assert wire.verify() == 0
