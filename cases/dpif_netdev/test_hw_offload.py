"""Hardware offload with the dummy offload provider: dpif-netdev.at tests 1105-1110.

Partial offload (the provider marks packets, the datapath finds the flow by its
mark and still runs the actions) with header rewrites, on dummy and dummy-pmd
ports; full offload (the provider forwards the packet itself), including a
pipeline abort and the tunnel source port the provider chooses.  Each case
checks upstream's log lines, flow dumps, pcap parses and offload counters, and
every frame that leaves against the model.
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import expect_frames, send_and_expect
from datapath.model.actions import Action, PushTunnel, SetL4Port, SetVlanVid, mod_nw_dst, mod_nw_src, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import TxOffloads
from datapath.verdict import conclude
from evidence.pcap import PcapReader, read_all
from evidence.tshark import Tshark
from fixtures.frames import compose, ndp_solicit
from harness.control import check
from harness.filters import (
    filter_flow_install,
    filter_hw_flow_del,
    filter_hw_flow_install,
    filter_hw_packet_netdev_dummy,
    offload_counters,
    strip_hw_offload,
    strip_timers,
    strip_xout,
)
from harness.logscan import miss_upcall_keys
from harness.records import CaseRecord, Step
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface, set_open_vswitch
from harness.wait import wait_until

KEY_PREFIX = ("recirc_id(0),dp_hash(0),skb_priority(0),in_port(1),skb_mark(0),ct_state(0),"
              "ct_zone(0),ct_mark(0),ct_label(0),")


def port_types(title: str) -> list:
    return [pytest.param(t, id=t, marks=[pytest.mark.upstream(f"{title} - {t}"),
                                         pytest.mark.sandbox(dummy_numa="0,0,0,0,1,1,1,1")
                                         if t == "dummy-pmd" else pytest.mark.sandbox()])
            for t in ("dummy", "dummy-pmd")]


def log(sb: Sandbox) -> str:
    return "\n".join(sb.log.lines())


def last_miss_key(sb: Sandbox) -> str:
    return miss_upcall_keys(sb.log.lines())[-1]


def filtered_equals(sb: Sandbox, filt, want: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """The filtered log must read `want`; the offload thread logs asynchronously,
    so wait for it (upstream checks once, having spent the time forking tools)."""
    wait_until(lambda: strip_xout(filt(log(sb))) == want, 10, what=what,
               describe=lambda: strip_xout(filt(log(sb))))


def enable_hw_offload(sb: Sandbox) -> None:
    sb.appctl("vlog/set", "dpif:file:dbg", "dpif_netdev:file:dbg",
              "dpif_offload_dummy:file:dbg")
    sb.vsctl(*set_open_vswitch(other_config={"hw-offload": True}))
    sb.log.wait("Flow HW offload is enabled")


def exchange(sb: Sandbox, reader: PcapReader, packet: str, actions: list[Action],
             steps: list[Step], title: str, second_opinion: Tshark | None = None) -> None:
    """netdev-dummy/receive p1 PACKET --len 64 on a port whose pcap= file records
    what it receives and what it sends: the frame that went in is read from the
    file, and the one that came out must be the model's for it."""
    sb.appctl("netdev-dummy/receive", "p1", packet, "--len", "64")
    frames: list[bytes] = []
    wait_until(lambda: frames.extend(reader.read_new()) or len(frames) >= 2, 10,
               what="the frame in and the frame out in p1.pcap",
               describe=lambda: f"{len(frames)} record(s)")
    sent, captured = frames[:1], frames[1:]
    expected = model.forward(sent[0], actions, TxOffloads())
    conclude(steps, expected, captured, title=title, rx_port="p1", tx_port="p1", sent=sent,
             second_opinion=second_opinion).check()


def partial_offload(sb: Sandbox, port_type: str, ifindex: int, flow: str, packet: str,
                    actions: list[Action], steps: list[Step], miss_key: str, hw_create: str,
                    dp_flow: str, hw_packet: str, dumped: str, parsed: list[str],
                    second_opinion: Tshark | None = None) -> None:
    """DPIF_NETDEV_FLOW_HW_OFFLOAD_OFFSETS and _VID_ARP: one sequence, two packets."""
    sb.add_of_br("br0",
                 *chain(add_port("br0", "p1", type=port_type, ofport_request=1,
                                 options={"pcap": "p1.pcap", "ifindex": ifindex}),
                        ["set", "bridge", "br0", "datapath-type=dummy", "other-config:datapath-id=1234",
                         "fail-mode=secure"]))
    enable_hw_offload(sb)
    sb.ofctl("del-flows", "br0")
    sb.ofctl("add-flow", "br0", flow)
    reader = PcapReader(sb.rundir / "p1.pcap")
    exchange(sb, reader, packet, actions, steps, "first packet (upcall)", second_opinion)
    sb.log.wait("miss upcall")
    assert last_miss_key(sb) == KEY_PREFIX + miss_key
    sb.log.wait("succeed to add netdev flow")
    assert strip_xout(filter_hw_flow_install(log(sb))) == hw_create  # flow offloaded
    filtered_equals(sb, filter_flow_install, dp_flow, "the datapath flow_add")
    exchange(sb, reader, packet, actions, steps, "second packet (matched by mark)",
             second_opinion)
    filtered_equals(sb, filter_hw_packet_netdev_dummy, hw_packet,
                    "the packet to match the offloaded flow by its mark")
    sb.appctl("revalidator/wait")
    assert strip_timers(sb.appctl("dpif/dump-flows", "br0").stdout) == dumped
    sb.appctl("time/stop")  # let the datapath flow expire
    sb.appctl("time/warp", "15000")
    sb.appctl("revalidator/wait")
    sb.log.wait("succeed to delete netdev flow")
    assert strip_xout(filter_hw_flow_del(log(sb))) == "p1: flow del: mark: 1\n"
    check(sb.ofctl("parse-pcap", "p1.pcap"), stdout="".join(f"{ln}\n" for ln in parsed))
    if port_type == "dummy-pmd":  # partial hw offload was hit in dpif-netdev
        assert "PHWOL hits:                  1" in sb.appctl(
            "dpif-netdev/pmd-perf-show").stdout


UDP_PACKET = ("packet_type(ns=0,id=0),eth(src=00:06:07:08:09:0a,dst=00:01:02:03:04:05),"
              "eth_type(0x8100),vlan(vid=99,pcp=7),encap(eth_type(0x0800),ipv4(src=127.0.0.1,"
              "dst=127.0.0.1,proto=17,ttl=64,frag=no),udp(src=81,dst=82))")
UDP_PARSED = ("udp,in_port=ANY,dl_vlan=99,dl_vlan_pcp=7,vlan_tci1=0x0000,dl_src=00:06:07:08:09:0a,"
              "dl_dst=00:01:02:03:04:05,nw_src={src},nw_dst=127.0.0.1,nw_tos=0,nw_ecn=0,"
              "nw_ttl=64,nw_frag=no,tp_src=81,tp_dst={dst}")


@pytest.mark.parametrize("port_type", port_types(
    "dpif-netdev - partial hw offload with packet modifications"))
def test_partial_hw_offload_with_packet_modifications(sandbox: Sandbox, case_record: CaseRecord,
                                                      port_type: str) -> None:
    """mod_nw_src and mod_tp_dst on a VLAN-tagged UDP packet, sent back out of p1:
    the offloaded packet must carry correct L3/L4 offsets, so both packets leave
    rewritten (the UDP checksum updated with them).

    No tshark opinion: upstream's 64-byte packet declares a UDP length (44)
    past its IP payload (26 bytes), so tshark leaves the checksum unverified
    (RFC 768 sums the declared datagram, which is not all there), where the
    model's checksum verdict says good; which of the two a checksum over a
    short datagram should be is the model's open question, not this case's."""
    udp = "recirc_id=0,eth,udp,in_port=1,dl_vlan=99,nw_src=127.0.0.1,nw_frag=no,tp_dst=82"
    partial_offload(
        sandbox, port_type, 1101,
        "in_port=1,udp,actions=mod_nw_src:192.168.0.7,mod_tp_dst:3773,output:IN_PORT",
        UDP_PACKET, [mod_nw_src("192.168.0.7"), SetL4Port(3773, "dst"), output("p1")],
        case_record.steps, miss_key=UDP_PACKET.replace("ttl=64", "tos=0,ttl=64"),
        hw_create=f"p1: flow put[create]: flow match: {udp}, mark: 1\n",
        dp_flow=("recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),"
                 "vlan(vid=99,pcp=7/0x0),encap(eth_type(0x0800),ipv4(src=127.0.0.1,proto=17,"
                 "frag=no),udp(dst=82)), actions: <del>\n"),
        hw_packet=("p1: packet: udp,dl_vlan=99,dl_vlan_pcp=7,vlan_tci1=0x0000,"
                   "dl_src=00:06:07:08:09:0a,dl_dst=00:01:02:03:04:05,nw_src=127.0.0.1,"
                   "nw_dst=127.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=81,tp_dst=82 "
                   "matches with flow: recirc_id=0,eth,udp,dl_vlan=99,nw_src=127.0.0.1,"
                   "nw_frag=no,tp_dst=82 with mark: 1\n"),
        dumped=("recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),"
                "vlan(vid=99,pcp=7/0x0),encap(eth_type(0x0800),ipv4(src=127.0.0.1,proto=17,"
                "frag=no),udp(dst=82)), packets:1, bytes:64, used:0.0s, "
                "actions:set(ipv4(src=192.168.0.7)),set(udp(dst=3773)),1\n"),
        parsed=[UDP_PARSED.format(src="127.0.0.1", dst=82),
                UDP_PARSED.format(src="192.168.0.7", dst=3773)] * 2)


ARP_PACKET = ("packet_type(ns=0,id=0),eth(src=00:06:07:08:09:0a,dst=00:01:02:03:04:05),"
              "eth_type(0x8100),vlan(vid=99,pcp=7),encap(eth_type(0x0806),arp(sip=127.0.0.1,"
              "tip=127.0.0.1,op=1,sha=00:0b:0c:0d:0e:0f,tha=00:00:00:00:00:00))")
ARP_PARSED = ("arp,in_port=ANY,dl_vlan={vid},dl_vlan_pcp=7,vlan_tci1=0x0000,"
              "dl_src=00:06:07:08:09:0a,dl_dst=00:01:02:03:04:05,arp_spa=127.0.0.1,"
              "arp_tpa=127.0.0.1,arp_op=1,arp_sha=00:0b:0c:0d:0e:0f,arp_tha=00:00:00:00:00:00")


@pytest.mark.parametrize("port_type", port_types(
    "dpif-netdev - partial hw offload with arp vlan id packet modifications"))
def test_partial_hw_offload_arp_vlan_id(sandbox: Sandbox, case_record: CaseRecord, port_type: str,
                                        second_opinion: Tshark | None) -> None:
    """mod_vlan_vid on a VLAN-tagged ARP packet (the datapath does pop_vlan,
    push_vlan): the offloaded packet must carry the right L3 offset, so both
    packets leave with VLAN id 11 and PCP 7."""
    partial_offload(
        sandbox, port_type, 1102,
        "in_port=1,arp,dl_vlan=99,actions=mod_vlan_vid=11,output:IN_PORT",
        ARP_PACKET, [SetVlanVid(11), output("p1")], case_record.steps, miss_key=ARP_PACKET,
        hw_create=("p1: flow put[create]: flow match: recirc_id=0,eth,arp,in_port=1,dl_vlan=99,"
                   "dl_vlan_pcp=7, mark: 1\n"),
        dp_flow=("recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),"
                 "vlan(vid=99,pcp=7),encap(eth_type(0x0806)), actions: <del>\n"),
        hw_packet=("p1: packet: arp,dl_vlan=99,dl_vlan_pcp=7,vlan_tci1=0x0000,"
                   "dl_src=00:06:07:08:09:0a,dl_dst=00:01:02:03:04:05,arp_spa=127.0.0.1,"
                   "arp_tpa=127.0.0.1,arp_op=1,arp_sha=00:0b:0c:0d:0e:0f,"
                   "arp_tha=00:00:00:00:00:00 matches with flow: recirc_id=0,eth,arp,dl_vlan=99,"
                   "dl_vlan_pcp=7 with mark: 1\n"),
        dumped=("recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),"
                "vlan(vid=99,pcp=7),encap(eth_type(0x0806)), packets:1, bytes:64, used:0.0s, "
                "actions:pop_vlan,push_vlan(vid=11,pcp=7),1\n"),
        parsed=[ARP_PARSED.format(vid=99), ARP_PARSED.format(vid=11)] * 2,
        second_opinion=second_opinion)


FULL_PACKET = ("eth_src=00:06:07:08:09:0a,eth_dst=00:01:02:03:04:05,udp,ip_src=127.0.0.1,"
               "ip_dst=127.0.0.1,nw_ttl=64,udp_src=54392,udp_dst=5201")
OFFLOADED = ("recirc_id(0),in_port(p1),packet_type(ns=0,id=0),eth(),eth_type(0x0800),ipv4(),"
             "udp(), packets:1, bytes:106, used:0.0s, offloaded:yes, dp:dummy, actions:{out}\n")


def counters(sb: Sandbox) -> str:
    return offload_counters(sb.appctl_tool("--format", "json", "dpif/offload/show").stdout)


@pytest.mark.upstream("dpif-netdev - full hw offload - dummy-pmd", since="4.0")
@pytest.mark.sandbox(dummy_numa="0,0,0,0,1,1,1,1")
def test_full_hw_offload(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """The second packet of a flow is forwarded by the (simulated) hardware: the
    datapath flow shows offloaded:yes and no partial hit; one miss, one full.
    With its output port deleted behind the revalidator's back, the hardware
    path aborts and the packet falls back to the datapath (pipe_abort 1).
    Every packet that leaves p2 must be the one sent, unchanged."""
    sb = sandbox
    sb.add_of_br("br0",
                 *chain(["add-port", "br0", "p1"], ["add-port", "br0", "p2"],
                        set_interface("p1", type="dummy-pmd", ofport_request=1, options={"ifindex": 1100}),
                        set_interface("p2", type="dummy-pmd", ofport_request=2,
                                      options={"ifindex": 1200, "tx_pcap": "p2.pcap"}),
                        ["set", "bridge", "br0", "datapath-type=dummy", "other-config:datapath-id=1234",
                         "fail-mode=secure"]))
    enable_hw_offload(sb)
    sb.ofctl("del-flows", "br0")
    sb.ofctl("add-flow", "br0", "in_port=1,actions=p2")
    packet_hex = sb.ofctl("compose-packet", "--bare", FULL_PACKET).stdout.strip()
    frame = compose("udp", 4, src="127.0.0.1", dst="127.0.0.1", ttl=64,
                    eth_src="00:06:07:08:09:0a", eth_dst="00:01:02:03:04:05")
    assert bytes.fromhex(packet_hex) == frame  # ovs-ofctl composes what the model gets
    p1 = DummyPort.existing(sb, "p1", 1)
    p2 = DummyPort.existing(sb, "p2", 2, pcap_name="p2.pcap")
    unchanged = model.forward(frame, [output("p2")], TxOffloads())

    def forward(title: str, expected: model.Expected = unchanged) -> None:
        send_and_expect(p1, [frame], p2, expected, title=title, steps=case_record.steps,
                        second_opinion=second_opinion)

    def by_hardware(title: str) -> None:
        """The simulated hardware takes the packet as it is queued, before p1's rx
        counters: the frame leaving p2 is the only sign it was forwarded."""
        p1.send([frame])
        expect_frames(p2, unchanged, sent=[frame], rx_name="p1", title=title,
                      steps=case_record.steps, second_opinion=second_opinion)
    forward("first packet (upcall)")
    sb.log.wait("miss upcall")
    assert last_miss_key(sb) == KEY_PREFIX + (
        "packet_type(ns=0,id=0),eth(src=00:06:07:08:09:0a,dst=00:01:02:03:04:05),"
        "eth_type(0x0800),ipv4(src=127.0.0.1,dst=127.0.0.1,proto=17,tos=0,ttl=64,frag=no),"
        "udp(src=54392,dst=5201)")
    sb.log.wait("succeed to add netdev flow")
    assert strip_xout(filter_hw_flow_install(log(sb))) == (
        "p1: flow put[create]: flow match: recirc_id=0,eth,ip,in_port=1,vlan_tci=0x0000/0x1fff,"
        "nw_frag=no, mark: 1\n")
    filtered_equals(sb, filter_flow_install, "recirc_id(0),in_port(1),packet_type(ns=0,id=0),"
                    "eth_type(0x0800),ipv4(frag=no), actions: <del>\n", "the datapath flow_add")
    by_hardware("second packet (full offload)")
    filtered_equals(sb, filter_hw_packet_netdev_dummy, (
        "p1: packet: udp,vlan_tci=0x0000,dl_src=00:06:07:08:09:0a,dl_dst=00:01:02:03:04:05,"
        "nw_src=127.0.0.1,nw_dst=127.0.0.1,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=54392,"
        "tp_dst=5201 matches with flow: recirc_id=0,eth,ip,vlan_tci=0x0000/0x1fff,nw_frag=no "
        "with mark: 1\n"), "the packet to match the offloaded flow by its mark")

    def dumped() -> str:
        return strip_hw_offload(sb.appctl("dpctl/dump-flows", "-m").stdout)
    wait_until(lambda: dumped() == OFFLOADED.format(out="p2"), 10,
               what="the offloaded flow's stats", describe=dumped)
    sb.appctl("time/stop")  # let the datapath flow expire
    sb.appctl("time/warp", "15000")
    sb.appctl("revalidator/wait")
    sb.log.wait("succeed to delete netdev flow")
    assert strip_xout(filter_hw_flow_del(log(sb))) == "p1: flow del: mark: 1\n"
    assert "PHWOL hits:                  0 " in sb.appctl("dpif-netdev/pmd-perf-show").stdout
    # Two packets were received: ovs-pcap p2.pcap | grep -c "$packet_hex".
    assert [f.hex() for f in read_all(p2.tx_pcap)].count(packet_hex) == 2
    assert counters(sb) == ("rx_offload_full:1\nrx_offload_miss:1\nrx_offload_partial:0\n"
                            "rx_offload_pipe_abort:0\n")
    # An output port removed while the revalidator is paused: the hardware flow
    # stays, its egress fails (a pipeline abort), the datapath takes over.
    forward("third packet (upcall again)")
    sb.log.wait("succeed to add netdev flow", count=2)  # offloaded before the next packet
    sb.appctl("revalidator/pause")
    sb.vsctl("del-port", "br0", "p2")
    forward("fourth packet (pipeline abort, port gone)", model.Expected(frames=[]))
    assert dumped() == OFFLOADED.format(out="2")
    sb.appctl("revalidator/resume")
    assert counters(sb) == ("rx_offload_full:2\nrx_offload_miss:2\nrx_offload_partial:0\n"
                            "rx_offload_pipe_abort:1\n")


NDP_EXPECTED = ("aa66aa660001aa66aa6600000800" "4500007a00004000401133be010102580101025c"
                "aba212b500660000" "0800000000007b00" "3333ff00000104bf1bd82d2d86dd"
                "6000000000203afffe800000000000000000000000000002ff0200000000000000000001ff000001"
                "87006e2600000000fe800000000000000000000000000001" "01018abf7e2f0584")


@pytest.mark.upstream("dpif-netdev - full hw offload - tunnel entropy - dummy-pmd", since="4.0")
@pytest.mark.sandbox(dummy_numa="0")
def test_full_hw_offload_tunnel_entropy(sandbox: Sandbox, case_record: CaseRecord,
                                        second_opinion: Tshark | None) -> None:
    """With hw-offload on, the VXLAN source port is the offload provider's choice,
    a hash of the inner frame (43938 here), not the configured range (57363),
    in software (first packet) and in hardware (second): the same frame twice."""
    sb = sandbox
    sb.add_of_br("br0",
                 *chain(["add-br", "br1"], ["set", "bridge", "br1", "datapath-type=dummy"],
                        add_port("br1", "p1", type="dummy-pmd"), ["add-br", "br2"],
                        ["set", "bridge", "br2", "datapath-type=dummy"],
                        ["set", "bridge", "br2", "other-config:hwaddr=aa:66:aa:66:00:00"],
                        add_port("br2", "p2", type="dummy-pmd")))
    sb.vsctl(*set_open_vswitch(other_config={"hw-offload": True}))
    sb.log.wait("Flow HW offload is enabled")
    sb.vsctl(*add_port("br1", "t1", type="vxlan",
                       options={"remote_ip": "1.1.2.92", "key": 123, "csum": False},
                       ofport_request=11))
    sb.ofctl("add-flow", "br1", "in_port=p1,actions=mod_nw_dst:192.168.1.1,output:11")
    check(sb.appctl("netdev-dummy/ip4addr", "br2", "1.1.2.88/24"), stdout="OK\n")
    check(sb.appctl("tnl/neigh/set", "br2", "1.1.2.92", "aa:66:aa:66:00:01"), stdout="OK\n")
    check(sb.appctl("tnl/egress_port_range", "57363", "57363"), stdout="OK\n")
    sb.appctl("vlog/set", "dpif:file:dbg", "dpif_netdev:file:dbg",
              "dpif_offload_dummy:file:dbg", "netdev_dummy:file:dbg")
    sb.vsctl(*set_interface("p2", options={"tx_pcap": "p2.pcap"}))
    p1 = DummyPort.existing(sb, "p1", 1)
    p2 = DummyPort.existing(sb, "p2", 2, pcap_name="p2.pcap")
    tunnel = TunnelSpec("vxlan", "1.1.2.88", "1.1.2.92", "aa:66:aa:66:00:00",
                        "aa:66:aa:66:00:01", key=123, csum=False, entropy="dummy-offload")
    frame = ndp_solicit()
    expected = model.forward(frame, [mod_nw_dst("192.168.1.1"), PushTunnel(tunnel, "11"),
                                     output("p2")], TxOffloads())
    assert [f.hex() for f in expected.frames] == [NDP_EXPECTED]  # the model agrees with upstream
    captured = send_and_expect(p1, [frame], p2, expected, title="first packet (software)",
                               steps=case_record.steps, second_opinion=second_opinion)
    assert captured[-1].hex() == NDP_EXPECTED  # CHECK_FWD_PACKET: the last pcap line
    p1.send([frame])  # taken by the simulated hardware before p1's rx counters
    captured = expect_frames(p2, expected, sent=[frame], rx_name="p1",
                             title="second packet (hardware)", steps=case_record.steps,
                             second_opinion=second_opinion)
    assert captured[-1].hex() == NDP_EXPECTED
    assert counters(sb) == ("rx_offload_full:1\nrx_offload_miss:1\nrx_offload_partial:0\n"
                            "rx_offload_pipe_abort:0\n")
