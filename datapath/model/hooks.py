"""Where a layer above the model may watch it work.

The model computes what a correct datapath must emit, from the standards and
OVS's documentation, with no OVS bug in view: it imports neither the bug
catalogue (datapath/model/bugs.py) nor what OVS does instead
(datapath/deviations/).  That layer installs an Observer here; the model calls
it at a few events (a tunnel push, a segment made, an IPv4 address rewrite, a
cut, a software completion, an egress) and it records, on the packet's
`overlay`, what OVS does otherwise.  With the default Observer, every hook does
nothing and the model's expectation is the correct one alone.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from datapath.model.packet import Packet
    from datapath.offloads import TxOffloads

Verdicts = dict[str, str]
# What Observer.egress() returns as the frame the datapath under test sends, where
# it sends none at all (the port refuses what it is handed).
NOT_SENT = b""


class Known(Protocol):
    """A known deviation of the datapath under test, as the expectation names it
    (datapath/model/bugs.py's OvsBug has this shape)."""

    key: str
    title: str
    crash: bool
    signature: str

    def reason(self) -> str: ...

    def gone(self) -> str: ...


class Overlay(Protocol):
    """What the layer above keeps on a packet; copied with it."""

    def copy(self) -> "Overlay": ...


class Observer:
    """The hooks the model calls; each does nothing here."""

    def pushed(self, pkt: "Packet") -> None:
        """A tunnel header went on (tunnel.push)."""

    def segmented(self, original: "Packet", seg: "Packet", index: int) -> None:
        """Segment `index` of `original` was made (gso.segment), headers updated."""

    def ipv4_addr_rewritten(self, pkt: "Packet", old: bytes, new: bytes) -> None:
        """mod_nw_src/mod_nw_dst is about to change an IPv4 address of a packet
        without a TCP/UDP header to patch."""

    def gre_sealed(self, pkt: "Packet", ofs: int) -> None:
        """The GRE checksum at `ofs` was made final before a second push."""

    def before_software_completion(self, pkt: "Packet", slots: list[Any]) -> Any:
        """The datapath is about to complete `slots` in software; what is
        returned comes back to after_software_completion()."""
        return None

    def after_software_completion(self, pkt: "Packet", token: Any) -> None:
        """The slots are completed: `pkt` holds the right bytes."""

    def truncated(self, before: "Packet", pkt: "Packet", max_len: int,
                  completed: bytes) -> None:
        """output max_len cut `pkt`: `before` is the packet as it was (checksums
        pending), `completed` its bytes once completed, before the cut."""

    def egress(self, pkt: "Packet", slots: list[Any], tx: "TxOffloads",
               allowed: dict[bytes, Verdicts]) -> tuple[dict[bytes, Verdicts], list[Known],
                                                        list[str]]:
        """Before the contract is applied at egress (`pkt` as handed, `slots`
        pending, `allowed` what the contract allows): what the datapath under
        test sends instead (empty: nothing else; NOT_SENT: no frame at all), the
        known deviations that make it differ, and notes."""
        return {}, [], []

    def ct_commit_refused(self, pkt: "Packet", why: str) -> Known | None:
        """The tracker refused to commit the connection of a packet whose ct
        action translates it (`why`: a limit reached, no free mapping): the
        model drops it.  A layer above returns the known deviation under which
        the datapath under test forwards it instead, as it came (untranslated,
        uncommitted: +trk+new); None: it is dropped."""
        return None

    def ct_state(self, pkt: "Packet", res: Any) -> "tuple[Known, int] | None":
        """The tracker's verdict on the packet (`res`, a conntrack Result): a layer
        above returns the known deviation and the ct_state the datapath under test
        gives instead; None: as the model says."""
        return None

    def ct_related_translated(self, pkt: "Packet", before: bytes, res: Any) -> None:
        """A related ICMP error was translated by its connection's NAT (`before`:
        its bytes as they came): a layer above may record the bytes the datapath
        under test makes of it instead."""

    def crashes(self, pkt: "Packet", tx: "TxOffloads") -> None:
        """The packet is about to be sent to a port with `tx` (or completed in
        software, with no offloads): a layer above may name an abort on
        `pkt.bugs`."""


_active: list[Observer] = [Observer()]


def active() -> Observer:
    """The observer installed last, which the model's hooks call."""
    return _active[-1]


def install(observer: Observer) -> None:
    """Make `observer` the one the model calls (replacing any installed one)."""
    _active[:] = [_active[0], observer]


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """`observer` for the duration of the block (Observer(): the correct
    expectation alone)."""
    _active.append(observer)
    try:
        yield
    finally:
        _active.pop()
