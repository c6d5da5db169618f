"""drop-stats.at (tests 2751-2757): each reason a packet is dropped has its
coverage counter.

Upstream's sequence: the same bridge settings, flows and packets (sent as its
ODP flow strings with netdev-dummy/receive, one command per packet), its
exact flow dumps and its coverage counter values.  Each case checks more where
the frames cross: every port of the bridge (br0's local port included)
captures what it transmits (a tx_pcap option added for the capture only), and
once the datapath took each packet (its rx counter) every port's frames are
judged through the verdict path: nothing may leave, for every flow here ends in
a drop (OpenFlow's empty action set, or a translation error, which
ovs-actions(7) says drops the packet), and a sample goes to IPFIX, not to a
port.
"""
from __future__ import annotations

import re

import pytest
from scapy.layers.l2 import Ether

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.model import Expected
from datapath.offloads import TxOffloads
from datapath.verdict import PortFrames, conclude_ports
from evidence.tshark import Tshark
from fixtures.dpif_netdev.sequence import add_of_ports
from fixtures.pmd.macros import icmp_frame
from harness.filters import ofctl_strip, strip_used
from harness.records import CaseRecord, Step
from harness.sandbox import Sandbox
from harness.wait import wait_until

DROP_STATS_AT = {"file": "drop-stats.at"}

ICMP_PKT = ("in_port(1),packet_type(ns=0,id=0),eth(src=3a:6d:d2:09:9c:ab,dst=1e:2c:e9:2a:66:9e),"
            "ipv4(src=192.168.10.10,dst=192.168.10.30,proto=1,tos=0,ttl=64,frag=no),"
            "icmp(type=8,code=0)")
# The frame netdev-dummy composes from ICMP_PKT (106 bytes: upstream's dumps
# count 212 for two).
ICMP = icmp_frame("3a:6d:d2:09:9c:ab", "1e:2c:e9:2a:66:9e", "192.168.10.10", "192.168.10.30")
ETH_PKT = "in_port(1),eth(src=50:54:00:00:00:09,dst=50:54:00:00:00:0a),eth_type(0x1234)"
# flow_compose() writes the Ethernet header alone for a type it does not know.
ETH = bytes(Ether(src="50:54:00:00:00:09", dst="50:54:00:00:00:0a", type=0x1234))

BRIDGE = ("set", "bridge", "br0", "datapath_type=dummy",
          "protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15")


def dummy_ports(*numbers: int) -> list[str]:
    """`-- add-port br0 pN -- set Interface pN type=dummy ofport_request=N`..."""
    args: list[str] = []
    for n in numbers:
        args += ["--", "add-port", "br0", f"p{n}", "--", "set", "Interface", f"p{n}",
                 "type=dummy", f"ofport_request={n}"]
    return args


def captured_ports(sandbox: Sandbox, *numbers: int) -> list[DummyPort]:
    """br0's local port and pN, each capturing what it transmits."""
    return [DummyPort.existing(sandbox, "br0", 65534, tx_pcap=True),
            *(DummyPort.existing(sandbox, f"p{n}", n, tx_pcap=True) for n in numbers)]


def replace_flows_of13(sandbox: Sandbox, flows: str) -> str:
    """ovs-ofctl del-flows br0; ovs-ofctl -Oopenflow13 add-flows br0 flows.txt;
    ovs-ofctl -Oopenflow13 dump-flows br0 | ofctl_strip | sort | grep actions."""
    path = sandbox.rundir / "flows.txt"
    path.write_text(flows)
    sandbox.ofctl("del-flows", "br0")
    sandbox.ofctl("-Oopenflow13", "add-flows", "br0", str(path))
    dump = ofctl_strip(sandbox.ofctl("-Oopenflow13", "dump-flows", "br0").stdout)
    return "".join(ln + "\n" for ln in sorted(dump.splitlines()) if "actions" in ln)


def receive_dropped(sandbox: Sandbox, rx: DummyPort, packet: str, frame: bytes,
                    ports: list[DummyPort], *, steps: list[Step], second_opinion: Tshark | None,
                    expected: Expected, title: str, count: int = 1) -> None:
    """`ovs-appctl netdev-dummy/receive RX PACKET`, `count` times (one command
    each, as upstream); once RX's datapath counter shows them taken (the main
    thread polls dummy ports and finishes the batch, upcall included, before
    it answers the next command), every port's frames are judged."""
    base = rx.rx_count()
    for _ in range(count):
        sandbox.appctl("netdev-dummy/receive", rx.name, packet)
    wait_until(lambda: rx.rx_count() >= base + count, 5,
               what=f"{rx.name} to take {count} packet(s)",
               describe=lambda: f"rx_packets {rx.rx_count() - base}")
    conclude_ports(steps, [PortFrames(port=p.name, expected=expected, captured=p.read_tx(),
                                      sent=[frame] * count, rx_port=rx.name)
                           for p in ports],
                   title=title, second_opinion=second_opinion).check()


def dropped() -> Expected:
    """The model's frames for a flow whose actions are empty: none."""
    return model.forward(ICMP, [], TxOffloads())


# Built here, not by model.forward: the model has no resubmit, push/pop of the
# register stack or MPLS push, and a translation error drops the packet as a
# whole (ovs-actions(7)).  No variants.
TRANSLATION_ERROR = Expected(frames=[])


def warp_and_check_coverage(sandbox: Sandbox, counter: str, value: int) -> None:
    """ovs-appctl time/warp 5000; CHECK_COVERAGE([counter], [value])."""
    sandbox.appctl("time/warp", "5000")
    sandbox.wait_coverage(counter, value)


@pytest.mark.upstream("drop-stats - cli tests", **DROP_STATS_AT)
def test_cli(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """actions=drop: three packets, one upcall and two hits on the megaflow
    (exact dump), each counted as a pipeline drop; none leaves a port."""
    sandbox.add_of_br("br0", *BRIDGE, *dummy_ports(1))
    ports = captured_ports(sandbox, 1)
    assert replace_flows_of13(sandbox, "table=0,in_port=1,actions=drop\n") == \
        " in_port=1 actions=drop\n"
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=dropped(), title="3 packets to drop",
                    count=3)
    dump = sandbox.dpctl("dump-flows").stdout
    # sed 's/used:[0-9].[0-9]*s/used:0.0/' | sort
    dump = "".join(ln + "\n" for ln in sorted(
        re.sub(r"used:[0-9].[0-9]*s", "used:0.0", ln) for ln in dump.splitlines()))
    assert dump == ("flow-dump from the main thread:\n"
                    "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no),"
                    " packets:2, bytes:212, used:0.0, actions:drop\n")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 3)


@pytest.mark.upstream("drop-stats - pipeline and recursion drops", **DROP_STATS_AT)
def test_pipeline_and_recursion_drops(sandbox: Sandbox, case_record: CaseRecord,
                                      second_opinion: Tshark | None) -> None:
    """A pipeline drop, then a goto_table/resubmit loop: translation recursion
    too deep, counted; nothing leaves either time."""
    sandbox.add_of_br("br0", *BRIDGE, *dummy_ports(1, 2))
    ports = captured_ports(sandbox, 1, 2)
    assert replace_flows_of13(sandbox, "table=0,in_port=1,actions=drop\n") == \
        " in_port=1 actions=drop\n"
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=dropped(), title="pipeline drop")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 1)
    replace_flows_of13(sandbox, "table=0, in_port=1, actions=goto_table:1\n"
                                "table=1, in_port=1, actions=goto_table:2\n"
                                "table=2, in_port=1, actions=resubmit(,1)\n")
    sandbox.appctl("time/warp", "15000")
    sandbox.appctl("revalidator/wait")
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=TRANSLATION_ERROR,
                    title="resubmit loop")
    warp_and_check_coverage(sandbox, "drop_action_recursion_too_deep", 1)
    sandbox.allow_log(r"\|WARN\|")


def resubmit_tree(depth: int, last: str) -> str:
    """in_port=i, actions=resubmit:i+1, resubmit:i+1, local (i = 1..depth), then
    in_port=depth+1's `last` actions."""
    return "".join(f"in_port={i}, actions=resubmit:{i + 1}, resubmit:{i + 1}, local\n"
                   for i in range(1, depth + 1)) + f"in_port={depth + 1}, actions={last}\n"


@pytest.mark.upstream("drop-stats - too many resubmit", **DROP_STATS_AT)
def test_too_many_resubmit(sandbox: Sandbox, case_record: CaseRecord,
                           second_opinion: Tshark | None) -> None:
    """2^64 resubmits: over the limit, the packet is dropped whole (none of the
    `local` outputs happens), counted."""
    sandbox.add_of_br("br0")
    add_of_ports(sandbox, "br0", 1)
    ports = captured_ports(sandbox, 1)
    path = sandbox.rundir / "flows.txt"
    path.write_text(resubmit_tree(64, "local"))
    sandbox.ofctl("del-flows", "br0")
    sandbox.ofctl("-Oopenflow13", "add-flows", "br0", str(path))
    receive_dropped(sandbox, ports[1], ETH_PKT, ETH, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=TRANSLATION_ERROR,
                    title="too many resubmits")
    warp_and_check_coverage(sandbox, "drop_action_too_many_resubmit", 1)
    sandbox.allow_log(r"\|WARN\|")


@pytest.mark.upstream("drop-stats - stack too deep", **DROP_STATS_AT)
def test_stack_too_deep(sandbox: Sandbox, case_record: CaseRecord,
                        second_opinion: Tshark | None) -> None:
    """2^12 leaves each pushing eight registers: the stack outgrows 64 kB, the
    packet is dropped whole, counted."""
    sandbox.add_of_br("br0")
    add_of_ports(sandbox, "br0", 1)
    ports = captured_ports(sandbox, 1)
    path = sandbox.rundir / "flows"
    path.write_text(resubmit_tree(12, ",".join(["push:NXM_NX_REG0[]"] * 8)))
    sandbox.ofctl("add-flows", "br0", str(path))
    receive_dropped(sandbox, ports[1], ETH_PKT, ETH, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=TRANSLATION_ERROR,
                    title="stack too deep")
    warp_and_check_coverage(sandbox, "drop_action_stack_too_deep", 1)
    sandbox.allow_log(r"resubmits yielded over 64 kB of stack")


@pytest.mark.upstream("drop-stats - too many mpls labels", **DROP_STATS_AT)
def test_too_many_mpls_labels(sandbox: Sandbox, case_record: CaseRecord,
                              second_opinion: Tshark | None) -> None:
    """Five MPLS pushes before output:2, more labels than OVS supports: the
    packet is dropped (p2 gets nothing), counted."""
    sandbox.add_of_br("br0", *BRIDGE, *dummy_ports(1, 2))
    ports = captured_ports(sandbox, 1, 2)
    replace_flows_of13(sandbox, (
        "table=0, in_port=1, actions=push_mpls:0x8847, resubmit:3\n"
        "table=0, in_port=3, actions=push_mpls:0x8847, set_field:10->mpls_label, "
        "set_field:15->mpls_label, resubmit:4\n"
        "table=0, in_port=4, actions=push_mpls:0x8847, set_field:11->mpls_label, resubmit:5\n"
        "table=0, in_port=5, actions=push_mpls:0x8847, set_field:12->mpls_label, resubmit:6\n"
        "table=0, in_port=6, actions=push_mpls:0x8847, set_field:13->mpls_label, output:2\n"))
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=TRANSLATION_ERROR,
                    title="too many MPLS labels")
    warp_and_check_coverage(sandbox, "drop_action_too_many_mpls_labels", 1)
    sandbox.allow_log(r"\|WARN\|")


def dump_flows(sandbox: Sandbox) -> str:
    """ovs-appctl dpctl/dump-flows | strip_used | sort."""
    out = strip_used(sandbox.dpctl("dump-flows").stdout)
    return "".join(ln + "\n" for ln in sorted(out.splitlines()))


def flow_dump(in_port: int, packets: int, actions: str) -> str:
    return ("flow-dump from the main thread:\n"
            f"recirc_id(0),in_port({in_port}),packet_type(ns=0,id=0),eth_type(0x0800),"
            f"ipv4(frag=no), packets:{packets}, bytes:{106 * packets}, used:0.0s, "
            f"actions:{actions}\n")


def explicit_sampled_drops(sandbox: Sandbox) -> None:
    sandbox.vsctl("set", "Open_vSwitch", ".", "other-config:explicit-sampled-drops=true")
    sandbox.appctl("revalidator/wait")


@pytest.mark.upstream("drop-stats - bridge sampling", **DROP_STATS_AT)
def test_bridge_sampling(sandbox: Sandbox, case_record: CaseRecord,
                         second_opinion: Tshark | None) -> None:
    """Bridge IPFIX sampling of dropped packets: the datapath action is the
    sample alone (no drop counted) until explicit-sampled-drops adds an
    explicit drop (counted); no frame leaves a port either way."""
    sandbox.add_of_br("br0", *BRIDGE, *dummy_ports(1))
    ports = captured_ports(sandbox, 1)
    path = sandbox.rundir / "flows.txt"
    path.write_text("table=0,in_port=1,actions=drop\n")
    sandbox.ofctl("add-flows", "br0", str(path))
    sandbox.vsctl("--", "set", "bridge", "br0", "ipfix=@fix", "--", "--id=@fix", "create",
                  "ipfix", 'targets="127.0.0.1:4739"', "sampling=1")
    ipfix = "userspace(pid=0,ipfix(output_port=4294967295))"
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=dropped(), count=3,
                    title="3 sampled drops")
    assert dump_flows(sandbox) == flow_dump(1, 2, ipfix)
    sandbox.appctl("time/warp", "5000")
    sandbox.wait_coverage("drop_action_of_pipeline", 0)
    explicit_sampled_drops(sandbox)
    receive_dropped(sandbox, ports[1], ICMP_PKT, ICMP, ports, steps=case_record.steps,
                    second_opinion=second_opinion, expected=dropped(), count=3,
                    title="3 sampled drops, explicit")
    assert dump_flows(sandbox) == flow_dump(1, 5, f"{ipfix},drop")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 3)
    sandbox.allow_log(r"sending to collector failed")


def sample_action(probability: int) -> str:
    return ("userspace(pid=0,flow_sample(probability="
            f"{probability},collector_set_id=1,obs_domain_id=0,obs_point_id=0,"
            "output_port=4294967295))")


@pytest.mark.upstream("drop-stats - sampling action", **DROP_STATS_AT)
def test_sampling_action(sandbox: Sandbox, case_record: CaseRecord,
                         second_opinion: Tshark | None) -> None:
    """sample() as the only action, before a register load, and inside
    clone(): an explicit drop (counted) only with explicit-sampled-drops; no
    frame leaves a port."""
    sandbox.add_of_br("br0")
    add_of_ports(sandbox, "br0", 1, 2, 3)
    ports = captured_ports(sandbox, 1, 2, 3)
    path = sandbox.rundir / "flows.txt"
    path.write_text(
        "table=0,in_port=1,actions=sample(probability=65535,collector_set_id=1)\n"
        "table=0,in_port=2,actions=sample(probability=32767,collector_set_id=1),load:0->reg0\n"
        "table=0,in_port=3,actions=clone(sample(probability=65535,collector_set_id=1))\n")
    sandbox.ofctl("add-flows", "br0", str(path))
    sandbox.vsctl("--id=@br0", "get", "Bridge", "br0", "--", "--id=@ipfix", "create", "IPFIX",
                  'targets="127.0.0.1:4739"', "--", "create", "Flow_Sample_Collector_Set",
                  "id=1", "bridge=@br0", "ipfix=@ipfix")
    steps = case_record.steps

    def three(rx: DummyPort, title: str) -> None:
        receive_dropped(sandbox, rx, ICMP_PKT, ICMP, ports, steps=steps,
                        second_opinion=second_opinion, expected=dropped(), count=3, title=title)
    three(ports[1], "3 sampled on p1")
    assert dump_flows(sandbox) == flow_dump(1, 2, sample_action(65535))
    sandbox.appctl("time/warp", "5000")
    sandbox.wait_coverage("drop_action_of_pipeline", 0)
    explicit_sampled_drops(sandbox)
    three(ports[1], "3 sampled on p1, explicit drops")
    assert dump_flows(sandbox) == flow_dump(1, 5, f"{sample_action(65535)},drop")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 3)
    sandbox.dpctl("del-flows")
    three(ports[2], "3 sampled at 50% on p2")
    assert dump_flows(sandbox) == flow_dump(
        2, 2, f"sample(sample=50.0%,actions({sample_action(32767)})),drop")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 6)
    sandbox.dpctl("del-flows")
    three(ports[3], "3 sampled in clone() on p3")
    assert dump_flows(sandbox) == flow_dump(3, 2, f"{sample_action(65535)},drop")
    warp_and_check_coverage(sandbox, "drop_action_of_pipeline", 9)
    sandbox.allow_log(r"sending to collector failed")
