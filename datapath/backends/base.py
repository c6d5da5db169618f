"""What every backend's port offers the cases: configure offloads, send, read what left."""
from __future__ import annotations

from typing import Protocol

from datapath.offloads import RxFlags, TxOffloads
from harness.sandbox import Sandbox


class BackendError(Exception):
    """The backend cannot do what was asked; the message names the missing capability."""


class Port(Protocol):
    """What the framework needs of a port, whatever its backend: name, ofport, the OVS it is on."""

    name: str
    ofport: int
    sb: Sandbox  # the OVS the port belongs to (a case that expects it to die tells it so)

    def configure(self, rx: RxFlags | None = None, tx: TxOffloads | None = None) -> None:
        """Set the checksum flags stamped on received packets and the tx offloads."""

    def send(self, frames: list[bytes]) -> None:
        """Hand frames to the datapath as if they arrived on this port."""

    def read_tx(self) -> list[bytes]:
        """Frames this port transmitted since the last call (never blocks)."""

    def rx_count(self) -> int:
        """Packets the datapath has taken from this port so far."""
