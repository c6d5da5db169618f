"""The full tx capability product: every tx offload set against every topology.

Each of the port features ip, l4, out_ip and out_udp is absent, on, or on but
not done (`_disabled`): 81 sets.  Which set a port has decides whether OVS
completes a checksum itself or hands it on, so every set meets every topology:
plain forwarding, VXLAN, Geneve and GRE with the tunnel checksum on and off,
and each tunnel with TSO (software segmentation), with a TCP, a UDP and an
ICMP packet (TSO: TCP).  The remaining axes (underlay, inner IP version, rx
checksum flags, good or bad input) are chosen pairwise: every pair of values of
any two axes of this module meets in at least one id (fixtures/pairwise.py).
Every id sends its frame through the upcall and through the installed flow.
"""
from __future__ import annotations

import itertools

import pytest

from datapath.model.actions import PushTunnel, output
from datapath.offloads import TX_FEATURES, RxFlags, TxOffloads
from fixtures.frames import tso_frame, with_bad_checksums
from fixtures.pairwise import cover
from fixtures.tunnel import TUNNEL_OFPORT, inner_frame, rewrite, rx_flags, spec

STATES = ("absent", "on", "disabled")


def tx_sets() -> list[TxOffloads]:
    out = []
    for states in itertools.product(STATES, repeat=len(TX_FEATURES)):
        words = [f if s == "on" else f"{f}_disabled"
                 for f, s in zip(TX_FEATURES, states) if s != "absent"]
        out.append(TxOffloads.parse(",".join(words) or "none"))
    return out


TOPOLOGIES = ["plain"] + [f"{k}-csum_{c}" for k in ("vxlan", "geneve", "gre")
                          for c in ("on", "off")] + [f"{k}-tso" for k in ("vxlan", "geneve", "gre")]
BASE = [{"topology": topo, "tx": tx.id, "l4": l4}
        for topo in TOPOLOGIES for tx in tx_sets()
        for l4 in (("tcp",) if topo.endswith("-tso") else ("tcp", "udp", "other"))]
AXES = {"underlay": (4, 6), "inner": ("in4", "in6"),
        "rx": ("rx_none", "rx_good", "rx_bad", "rx_partial"), "frame": ("good", "bad")}
ROWS = cover(BASE, AXES)
TX_BY_ID = {tx.id: tx for tx in tx_sets()}


def _id(row: dict[str, object]) -> str:
    return "-".join(str(row[k]) for k in ("topology", "tx", "l4")) + \
        f"-ul{row['underlay']}-{row['inner']}-{row['rx']}-{row['frame']}"


@pytest.mark.parametrize("row", [pytest.param(r, id=_id(r)) for r in ROWS])
def test_tx_product(tunnel_rig, row: dict[str, object]) -> None:
    """Verifies every field of what leaves p2 against the model (datapath/model/
    send.py: checksums right on the wire, or as handed to a port that advertises
    but does not do them), on the upcall path and through the installed flow."""
    topology, l4 = str(row["topology"]), str(row["l4"])
    tx, underlay, inner = TX_BY_ID[str(row["tx"])], int(str(row["underlay"])), str(row["inner"])
    bad = row["frame"] == "bad"
    kind, _, variant = topology.partition("-")
    tso = variant == "tso"
    rx = rx_flags(str(row["rx"]))
    if tso:
        frame = tso_frame(int(inner[-1]), 1200, flags="PA")
        frame = with_bad_checksums(frame) if bad else frame
        rx = RxFlags(ip=rx.ip, l4=rx.l4, tso_segsz=500)
    else:
        frame = inner_frame(inner, l4, bad)
    suffix, rw = rewrite(inner, l4)
    if kind == "plain":
        rig, record = tunnel_rig("plain", 4)
        rig.forward(record, None, f"in_port=p1{suffix}", [*rw, output("p2")], [frame], rx, tx)
        return
    tun = spec(kind, underlay, True if tso else variant == "csum_on")
    rig, record = tunnel_rig(kind, underlay, tso)
    actions = [*rw, PushTunnel(tun, str(TUNNEL_OFPORT)), output("p2")]
    rig.forward(record, tun, f"in_port=p1{suffix}", actions, [frame], rx, tx)
