"""The model's OpenFlow pipeline (datapath/model/openflow/): lookup by
priority and mask, the tables a packet walks through, ct's two forms, the
fields actions write, per-flow statistics, and `not modelled` for what it does
not interpret.  Each expectation is written from ovs-actions(7) and
ovs-fields(7), the frames built with scapy."""
from __future__ import annotations

import pytest

pytest.importorskip("ovs.flow.ofp")
from scapy.layers.inet import ICMP, IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6  # noqa: E402
from scapy.layers.l2 import ARP, Ether  # noqa: E402

from datapath.model.conntrack import EST, NEW, RPL, TRK, Conntrack  # noqa: E402
from datapath.model.openflow import NotModelled, OpenFlow, parse_flows  # noqa: E402

PORTS = {1: "p1", 2: "p2", 3: "p3"}
MAC1, MAC2 = "50:54:00:00:00:01", "50:54:00:00:00:02"


def udp(src: str = "10.1.1.1", dst: str = "10.1.1.2", sport: int = 1, dport: int = 2) -> bytes:
    return bytes(Ether(src=MAC1, dst=MAC2) / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport)
                 / (b"x" * 8))


def tcp_syn(src: str = "10.1.1.1", dst: str = "10.1.1.2") -> bytes:
    return bytes(Ether(src=MAC1, dst=MAC2) / IP(src=src, dst=dst) / TCP(sport=1234, dport=80,
                                                                        flags="S"))


def where(of: OpenFlow, frame: bytes, port: str) -> dict[str, int]:
    out = of.run(frame, port)
    return {p: len(e.frames) for p, e in out.sent.items() if e.frames}


def test_the_highest_priority_match_wins_and_masks_match_bits() -> None:
    of = OpenFlow.of(["priority=10,ip,nw_dst=10.1.1.0/24,actions=2",
                      "priority=20,ip,nw_dst=10.1.1.2,actions=3",
                      "priority=30,ip,nw_dst=10.1.2.0/24,actions=drop"], PORTS)
    assert where(of, udp(dst="10.1.1.2"), "p1") == {"p3": 1}
    assert where(of, udp(dst="10.1.1.9"), "p1") == {"p2": 1}
    assert where(of, udp(dst="10.1.2.9"), "p1") == {}
    # A miss drops (OpenFlow 1.5 §5.4).
    assert where(of, udp(dst="10.9.9.9"), "p1") == {}


def test_flow_statistics_count_the_packets_each_flow_matched() -> None:
    of = OpenFlow.of(["priority=10,udp,tp_dst=2,actions=2", "priority=1,actions=drop"], PORTS)
    frame = udp()
    of.run(frame, "p1")
    of.run(frame, "p1")
    of.run(tcp_syn(), "p1")
    (udp_flow, rest) = of.flows
    assert (udp_flow.n_packets, udp_flow.n_bytes) == (2, 2 * len(frame))
    assert rest.n_packets == 1


def test_a_field_the_packet_lacks_does_not_match() -> None:
    of = OpenFlow.of(["priority=10,tp_dst=2,actions=2", "priority=1,actions=3"], PORTS)
    arp = bytes(Ether(src=MAC1, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.1.1.1", pdst="10.1.1.2"))
    assert where(of, arp, "p1") == {"p3": 1}


def test_output_to_the_in_port_sends_nothing_but_in_port_does() -> None:
    of = OpenFlow.of(["in_port=1,actions=1", "in_port=2,actions=in_port"], PORTS)
    assert where(of, udp(), "p1") == {}
    assert where(of, udp(), "p2") == {"p2": 1}


def test_resubmit_comes_back_and_goto_table_goes_on() -> None:
    of = OpenFlow.of(["table=0,actions=resubmit(,1),3,goto_table:2",
                      "table=1,actions=2", "table=2,actions=1"], PORTS)
    out = of.run(udp(), "p3")
    assert [p for p, e in out.sent.items() for _ in e.frames] == ["p1", "p2"]
    # Order of emission: table 1's output, then the output after resubmit, then table 2's.
    of2 = OpenFlow.of(["table=0,actions=resubmit(,1),2", "table=1,actions=1"], PORTS)
    assert where(of2, udp(), "p3") == {"p1": 1, "p2": 1}


def test_registers_written_and_matched_across_tables() -> None:
    of = OpenFlow.of(["table=0,in_port=1,actions=load:0x5->NXM_NX_REG0[0..3],goto_table:1",
                      "table=1,reg0=0x5/0xf,actions=2", "table=1,priority=1,actions=3"], PORTS)
    assert where(of, udp(), "p1") == {"p2": 1}
    of = OpenFlow.of(["table=0,in_port=1,actions=move:NXM_OF_IN_PORT[]->NXM_NX_REG1[],"
                      "goto_table:1", "table=1,reg1=2,actions=2", "table=1,priority=1,actions=3"],
                     PORTS)
    assert where(of, udp(), "p1") == {"p3": 1}


def test_ct_with_table_recirculates_with_the_state_and_commit_keeps_it() -> None:
    """ovs-actions(7)'s firewall: new connections from port 1 only, replies
    from port 2 only as +est."""
    of = OpenFlow.of(["table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1)",
                      "table=1,in_port=1,ip,ct_state=+trk+new,actions=ct(commit),2",
                      "table=1,in_port=1,ip,ct_state=+trk+est,actions=2",
                      "table=1,in_port=2,ip,ct_state=+trk+new,actions=drop",
                      "table=1,in_port=2,ip,ct_state=+trk+est,actions=1"], PORTS)
    assert where(of, udp(src="10.1.1.2", dst="10.1.1.1", sport=2, dport=1), "p2") == {}
    assert where(of, udp(), "p1") == {"p2": 1}
    assert of.conntrack.last.state == TRK | NEW
    assert where(of, udp(src="10.1.1.2", dst="10.1.1.1", sport=2, dport=1), "p2") == {"p1": 1}
    assert of.conntrack.last.state == TRK | EST | RPL


def test_ct_mark_set_in_commit_is_matched_after_the_next_lookup() -> None:
    of = OpenFlow.of(["table=0,ip,ct_state=-trk,actions=ct(table=1,zone=3)",
                      "table=1,ip,ct_state=+trk+new,actions=ct(commit,zone=3,"
                      "exec(set_field:0x2a->ct_mark)),2",
                      "table=1,ip,ct_state=+trk+est,ct_mark=0x2a,ct_zone=3,actions=3"], PORTS)
    assert where(of, udp(), "p1") == {"p2": 1}
    # The reply: +est once both directions were seen (ovs-fields(7), ct_state).
    assert where(of, udp(src="10.1.1.2", dst="10.1.1.1", sport=2, dport=1), "p2") == {"p3": 1}
    assert of.conntrack.conns[0].mark == 0x2a and of.conntrack.conns[0].zone == 3


def test_ct_without_table_clears_the_state_for_what_follows() -> None:
    of = OpenFlow.of(["table=0,ip,actions=ct(commit),resubmit(,1)",
                      "table=1,ct_state=+trk,actions=2", "table=1,ct_state=-trk,actions=3"],
                     PORTS)
    assert where(of, udp(), "p1") == {"p3": 1}


def test_ct_nat_translates_the_packet_and_its_replies() -> None:
    of = OpenFlow.of(["table=0,in_port=1,ip,actions=ct(commit,nat(src=10.1.1.240)),2",
                      "table=0,in_port=2,ip,ct_state=-trk,actions=ct(table=1,nat)",
                      "table=1,in_port=2,ip,ct_state=+trk+est,actions=1"], PORTS)
    out = of.run(udp(), "p1")
    (sent,) = out.sent["p2"].frames
    assert IP(sent[14:]).src == "10.1.1.240"
    back = of.run(udp(src="10.1.1.2", dst="10.1.1.240", sport=2, dport=1), "p2")
    (reply,) = back.sent["p1"].frames
    assert IP(reply[14:]).dst == "10.1.1.1"


def test_a_lookup_after_ct_nat_without_table_is_not_guessed() -> None:
    """ovs-actions(7): after ct without table= "the original instance of the packet
    continues", yet the frame that leaves is translated: a later lookup in that pass
    (resubmit, goto_table) whose flow depends on which headers it sees is not
    modelled.  Found by test_explore_openflow (OVS matched table 2 on the
    untranslated destination)."""
    nat = "table=0,ip,actions=ct(commit,nat(dst=10.1.1.9)),resubmit(,2)"
    by_dst = ["table=2,priority=20,ip,nw_dst=10.1.1.9,actions=2", "table=2,priority=10,ip,actions=3"]
    with pytest.raises(NotModelled, match="lookup in table 2 after"):
        OpenFlow.of([nat, *by_dst], PORTS).run(udp(), "p1")
    # Negative controls: the same without nat; a table 2 that picks one flow either
    # way (the translated frame goes out); the translated frame output at once.
    assert where(OpenFlow.of([nat.replace(",nat(dst=10.1.1.9)", ""), *by_dst], PORTS),
                 udp(), "p1") == {"p3": 1}
    out = OpenFlow.of([nat, "table=2,ip,actions=2"], PORTS).run(udp(), "p1")
    assert IP(out.sent["p2"].frames[0][14:]).dst == "10.1.1.9"
    out = OpenFlow.of(["table=0,ip,actions=ct(commit,nat(dst=10.1.1.9)),2"], PORTS).run(udp(), "p1")
    assert IP(out.sent["p2"].frames[0][14:]).dst == "10.1.1.9"


def test_controller_records_a_packet_in_with_its_table_and_cookie() -> None:
    of = OpenFlow.of(["table=0,actions=goto_table:4", "table=4,cookie=0x7,actions=controller"],
                     PORTS)
    out = of.run(udp(), "p1")
    (pin,) = out.packet_ins
    assert (pin.table, pin.cookie, pin.frame) == (4, 7, udp())


def test_icmpv6_type_is_matched() -> None:
    ping6 = bytes(Ether(src=MAC1, dst=MAC2) / IPv6(src="fc00::1", dst="fc00::2")
                  / ICMPv6EchoRequest())
    of = OpenFlow.of(["priority=10,icmp6,icmp_type=128,actions=2", "priority=1,actions=3"],
                     PORTS)
    assert where(of, ping6, "p1") == {"p2": 1}
    ping = bytes(Ether(src=MAC1, dst=MAC2) / IP(src="10.1.1.1", dst="10.1.1.2") / ICMP(type=0))
    of = OpenFlow.of(["priority=10,icmp,icmp_type=8,actions=2", "priority=1,actions=3"], PORTS)
    assert where(of, ping, "p1") == {"p3": 1}


@pytest.mark.parametrize("flow, what", [
    ("actions=learn(table=1,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
     "action learn"),
    ("actions=dec_ttl,2", "action dec_ttl"),
    ("tun_id=5,actions=2", "match field tun_id"),
])
def test_what_it_does_not_interpret_says_not_modelled(flow: str, what: str) -> None:
    with pytest.raises(NotModelled, match=f"^not modelled: {what}"):
        OpenFlow(parse_flows([flow]), PORTS, Conntrack()).run(udp(), "p1")


def test_two_matching_flows_of_one_priority_are_not_guessed() -> None:
    of = OpenFlow.of(["priority=5,ip,actions=2", "priority=5,udp,actions=3"], PORTS)
    with pytest.raises(NotModelled, match="one priority"):
        of.run(udp(), "p1")


def test_xreg_overlays_two_registers() -> None:
    """ovs-fields(7): xreg0 is reg0 (most significant) and reg1."""
    of = OpenFlow.of(["table=0,actions=set_field:0x100000002->xreg0,goto_table:1",
                      "table=1,reg0=1,reg1=2,actions=2", "table=1,priority=1,actions=3"], PORTS)
    assert where(of, udp(), "p1") == {"p2": 1}
    of = OpenFlow.of(["table=0,actions=load:0x2->NXM_NX_REG1[],goto_table:1",
                      "table=1,xreg0=2,actions=2", "table=1,priority=1,actions=3"], PORTS)
    assert where(of, udp(), "p1") == {"p2": 1}


def test_ports_by_name_and_ethernet_rewrites() -> None:
    of = OpenFlow.of(["in_port=p1,actions=mod_dl_dst:50:54:00:00:00:09,"
                      "set_field:50:54:00:00:00:08->eth_src,output:p3"], PORTS)
    (frame,) = of.run(udp(), "p1").sent["p3"].frames
    assert (Ether(frame).dst, Ether(frame).src) == ("50:54:00:00:00:09", "50:54:00:00:00:08")
    assert frame[12:] == udp()[12:]
    assert where(of, udp(), "p2") == {}


def test_output_to_a_port_outside_the_map_is_not_guessed() -> None:
    of = OpenFlow.of(["actions=output:7"], PORTS)
    with pytest.raises(NotModelled, match="output to port 7"):
        of.run(udp(), "p1")


def test_a_packet_out_runs_its_own_actions_not_the_table() -> None:
    of = OpenFlow.of(["actions=2"], PORTS)
    assert {p: len(e.frames) for p, e in of.run(udp(), "p1", actions="3").sent.items()
            if e.frames} == {"p3": 1}


def test_upstream_arp_responder_answers_by_the_in_port() -> None:
    """system-traffic.at's NAT tests' responder: a request for 10.1.1.240 is
    turned into the reply from 80:88:88:88:88:88 (RFC 826) and sent back by
    the port it came in by (in_port cleared, the port kept in reg3)."""
    from fixtures.system_userspace.system_ct_nat import arp_responder_flows

    flows = arp_responder_flows("reg2=0x0a0101f0/0xffffffff")
    of = OpenFlow.of(flows, PORTS, normal=lambda frame, port: ["p3"])
    req = bytes(Ether(src=MAC1, dst="ff:ff:ff:ff:ff:ff")
                / ARP(op=1, hwsrc=MAC1, psrc="10.1.1.1", pdst="10.1.1.240"))
    (reply,) = of.run(req, "p1").sent["p1"].frames
    want = Ether(src="80:88:88:88:88:88", dst=MAC1) / ARP(
        op=2, hwsrc="80:88:88:88:88:88", psrc="10.1.1.240", hwdst=MAC1, pdst="10.1.1.1")
    assert reply == bytes(want)
    # Any other address is NORMAL's.
    other = bytes(Ether(src=MAC1, dst="ff:ff:ff:ff:ff:ff")
                  / ARP(op=1, hwsrc=MAC1, psrc="10.1.1.1", pdst="10.1.1.2"))
    assert where(of, other, "p1") == {"p3": 1}


def test_resubmit_with_ct_looks_up_the_original_tuple() -> None:
    """ovs-actions(7), resubmit's ct flag: the reply is looked up as its
    connection's original direction (10.1.1.1 -> 10.1.1.2)."""
    of = OpenFlow.of(["table=0,in_port=1,udp,actions=ct(commit),2",
                      "table=0,in_port=2,udp,ct_state=-trk,actions=ct(table=1)",
                      "table=1,ct_state=+est,actions=resubmit(,2,ct)",
                      "table=2,nw_src=10.1.1.1,tp_src=1,actions=1",
                      "table=2,priority=1,actions=3"], PORTS)
    assert where(of, udp(), "p1") == {"p2": 1}
    assert where(of, udp(src="10.1.1.2", dst="10.1.1.1", sport=2, dport=1), "p2") == {"p1": 1}
