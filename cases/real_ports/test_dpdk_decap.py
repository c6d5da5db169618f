"""Tunnel decapsulation on DPDK ports: test_tunnel_matrix's decap scenario with
the checksum flags a real driver stamps.

Encapsulated frames (built with scapy, as a remote endpoint sends them, then
broken where the id says) enter p2, a net_tap port.  net_tap verifies the
outer IPv4 header and outer UDP checksum in software and stamps good or bad;
those are the rx flags the model works with (a dummy port is told which flags
to stamp; a real one is not, so the ids here name no rx flag).  The model says
whether the inner frame comes out of p1 (another net_tap port, whose tx
offloads finish what OVS leaves) and how, or is dropped, and which coverage
counters move.
"""
from __future__ import annotations

import itertools

import pytest

from datapath import model
from datapath.backends.kernel import flags_text
from datapath.expect import send_and_expect
from datapath.model import decap
from datapath.model.actions import ofctl_actions, output
from datapath.offloads import RxFlags
from fixtures.frames import corrupt_outer, encapsulate
from fixtures.tunnel import LOCAL_MAC, REMOTE_MAC, UNDERLAY, csum_id, inner_frame, rewrite, spec

pytestmark = pytest.mark.requires(backend="dpdk")

FRAMES = ["good_frame", "bad_outer_ip", "bad_outer_csum", "bad_inner"]
# Inner IPv4 TCP rewritten by mod_nw_dst, inner IPv6 UDP by mod_tp_dst.
INNERS = {"in4": "tcp", "in6": "udp"}
# Each id waits for the PMD thread's counters (published once a second): the
# inner IPv6 variant runs on VXLAN only (the pop does not look at the inner
# frame; the rewrite and p1's offloads do, whatever the tunnel).
DECAP = [
    pytest.param(kind, ul, inner, on, frame, id=f"{kind}-ul{ul}-{inner}-{csum_id(on)}-{frame}")
    for kind, ul, inner, on, frame in itertools.product(
        ["vxlan", "geneve", "gre"], [4, 6], INNERS, [True, False], FRAMES)
    if not (frame == "bad_outer_ip" and ul == 6) and not (frame == "bad_outer_csum" and not on)
    and (inner == "in4" or kind == "vxlan")
]


@pytest.mark.parametrize("tunnel,underlay,inner,csum,frame", DECAP)
def test_dpdk_decap(dpdk_tunnel_rig, tunnel: str, underlay: int, inner: str, csum: bool,
                    frame: str) -> None:
    """Verifies: what the native tunnel receive rules accept comes out of p1 as
    the model says, given the flags net_tap stamped and p1's offloads; what
    they refuse is dropped, nothing leaves p1, and exactly the drop and check
    counters the model names move."""
    rig, record = dpdk_tunnel_rig()
    tun = spec(tunnel, underlay, csum)
    local, remote, _ = UNDERLAY[underlay]
    l4 = INNERS[inner]
    sent = encapsulate(tunnel, local, remote, LOCAL_MAC, REMOTE_MAC,
                       inner_frame(inner, l4, frame == "bad_inner"), csum=csum)
    if frame in ("bad_outer_ip", "bad_outer_csum"):
        sent = corrupt_outer(sent, frame)
    flags = rig.p2.rx_flags_for(sent)
    record.params["rx"] = f"net_tap: {flags_text(flags)}"
    suffix, rw = rewrite(inner, l4)
    actions = [*rw, output("p1")]
    rig.prepare(record, tun, f"in_port=t1{suffix},actions={ofctl_actions(actions)}")
    popped = decap.pop(sent, flags)
    expected = model.Expected(frames=[], notes=[
        f"backend: net_tap port p2 stamps rx {flags_text(flags)}; p1 offers tx "
        f"{rig.p1.tx.id}", *popped.notes])
    if popped.inner is not None:
        expected.extend(model.forward(popped.inner, actions, rig.p1.tx, RxFlags()))
    before = rig.counters()
    send_and_expect(rig.p2, [sent], rig.p1, expected,
                    title=f"{tun.id} rx {flags_text(flags)} {frame}", steps=record.steps)
    moved = rig.counters_after(before, popped.counters)
    assert moved == popped.counters, f"coverage counters moved {moved}, model says {popped.counters}"
    l3_drop = popped.counters["native_tnl_l3csum_err"] > 0
    # A PMD thread's log lines carry its name: native_tnl(pmd-c01/id:7)|WARN|...
    rig.check_log(*([r"native_tnl(\([^)]*\))?\|WARN\|ip packet has invalid checksum"]
                    if l3_drop else []))
