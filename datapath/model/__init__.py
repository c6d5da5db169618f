"""The reference model of the userspace datapath: our oracle.

forward() computes, from an input frame, the rx port's checksum flags, the
OpenFlow actions and the tx port's offloads, the frames that must leave.  It is
written from the protocol rules and the documented OVS semantics (reference
section 4), never from what OVS printed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from datapath.model import csum, gso, hooks
from datapath.model.actions import Action, Output, PushTunnel, Truncate
from datapath.model.cut import truncate
from datapath.model.hooks import NOT_SENT, Known
from datapath.model.packet import Packet
from datapath.model.send import Egress, complete_in_software, transmit
from datapath.model.tunnel import TunnelSpec, push
from datapath.offloads import RxFlags, TxOffloads
from evidence.compare import compare_frames


@dataclass
class Expected:
    """What the model says leaves one tx port, frame by frame: the canonical frame
    and its checksum verdicts, every frame the contract allows in its place
    (datapath/model/send.py E3), and what OVS is known to send instead."""

    frames: list[bytes]
    csum_state: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Known deviations of the datapath under test these frames run into, as the
    # layer above names them (datapath/deviations/); the model names none.
    bugs: list[Known] = field(default_factory=list)
    # Per frame: every frame the contract allows -> its verdicts (empty: only frames[i]).
    allowed: list[dict[bytes, dict[str, str]]] = field(default_factory=list)
    # Per frame: what OVS is known to send (a known bug) -> verdicts; empty: no deviation.
    ovs_allowed: list[dict[bytes, dict[str, str]]] = field(default_factory=list)

    def extend(self, other: "Expected") -> None:
        self.frames += other.frames
        self.csum_state += other.csum_state
        self.notes += other.notes
        self.bugs += [b for b in other.bugs if b not in self.bugs]
        self.allowed += other.padded("allowed")
        self.ovs_allowed += other.padded("ovs_allowed")

    def padded(self, name: str) -> list[dict[bytes, dict[str, str]]]:
        values: list[dict[bytes, dict[str, str]]] = getattr(self, name)
        return values + [{} for _ in range(len(self.frames) - len(values))]

    def permits(self, i: int, frame: bytes) -> bool:
        """Whether the contract allows `frame` as frame i."""
        return frame == self.frames[i] or frame in self.padded("allowed")[i]

    def ovs_sends(self, i: int, frame: bytes) -> bool:
        """Whether `frame` is what OVS is known to send as frame i (a known bug),
        or, for a frame no bug touches, one the contract allows."""
        known = self.padded("ovs_allowed")[i]
        return frame in known if known else self.permits(i, frame)

    @property
    def ovs_frames(self) -> list[bytes]:
        """Per frame, what OVS is known to send (its canonical variant); a frame
        it is known not to send is left out."""
        return [next(iter(known)) if known else frame
                for frame, known in zip(self.frames, self.padded("ovs_allowed"))
                if set(known) != {NOT_SENT}]

    @property
    def not_sent(self) -> int:
        """How many of the frames OVS is known not to send at all (hooks.NOT_SENT)."""
        return sum(set(known) == {NOT_SENT} for known in self.padded("ovs_allowed"))

    @property
    def deviates(self) -> bool:
        """Whether a known bug changes some frame (so a correct OVS would differ)."""
        return any(self.padded("ovs_allowed"))

    def judge(self, captured: list[bytes]) -> "Judgement":
        """The known-bug policy: what `captured` means against these frames.

        "match": what the contract allows; "known": it differs exactly as the
        known bugs say OVS deviates (an xfail); "gone": it is right although a
        known bug says OVS would deviate (retire or re-scope the entry);
        "mismatch": anything else."""
        resolved = self.resolved(captured)
        lines = compare_frames(resolved.frames, captured)
        known = [b for b in self.bugs if not b.crash]
        # A frame OVS is known not to send at all (hooks.NOT_SENT) is left out.
        sent = [i for i, ovs in enumerate(self.padded("ovs_allowed")) if set(ovs) != {NOT_SENT}]
        same = len(captured) == len(sent) and all(
            self.ovs_sends(i, f) for i, f in zip(sent, captured))
        if lines and known and same:
            return Judgement(resolved, lines, "known", {b.key: "present" for b in known})
        if not lines and known and self.deviates and not same:
            return Judgement(resolved, [b.gone() for b in known], "gone",
                             {b.key: "absent" for b in known})
        return Judgement(resolved, lines, "mismatch" if lines else "match", {})

    def resolved(self, captured: list[bytes]) -> "Expected":
        """A copy whose frames are, where the contract allows what was captured,
        the captured ones (with their verdicts): the rest stay canonical."""
        out = Expected(list(self.frames), list(self.csum_state), list(self.notes),
                       list(self.bugs), self.padded("allowed"), self.padded("ovs_allowed"))
        for i, frame in enumerate(captured[:len(out.frames)]):
            if frame != out.frames[i] and frame in out.allowed[i]:
                out.frames[i] = frame
                if i < len(out.csum_state):
                    out.csum_state[i] = out.allowed[i][frame]
            if len(out.allowed[i]) > 1 and frame in out.allowed[i]:
                # Who did the work is OVS's choice (send.py E3, E4): a fact seen here.
                left = sorted(k for k, v in out.allowed[i][frame].items() if v == "stale")
                out.notes.append(f"frame {i}: OVS's split of the checksum work, as seen: " + (
                    f"{', '.join(left)} left as handed to the port" if left
                    else "no checksum left as handed to the port"))
        return out


@dataclass
class Judgement:
    """Expected.judge(): the expectation as resolved against what was captured,
    the differing fields, the verdict, and which known bugs showed (or not)."""

    expected: Expected
    lines: list[str]
    status: str  # match, known, gone, mismatch
    bugs: dict[str, str]

    def xfail_reason(self, max_lines: int = 24) -> str:
        known = [b for b in self.expected.bugs if not b.crash]
        shown = self.lines[:max_lines] + ([f"... {len(self.lines) - max_lines} more lines in "
                                           "the step's diff"] if len(self.lines) > max_lines
                                          else [])
        return "; ".join(b.reason() for b in known) + "\n" + "\n".join(shown)


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
    cut: int | None = None
    for action in actions:
        if isinstance(action, Truncate):
            cut = action.max_len
        elif isinstance(action, PushTunnel):
            pushes.append(action)
        elif isinstance(action, Output):
            # Output to a tunnel port works on a clone: (cut,) push(es), then the underlay.
            for pkt in pkts:
                if pkt.dropped:
                    continue
                clones = [pkt.copy()]
                clones[0].notes = pkt.notes
                if cut is not None:
                    truncate(clones[0], cut)
                for tnl_push in pushes:
                    clones = [q for c in clones for q in push_nested(c, tnl_push)]
                for clone in clones:
                    emit(out, transmit(clone, tx))
                pkt.notes = []
            pushes, cut = [], None
        else:
            for pkt in pkts:
                if not pkt.dropped:
                    action.apply(pkt)
    for pkt in pkts:
        if pkt.dropped:
            out.notes += pkt.notes
    return out


def emit(out: Expected, sent: list[Egress]) -> None:
    """Append the frames sent, with what each may also be, their bugs and notes, to the expectation."""
    for egress in sent:
        pkt = egress.pkt
        out.allowed, out.ovs_allowed = out.padded("allowed"), out.padded("ovs_allowed")
        out.frames.append(bytes(pkt.data))
        out.allowed.append(egress.allowed)
        out.ovs_allowed.append(egress.ovs_allowed)
        out.bugs += [b for b in pkt.bugs if b not in out.bugs]
        out.csum_state.append(egress.allowed.get(bytes(pkt.data), pkt.csum_verdicts()))
        out.notes += pkt.notes


def push_nested(pkt: Packet, action: PushTunnel) -> list[Packet]:
    """A tunnel header pushed on `pkt`; on a packet already tunnelled, the rule
    of send.py's nested-push paragraph.

    A port's offloads reach a packet's outer headers and one level of inner
    ones (send.py E4), and its segmentation a TCP packet under at most one
    VXLAN, Geneve or GRE header (OVS Documentation/topics/userspace-tso.rst,
    Limitations).  Under a second tunnel header neither reaches the first
    tunnel's packet, so a correct datapath leaves nothing of it to the port: a
    TSO packet leaves as segments it made in software (userspace-tso.rst,
    "Software segmentation fallback"), each a whole packet with its own lengths
    and checksums right (RFC 791, 9293, 768, 8200), and every checksum under
    the new header is right in the bytes, a GRE checksum (RFC 2784 §2.5)
    included.  When the datapath does this work does not show on the wire, so
    the model does it before the push.  Two limits of what it allows: each
    segment carries the headers the push writes on a single packet (a datapath
    that segmented after the push could number the new IPv4 headers otherwise,
    which RFC 6864 §4.1 allows for these DF datagrams); and the first tunnel's
    own outer checksums, which a port could be handed as the inner level, are
    expected right, not also as handed to a port that does not do them (E3).
    """
    if pkt.tunnel is None and pkt.inner is None:
        action.apply(pkt)
        return [pkt]
    segs = gso.segment(pkt) if pkt.tso_segsz else [pkt]
    for seg in segs:
        complete_in_software(seg, "under a second tunnel header:")
        if seg.gre_csum_ofs is not None:
            _seal_gre(seg)
        action.apply(seg)
    return segs


def _seal_gre(pkt: Packet) -> None:
    """The GRE checksum of the current outer header, final before a second push."""
    assert pkt.gre_csum_ofs is not None
    ofs = pkt.gre_csum_ofs
    pkt.put16(ofs, 0)
    pkt.put16(ofs, csum.checksum(bytes(pkt.data[ofs - 4:])))
    pkt.notes.append(f"GRE checksum 0x{pkt.u16(ofs):04x} final before the second push")
    hooks.active().gre_sealed(pkt, ofs)
    pkt.gre_csum_ofs = None


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
                    allowed=[{fn(f): v for f, v in a.items()} for a in exp.padded("allowed")],
                    ovs_allowed=[{fn(f): v for f, v in a.items()}
                                 for a in exp.padded("ovs_allowed")])


def deviation(correct: Expected, ovs: Expected, *bugs: Known) -> Expected:
    """The correct frames, with what OVS sends instead because of known bugs
    (the frames `ovs` expects, one by one)."""
    out = Expected(frames=list(correct.frames), csum_state=list(correct.csum_state),
                   notes=list(correct.notes), bugs=list(correct.bugs),
                   allowed=correct.padded("allowed"),
                   ovs_allowed=[{f: v} for f, v in zip(ovs.frames, ovs.csum_state)])
    out.bugs += [b for b in bugs if b not in out.bugs]
    return out
