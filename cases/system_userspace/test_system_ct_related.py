"""system-traffic.at's conntrack tests of ICMP errors related to a connection
(and the ICMP identifier a source NAT gives), as `make check-system-userspace`
(and check-system-tso) run them: upstream's topology, flows, traffic (nc, or
crafted frames by packet-out) and checks (flow counters, dump-conntrack,
ovs-ofctl monitor, tcpdump).  Beyond upstream, the frames that crossed OVS
are judged by the model's connection tracker running the same flow table
(fixtures/system_userspace/system_ct.py's CtWire): RFC 792 / RFC 4443 errors, +rel by the
embedded packet (ovs-fields(7)), their NAT (RFC 5508).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath.model.actions import Action
from datapath.model.conntrack import Ct
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports
from fixtures.system_userspace.system_ct_macros import (
    ICMP,
    IPV4,
    check_grep_ct,
    dump_flows_sorted,
    monitor,
    packet_in_states,
    received,
    wait_packet_ins,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, NC_EOF_OPT, Traffic, upstream
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")


@FLAVOUR
@upstream("conntrack - ICMP related")
def test_icmp_related(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                      flavour: str) -> None:
    """UDP from ns0 is committed with ct_mark 1; ns1, with nothing listening,
    answers port unreachable, which is +rel to it (RFC 792, ovs-fields(7)) and
    carries its mark: let back.  Upstream counts each flow's packets and
    bytes.  Beyond upstream: the datagram and the error as the model passes
    them."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=100,in_port=1,udp,action=ct(commit,exec(set_field:1->ct_mark)),2",
                  "priority=100,in_port=2,icmp,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,icmp,ct_state=+trk+rel,ct_mark=1,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    data = t.sb.rundir / "a.txt"
    data.write_text("a\n")
    t.run(["ncat", *NC_EOF_OPT, "-u", "10.1.1.2", "10000"], ns0, input_path=data)
    # The error answers the datagram; wait for it to have crossed before the counts.
    wait_until(lambda: received(wire, "ovs-p0", lambda f: f[12:14] == b"\x08\x00" and f[23] == ICMP),
               10, what="the port unreachable to reach at_ns0")
    t.sb.appctl("revalidator/purge")
    got = dump_flows_sorted(t)
    assert got == (
        " n_packets=1, n_bytes=44, priority=100,udp,in_port=1 actions=ct(commit,"
        "exec(load:0x1->NXM_NX_CT_MARK[])),output:2\n"
        " n_packets=1, n_bytes=72, priority=100,ct_state=+rel+trk,ct_mark=0x1,icmp,in_port=2 "
        "actions=output:1\n"
        " n_packets=1, n_bytes=72, priority=100,ct_state=-trk,icmp,in_port=2 actions=ct(table=0)\n"
        " n_packets=2, n_bytes=84, priority=10,arp actions=NORMAL\n"
        "NXST_FLOW reply:\n"), got
    assert wire.verify() >= 4


# Upstream's crafted frames: UDP 192.100.1.8:53 -> 192.100.2.5:53 (port 2), the
# same the other way (port 1), and a port unreachable from 192.100.1.8 about
# the second, sent by port 2 (the first's original direction).
UDP_53_FWD = ("00010200020400232211223308004500001c000100004011f6fac0640108c06402050035003500087b9e")
UDP_53_REV = ("00232211223300010200020408004500001c000100004011f6fac0640205c06401080035003500087b9e")
UNREACH_53 = ("000102000204002322112233080045000038000100003f01f7eec0640108c0640205030a80e5ffffffff"
              "4500001c000100003f11f7fac0640205c06401080035003500087b9e")


@FLAVOUR
@upstream("conntrack - ICMP related to original direction")
def test_icmp_related_original_direction(system_traffic: Callable[..., Traffic],
                                         request: pytest.FixtureRequest, flavour: str) -> None:
    """Two UDP packets of one connection in zone 34673 (one each way), then
    twice a port unreachable about the reply-direction packet, travelling in
    the connection's original direction: it is +rel (RFC 5508 4.2: an error
    travels opposite to the packet it embeds) and goes to port 1 both times.
    Upstream counts each flow's packets and reads the one connection.  Beyond
    upstream: the four frames that left, through the model's two lookups."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1000,arp,action=normal", "priority=100,ip,action=ct(table=1)",
                  "priority=1,action=drop", "table=1,ip,action=ct(zone=34673,table=2)",
                  "table=2,in_port=2,udp,action=ct(commit,zone=34673),1",
                  "table=2,in_port=1,udp,action=ct(commit,zone=34673),2",
                  "table=2,in_port=2,ct_state=+rel,icmp,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    for port, pkt in ((2, UDP_53_FWD), (1, UDP_53_REV), (2, UNREACH_53)):
        wire.inject(f"ovs-p{port - 1}", pkt)
        t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0", str(port), "resubmit(,0)", pkt)
    t.sb.appctl("revalidator/purge")
    wire.inject("ovs-p1", UNREACH_53)
    t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0", "2", "resubmit(,0)", UNREACH_53)
    t.sb.appctl("revalidator/purge")
    got = dump_flows_sorted(t)
    assert got == (
        " n_packets=4, n_bytes=224, priority=100,ip actions=ct(table=1)\n"
        " priority=1000,arp actions=NORMAL\n"
        " table=1, n_packets=4, n_bytes=224, ip actions=ct(table=2,zone=34673)\n"
        " table=2, n_packets=1, n_bytes=42, udp,in_port=1 actions=ct(commit,zone=34673),output:2\n"
        " table=2, n_packets=1, n_bytes=42, udp,in_port=2 actions=ct(commit,zone=34673),output:1\n"
        " table=2, n_packets=2, n_bytes=140, ct_state=+rel,icmp,in_port=2 actions=output:1\n"
        "NXST_FLOW reply:\n"), got
    check_ct(t, "192.100.1.8", "udp,orig=(src=192.100.1.8,dst=192.100.2.5,sport=<cleared>,"
             "dport=<cleared>),reply=(src=192.100.2.5,dst=192.100.1.8,sport=<cleared>,"
             "dport=<cleared>),zone=34673\n")
    assert wire.verify() == 4


def without_ipv6_chatter(log: str) -> str:
    """grep -v ff02 | grep -v fe80 | grep -v no_match."""
    return "".join(line + "\n" for line in log.splitlines()
                   if not any(w in line for w in ("ff02", "fe80", "no_match")))


@FLAVOUR
@upstream("conntrack - ICMP related 2")
def test_icmp_related_2(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                        flavour: str) -> None:
    """Everything IP is committed and sent to the controller.  A port
    unreachable about no connection is +inv; a UDP packet opens one (+new);
    an unreachable from a midpoint router about it is +rel+rpl.  Only the UDP
    connection is in the table (an error is no connection of its own).
    Beyond upstream: the model's tracker replays the three, nothing leaves
    by a port, and each packet-in's ct_state is the model's."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, addrs=("172.16.0.1/24", "172.16.0.2/24"))
    path = t.sb.rundir / "flows.txt"
    path.write_text("table=0,ip,action=ct(commit,table=1)\ntable=1,ip,action=controller\n")
    t.sb.ofctl("--bundle", "replace-flows", "br0", str(path))

    def pipeline(a: Arrival) -> list[tuple[str | None, list[Action]]]:
        return [(None, [Ct(a.table, commit=True)])] if a.eth_type == IPV4 else []

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    mon = monitor(t)
    for port, pkt in (
            (2, "f64c473528c9c6f54ecb72db080045c0003d2e8700004001f351ac100004ac1000030303da4900"
                "00000045000021317040004011b138ac100003ac10000411112222000d20966369616f0a"),
            (1, "c6f94ecb72dbe64c473528c9080045000021317040004011b138ac100001ac100002a28e15b300"
                "0d20966369616f0a"),
            (2, "e64c473528c9c6f94ecb72db080045c0003d2e8700004001f354ac100003ac1000010303553f00"
                "00000045000021317040004011b138ac100001ac100002a28e15b3000d20966369616f0a")):
        wire.inject(f"ovs-p{port - 1}", pkt)
        t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br0", str(port), "resubmit(,0)", pkt)
    log = without_ipv6_chatter(wait_packet_ins(mon, 3, without_ipv6_chatter))
    assert log == (
        "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=75 ct_state=inv|trk,ip,"
        "in_port=2 (via action) data_len=75 (unbuffered)\n"
        "icmp,vlan_tci=0x0000,dl_src=c6:f5:4e:cb:72:db,dl_dst=f6:4c:47:35:28:c9,nw_src=172.16.0.4,"
        "nw_dst=172.16.0.3,nw_tos=192,nw_ecn=0,nw_ttl=64,nw_frag=no,icmp_type=3,icmp_code=3 "
        "icmp_csum:da49\n"
        "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=47 ct_state=new|trk,"
        "ct_nw_src=172.16.0.1,ct_nw_dst=172.16.0.2,ct_nw_proto=17,ct_tp_src=41614,ct_tp_dst=5555,"
        "ip,in_port=1 (via action) data_len=47 (unbuffered)\n"
        "udp,vlan_tci=0x0000,dl_src=e6:4c:47:35:28:c9,dl_dst=c6:f9:4e:cb:72:db,nw_src=172.16.0.1,"
        "nw_dst=172.16.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=41614,tp_dst=5555 "
        "udp_csum:2096\n"
        "NXT_PACKET_IN2 (xid=0x0): table_id=1 cookie=0x0 total_len=75 ct_state=rel|rpl|trk,"
        "ct_nw_src=172.16.0.1,ct_nw_dst=172.16.0.2,ct_nw_proto=17,ct_tp_src=41614,ct_tp_dst=5555,"
        "ip,in_port=2 (via action) data_len=75 (unbuffered)\n"
        "icmp,vlan_tci=0x0000,dl_src=c6:f9:4e:cb:72:db,dl_dst=e6:4c:47:35:28:c9,nw_src=172.16.0.3,"
        "nw_dst=172.16.0.1,nw_tos=192,nw_ecn=0,nw_ttl=64,nw_frag=no,icmp_type=3,icmp_code=3 "
        "icmp_csum:553f\n"), f"ofctl_monitor.log:\n{log}"
    check_ct(t, "172.16.0.1", "udp,orig=(src=172.16.0.1,dst=172.16.0.2,sport=<cleared>,"
             "dport=<cleared>),reply=(src=172.16.0.2,dst=172.16.0.1,sport=<cleared>,"
             "dport=<cleared>)\n")
    check_ct(t, "172.16.0.3", "")
    assert wire.verify() == 0
    model = [r.text for r in wire.table.results]  # each packet's ct(commit,table=1)
    assert packet_in_states(log) == model, f"ct_state in the packet-ins, the model's: {model}"


@FLAVOUR
@upstream("conntrack - ICMP related NAT with single port")
def test_icmp_related_nat_single_port(system_traffic: Callable[..., Traffic],
                                      request: pytest.FixtureRequest, flavour: str) -> None:
    """UDP 10.1.1.1:1234 -> 10.1.1.240:80 is DNATed to 10.1.1.2:8080; the port
    unreachable 10.1.1.2 sends about the translated datagram is +rel+rpl and
    is translated back, its embedded datagram too (RFC 5508 4.2): tcpdump on
    p0 must capture upstream's bytes.  Beyond upstream: both frames through
    the model's NAT (datapath/model/ct_nat.py)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24", "f0:00:00:01:01:01")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24", "f0:00:00:01:01:02")
    add_flows(t, ["table=0,ip,ct_state=-trk,actions=ct(table=0,nat)",
                  "table=0,in_port=ovs-p0,ct_state=+trk+new,udp,actions=ct(commit,"
                  "nat(dst=10.1.1.2:8080)),ovs-p1",
                  "table=0,in_port=ovs-p1,ct_state=+trk+rel+rpl,icmp,actions=ovs-p0"])

    wire = CtWire.on(t, request, [ns0, ns1])
    pcap, err = t.sb.rundir / "p0.pcap", t.sb.rundir / "tcpdump0_err"
    t.daemonize("tcpdump", ["sh", "-c", f"exec tcpdump -n -l -U -i p0 -w {pcap} 2>{err}"],
                ns0, t.sb.rundir / "tcpdump0.out")
    wait_until(lambda: err.exists() and "listening" in err.read_text(), 10,
               what="tcpdump to listen on p0")
    wire.packet_out("ovs-p0", "f00000010102f0000001010108004500002944c140004011df100a0101010a01"
                    "01f004d2005000156b24646573745f756e72656163680a", in_port="ovs-p0")
    wire.packet_out("ovs-p1", "f00000010101f00000010102080045c000456a3700004001f9bc0a0101020a01"
                    "010103031328000000004500002944c140004011dffe0a0101010a01010204d21f900015"
                    "4cd2646573745f756e72656163680a", in_port="ovs-p1")
    check_grep_ct(t, r"orig=.src=10\.1\.1\.1,", "udp,orig=(src=10.1.1.1,dst=10.1.1.240,"
                  "sport=1234,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8080,dport=1234)\n",
                  sort=True)
    want = ("f00000010101f00000010102080045c000456a3700004001f8ce0a0101f00a01010103031416000000"
            "004500002944c140004011df100a0101010a0101f004d2005000156b24646573745f756e7265616368"
            "0a")

    def captured() -> bool:
        return want in t.run(["ovs-pcap", str(pcap)]).stdout
    wait_until(captured, 10, what="ovs-pcap p0.pcap to show the translated unreachable")
    assert wire.verify() == 2


@FLAVOUR
@upstream("conntrack - SNAT with icmp_id")
def test_snat_icmp_id(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                      flavour: str) -> None:
    """Three echo requests with one ICMP id (500) from three sources, SNATed to
    one address: the tracker must give the second and third new ids (501,
    502) for their replies to be told apart.  Upstream reads the table only.
    Not judged on the wire: the model keeps an ICMP id as it is (its NAT
    chooses no new identifier on a collision, RFC 5508 3.2's query
    mapping), so it cannot say which ids the three frames out of ovs-p1
    carry; the table's ids are upstream's check."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.0.0.1/24")
    t.ip("link", "set", "dev", "p0", "address", "80:88:88:88:88:88", ns=ns0)
    t.add_veth("p1", ns1, "br0", "10.0.0.2/24")
    add_flows(t, ["table=0,ct_state=-trk,ip,in_port=ovs-p0, actions=ct(table=1, nat)",
                  "table=0,ct_state=-trk,ip,in_port=ovs-p1, actions=ct(table=1, nat)",
                  "table=1,ct_state=+trk+new,ip,in_port=ovs-p0, actions=ct(commit, "
                  "nat(src=10.0.0.201)),ovs-p1",
                  "table=1,ct_state=+trk+est,ip,in_port=ovs-p0, actions=ovs-p1",
                  "table=1,ct_state=+trk+est,ip,in_port=ovs-p1, actions=ovs-p0"])
    t.sb.appctl("dpctl/flush-conntrack")
    for src, csum in (("01", "de"), ("03", "dc"), ("04", "db")):
        t.sb.ofctl("packet-out", "br0", "in_port=ovs-p0,packet=62cf3bde230262cf3bde2301"
                   f"08004500001c00010000400166{csum}0a0000{src}0a0000020800f60b01f40000 "
                   "actions=resubmit(,0)")
    got = "".join(sorted(t.sb.appctl("dpctl/dump-conntrack").stdout.splitlines(True)))
    assert got == (
        "icmp,orig=(src=10.0.0.1,dst=10.0.0.2,id=500,type=8,code=0),reply=(src=10.0.0.2,"
        "dst=10.0.0.201,id=500,type=0,code=0)\n"
        "icmp,orig=(src=10.0.0.3,dst=10.0.0.2,id=500,type=8,code=0),reply=(src=10.0.0.2,"
        "dst=10.0.0.201,id=501,type=0,code=0)\n"
        "icmp,orig=(src=10.0.0.4,dst=10.0.0.2,id=500,type=8,code=0),reply=(src=10.0.0.2,"
        "dst=10.0.0.201,id=502,type=0,code=0)\n"), got
