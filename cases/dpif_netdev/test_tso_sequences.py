"""TSO, upstream's sequences: dpif-netdev.at tests 1135-1139, one id each.

Each runs upstream's set-up (userspace-tso-enable set with the bridges, after
ovs-vswitchd started; add_of_ports --pcap where upstream uses it) and sends
upstream's packets (the same ODP flows and --len) in upstream's order into one
daemon; after each it checks what upstream checks and every frame against the
model.  Where upstream waits for ovs-vswitchd's 5-second statistics update
(ovs-vsctl wait-until ... statistics:rx_packets), the case waits for the
datapath's own counters, then moves the clock past the update (time/warp 5000).
"""
from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import expect_frames, send_and_expect
from datapath.model import gso
from datapath.model.actions import PushTunnel, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags, TxOffloads
from evidence.pcap import PcapReader, read_all
from evidence.tshark import Tshark
from fixtures.dpif_netdev.sequence import add_of_ports, expect_unordered
from fixtures.dpif_netdev.upstream_tso_vectors import FRAMES, V4_BIG, V4_SEGS, V6_BIG, V6_SEGS, expand
from fixtures.frames import L7, tso_frame
from fixtures.tunnel import FALLBACK_TUNNELS, fallback_spec
from harness.control import check
from harness.filters import strip_stats, strip_used
from harness.ifstatus import read_interface
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface
from harness.wait import wait_until

TSO_ON = ("set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
FLOW_V4 = ("eth(src=8a:bf:7e:2f:05:84,dst=0a:8f:39:4f:e0:73),eth_type(0x0800),"
           "ipv4(src=192.168.123.2,dst=192.168.123.1,proto=6,tos=1,ttl=64,frag=no),"
           "tcp(src=54392,dst=5201),tcp_flags(ack)")
FLOW_V6 = ("eth(src=8a:bf:7e:2f:05:84,dst=0a:8f:39:4f:e0:73),eth_type(0x86dd),"
           "ipv6(src=2001:cafe::88,dst=2001:cafe::92,proto=6),tcp(src=54392,dst=5201),"
           "tcp_flags(ack)")
# 1138 and 1139's flow.
FLOW_GROW = ("in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:01:00),eth_type(0x0800),"
             "ipv4(src=10.0.1.1,dst=10.0.0.1,proto=6,tos=0,ttl=64,frag=no),"
             "tcp(src=1234,dst=80),tcp_flags(ack)")


def grow_frame(length: int) -> bytes:
    """What netdev-dummy makes of FLOW_GROW --len LENGTH: headers, zero padding."""
    return bytes(Ether(src="50:54:00:00:00:05", dst="50:54:00:00:01:00")
                 / IP(src="10.0.1.1", dst="10.0.0.1", ttl=64, id=0, flags=0, tos=0)
                 / TCP(sport=1234, dport=80, flags="A", seq=0, ack=0, window=0)
                 / Raw(bytes(length - 54)))


def receive(sb: Sandbox, port: str, flow: str, *length: str):  # type: ignore[no-untyped-def]
    """The send of send_and_expect: upstream's netdev-dummy/receive of an ODP flow."""
    return lambda _frames: sb.appctl("netdev-dummy/receive", port, flow, *length)


def statistics_update(sb: Sandbox) -> None:
    """The 5-second statistics update, now: move vswitchd's clock past it."""
    sb.appctl("time/warp", "5000")


@pytest.mark.upstream("dpif-netdev - tso")
def test_tso_sequence(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """From a TSO port (segsz 500): an IPv4 and an IPv6 2000-byte payload leave a
    port without TSO as four segments each, then a TSO port whole; p2.pcap must
    hold upstream's ten frames exactly."""
    sb = sandbox
    sb.add_of_br("br0", *TSO_ON, "--", "add-br", "br1", "--", "set", "bridge", "br1",
                 "datapath-type=dummy", "--", "add-port", "br1", "p1", "--", "set", "Interface",
                 "p1", "type=dummy", "--", "add-port", "br1", "p2", "--", "set", "Interface", "p2",
                 "type=dummy")
    sb.appctl("vlog/set", "netdev_dummy:file:dbg")
    sb.ofctl("add-flow", "br1", "in_port=p1,actions=output:p2")
    sb.vsctl(*chain(set_interface("p2", options={"tx_pcap": "p2.pcap"}),
                    set_interface("p1", options={"ol_tso_segsz": 500})))
    p1 = DummyPort.existing(sb, "p1", 0)
    p2 = DummyPort.existing(sb, "p2", 0, pcap_name="p2.pcap")
    rx = RxFlags(tso_segsz=500)
    for tx in (TxOffloads(), TxOffloads(tso_segsz=500)):
        if tx.tso_segsz:  # send from tso to tso
            sb.vsctl(*set_interface("p2", options={"ol_tso_segsz": 500}))
        for ipv, flow, length in ((4, FLOW_V4, "2054"), (6, FLOW_V6, "2074")):
            frame = tso_frame(ipv, 2000)
            send_and_expect(p1, [frame], p2, model.forward(frame, [output("p2")], tx, rx),
                            title=f"IPv{ipv} {length} bytes, p2 {tx.id}",
                            send=receive(sb, "p1", f"in_port(1),{flow}", "--len", length),
                            steps=case_record.steps, second_opinion=second_opinion)
    assert [f.hex() for f in read_all(p2.tx_pcap)] == [*V4_SEGS, *V6_SEGS, V4_BIG, V6_BIG]


@pytest.mark.upstream("dpif-netdev - tunnel tso fallback")
def test_tunnel_tso_fallback_sequence(sandbox: Sandbox, case_record: CaseRecord) -> None:
    """int-br floods (NORMAL) a TSO packet into six tunnels (VXLAN, Geneve, GRE
    over IPv4 and IPv6), none of which can segment: each is segmented in
    software.  p1.pcap, sorted, must be upstream's 48 frames; the frames, in any
    order, the model's (IPv6 GRE with csum: known bug gre-csum-at-push, whose
    wrong checksums upstream's vectors encode)."""
    sb = sandbox
    sb.add_of_br("br0", *TSO_ON, "--", "add-br", "br1", "--", "set", "bridge", "br1",
                 "datapath-type=dummy", "other-config:hwaddr=aa:55:aa:55:00:03", "--",
                 "add-port", "br1", "p1", "--", "set", "Interface", "p1", "type=dummy",
                 "ofport_request=1")
    tunnels: list[str] = ["add-br", "int-br", "--", "set", "bridge", "int-br",
                          "datapath_type=dummy"]
    for n, (kind, ul, csum) in enumerate(FALLBACK_TUNNELS, start=1):
        remote = "1.1.2.92" if ul == 4 else "2001:cafe::93"
        tunnels += ["--", "add-port", "int-br", f"t{n}", "--", "set", "Interface", f"t{n}",
                    f"type={kind}", f"options:remote_ip={remote}", "options:key=123",
                    f"options:csum={'true' if csum else 'false'}", f"ofport_request={n + 1}"]
    sb.vsctl(*tunnels)
    sb.appctl("vlog/set", "netdev_dummy:file:dbg")
    check(sb.appctl("netdev-dummy/ip4addr", "br1", "1.1.2.88/24"), stdout="OK\n")
    check(sb.appctl("netdev-dummy/ip6addr", "br1", "2001:cafe::88/24"), stdout="OK\n")
    check(sb.appctl("tnl/neigh/set", "br1", "1.1.2.92", "aa:bb:cc:00:00:01"), stdout="OK\n")
    check(sb.appctl("tnl/neigh/set", "br1", "2001:cafe::93", "aa:bb:cc:00:00:06"),
          stdout="OK\n")
    check(sb.appctl("tnl/egress_port_range", "57363", "57363"), stdout="OK\n")
    sb.ofctl("add-flow", "br1", "action=normal")
    sb.ofctl("add-flow", "int-br", "action=normal")
    sb.vsctl(*chain(set_interface("p1", options={"tx_pcap": "p1.pcap"}),
                    set_interface("int-br", options={"ol_tso_segsz": 500})))
    p1 = DummyPort.existing(sb, "p1", 1, pcap_name="p1.pcap")
    actions = []
    for n, (kind, ul, csum) in enumerate(FALLBACK_TUNNELS, start=2):
        actions += [PushTunnel(fallback_spec(kind, ul, csum), str(n)), output("p1")]
    rx = RxFlags(tso_segsz=500)
    for ipv, flow, length in ((4, FLOW_V4, "2054"), (6, FLOW_V6, "2074")):
        frame = tso_frame(ipv, 2000)
        receive(sb, "int-br", flow, "--len", length)([frame])
        expect_unordered(p1, model.forward(frame, actions, TxOffloads(), rx), sent=[frame],
                         rx_name="int-br", title=f"IPv{ipv} into six tunnels",
                         steps=case_record.steps)
    assert sorted(f.hex() for f in read_all(p1.tx_pcap)) == sorted(expand(f) for f in FRAMES)


CHECK_PKT_LEN_FLOWS = ("table=0,in_port=1,ip actions=check_pkt_larger(514)->NXM_NX_REG0[0],"
                       "resubmit(,1)\n"
                       "table=1,ip,reg0=0x0 actions=output:2\n"
                       "table=1,ip,reg0=0x1 actions=output:3\n")


@pytest.mark.upstream("dpif-netdev - tso + check_pkt_len")
def test_tso_check_pkt_len_sequence(sandbox: Sandbox, case_record: CaseRecord,
                                    second_opinion: Tshark | None) -> None:
    """check_pkt_larger(514) on TSO packets measures the headers plus one segment:
    a 64-byte payload and 974 bytes at segsz 460 (54 + 460 = 514) are not larger
    (p2), 974 bytes at segsz 462 are (p3); pcap counts as upstream's."""
    sb = sandbox
    sb.add_of_br("br0", *TSO_ON)
    add_of_ports(sb, "br0", 1, 2, 3, pcap=True)
    sb.appctl("vlog/set", "netdev_dummy:file:dbg")
    (sb.rundir / "flows.txt").write_text(CHECK_PKT_LEN_FLOWS)
    sb.ofctl("del-flows", "br0")
    sb.ofctl("add-flows", "br0", "flows.txt")
    p1, p2, p3 = (DummyPort.existing(sb, f"p{n}", n, pcap_name=f"p{n}-tx.pcap") for n in (1, 2, 3))
    flow = f"in_port(1),{FLOW_V4}"
    counts = {"p2": 0, "p3": 0}
    for segsz, length, first in ((0, None, True), (460, None, False), (460, 974, False),
                                 (462, 974, False)):
        if segsz != p1.rx.tso_segsz:
            p1.configure(rx=RxFlags(tso_segsz=segsz))
        frame = tso_frame(4, L7 if length is None else length - 54)
        rx = RxFlags(tso_segsz=segsz)
        larger = gso.check_pkt_len(model.receive(frame, rx)) > 514
        chosen, other = (p3, p2) if larger else (p2, p3)
        expected = model.forward(frame, [output(chosen.name)], TxOffloads(), rx)
        send_and_expect(p1, [frame], chosen, expected, title=f"segsz {segsz} len {len(frame)}",
                        send=receive(sb, "p1", flow, *(("--len", str(length)) if length else ())),
                        steps=case_record.steps, second_opinion=second_opinion)
        assert other.read_tx() == [], f"{other.name} must send nothing"
        counts[chosen.name] += len(expected.frames)
        if first:
            dump = strip_stats(strip_used(sb.appctl("dpctl/dump-flows").stdout))
            assert dump == ("flow-dump from the main thread:\n"
                            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),"
                            "ipv4(frag=no), packets:0, bytes:0, used:never, "
                            "actions:check_pkt_len(size=514,gt(3),le(2))\n")
        assert (len(read_all(p2.tx_pcap)), len(read_all(p3.tx_pcap))) == (counts["p2"],
                                                                          counts["p3"])
    assert counts == {"p2": 4, "p3": 2}  # upstream's final wc -l


def coverage(sb: Sandbox, **values: int) -> None:
    """CHECK_COVERAGE / OVS_CHECK_BATCH_GROW for each counter."""
    for name, value in values.items():
        sb.wait_coverage(name, value)


@pytest.mark.upstream("dpif-netdev - tso + dynamic packet batch grow", since="4.0")
def test_tso_batch_grow_sequence(sandbox: Sandbox, case_record: CaseRecord,
                                 second_opinion: Tshark | None) -> None:
    """35000 bytes at segsz 1000: 35 segments, more than a batch holds (32), so
    the batch grows once; one packet received, one segmentation, one send."""
    sb = sandbox
    sb.add_of_br("br0", *TSO_ON)
    add_of_ports(sb, "br0", 1, 2, pcap=True)
    sb.vsctl(*set_interface("p1", options={"ol_tso_segsz": 1000}))
    sb.ofctl("add-flow", "br0", "in_port=1,actions=output:2")
    coverage(sb, dp_packet_batch_grow=0, dp_packet_gso=0)
    p1 = DummyPort.existing(sb, "p1", 1)
    p2 = DummyPort.existing(sb, "p2", 2, pcap_name="p2-tx.pcap")
    frame, rx = grow_frame(35000), RxFlags(tso_segsz=1000)
    expected = model.forward(frame, [output("p2")], TxOffloads(), rx)
    assert len(expected.frames) == 35
    send_and_expect(p1, [frame], p2, expected, title="35000 bytes",
                    send=receive(sb, "p1", FLOW_GROW, "--len", "35000"),
                    steps=case_record.steps, second_opinion=second_opinion)
    statistics_update(sb)
    sb.vsctl("wait-until", "interface", "p1", "statistics:rx_packets=1")
    coverage(sb, netdev_received=1, dp_packet_batch_grow=1, dp_packet_gso=1, netdev_sent=1)
    assert read_interface(sb, "p2").statistics.tx_packets == 35
    sb.expected_batch_grow = 1


@pytest.mark.upstream("dpif-netdev - tso + dual tunnel encap", since="4.0")
def test_tso_dual_tunnel_encap_sequence(sandbox: Sandbox, case_record: CaseRecord,
                                        second_opinion: Tshark | None) -> None:
    """VXLAN in VXLAN (br1 t1 -> br2 t2 -> br3's p3): the packet is segmented and
    its checksums finished before the second push; 2000 bytes make 2 packets,
    then 35000 make 35 more (37 sent), growing the output queues once.

    Upstream sets no egress port range, so each tunnel's UDP source port is the
    datapath's pick within the default range: the case takes the two ports from
    the first captured frame, checks them against the range OVS reports, and the
    model then computes every frame with them."""
    sb = sandbox
    sb.add_of_br("br0", *TSO_ON, "--", "add-br", "br1", "--", "set", "bridge", "br1",
                 "datapath-type=dummy", "--", "add-port", "br1", "p1", "--", "set", "Interface",
                 "p1", "type=dummy", "--", "add-br", "br2", "--", "set", "bridge", "br2",
                 "datapath-type=dummy", "--", "set", "bridge", "br2",
                 "other-config:hwaddr=aa:66:aa:66:00:00", "--", "add-port", "br2", "p2", "--",
                 "set", "Interface", "p2", "type=dummy", "--", "add-br", "br3", "--", "set",
                 "bridge", "br3", "datapath-type=dummy", "--", "set", "bridge", "br3",
                 "other-config:hwaddr=aa:66:bb:66:00:00", "--", "add-port", "br3", "p3", "--",
                 "set", "Interface", "p3", "type=dummy")
    for br, name, remote, key, ofport in (("br1", "t1", "1.1.2.92", 123, 11),
                                          ("br2", "t2", "1.1.3.92", 456, 21)):
        sb.vsctl(*add_port(br, name, type="vxlan", options={"remote_ip": remote, "key": key},
                           ofport_request=ofport))
    for br, flow in (("br1", "in_port=p1,actions=output:11"),
                     ("br2", "in_port=br2,actions=output:21")):
        sb.ofctl("del-flows", br)
        sb.ofctl("add-flow", br, flow)
    for br, local, remote, mac in (("br2", "1.1.2.88", "1.1.2.92", "aa:66:aa:66:00:01"),
                                   ("br3", "1.1.3.88", "1.1.3.92", "aa:66:bb:66:00:01")):
        check(sb.appctl("netdev-dummy/ip4addr", br, f"{local}/24"), stdout="OK\n")
        check(sb.appctl("tnl/neigh/set", br, remote, mac), stdout="OK\n")
    sb.vsctl(*set_interface("p1", options={"ol_tso_segsz": 1000}))
    shown = sb.appctl("tnl/egress_port_range").stdout  # "...range: MIN-MAX"
    low, high = (int(v) for v in shown.rsplit(" ", 1)[1].split("-"))
    p1 = DummyPort.existing(sb, "p1", 0)
    p3 = DummyPort.existing(sb, "p3", 0, tx_pcap=True)  # capture only
    peek = PcapReader(p3.tx_pcap)
    rx = RxFlags(tso_segsz=1000)
    ports: tuple[int, int] | None = None
    for received, total, n, grow, sent in ((1, 2000, 2, 0, 2), (2, 35000, 35, 2, 37)):
        frame = grow_frame(total)
        taken = p1.rx_count()
        receive(sb, "p1", FLOW_GROW, "--len", str(total))([frame])
        if ports is None:  # the first frame tells the two source ports
            first = wait_until(peek.read_new, 10, what="the first frame on p3")[0]
            ports = (int.from_bytes(first[50 + 34:50 + 36], "big"),  # t1: inside
                     int.from_bytes(first[34:36], "big"))  # t2: outside
            assert all(low <= port <= high for port in ports), (ports, low, high)
        t1 = TunnelSpec("vxlan", "1.1.2.88", "1.1.2.92", "aa:66:aa:66:00:00",
                        "aa:66:aa:66:00:01", key=123, udp_src=ports[0])
        t2 = TunnelSpec("vxlan", "1.1.3.88", "1.1.3.92", "aa:66:bb:66:00:00",
                        "aa:66:bb:66:00:01", key=456, udp_src=ports[1])
        expected = model.forward(frame, [PushTunnel(t1, "11"), PushTunnel(t2, "21"),
                                         output("p3")], TxOffloads(), rx)
        assert len(expected.frames) == n
        expect_frames(p3, expected, sent=[frame], rx_name="p1", title=f"{total} bytes",
                      steps=case_record.steps, second_opinion=second_opinion,
                      done=lambda t=taken: p1.rx_count() > t)
        statistics_update(sb)
        sb.vsctl("wait-until", "interface", "p1", f"statistics:rx_packets={received}")
        coverage(sb, netdev_received=received, dp_packet_gso=received, netdev_sent=received,
                 dp_packet_batch_grow=grow)
        if grow:
            coverage(sb, dpif_netdev_output_grow_queues=1)
        assert read_interface(sb, "p3").statistics.tx_packets == sent
    sb.expected_batch_grow = 2
