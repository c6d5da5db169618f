"""The reference model of the userspace datapath: our oracle.

forward() computes, from an input frame, the rx port's checksum flags, the
OpenFlow actions and the tx port's offloads, the frames that must leave.  It is
written from the protocol rules and the documented OVS semantics (reference
section 4), never from what OVS printed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from datapath.model.actions import Action, Output
from datapath.model.packet import Packet
from datapath.offloads import RxFlags, TxOffloads


@dataclass
class Expected:
    """What the model says leaves one tx port."""

    frames: list[bytes]
    csum_state: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def receive(frame: bytes, rx: RxFlags) -> Packet:
    """The packet as the datapath holds it after the rx port stamped its flags."""
    pkt = Packet.parse(frame)
    pkt.ip_csum, pkt.l4_csum = rx.ip, rx.l4
    pkt.notes.append(f"rx flags: IP {rx.ip.value}, L4 {rx.l4.value}")
    return pkt


def forward(frame: bytes, actions: list[Action], tx: TxOffloads,
            rx: RxFlags = RxFlags()) -> Expected:
    """Apply the actions in order; each output sends a finished copy to its port.

    Model v1 supports one tx port per case (all outputs land in the same capture).
    """
    pkt = receive(frame, rx)
    out = Expected(frames=[])
    for action in actions:
        if isinstance(action, Output):
            copy = Packet(bytearray(pkt.data), pkt.l3, pkt.ipv, pkt.l4, pkt.proto,
                          pkt.l3_size, pkt.ip_csum, pkt.l4_csum, [])
            copy.finish(tx)
            out.frames.append(bytes(copy.data))
            out.csum_state.append(copy.csum_verdicts())
            out.notes += pkt.notes + copy.notes
            pkt.notes = []
        else:
            action.apply(pkt)
    return out
