"""Tunnel checksums as upstream tests them: dpif-netdev.at 1122-1133.

'IPv4/IPv6 vxlan tunnel - {no offload, ip, tcp, udp, IPv6 tcp, IPv6 udp csum
offload}': traffic from p1 is rewritten, pushed into VXLAN port t1 and leaves
the underlay port p2.  Upstream's sequences, faithfully (one daemon each, all
forwards in order), are cases/dpif_netdev/test_tunnel_sequences.py.  Here, on top, every
forward of every upstream test is one id on a shared rig whose datapath
flows are purged first (so its packet is always a miss), and every frame is
compared in full with the model's.
"""
from __future__ import annotations

import pytest

from fixtures.tunnel import INNERS, UpstreamForward, model_actions, spec, upstream_steps, upstream_title

PARAMS = [
    pytest.param(ul, traffic, step, id=f"ul{ul}-{traffic}-{step.id}",
                 marks=pytest.mark.upstream(upstream_title(ul, traffic)))
    for ul in (4, 6) for traffic in INNERS for step in upstream_steps(traffic)
]


@pytest.mark.parametrize("underlay,traffic,step", PARAMS)
def test_vxlan_upstream(tunnel_rig, underlay: int, traffic: str, step: UpstreamForward) -> None:
    """Verifies the outer header (addresses, lengths, DF, TTL, UDP ports, VNI),
    the outer UDP checksum (0 with csum off; complete, via the nested-checksum
    shortcut or in full, with csum on; ffff left by a _disabled driver), the
    outer IPv4 checksum, and the inner checksums after the rewrite."""
    rig, record = tunnel_rig("vxlan", underlay)
    inn = INNERS[traffic]
    tun = spec("vxlan", underlay, step.csum)
    rig.forward(record, tun, inn.match(), model_actions(inn, tun),
                [inn.frames()[step.frame]], step.rx, step.tx)
