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
E4  Which port feature may complete which checksum: the innermost IP and L4
    headers are the `ip` and `l4` features (for a tunnel packet too: DPDK's mbuf
    API addresses the inner headers with the plain flags); the outer IPv4 and
    UDP headers of a tunnel are `out_ip` and `out_udp`, or `ip` and `l4` when no
    inner checksum is pending at the port (then the packet is a plain one to
    it); an inner checksum the port has no feature for is not: the datapath
    completed it in software before handing the packet over (E2).
E5  A checksum covering another checksum that a port completes (an outer UDP
    checksum over the inner packet, a GRE checksum) must be right for the frame
    as completed: it is computed as if the covered checksum were already right
    (Linux Documentation/networking/checksum-offloads.rst, "LCO").  No port
    offers GRE checksum offload, so the GRE checksum (RFC 2784 §2.5) is always
    the datapath's to compute.
E6  An L4 checksum flagged partial on a packet that is neither TCP nor UDP has
    nothing to complete (OVS offloads only TCP, UDP and SCTP): it leaves as is.
E7  A checksum an rx port flagged good is, to the datapath, validated (CSUM-DOC:
    the flag says so): an outer UDP checksum over it may be computed as if it
    were right, as E5 does for completed ones.  Where the port flagged a wrong
    checksum good, the outer checksum may therefore be right for the bytes or
    for the bytes as the flag claims them.

E8  output(port, max_len) hands the port the first max_len bytes of the
    packet as it would leave (ovs-actions(7): truncation serves mirroring to a
    collector): its postponed checksums are completed first (E2), then it is
    cut.  No checksum below the cut is judged: its bytes are gone
    (datapath/model/cut.py).

Before a second tunnel header goes on, every pending checksum is completed in
software: offload flags reach an inner and an outer header only (DPDK mbuf
outer/inner offsets), so nothing below the new outer header can be handed on.

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
    slots = pending_slots(pkt, tx)
    allowed, canonical = variants(pkt, slots)
    if pkt.cut is not None and pkt.cut.handed is not None \
            and pkt.cut.flag in tx.driver_flags():
        handed = pkt.copy()  # E3: a cut packet's pending checksum left to such a port
        pkt.cut.handed(handed)
        allowed.update(variants(handed, slots)[0])
    for slot in slots:
        pkt.notes.append(f"{slot.name} checksum pending: " + (
            f"right on the wire, or as handed ({slot.optional})" if slot.optional
            else f"right on the wire, or as it is ({slot.may_stay})" if slot.may_stay
            else "must be right on the wire"))
    out = Egress(canonical, allowed)
    canonical.notes = pkt.notes
    ovs, named, notes = hooks.active().egress(pkt, slots, tx, allowed)
    if ovs:
        out.ovs_allowed = ovs
        canonical.bugs += [b for b in named if b not in canonical.bugs]
        canonical.notes += notes
    return out


def pending_slots(pkt: Packet, tx: TxOffloads) -> list[Slot]:
    """The postponed checksums, innermost first (the order E5 needs)."""
    adv = tx.netdev_flags()
    disabled = tx.driver_flags()
    tunnel = pkt.inner is not None
    inner_pending = tunnel and _handed_inner(pkt, adv)
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
            if tunnel and not innermost:
                covers = {"out_ip" if kind == "ip" else "out_udp"}
                if not inner_pending:
                    covers.add(plain)
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


def _handed_inner(pkt: Packet, adv: frozenset[str]) -> bool:
    """Whether an inner checksum is still pending when the port gets the packet:
    one the port advertises a feature for.  One it does not, the datapath has
    completed in software before (E2, the fallback), so the port sees a plain
    packet (E4)."""
    lay = pkt.inner
    assert lay is not None
    if lay.ip_csum is P and lay.l3 is not None and lay.ipv == 4 and "ip" in adv:
        return True
    return (lay.l4_csum is P and lay.l4 is not None and not lay.fragment
            and lay.proto in (PROTO_TCP, PROTO_UDP)
            and ("tcp" if lay.proto == PROTO_TCP else "udp") in adv)


def variants(pkt: Packet, slots: list[Slot],
             completions: dict[str, Completion | None] | None = None,
             gre: int | None = None) -> tuple[dict[bytes, Verdicts], Packet]:
    """Every frame the slots allow (see _variants), from the packet and from each
    of its choices (E7 before a second push)."""
    allowed, canonical = _variants(pkt, slots, completions, gre)
    for choice in pkt.choices:
        other = pkt.copy()
        other.choices = []
        choice(other)
        for frame, verdicts in _variants(other, slots, completions, gre)[0].items():
            allowed.setdefault(frame, verdicts)
    return allowed, canonical


def _variants(pkt: Packet, slots: list[Slot],
              completions: dict[str, Completion | None] | None = None,
              gre: int | None = None) -> tuple[dict[bytes, Verdicts], Packet]:
    """Every frame the slots allow, and the canonical one (each optional checksum
    as handed, each that may stay as it was).

    A slot that may stay (E2) is a final choice: what covers it is computed over
    the value chosen.  A slot handed to a port (E3) is not: what covers it is
    computed as if the port had completed it (E5).  `completions` gives slots
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
        trusting = None
        if "outer.UDP" not in left and "outer.UDP" not in completions \
                and any(s.name == "outer.UDP" for s in slots):
            trusting = _trusting_outer_udp(ideal)
        for choice in itertools.product((True, False), repeat=len(optional)):
            variant = ideal.copy()
            for slot, as_handed in zip(optional, choice):
                if as_handed:
                    variant.put16(slot.ofs(variant), handed[slot.name])
                    slot.set_state(variant, P)
            allowed.setdefault(bytes(variant.data), variant.csum_verdicts())
            canonical = canonical or variant
            handed_udp = any(a and s.name == "outer.UDP" for s, a in zip(optional, choice))
            if trusting is not None and not handed_udp:
                alt = variant.copy()
                alt.put16(alt.outer.l4_csum_ofs, trusting)
                allowed.setdefault(bytes(alt.data), alt.csum_verdicts())
    assert canonical is not None
    return allowed, canonical


def _trusting_outer_udp(pkt: Packet) -> int | None:
    """E7: the outer UDP checksum of a VXLAN/Geneve packet computed as if each
    inner checksum flagged good were right, where one is not (a port that
    flagged a wrong checksum good).  The datapath may rely on an rx port's
    verdict (CSUM-DOC: good means validated), as LCO relies on the inner
    checksums (E5); None where no such checksum is wrong."""
    inn = pkt.inner
    if inn is None or pkt.tunnel not in ("vxlan", "geneve") or inn.l3 is None:
        return None
    fixed = pkt.copy()
    lay = fixed.inner
    assert lay is not None
    if inn.ip_csum is CsumState.GOOD and inn.ipv == 4:
        fixed.set_ip_csum(lay)
    if inn.l4_csum is CsumState.GOOD and inn.l4 is not None and not inn.fragment \
            and inn.proto in (PROTO_TCP, PROTO_UDP) \
            and not (inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) == 0):
        fixed.set_l4_csum(lay)
    if fixed.data == pkt.data:
        return None
    fixed.set_l4_csum(fixed.outer)
    return fixed.u16(fixed.outer.l4_csum_ofs)


def complete_in_software(pkt: Packet, why: str) -> None:
    """Every pending checksum right, by the datapath itself (before a second
    tunnel header: see the module docstring).  The layer above may record that
    the datapath under test completes one otherwise, to show once the packet
    leaves, or aborts on the way (hooks.py)."""
    nothing = TxOffloads()
    observer = hooks.active()
    observer.crashes(pkt, nothing)
    slots = pending_slots(pkt, nothing)
    _, done = variants(pkt, slots)
    token = observer.before_software_completion(pkt, slots)
    trusting = _trusting_outer_udp(done) if any(s.name == "outer.UDP" for s in slots) else None
    pkt.data = done.data
    for slot in slots:
        slot.set_state(pkt, CsumState.GOOD)
    if slots:
        pkt.notes.append(f"{why} completed {', '.join(s.name for s in slots)} in software")
    if trusting is not None and trusting != pkt.u16(pkt.outer.l4_csum_ofs):
        other = pkt.copy()
        other.put16(other.outer.l4_csum_ofs, trusting)
        pkt.choices.append(patch_from_end(bytes(pkt.data), bytes(other.data)))
        pkt.notes.append(f"outer.UDP 0x{trusting:04x} allowed too: computed as if the checksums "
                         "flagged good under it were right (E7)")
    observer.after_software_completion(pkt, token)


def patch_from_end(right: bytes, other: bytes) -> Change:
    """A change that makes `right` into `other`, each byte placed from the end:
    it still finds its bytes after more headers went on in front."""
    back = [(len(right) - i, other[i]) for i in range(len(right)) if right[i] != other[i]]

    def patch(pkt: Packet) -> None:
        for distance, value in back:
            pkt.data[len(pkt.data) - distance] = value
    return patch

