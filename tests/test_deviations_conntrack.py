"""The known-bug layer's conntrack answers (datapath/deviations/conntrack.py), as
the OpenFlow pipeline asks them: the ct_state OVS gives instead, and the bytes it
makes of a translated ICMPv6 error.  Each with negative controls the layer must
leave alone."""
from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from datapath.deviations.observer import OvsObserver
from datapath.model import hooks
from datapath.model.bugs import CT_ICMP6_NAT_CONN_PROTO, CT_TCP_EST_BEFORE_REPLY
from datapath.model.openflow import OpenFlow
from fixtures.explore_openflow import PORTS, Hosts

ETH1 = Ether(src="50:54:00:00:00:01", dst="50:54:00:00:00:02")
ETH2 = Ether(src="50:54:00:00:00:02", dst="50:54:00:00:00:01")
POLICY = ["table=0,priority=10,ip,actions=ct(table=1)",
          "table=0,priority=30,ip,in_port=2,actions=output:1",  # replies go around ct
          "table=1,priority=4,ip,ct_state=+trk+new,in_port=1,actions=ct(commit),output:2",
          "table=1,priority=3,ip,ct_state=+trk+est,in_port=1,actions=output:3"]


def seg(flags: str, seq: int, ack: int = 0, src: str = "10.1.1.1", dst: str = "10.1.1.2",
        sport: int = 1001, dport: int = 80) -> bytes:
    return bytes(ETH1 / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags=flags,
                                                   seq=seq, ack=ack))


def went(of: OpenFlow, frame: bytes, port: str = "p1") -> tuple[list[str], list[str]]:
    out = of.run(frame, port)
    return [p for p, e in out.sent.items() if e.frames], [b.key for b in out.bugs]


def test_an_originators_segment_before_any_reply_is_est_in_ovs() -> None:
    with hooks.observing(OvsObserver()):
        of = OpenFlow.of(POLICY, PORTS)
        assert went(of, seg("S", 1000)) == (["p2"], [])  # the SYN that commits: +new
        assert went(of, seg("S", 1000)) == (["p2"], [])  # its retransmission: still +new
        assert went(of, seg("A", 1001, 5001)) == (["p3"], [CT_TCP_EST_BEFORE_REPLY.key])
    with hooks.observing(hooks.Observer()):  # the model alone: +new (ovs-fields(7) est)
        of = OpenFlow.of(POLICY, PORTS)
        of.run(seg("S", 1000), "p1")
        assert went(of, seg("A", 1001, 5001)) == (["p2"], [])


def test_not_claimed_once_a_reply_was_tracked_nor_for_udp() -> None:
    policy = [*POLICY[:1], "table=1,priority=5,ip,ct_state=+trk,in_port=2,actions=output:1",
              *POLICY[2:]]  # the replies through ct too
    with hooks.observing(OvsObserver()):
        of = OpenFlow.of(policy, PORTS)
        of.run(seg("S", 1000), "p1")
        of.run(bytes(ETH2 / IP(src="10.1.1.2", dst="10.1.1.1")
                     / TCP(sport=80, dport=1001, flags="SA", seq=5000, ack=1001)), "p2")
        assert went(of, seg("A", 1001, 5001)) == (["p3"], [])  # +est, as the model says
        of = OpenFlow.of(POLICY, PORTS)
        datagram = bytes(ETH1 / IP(src="10.1.1.1", dst="10.1.1.2") / UDP(sport=1, dport=53))
        of.run(datagram, "p1")
        assert went(of, datagram) == (["p2"], [])  # a second datagram stays +new


# A scenario test_explore_openflow found (cases/regressions.json a96749107d): an
# ICMPv6 port unreachable about an SNATed SYN (fc00::1 -> fc00::f0), translated back.
# The model's frame, and the one OVS 4.0.0 sent: the embedded TCP checksum updated
# from the damaged source address, the ICMPv6 checksum recomputed over it.
ICMP6_FLOWS = ["cookie=1,table=0,priority=10,ipv6,actions=ct(table=1,zone=0)",
               "cookie=3,table=0,priority=30,ipv6,actions=ct(table=1,zone=0,nat)",
               "cookie=4,table=1,priority=4,ipv6,ct_state=+trk+new,in_port=1,"
               "actions=ct(commit,zone=0,nat(src=fc00::f0)),output:2",
               "cookie=7,table=1,priority=1,ipv6,ct_state=+trk+rel,actions=output:1"]
MODEL = ("50540000000150540000000286dd6000000000443a40fc000000000000000000000000000002fc00000000"
         "00000000000000000000010104a03e000000006000000000140640fc0000000000000000000000000000"
         "01fc00000000000000000000000000000203e90050000003e8000000005002ffffafbd0000")
OVS = ("50540000000150540000000286dd6000000000443a40fc000000000000000000000000000002fc00000000"
       "000000000000000000000101049f4f000000006000000000140640fc0000000000000000000000000000"
       "01fc00000000000000000000000000000203e90050000003e8000000005002ffffb0ac0000")


def test_an_snat_connections_icmpv6_error_as_ovs_sends_it() -> None:
    hosts = Hosts(6)
    correct, known = OpenFlow.of(ICMP6_FLOWS, PORTS), OpenFlow.of(ICMP6_FLOWS, PORTS)
    for step in (["open", "tcp", 1, 2, False], ["error", 0]):
        num, frame, conv, from_client = hosts.packet(step)
        with hooks.observing(hooks.Observer()):
            right = correct.run(frame, PORTS[num])
        with hooks.observing(OvsObserver()):
            ovs = known.run(frame, PORTS[num])
        hosts.delivered(conv, from_client, {p: e.frames for p, e in right.sent.items()})
    assert right.sent["p1"].frames == [bytes.fromhex(MODEL)]
    (variants,) = ovs.sent["p1"].ovs_allowed
    assert list(variants) == [bytes.fromhex(OVS)]
    assert [b.key for b in ovs.sent["p1"].bugs] == [CT_ICMP6_NAT_CONN_PROTO.key]
    # The negative control: the same error about an unNATed connection is left alone.
    plain = [f.replace(",nat(src=fc00::f0)", "") for f in ICMP6_FLOWS]
    hosts, known = Hosts(6), OpenFlow.of(plain, PORTS)
    for step in (["open", "tcp", 1, 2, False], ["error", 0]):
        num, frame, conv, from_client = hosts.packet(step)
        with hooks.observing(OvsObserver()):
            ovs = known.run(frame, PORTS[num])
        hosts.delivered(conv, from_client, {p: e.frames for p, e in ovs.sent.items()})
    assert not ovs.sent["p1"].bugs and Ether(ovs.sent["p1"].frames[0])[IPv6].src == "fc00::2"
