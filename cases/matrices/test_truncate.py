"""output(port, max_len) on dummy ports, beyond upstream (system-traffic.at's
truncate tests run on veth: cases/system_userspace/test_system_traffic_truncate.py).

A TCP or UDP frame, over IPv4 and IPv6, with every rx checksum state, leaves
p2 through `output(port=p2,max_len=N)`: cut inside the IP header, the L4
header or the payload, or not at all; p2 takes no offload, the L4 one, or
advertises it and does not do it.  The model (datapath/model/send.py E8)
expects the frame's first N bytes as it would leave, its postponed checksums
completed before the cut; later actions see the whole packet.  Where a
checksum was pending (rx partial) and OVS or the port completes it, OVS does
so over the bytes left (known OVS bug trunc-pending-csum), or dies where the
cut fell before an IPv4 TCP/UDP header (trunc-l4-cut-crash): those ids xfail
only if OVS deviates exactly so.  Then the same into VXLAN, Geneve and GRE
tunnels with checksums on, across the tx offloads that decide who completes
the inner and the outer checksums.
"""
from __future__ import annotations

import pytest

from datapath.model.actions import PushTunnel, Truncate, output
from datapath.offloads import CsumState, RxFlags, TxOffloads
from fixtures.frames import compose
from fixtures.tunnel import TUNNEL_OFPORT, spec

STATES = [pytest.param(s, id=f"rx_{n}") for s, n in (
    (CsumState.UNKNOWN, "none"), (CsumState.GOOD, "good"), (CsumState.BAD, "bad"),
    (CsumState.PARTIAL, "partial"))]
# 20 bytes cut the IP header; 40 an IPv4 TCP or UDP header (and an IPv6 header);
# 64 an IPv6 TCP header before its checksum, an IPv4 one after it; 100 the
# payload; 2000 nothing.
MAX_LENS = [20, 40, 64, 100, 2000]


@pytest.mark.parametrize("max_len", MAX_LENS, ids=lambda n: f"max_len{n}")
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("l4,ipv", [("tcp", 4), ("udp", 4), ("tcp", 6), ("udp", 6)],
                         ids=["tcp4", "udp4", "tcp6", "udp6"])
@pytest.mark.parametrize("tx", [pytest.param(TxOffloads.parse(s), id=TxOffloads.parse(s).id)
                                for s in ("none", "l4", "l4_disabled")])
def test_output_max_len(two_ports_shared, tx: TxOffloads, l4: str, ipv: int, state: CsumState,
                        max_len: int) -> None:
    """Truncated once, then the same packet whole to the same port: both frames
    on p2 against the model, through the upcall path and the installed flow."""
    frame = compose(l4, ipv, payload=bytes(range(120)))
    actions = [Truncate(max_len), output("p2"), output("p2")]
    two_ports_shared.flow("in_port=p1", actions)
    two_ports_shared.forward([frame], actions, rx=RxFlags(l4=state), tx=tx)


# Into a tunnel: the cut packet is the inner one.  Cut in the Ethernet header
# region's end (14), in an IPv4 L4 header or the IPv6 header (40), in an IPv6
# TCP header (64), in the payload (80).
TUNNEL_CUTS = [14, 40, 64, 80]
TUNNEL_TX = ["none", "l4", "l4_disabled", "out_udp", "out_udp_disabled"]


@pytest.mark.parametrize("max_len", TUNNEL_CUTS, ids=lambda n: f"max_len{n}")
@pytest.mark.parametrize("l4,ipv", [("tcp", 4), ("udp", 4), ("tcp", 6), ("udp", 6)],
                         ids=["tcp4", "udp4", "tcp6", "udp6"])
@pytest.mark.parametrize("tunnel,underlay", [("vxlan", 4), ("geneve", 6), ("gre", 4)],
                         ids=["vxlan-ul4", "geneve-ul6", "gre-ul4"])
@pytest.mark.parametrize("tx", [pytest.param(TxOffloads.parse(s), id=TxOffloads.parse(s).id)
                                for s in TUNNEL_TX])
def test_output_max_len_into_tunnel(tunnel_rig, tx: TxOffloads, tunnel: str, underlay: int,
                                    l4: str, ipv: int, max_len: int) -> None:
    """output(port=TUNNEL,max_len=N) of a frame whose L4 checksum is pending,
    into a tunnel with checksums on: the frame leaving p2 against the model (the
    cut inner frame as it would leave, pushed).  OVS deviates as
    trunc-pending-csum says (the inner checksum over the bytes left; a
    VXLAN/Geneve outer UDP checksum for the packet before the cut) or dies as
    trunc-l4-cut-crash says.  Out of a veth with tx checksumming (tap backend)
    the kernel completes the inner checksum from OVS's seed, or refuses the
    frame whose checksum field the cut left out (trunc-csum-past-end).  Those
    ids xfail only if OVS does exactly so."""
    rig, record = tunnel_rig(tunnel, underlay)
    tun = spec(tunnel, underlay, True)
    frame = compose(l4, ipv, payload=bytes(range(20)))
    rig.forward(record, tun, "in_port=p1",
                [Truncate(max_len), PushTunnel(tun, str(TUNNEL_OFPORT)), output("p2")],
                [frame], RxFlags(l4=CsumState.PARTIAL), tx)
