"""Egress: what may leave a tx port, derived from the checksum contract.

The contract (OVS Documentation/topics/userspace-checksum-offloading.rst, cited
as CSUM-DOC; RFC 791, 768, 1071, 1624, 8200):

E1  A checksum known good, known bad or of unknown state leaves as it is
    (CSUM-DOC rules 2-4, 6: OVS "must not correct a known bad packet checksum",
    and an unknown one was only patched incrementally, RFC 1624 §3).
E2  A checksum OVS postponed (state partial: the header is valid but the
    checksum "may not be set in the packet data", CSUM-DOC rule 5) must be
    right on the wire: "performed by OVS or offloaded onto the NIC if the
    egress NIC supports checksum offloading"; where the port lacks the feature,
    "the data path will fall back to equivalent software implementation"
    (CSUM-DOC, Design).  Right means RFC 791 §3.1 for an IPv4 header (a header
    without payload too), RFC 9293 §3.1 for TCP, RFC 768 for UDP over IPv4 and
    RFC 8200 §8.1 for UDP over IPv6, with RFC 1071 arithmetic.  A partial UDP
    checksum whose field holds 0 may also stay 0, over IPv4 and IPv6 alike: 0
    is UDP's "no checksum" (RFC 768), which RFC 6935 §5 and RFC 6936 allow over
    IPv6 for tunnel encapsulations, and OVS keeps that meaning for every UDP
    packet (its own tests/dpif-netdev.at, "IPv6 udp csum offload": the inner
    no_csum_frame leaves with checksum 0 as no_csum_expected).
E3  Who completes a postponed checksum is OVS's choice, visible only on a port
    that advertises the feature but does not do it (netdev-dummy's `_disabled`,
    a stand-in for a broken driver).  There the wire may show the checksum
    right (OVS did it) or as handed to the port, untouched since it became
    partial.  `Egress.allowed` lists every frame the contract allows.
E4  Which port feature may complete which checksum (vswitch.xml, Interface
    status: `tx_ip_csum_offload`, `tx_tcp_csum_offload`, `tx_udp_csum_offload`
    for a packet's own headers, `tx_out_ip_csum_offload` and
    `tx_out_udp_csum_offload` for the outer headers of a tunnel packet).  A
    tunnel packet may be handed to the port as one (its inner IP and L4 headers
    are the `ip` and `l4` features', its outer IPv4 and UDP headers `out_ip`'s
    and `out_udp`'s), or, once every inner checksum is right in the bytes, as a
    plain packet (its outer headers are then the `ip` and `l4` features').  How
    the datapath splits the work is its choice: every frame either split allows
    is allowed (`Egress.allowed`), and a checksum the port has no feature for
    under a split is the datapath's under that split (E2, the fallback).
E5  A checksum covering another checksum that a port completes (an outer UDP
    checksum over the inner packet, a GRE checksum) must be right for the frame
    as completed: it is computed as if the covered checksum were already right
    (Linux Documentation/networking/checksum-offloads.rst, "LCO").  No port
    offers GRE checksum offload, so the GRE checksum (RFC 2784 §2.5) is always
    the datapath's to compute.
E6  An L4 checksum flagged partial on a packet that is neither TCP nor UDP has
    nothing to complete (OVS offloads only TCP, UDP and SCTP): it leaves as is.
E7  Every other checksum that covers a checksum is judged against the bytes
    that leave: an outer UDP checksum covers the inner packet as it is on the
    wire (RFC 768 over IPv4, RFC 8200 §8.1 over IPv6), an inner checksum that is
    wrong there included, even one the rx port flagged good.  The flag tells the
    datapath what to leave alone (E1), not what the bytes are; LCO (E5) holds
    only for a checksum a port completes after the datapath hands it over.

E9  A TCP checksum whose value is zero has two forms, 0x0000 and 0xffff (ones'
    complement's +0 and -0): RFC 1071's verification (the sum over pseudo-header
    and segment, field included, is all ones) accepts either, and RFC 1624 §3
    says a recomputation yields +0 where an update or a sender may have left
    -0 (Linux writes 0xffff for a zero result, CSUM_MANGLED_0).  A datapath
    that recomputes such a checksum (an ALG's rewrite) and one that carries it
    over are both right, so each frame allowed with one form is allowed with
    the other.  Not for UDP, whose 0x0000 means "no checksum" (RFC 768).

E8  output(port, max_len) hands the port the first max_len bytes of the
    packet as it would leave (ovs-actions(7): truncation serves mirroring to a
    collector): its postponed checksums are completed first (E2), then it is
    cut.  No checksum below the cut is judged: its bytes are gone
    (datapath/model/cut.py).

A second tunnel header (push_nested in datapath/model/__init__.py): the port
features above reach two levels of headers, a packet's outer headers and one
level of inner ones, so once a second tunnel header is on, nothing under the
first tunnel's outer headers can be left to the port: those checksums must be
right in the bytes the port is handed (E2).  When the datapath computes them,
before or after the push, does not show on the wire (a checksum is a function
of the bytes it covers, RFC 1071); the model computes them before the push.

The model knows no OVS bug.  Where OVS is known to break these rules, the layer
above it (datapath/deviations/, through datapath/model/hooks.py) fills
`Egress.ovs_allowed` with the frames OVS sends instead, naming the entry of the
catalogue (datapath/model/bugs.py).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from datapath.model import csum, gso, hooks
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Layer, Packet
from datapath.offloads import CsumState, TxOffloads

P = CsumState.PARTIAL
Verdicts = dict[str, str]
# A slot completed another way than the contract's (how a layer above says what
# the datapath under test does instead), and a change to a packet's bytes.
Completion = Callable[[Packet, Layer], None]
Change = Callable[[Packet], None]


@dataclass(frozen=True)
class Slot:
    """One checksum field OVS postponed, and who may complete it."""

    name: str  # as the diff names it: "IP", "TCP", "outer.UDP", "inner.IP"
    layer: str  # "inner" or "outer" (a plain packet has only an outer layer)
    kind: str  # "ip" or "l4"
    covers: frozenset[str]  # port feature flags that may complete it (E4)
    optional: str = ""  # why it may also leave as handed to the port (E3)
    may_stay: str = ""  # why the datapath may also leave it as it is for good (E2)

    def lay(self, pkt: Packet) -> Layer:
        lay = pkt.inner if self.layer == "inner" else pkt.outer
        assert lay is not None
        return lay

    def ofs(self, pkt: Packet) -> int:
        lay = self.lay(pkt)
        assert lay.l3 is not None
        return lay.l3 + 10 if self.kind == "ip" else lay.l4_csum_ofs

    def set_state(self, pkt: Packet, state: CsumState) -> None:
        if self.kind == "ip":
            self.lay(pkt).ip_csum = state
        else:
            self.lay(pkt).l4_csum = state


@dataclass
class Egress:
    """One frame that must leave, and every frame the contract allows instead."""

    pkt: Packet  # the canonical frame: every optional checksum left as handed
    allowed: dict[bytes, Verdicts] = field(default_factory=dict)  # frame -> verdicts
    # What the datapath under test is known to send instead (named in pkt.bugs by
    # the layer above, datapath/model/hooks.py); empty: no deviation.
    ovs_allowed: dict[bytes, Verdicts] = field(default_factory=dict)


def transmit(pkt: Packet, tx: TxOffloads) -> list[Egress]:
    """Everything between the datapath and the wire: software segmentation where
    the port cannot segment (OVS Documentation/topics/userspace-tso.rst,
    "Software segmentation fallback"), then the contract on each segment."""
    if pkt.tso_segsz and ("tso" not in tx.netdev_flags() or pkt.tunnel):
        segs = gso.segment(pkt)
    else:
        segs = [pkt]
    return [complete(seg, tx) for seg in segs]


def complete(pkt: Packet, tx: TxOffloads) -> Egress:
    """The contract applied to one packet about to leave a port with `tx`."""
    hooks.active().crashes(pkt, tx)
    for lay in (pkt.outer, pkt.inner):  # E6
        if lay is not None and lay.l4_csum is P and lay.proto not in (PROTO_TCP, PROTO_UDP):
            pkt.notes.append("L4 checksum partial on a packet that is neither TCP nor UDP: "
                             "nothing to complete; it leaves as it is")
            lay.l4_csum = CsumState.UNKNOWN
    splits = [pending_slots(pkt, tx)]  # E4: handed as a tunnel packet (or a plain one)
    if pkt.inner is not None:
        plain = pending_slots(pkt, tx, as_plain=True)
        if plain != splits[0]:
            splits.append(plain)
    allowed, canonical = _allowed(pkt, splits[0], tx)
    for slots in splits[1:]:
        for frame, verdicts in _allowed(pkt, slots, tx)[0].items():
            allowed.setdefault(frame, verdicts)
    for slot in splits[0]:
        pkt.notes.append(f"{slot.name} checksum pending: " + (
            f"right on the wire, or as handed ({slot.optional})" if slot.optional
            else f"right on the wire, or as it is ({slot.may_stay})" if slot.may_stay
            else "must be right on the wire"))
    for slot in (splits[1] if len(splits) > 1 else []):
        if slot.optional:
            pkt.notes.append(f"{slot.name} checksum: also as handed once the inner checksums "
                             f"are right and the packet is handed as a plain one ({slot.optional})")
    allowed = zero_twins(pkt, allowed)  # E9
    out = Egress(canonical, allowed)
    canonical.notes = pkt.notes
    ovs: dict[bytes, Verdicts] = {}
    named: list[hooks.Known] = []
    for slots in splits:
        mine = _allowed(pkt, slots, tx)[0] if len(splits) > 1 else allowed
        theirs, bugs, notes = hooks.active().egress(pkt, slots, tx, mine)
        for frame, verdicts in (theirs or mine).items():
            ovs.setdefault(frame, verdicts)
        if theirs:
            named += [b for b in bugs if b not in named]
            canonical.notes += [n for n in notes if n not in canonical.notes]
    if named:
        out.ovs_allowed = zero_twins(pkt, ovs)
        canonical.bugs += [b for b in named if b not in canonical.bugs]
    return out


def _allowed(pkt: Packet, slots: list[Slot], tx: TxOffloads) -> tuple[dict[bytes, Verdicts],
                                                                      Packet]:
    """Every frame one split of the work allows, and its canonical frame."""
    allowed, canonical = variants(pkt, slots)
    if pkt.cut is not None and pkt.cut.handed is not None \
            and pkt.cut.flag in tx.driver_flags():
        handed = pkt.copy()  # E3: a cut packet's pending checksum left to such a port
        pkt.cut.handed(handed)
        allowed.update(variants(handed, slots)[0])
    return allowed, canonical


def zero_twins(pkt: Packet, frames: dict[bytes, Verdicts]) -> dict[bytes, Verdicts]:
    """`frames` and, for each whose TCP checksum (outer or inner) is zero and
    verifies, the frame with zero's other form (E9), with the same verdicts."""
    out = dict(frames)
    tcp = [lay for lay in (pkt.outer, pkt.inner)
           if lay is not None and lay.proto == PROTO_TCP and lay.l4 is not None]
    for frame, verdicts in frames.items():
        for lay in tcp:
            ofs = lay.l4_csum_ofs
            value = int.from_bytes(frame[ofs:ofs + 2], "big")
            if value not in (0, 0xFFFF) or len(frame) < ofs + 2:
                continue
            probe = pkt.copy()
            probe.data = bytearray(frame)
            if probe.l4_sum(lay) != 0xFFFF:
                continue
            twin = frame[:ofs] + (0xFFFF - value).to_bytes(2, "big") + frame[ofs + 2:]
            out.setdefault(twin, verdicts)
    return out


def pending_slots(pkt: Packet, tx: TxOffloads, as_plain: bool = False) -> list[Slot]:
    """The postponed checksums, innermost first (the order E5 needs), with the
    port features that may complete each (E4): a tunnel packet handed to the
    port as one, or `as_plain`, as a plain packet (every inner checksum is then
    the datapath's)."""
    adv = tx.netdev_flags()
    disabled = tx.driver_flags()
    tunnel = pkt.inner is not None
    layers = [("inner", True), ("outer", False)] if tunnel else [("outer", False)]
    out: list[Slot] = []
    for where, innermost in layers:
        lay = pkt.inner if where == "inner" else pkt.outer
        assert lay is not None
        for kind in ("ip", "l4"):
            if (lay.ip_csum if kind == "ip" else lay.l4_csum) is not P:
                continue
            if kind == "ip" and (lay.l3 is None or lay.ipv != 4):
                continue
            if kind == "l4" and (lay.l4 is None or lay.proto not in (PROTO_TCP, PROTO_UDP)
                                 or lay.fragment):  # a fragment's covers the whole datagram
                continue
            plain = "ip" if kind == "ip" else ("tcp" if lay.proto == PROTO_TCP else "udp")
            covers = {plain}
            if tunnel and innermost and as_plain:
                covers = set()
            elif tunnel and not innermost and not as_plain:
                covers = {"out_ip" if kind == "ip" else "out_udp"}
            why = ""
            if covers & disabled & adv:
                why = f"the port advertises {'/'.join(sorted(covers & disabled))} but does not do it"
            stay = ""
            if kind == "l4" and lay.proto == PROTO_UDP and pkt.u16(lay.l4_csum_ofs) == 0:
                stay = ("a UDP checksum of 0 means none (RFC 768" +
                        ("; over IPv6 RFC 6935 §5, RFC 6936)" if lay.ipv == 6 else ")"))
            prefix = f"{where}." if tunnel else ""
            out.append(Slot(prefix + ("IP" if kind == "ip" else lay.l4_name), where, kind,
                            frozenset(covers), why, stay))
    return out


def variants(pkt: Packet, slots: list[Slot],
             completions: dict[str, Completion | None] | None = None,
             gre: int | None = None) -> tuple[dict[bytes, Verdicts], Packet]:
    """Every frame the slots allow, and the canonical one (each optional checksum
    as handed, each that may stay as it was).

    A slot that may stay (E2) is a final choice: what covers it is computed over
    the value chosen.  A slot handed to a port (E3) is not: what covers it is
    computed as if the port had completed it (E5); every other covering
    checksum is right for the bytes that leave (E7).  `completions` gives slots
    completed another way (None: left as they are) and `gre` a fixed GRE
    checksum: how the layer above says the datapath under test deviates."""
    completions = completions or {}
    skip = frozenset(n for n, how in completions.items() if how is None)
    handed = {s.name: pkt.u16(s.ofs(pkt)) for s in slots}
    stays = [s for s in slots if s.may_stay and s.name not in skip]
    allowed: dict[bytes, Verdicts] = {}
    canonical: Packet | None = None
    for kept in itertools.product((True, False), repeat=len(stays)):
        left = skip | {s.name for s, keep in zip(stays, kept) if keep}
        ideal = pkt.copy()
        ideal.notes = []
        for slot in slots:
            own = completions.get(slot.name)
            if own is not None:
                own(ideal, slot.lay(ideal))
            elif slot.name not in left:
                (ideal.set_ip_csum if slot.kind == "ip" else ideal.set_l4_csum)(slot.lay(ideal))
            elif slot.may_stay and slot.name not in skip:
                slot.set_state(ideal, CsumState.GOOD)  # a final choice, not a pending one
        if ideal.gre_csum_ofs is not None:
            ofs = ideal.gre_csum_ofs
            ideal.put16(ofs, 0)
            ideal.put16(ofs, csum.checksum(bytes(ideal.data[ofs - 4:])) if gre is None else gre)
        optional = [s for s in slots if s.optional and s.name not in left]
        for choice in itertools.product((True, False), repeat=len(optional)):
            variant = ideal.copy()
            for slot, as_handed in zip(optional, choice):
                if as_handed:
                    variant.put16(slot.ofs(variant), handed[slot.name])
                    slot.set_state(variant, P)
            allowed.setdefault(bytes(variant.data), variant.csum_verdicts())
            canonical = canonical or variant
    assert canonical is not None
    return allowed, canonical


def complete_in_software(pkt: Packet, why: str) -> None:
    """Every pending checksum right for the bytes (E2, E7), by the datapath
    itself (before a second tunnel header: see the module docstring).  The
    layer above may record that the datapath under test completes one
    otherwise, to show once the packet leaves, or aborts on the way (hooks.py)."""
    nothing = TxOffloads()
    observer = hooks.active()
    observer.crashes(pkt, nothing)
    slots = pending_slots(pkt, nothing)
    _, done = variants(pkt, slots)
    token = observer.before_software_completion(pkt, slots)
    pkt.data = done.data
    for slot in slots:
        slot.set_state(pkt, CsumState.GOOD)
    if slots:
        pkt.notes.append(f"{why} completed {', '.join(s.name for s in slots)} in software")
    observer.after_software_completion(pkt, token)


def patch_from_end(right: bytes, other: bytes) -> Change:
    """A change that makes `right` into `other`, each byte placed from the end:
    it still finds its bytes after more headers went on in front."""
    back = [(len(right) - i, other[i]) for i in range(len(right)) if right[i] != other[i]]

    def patch(pkt: Packet) -> None:
        for distance, value in back:
            pkt.data[len(pkt.data) - distance] = value
    return patch

