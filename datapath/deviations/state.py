"""What OVS does otherwise, kept on the model's packet (its overlay): the
changes OVS makes that the model does not, the GRE checksum OVS wrote at push,
and what OVS does with a packet output max_len cut."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from datapath.model.bugs import OvsBug
from datapath.model.packet import Layer, Packet

Change = Callable[[Packet], None]
Completion = Callable[[Packet, Layer], None]


@dataclass(frozen=True)
class OvsCut:
    """What OVS does with a packet output max_len cut while a TCP/UDP checksum
    was pending (datapath/deviations/truncation.py)."""

    before_l4: bool  # the cut fell before an IPv4 TCP/UDP header (TRUNC_L4_CUT_CRASH)
    ipv: int  # the IP version of the layer whose checksum was pending
    # The cut fell before the end of that TCP/UDP header (the tunnel shortcut, where
    # it runs, reads headers that are gone: TRUNC_TUNNEL_OUTER_CSUM).
    header_cut: bool
    # OVS's own bytes for it, completed over what is left (TRUNC_PENDING_CSUM).
    change: Change | None
    # The uncut packet's ones' sum, where a UDP tunnel's outer checksum shortcut
    # would take the uncut headers; None where the shortcut gives up.
    uncut_sum: int | None
    # The bytes a Linux port makes of it, handed the checksum in a virtio-net
    # header with OVS's seed (the pseudo-header of the IP header's lengths),
    # summed over what is left (TRUNC_PENDING_CSUM on a tap or veth).
    seeded: Change | None = None
    # The checksum field itself is past the cut: a Linux port refuses the packet
    # whose virtio-net header points there (TRUNC_CSUM_PAST_END).
    field_gone: bool = False


@dataclass
class OvsState:
    """What OVS does otherwise to one model packet: its changes, the GRE checksum at push, a max_len cut."""

    # Where OVS changes the packet otherwise than the model (record_change).
    changes: list[tuple[OvsBug, Change, str]] = field(default_factory=list)
    gre_csum: int | None = None  # what OVS wrote into the GRE checksum at push
    cut: OvsCut | None = None

    def copy(self) -> "OvsState":
        return OvsState(list(self.changes), self.gre_csum, self.cut)


def state(pkt: Packet) -> OvsState:
    """The packet's OVS state (made on first use)."""
    if pkt.overlay is None:
        pkt.overlay = OvsState()
    assert isinstance(pkt.overlay, OvsState)
    return pkt.overlay


def record_change(pkt: Packet, bug: OvsBug, change: Change, note: str) -> None:
    """Remember that OVS changes this packet otherwise than the model did (applied
    at egress to a copy: `change` finds its place from the packet's layers)."""
    state(pkt).changes.append((bug, change, note))


def ovs_bytes(pkt: Packet) -> bytes:
    """The packet's bytes as OVS has them: with OVS's own changes applied."""
    changes = state(pkt).changes
    if not changes:
        return bytes(pkt.data)
    changed = pkt.copy()
    for _, change, _ in changes:
        change(changed)
    return bytes(changed.data)


def name_bug(pkt: Packet, bug: OvsBug) -> None:
    """Name a known bug this packet runs into."""
    if bug not in pkt.bugs:
        pkt.bugs.append(bug)
