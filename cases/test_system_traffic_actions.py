"""system-traffic.at's "datapath - drop action", as `make
check-system-userspace` (and check-system-tso) run it: a flow table whose
resubmit chain from at_ns0's port exceeds OVS's resubmit limit, so the
datapath flow for at_ns0's IPv4 becomes an explicit drop (upstream skips
unless the datapath supports it: OVS_CHECK_DROP_ACTION).

Upstream's checks: ping from at_ns0 exits 1, and the IPv4 datapath flow
(dpctl/dump-flows, after strip_ptype, strip_eth, strip_recirc, strip_stats
and strip_used) is the one drop flow.  Beyond upstream: no IPv4 frame at_ns0
sent came out at at_ns1, while ARP (NORMAL) crossed as the model's output.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath.backends.native_tunnel import Captured
from fixtures.system_l2 import Crossings, port_tx, switched
from fixtures.system_traffic import FLAVOUR, Traffic, upstream
from harness.control import check
from harness.filters import strip_recirc, strip_stats
from harness.wait import settled

DROP_FLOW = ("recirc_id(<recirc>),in_port(2),eth_type(0x0800),ipv4(frag=no), packets:0, "
             "bytes:0, used:0.0s, actions:drop\n")


def flows_txt() -> str:
    """Upstream's flows.txt: ARP and ICMPv6 normal, then a chain of 64 double
    resubmits (in_port=i -> resubmit:i+1 twice, local), past OVS's limit."""
    lines = ["priority=100, arp, actions=normal", "priority=100, icmp6, actions=normal"]
    lines += [f"priority=0, in_port={i}, actions=resubmit:{i + 1}, resubmit:{i + 1}, local"
              for i in range(1, 65)]
    lines.append("priority=0, in_port=65, actions=local")
    return "".join(f"{line}\n" for line in lines)


def ipv4_flows(t: Traffic) -> str:
    """dpctl/dump-flows | grep eth_type(0x0800) | strip_ptype | strip_eth |
    strip_recirc | strip_stats | strip_used | sort."""
    out = check(t.sb.appctl("dpctl/dump-flows")).stdout
    lines = []
    for line in out.splitlines():
        if "eth_type(0x0800)" not in line:
            continue
        line = re.sub(r"packet_type\(ns=[0-9]*,id=[0-9]*\),", "", line).replace("eth(),", "")
        line = strip_stats(strip_recirc(line + "\n")).rstrip("\n")
        lines.append(re.sub(r"used:[0-9]*\.[0-9]*", "used:0.0", line))
    return "".join(f"{ln}\n" for ln in sorted(lines))


@FLAVOUR
@upstream("datapath - drop action")
def test_drop_action(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """Upstream's flows, ping (exit 1) and dump check, the dump waited for
    until it equals upstream's line (OVS_WAIT_UNTIL_EQUAL); the frames as the
    module docstring says.  Upstream's stop drops every WARN line (the
    resubmit limit's complaints)."""
    t: Traffic = system_traffic(flavour)
    if not any("Datapath supports explicit drop action" in ln for ln in t.sb.log_lines()):
        pytest.skip("OVS_CHECK_DROP_ACTION: ovs-vswitchd.log does not say 'Datapath supports "
                    "explicit drop action'")
    t.sb.allow_log(r"\|WARN\|")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24")
    flows = t.sb.rundir / "flows.txt"
    flows.write_text(flows_txt())
    check(t.sb.ofctl("add-flows", "--bundle", "br0", str(flows)))
    wire = Crossings(t, request)
    normal = switched(port_tx(t, "ovs-p1"))

    def table(c: Captured) -> list[bytes]:  # ARP normal, IPv4 dropped
        return normal(c) if c.frame[12:14] == b"\x08\x06" else []
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False), table)
    res = t.run(["ping", "-q", "-c", "10", "-i", "0.1", "-w", "2", "10.1.1.2"], ns0, timeout=30)
    assert res.rc == 1, f"ping through the drop flow: expected exit 1, got {res.rc}\n{res}"
    got = settled(lambda: ipv4_flows(t), DROP_FLOW)
    assert got == DROP_FLOW, f"dpctl/dump-flows: expected\n{DROP_FLOW}got\n{got}"
    wire.verify()
    sent = [s for s in wire.hops[0].src.frames if s.outgoing and s.frame[12:14] == b"\x08\x00"]
    assert len(sent) >= 10, f"at_ns0 sent {len(sent)} IPv4 frames, want its 10 echo requests"
