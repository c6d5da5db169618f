"""OpenFlow meters in the userspace datapath: dpif-netdev.at test 1102.

Two bridges linked by a pair of dummies over a unix socket (br0's p1 and br1's
p2).  Packets from p7 go through meter 2 (1 kbps, burst 2 kbit) and cross to
br1, which sends them out of p8; packets from p8 cross the other way and go
through meter 1 (1 packet/s, burst 1) to p7.  Time is stopped and only warped.
After each round the meter statistics must be upstream's exactly, and the
frames that left p7 and p8 (captured with an added tx_pcap) must be exactly
those the model's token buckets let through, unchanged.
"""
from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from datapath import model
from datapath.backends.dummy import DummyPort, wait_connected
from datapath.expect import expect_frames
from datapath.model.actions import output
from datapath.model.meter import DropMeter
from datapath.offloads import TxOffloads
from evidence.tshark import Tshark
from harness.control import check
from harness.filters import filter_flow_install, strip_timers, strip_xout_keep_actions
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain

FLOW = ("in_port({port}),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:{src},"
        "dst=50:54:00:00:00:{dst}),eth_type(0x0800),ipv4(src={ips},proto=1,tos=0,ttl=64,"
        "frag=no),icmp(type=8,code=0)")
FROM_P7 = FLOW.format(port=7, src="09", dst="0a", ips="10.0.0.2,dst=10.0.0.1")
FROM_P8 = FLOW.format(port=8, src="0b", dst="0c", ips="10.0.0.3,dst=10.0.0.4")


def frame_60(src: str, dst: str, ip_src: str, ip_dst: str) -> bytes:
    """What `netdev-dummy/receive ... --len 60` makes of those flows: the headers,
    zero padding to 60 bytes, lengths and checksums fixed."""
    return bytes(Ether(src=src, dst=dst) / IP(src=ip_src, dst=ip_dst, ttl=64, id=0, flags=0)
                 / ICMP(type=8, code=0, id=0, seq=0) / Raw(bytes(18)))


P7_FRAME = frame_60("50:54:00:00:00:09", "50:54:00:00:00:0a", "10.0.0.2", "10.0.0.1")
P8_FRAME = frame_60("50:54:00:00:00:0b", "50:54:00:00:00:0c", "10.0.0.3", "10.0.0.4")

# Upstream's meter-stats after each round (the model's counters must agree: tests/).
STATS = [
    ("meter:1 flow_count:1 packet_in_count:5 byte_in_count:300 duration:0.0s bands:\n"
     "0: packet_count:4 byte_count:240\n\n"
     "meter:2 flow_count:1 packet_in_count:7 byte_in_count:420 duration:0.0s bands:\n"
     "0: packet_count:3 byte_count:180\n"),
    ("meter:1 flow_count:1 packet_in_count:10 byte_in_count:600 duration:0.0s bands:\n"
     "0: packet_count:9 byte_count:540\n\n"
     "meter:2 flow_count:1 packet_in_count:12 byte_in_count:720 duration:0.0s bands:\n"
     "0: packet_count:7 byte_count:420\n"),
    ("meter:1 flow_count:1 packet_in_count:10 byte_in_count:600 duration:0.0s bands:\n"
     "0: packet_count:9 byte_count:540\n\n"
     "meter:2 flow_count:1 packet_in_count:17 byte_in_count:1020 duration:0.0s bands:\n"
     "0: packet_count:11 byte_count:660\n"),
]
# (warp before the round in ms, the ports the round's receives go to, in order)
ROUNDS = [(5000, ["p7"] * 7 + ["p8"] * 5), (870, ["p7", "p8"] * 5), (10, ["p7"] * 5)]


@pytest.mark.upstream("dpif-netdev - meters")
def test_meters(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """Meter 1 (pktps) lets 1 of the first 5 packets through and none 870 ms later;
    meter 2 (kbps) lets 4 of 7 through (1920 of 2000 bits), then one per round
    as the bucket refills (80 + 870 bits, then 470 + 10 bits); 20 drops in all."""
    run = sandbox.rundir
    sandbox.add_of_br("br0",
                      *chain(add_port("br0", "p1", type="dummy", options={"pstream": f"punix:{run}/p0.sock"},
                                      ofport_request=1),
                             add_port("br0", "p7", ofport_request=7, type="dummy"), ["add-br", "br1"],
                             ["set", "bridge", "br1", "other-config:hwaddr=aa:66:aa:66:00:00"],
                             ["set", "bridge", "br1", "datapath-type=dummy", "other-config:datapath-id=1234",
                              "fail-mode=secure"],
                             add_port("br1", "p2", type="dummy", options={"stream": f"unix:{run}/p0.sock"},
                                      ofport_request=2),
                             add_port("br1", "p8", ofport_request=8, type="dummy")))
    sandbox.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    of13 = ("-O", "OpenFlow13")
    sandbox.ofctl(*of13, "add-meter", "br0",
                  "meter=1 pktps burst stats bands=type=drop rate=1 burst_size=1")
    sandbox.ofctl(*of13, "add-meter", "br0",
                  "meter=2 kbps burst stats bands=type=drop rate=1 burst_size=2")
    sandbox.ofctl(*of13, "add-flow", "br0", "in_port=1 action=meter:1,7")
    sandbox.ofctl(*of13, "add-flow", "br0", "in_port=7 action=meter:2,1")
    sandbox.ofctl("add-flow", "br1", "in_port=2 action=8")
    sandbox.ofctl("add-flow", "br1", "in_port=8 action=2")
    # Upstream's forked tools are slow enough for the link to be up before time
    # stops; once stopped, a stream that has yet to connect never retries.
    wait_connected(sandbox, "p2")
    sandbox.appctl("time/stop")
    check(sandbox.ofctl(*of13, "dump-meters", "br0"), stdout=(
        "OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\n"
        "meter=1 pktps burst stats bands=\ntype=drop rate=1 burst_size=1\n\n"
        "meter=2 kbps burst stats bands=\ntype=drop rate=1 burst_size=2\n"))
    ports = {name: DummyPort.existing(sandbox, name, n, tx_pcap=name in ("p7", "p8"))
             for name, n in (("p1", 1), ("p2", 2), ("p7", 7), ("p8", 8))}
    meters = {1: DropMeter("pktps", 1, 1), 2: DropMeter("kbps", 1, 2)}
    sent = {"p7": 0, "p8": 0}
    passed = {"p7": 0, "p8": 0}  # packets from p7 (p8) that passed meter 2 (1)
    for number, ((warp, order), stats) in enumerate(zip(ROUNDS, STATS), 1):
        for meter in meters.values():
            meter.advance(warp)
        sandbox.appctl("time/warp", str(warp))
        out = {"p7": model.Expected(frames=[]), "p8": model.Expected(frames=[])}
        for name in order:
            sandbox.appctl("netdev-dummy/receive", name,
                           FROM_P7 if name == "p7" else FROM_P8, "--len", "60")
            sent[name] += 1
            frame, meter, exit_port = ((P7_FRAME, meters[2], "p8") if name == "p7"
                                       else (P8_FRAME, meters[1], "p7"))
            if meter.offer(len(frame)):
                passed[name] += 1
                out[exit_port].extend(model.forward(frame, [output(exit_port)], TxOffloads()))

        def done() -> bool:  # every packet taken, crossed the link and forwarded
            stats_now = {n: p.rx_count() for n, p in ports.items()}
            return (stats_now["p7"] >= sent["p7"] and stats_now["p8"] >= sent["p8"]
                    and stats_now["p1"] >= sent["p8"] and stats_now["p2"] >= passed["p7"])
        for exit_port, rx, frame in (("p8", "p7", P7_FRAME), ("p7", "p8", P8_FRAME)):
            expect_frames(ports[exit_port], out[exit_port], sent=[frame] * order.count(rx),
                          rx_name=rx, title=f"round {number}: {rx} -> {exit_port}",
                          steps=case_record.steps, second_opinion=second_opinion, done=done)
        got = strip_timers(sandbox.ofctl(*of13, "meter-stats", "br0").stdout)
        assert got == "OFPST_METER reply (OF1.3) (xid=0x2):\n" + stats, f"round {number}"
        assert stats == meters[1].stats(1) + "\n" + meters[2].stats(2)  # the model agrees
    sandbox.appctl("time/warp", "5000")
    sandbox.wait_coverage("datapath_drop_meter", 20)
    log = "\n".join(sandbox.log.lines())
    assert strip_xout_keep_actions(filter_flow_install(log)) == (
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), "
        "actions:meter(0),7\n"
        "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), "
        "actions:8\n"
        "recirc_id(0),in_port(7),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), "
        "actions:meter(1),1\n"
        "recirc_id(0),in_port(8),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), "
        "actions:2\n")
    sandbox.ofctl(*of13, "del-meters", "br0")
