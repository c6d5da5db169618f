"""The reference model of the userspace datapath: our oracle.

forward() computes, from an input frame, the rx port's checksum flags, the
OpenFlow actions and the tx port's offloads, the frames that must leave.  It is
written from the protocol rules and the documented OVS semantics (reference
section 4), never from what OVS printed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from datapath.model import gso
from datapath.model.actions import Action, Output, PushTunnel
from datapath.model.bugs import OvsBug
from datapath.model.packet import Packet
from datapath.model.send import prepare, transmit
from datapath.model.tunnel import TunnelSpec, push
from datapath.offloads import RxFlags, TxOffloads


@dataclass
class Expected:
    """What the model says leaves one tx port."""

    frames: list[bytes]
    csum_state: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Known OVS bugs these frames run into, and what OVS is known to send instead.
    bugs: list[OvsBug] = field(default_factory=list)
    ovs_frames: list[bytes] = field(default_factory=list)

    def extend(self, other: "Expected") -> None:
        self.frames += other.frames
        self.csum_state += other.csum_state
        self.notes += other.notes
        self.bugs += [b for b in other.bugs if b not in self.bugs]
        self.ovs_frames += other.ovs_frames


def receive(frame: bytes, rx: RxFlags) -> Packet:
    """The packet as the datapath holds it after the rx port stamped its flags."""
    pkt = Packet.parse(frame)
    pkt.outer.ip_csum, pkt.outer.l4_csum = rx.ip, rx.l4
    pkt.tso_segsz = rx.tso_segsz
    pkt.notes.append(f"rx flags: IP {rx.ip.value}, L4 {rx.l4.value}"
                     + (f", TSO segsz {rx.tso_segsz}" if rx.tso_segsz else ""))
    return pkt


def forward(frame: bytes, actions: list[Action], tx: TxOffloads,
            rx: RxFlags = RxFlags()) -> Expected:
    """Apply the actions in order; each output sends a finished copy to the tx port.

    All outputs of one call land on the same tx port (one capture).
    """
    pkts = [receive(frame, rx)]
    out = Expected(frames=[])
    pushes: list[PushTunnel] = []
    for action in actions:
        if isinstance(action, PushTunnel):
            pushes.append(action)
        elif isinstance(action, Output):
            # Output to a tunnel port works on a clone: push(es), then the underlay.
            for pkt in pkts:
                clones = [pkt.copy()]
                clones[0].notes = pkt.notes
                for push in pushes:
                    clones = [q for c in clones for q in push_nested(c, push)]
                for clone in clones:
                    emit(out, transmit(clone, tx))
                pkt.notes = []
            pushes = []
        else:
            for pkt in pkts:
                action.apply(pkt)
    return out


def emit(out: Expected, sent: list[Packet]) -> None:
    for pkt in sent:
        out.frames.append(bytes(pkt.data))
        out.ovs_frames.append(bytes(pkt.ovs_data if pkt.ovs_data is not None else pkt.data))
        out.bugs += [b for b in pkt.bugs if b not in out.bugs]
        out.csum_state.append(pkt.csum_verdicts())
        out.notes += pkt.notes


def push_nested(pkt: Packet, action: PushTunnel) -> list[Packet]:
    """netdev_push_header(): a packet that is already tunnelled is segmented if it
    is TSO, and all its checksums are finished, before the next header goes on."""
    if pkt.tunnel is None and pkt.inner is None:
        action.apply(pkt)
        return [pkt]
    if pkt.gre_csum_ofs is not None:
        raise NotImplementedError("model: a tunnel inside a GRE tunnel")
    segs = gso.segment(pkt) if pkt.tso_segsz else [pkt]
    for seg in segs:
        prepare(seg, frozenset(), "push of a second tunnel:")
        action.apply(seg)
    return segs


def encapsulate(frame: bytes, spec: TunnelSpec, tx: TxOffloads = TxOffloads(),
                rx: RxFlags = RxFlags(), **inputs: int) -> Expected:
    """One frame out of a tunnel port onto the underlay port: the push (with its
    per-packet inputs, see tunnel.push) and the underlay port's send."""
    pkt = receive(frame, rx)
    push(pkt, spec, **inputs)
    out = Expected(frames=[])
    emit(out, transmit(pkt, tx))
    return out


def map_frames(exp: Expected, fn: Callable[[bytes], bytes]) -> Expected:
    """The same expectation for frames that something after the datapath's port
    changes the same way (e.g. a VLAN tag added by the underlay bridge)."""
    return Expected(frames=[fn(f) for f in exp.frames], csum_state=list(exp.csum_state),
                    notes=list(exp.notes), bugs=list(exp.bugs),
                    ovs_frames=[fn(f) for f in exp.ovs_frames])


def deviation(correct: Expected, ovs: Expected, *bugs: OvsBug) -> Expected:
    """The correct frames, with what OVS sends instead because of known bugs."""
    out = Expected(frames=list(correct.frames), csum_state=list(correct.csum_state),
                   notes=list(correct.notes), bugs=list(correct.bugs),
                   ovs_frames=list(ovs.frames))
    out.bugs += [b for b in bugs if b not in out.bugs]
    return out
