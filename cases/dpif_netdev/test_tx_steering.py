"""Tx packet steering: dpif-netdev.at test 1115.

p2 has two tx queues.  With tx-steering=thread, the one PMD thread sends all
128 packets on one queue; with tx-steering=hash (with hw-offload off and on)
the packets' hashes spread them over both.  The per-queue counters are read
from the Interface statistics column, as upstream does.

Upstream waits up to 5 s per round for ovs-vswitchd's periodic statistics
update.  Here the case waits until the datapath's own counter shows the 128
packets sent, then moves vswitchd's clock past the update interval
(time/warp 5000) so the update happens at once, and waits for the column.
p1's received and p2's sent frames are captured (added rxq_pcap/tx_pcap,
capture only) and each sent frame must be its received frame, unchanged.
No tshark second opinion here: `--len` frames carry a UDP length longer than
the datagram (netdev-dummy pads after setting it), which tshark will not verify.

All 128 packets of a round share one datapath flow from p1, which outlives
p2: once p2 is deleted a revalidator turns it into a drop, and once p2 is
back it outputs to p2 again, each only on a revalidator round after the
change.  Upstream sends the next round at once; a packet that met the flow
in between would be dropped, so the case waits for each retranslation
(harness/dpflows.py).
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import expect_frames
from datapath.model.actions import output
from datapath.offloads import TxOffloads
from evidence.pcap import PcapReader
from harness.dpflows import installed, wait_retranslated
from harness.ifstatus import Statistics, read_interface
from harness.records import CaseRecord, Step
from harness.sandbox import Sandbox
from harness.vsctl import add_port, set_interface, set_open_vswitch
from harness.wait import wait_until

UDP_FLOW = ("in_port({ofport}),eth(src=50:54:00:00:00:05,dst=50:54:00:00:01:00),"
            "eth_type(0x0800),ipv4(src=10.0.1.1,dst=10.0.0.1,proto=17),udp(src=1000,dst={i})")


def send_udp_pkts(sb: Sandbox, port: str, ofport: int) -> None:
    """SEND_UDP_PKTS: 128 packets, UDP destination ports 1..128, --len 256.

    Every 50 packets the case waits until p2 (new each round) sent them: an rx
    queue holds 100, and upstream's forked ovs-appctl per packet is slow enough
    never to fill it.  (p1's own rx counter would not do: with hw-offload on, the
    dummy offload provider takes packets before they are counted.)"""
    for i in range(1, 129):
        sb.appctl("netdev-dummy/receive", port, UDP_FLOW.format(ofport=ofport, i=i),
                  "--len", "256")
        if i % 50 == 0:
            wait_until(lambda n=i: sent_by_p2(sb) >= n, 10, what=f"{port} to keep up")


def del_p2(sb: Sandbox) -> None:
    """ovs-vsctl del-port p2, and the flows from p1 following it (to drop)."""
    before = installed(sb)
    sb.vsctl("del-port", "p2")
    wait_retranslated(sb, before, affected=lambda actions: actions != "drop",
                      what="p2's removal")


def sent_by_p2(sb: Sandbox) -> int:
    return sb.port_stats().get("p2", {}).get("tx_packets", 0)


def p2_statistics(sb: Sandbox) -> Statistics | None:
    """p2's Interface statistics once they count the 128 packets sent."""
    stats = read_interface(sb, "p2").statistics
    return stats if stats.tx_packets == 128 else None


def steering_round(sb: Sandbox, mode: str, rx_pcap: PcapReader, n: int,
                   steps: list[Step]) -> tuple[int, int]:
    """Add p2 with two tx queues in `mode`, send 128 packets, return (q0, q1)."""
    pcap = f"p2-round{n}.pcap"
    before = installed(sb)  # the last round's flows, dropping since p2 went
    sb.vsctl("add-port", "br0", "p2", "--", "set", "Interface", "p2", "type=dummy-pmd",
             "ofport_request=2", "options:n_txq=2", f"other_config:tx-steering={mode}",
             f"options:tx_pcap={pcap}")
    sb.ofctl("add-flow", "br0", "in_port=1,actions=output:2")
    wait_retranslated(sb, before, affected=lambda actions: actions == "drop",
                      what="p2 back on br0")
    p2 = DummyPort.existing(sb, "p2", 2, pcap_name=pcap)
    send_udp_pkts(sb, "p1", 1)
    sent: list[bytes] = []
    wait_until(lambda: sent.extend(rx_pcap.read_new()) or len(sent) >= 128, 10,
               what="p1's 128 received frames")
    expected = model.Expected(frames=[])
    for frame in sent:
        expected.extend(model.forward(frame, [output("p2")], TxOffloads()))
    expect_frames(p2, expected, sent=sent, rx_name="p1", title=f"tx-steering={mode}",
                  steps=steps, done=lambda: sent_by_p2(sb) >= 128)
    sb.appctl("time/warp", "5000")  # the statistics update, now rather than in 5 s
    got = wait_until(lambda: p2_statistics(sb), 10,
                     what="statistics:tx_packets=128 in the database",
                     describe=lambda: str(read_interface(sb, "p2")))
    assert got is not None  # wait_until returns the first truthy value
    return got.raw["tx_q0_packets"], got.raw["tx_q1_packets"]


@pytest.mark.upstream("dpif-netdev - tx packet steering")
@pytest.mark.sandbox(dummy_numa="0")
def test_tx_packet_steering(sandbox: Sandbox, case_record: CaseRecord) -> None:
    """thread: all 128 on one queue (one PMD thread); hash: both queues used, with
    and without hw-offload."""
    sb = sandbox
    sb.add_of_br("br0", *add_port("br0", "p1", type="dummy-pmd", ofport_request=1))
    sb.vsctl(*set_interface("p1", options={"rxq_pcap": "p1-rx.pcap"}))
    rx_pcap = PcapReader(sb.rundir / "p1-rx.pcap")
    q0, q1 = steering_round(sb, "thread", rx_pcap, 1, case_record.steps)
    assert (q0, q1) in ((0, 128), (128, 0)), (q0, q1)
    del_p2(sb)
    q0, q1 = steering_round(sb, "hash", rx_pcap, 2, case_record.steps)
    assert q0 > 0 and q1 > 0, (q0, q1)
    del_p2(sb)
    sb.vsctl(*set_open_vswitch(other_config={"hw-offload": True}))
    q0, q1 = steering_round(sb, "hash", rx_pcap, 3, case_record.steps)
    assert q0 > 0 and q1 > 0, (q0, q1)
