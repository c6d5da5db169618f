"""Tunnel checksums beyond upstream: VXLAN, Geneve and GRE, both directions.

Encapsulation: p1 -> rewrite -> tunnel t1 -> underlay p2, over every
combination of tunnel type, underlay, inner IP version, inner L4 (TCP, UDP, or
ICMP as "other"), tunnel csum, rx flags, tx offloads and good/bad input.

Decapsulation: encapsulated frames (built with scapy, as a remote endpoint
sends them) arrive on p2 with good or bad outer and inner checksums under each
rx flag; the model says whether the inner frame must come out of p1 (and how)
or be dropped, and which coverage counters must move.
"""
from __future__ import annotations

import itertools

import pytest

from datapath.model.actions import PushTunnel, output
from datapath.offloads import TxOffloads
from fixtures.frames import corrupt_outer, encapsulate
from fixtures.tunnel import (
    LOCAL_MAC,
    REMOTE_MAC,
    RX_STATES,
    TUNNEL_OFPORT,
    UNDERLAY,
    csum_id,
    inner_frame,
    rewrite,
    rx_flags,
    spec,
)

TUNNELS = ["vxlan", "geneve", "gre"]
UNDERLAYS = [4, 6]
INNER_IPS = ["in4", "in6"]
L4S = ["tcp", "udp", "other"]
CSUMS = [True, False]
RX = list(RX_STATES)
TXS = [TxOffloads.parse(s) for s in (
    "none", "ip,l4", "ip,l4,out_ip,out_udp", "ip_disabled,l4_disabled,out_ip_disabled,out_udp_disabled",
    "ip_disabled,l4,out_ip_disabled,out_udp")]


ENCAP = [
    pytest.param(kind, ul, ipv, l4, on, rx, tx, frame,
                 id=f"{kind}-ul{ul}-{ipv}-{l4}-{csum_id(on)}-{rx}-{tx.id}-{frame}")
    for kind, ul, ipv, l4, on, rx, tx, frame in itertools.product(
        TUNNELS, UNDERLAYS, INNER_IPS, L4S, CSUMS, RX, TXS, ["good_frame", "bad_frame"])
]


@pytest.mark.parametrize("tunnel,underlay,inner,l4,csum,rx,tx,frame", ENCAP)
def test_encap_csum(tunnel_rig, tunnel: str, underlay: int, inner: str, l4: str, csum: bool,
                    rx: str, tx: TxOffloads, frame: str) -> None:
    """Verifies every field of the encapsulated frame leaving p2 against the
    model: outer header, outer IPv4/UDP/GRE checksums, inner checksums."""
    rig, record = tunnel_rig(tunnel, underlay)
    tun = spec(tunnel, underlay, csum)
    suffix, rw = rewrite(inner, l4)
    actions = [*rw, PushTunnel(tun, str(TUNNEL_OFPORT)), output("p2")]
    rig.forward(record, tun, f"in_port=p1{suffix}", actions,
                [inner_frame(inner, l4, frame == "bad_frame")], rx_flags(rx), tx)


DECAP_FRAMES = ["good_frame", "bad_outer_ip", "bad_outer_csum", "bad_inner"]
DECAP = [
    pytest.param(kind, ul, ipv, l4, on, rx, frame,
                 id=f"{kind}-ul{ul}-{ipv}-{l4}-{csum_id(on)}-{rx}-{frame}")
    for kind, ul, ipv, l4, on, rx, frame in itertools.product(
        TUNNELS, UNDERLAYS, INNER_IPS, L4S, CSUMS, RX, DECAP_FRAMES)
    if not (frame == "bad_outer_ip" and ul == 6) and not (frame == "bad_outer_csum" and not on)
]


@pytest.mark.parametrize("tunnel,underlay,inner,l4,csum,rx,frame", DECAP)
def test_decap_csum(tunnel_rig, tunnel: str, underlay: int, inner: str, l4: str, csum: bool,
                    rx: str, frame: str) -> None:
    """Verifies: frames the native tunnel receive rules accept come out of p1 as
    the model says (inner checksums untouched but for rewrites); the others are
    dropped, nothing leaves p1, and exactly the drop and check counters move."""
    rig, record = tunnel_rig(tunnel, underlay)
    tun = spec(tunnel, underlay, csum)
    local, remote, _ = UNDERLAY[underlay]
    sent = encapsulate(tunnel, local, remote, LOCAL_MAC, REMOTE_MAC,
                       inner_frame(inner, l4, frame == "bad_inner"), csum=csum)
    if frame in ("bad_outer_ip", "bad_outer_csum"):
        sent = corrupt_outer(sent, frame)
    suffix, rw = rewrite(inner, l4)
    rig.receive(record, tun, f"in_port=t1{suffix}", [*rw, output("p1")], sent, rx_flags(rx))
