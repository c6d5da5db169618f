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
from datapath.model.send import transmit
from datapath.offloads import RxFlags, TxOffloads


@dataclass
class Expected:
    """What the model says leaves one tx port."""

    frames: list[bytes]
    csum_state: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def extend(self, other: "Expected") -> None:
        self.frames += other.frames
        self.csum_state += other.csum_state
        self.notes += other.notes


def receive(frame: bytes, rx: RxFlags) -> Packet:
    """The packet as the datapath holds it after the rx port stamped its flags."""
    pkt = Packet.parse(frame)
    pkt.outer.ip_csum, pkt.outer.l4_csum = rx.ip, rx.l4
    pkt.notes.append(f"rx flags: IP {rx.ip.value}, L4 {rx.l4.value}")
    return pkt


def forward(frame: bytes, actions: list[Action], tx: TxOffloads,
            rx: RxFlags = RxFlags()) -> Expected:
    """Apply the actions in order; each output sends a finished copy to the tx port.

    All outputs of one call land on the same tx port (one capture).
    """
    pkt = receive(frame, rx)
    out = Expected(frames=[])
    for action in actions:
        if isinstance(action, Output):
            copy = pkt.copy()
            transmit(copy, tx)
            out.frames.append(bytes(copy.data))
            out.csum_state.append(copy.csum_verdicts())
            out.notes += pkt.notes + copy.notes
            pkt.notes = []
        else:
            action.apply(pkt)
    return out
