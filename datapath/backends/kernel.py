"""What the real-port backends share: ports whose far end is a kernel interface,
datapath counters, negotiated offloads, and what a port can and cannot express.

A real port cannot be told which checksum flags to stamp or which offloads to
"forget", the way netdev-dummy can.  Each port therefore says what it does:
`rx_flags_for(frame)` is the checksum state the datapath will see for a frame
it receives, `tx` the tx offloads OVS and the kernel (or the DPDK driver)
negotiated.  `express()` compares that with what a case asks for.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from datapath.backends.base import BackendError
from datapath.backends.netns import KernelSide, Netns
from datapath.model.packet import parse_layer
from datapath.offloads import CsumState, RxFlags, TxOffloads
from harness.ifstatus import Status
from harness.pmdstats import parse_pmd_stats, total
from harness.sandbox import Sandbox

# OVS logs these when the kernel side of a port was moved into another namespace:
# its ioctls and ethtool calls by name then find no such device (upstream's
# system-tap test ignores the same lines).
MOVED_DEVICE_LOG = (
    r"ethtool command ETHTOOL_G\w+ on network device \S+ failed: No such device",
    r"netdev_linux\|\w+\|.*(ioctl|get_stats|get_ifindex|SIOC\w+).*No such device",
    r"could not (get|retrieve) .* No such device",
    r"failed to set MTU for network device \S+: No such device",
)


# ICMPv6 types of link housekeeping: MLD (RFC 2710, RFC 3810), router and
# neighbour discovery and redirect (RFC 4861).
LINK_CHATTER = frozenset({130, 131, 132, 133, 134, 135, 136, 137, 143})
ICMPV6 = 58


def link_chatter(frame: bytes) -> bool:
    """An IPv6 MLD or neighbour/router discovery frame, which a kernel sends on
    its own at any time (behind an 802.1Q tag too)."""
    bare = frame[:12] + frame[16:] if frame[12:14] == b"\x81\x00" else frame
    try:
        lay = parse_layer(bare)
    except (ValueError, IndexError, struct.error):
        return False
    return (lay.ipv == 6 and lay.proto == ICMPV6 and lay.payload is not None
            and len(bare) > lay.payload and bare[lay.payload] in LINK_CHATTER)


def datapath_rx_packets(sb: Sandbox) -> int:
    """Packets the userspace datapath received on all its threads and ports."""
    return total(parse_pmd_stats(sb.appctl("dpif-netdev/pmd-stats-show").stdout), "rx")


def tx_from_status(status: Status) -> tuple[TxOffloads, bool]:
    """(tx checksum offloads, TSO) as the Interface status column reports them."""
    adv = set()
    if status.tx_ip_csum_offload:
        adv.add("ip")
    if status.tx_tcp_csum_offload and status.tx_udp_csum_offload:
        adv.add("l4")
    if status.tx_out_ip_csum_offload:
        adv.add("out_ip")
    if status.tx_out_udp_csum_offload:
        adv.add("out_udp")
    return TxOffloads(frozenset(adv)), status.tx_tcp_seg_offload is True


def flags_text(rx: RxFlags) -> str:
    """The rx flags a port stamps, as text for a message ("none" for none)."""
    parts = [f"{layer}={state.value}" for layer, state in (("ip", rx.ip), ("l4", rx.l4))
             if state is not CsumState.UNKNOWN]
    if rx.tso_segsz:
        parts.append(f"tso_segsz={rx.tso_segsz}")
    return ",".join(parts) or "none"


@dataclass
class Expressed:
    """How a port pair expresses what a case asked for: the flags and offloads
    that will really be in effect, and why they differ from the request."""

    rx: RxFlags
    tx: TxOffloads
    notes: list[str] = field(default_factory=list)


class KernelPort:
    """Base of the real ports: the OVS port `name` on `bridge`, and the kernel
    interface `kernel` at its far end inside the peer namespace."""

    kind = "kernel"
    # One sentence: the rx checksum flags this port kind can produce, and why no others.
    RX_LIMITS = ""

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int,
                 peer: Netns | None) -> None:
        self.sb = sb
        self.bridge = bridge
        self.name = name
        self.ofport = ofport
        self.peer = peer
        self.kernel: KernelSide | None = None
        self.rx = RxFlags()  # what the case asked for
        self.tx = TxOffloads()  # what was negotiated
        self.tso = False
        self.requested_tx = TxOffloads()
        self.status = Status.parse("{}")

    # -- Port interface ------------------------------------------------------

    def configure(self, rx: RxFlags | None = None, tx: TxOffloads | None = None) -> None:
        if rx is not None:
            self.rx = rx
        if tx is not None:
            self.requested_tx = tx
            self.apply_tx(tx)

    def apply_tx(self, tx: TxOffloads) -> None:
        """Bring the negotiated offloads as close to `tx` as this port kind can."""

    def send(self, frames: list[bytes]) -> None:
        assert self.kernel is not None
        self.kernel.send(frames)

    def read_tx(self) -> list[bytes]:
        assert self.kernel is not None
        return self.kernel.read()

    def rx_count(self) -> int:
        return self.sb.port_stats().get(self.name, {}).get("rx_packets", 0)

    # -- capabilities ----------------------------------------------------------

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        """The checksum flags the datapath will see on `frame` received here."""
        return RxFlags()

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
            self.kernel = None


def express(rx_port: KernelPort, tx_port: KernelPort, frame: bytes, rx: RxFlags,
            tx: TxOffloads) -> Expressed:
    """What really happens to `frame` when a case asks for (rx, tx) on this pair.

    Raises BackendError when a requested rx flag is not what the port stamps:
    a case that asks for ip=good must get ip=good, never something that merely
    gives the same bytes.  Layers the case leaves unknown may carry a flag the
    port sets anyway (a NIC that verifies checksums), and tx offloads may
    differ from the request; express() returns what is in effect, and the
    caller checks with the model that the expected frames stay the same.
    """
    actual = rx_port.rx_flags_for(frame)
    for layer in ("ip", "l4"):
        want, got = getattr(rx, layer), getattr(actual, layer)
        if want is not CsumState.UNKNOWN and want is not got:
            raise BackendError(
                f"{rx_port.kind} port {rx_port.name} cannot stamp rx {layer}={want.value} on "
                f"this frame (it stamps {flags_text(actual)}): {rx_port.RX_LIMITS}")
    if rx.tso_segsz != actual.tso_segsz:
        raise BackendError(
            f"{rx_port.kind} port {rx_port.name} cannot hand over this frame as a TSO packet "
            f"of segment size {rx.tso_segsz} (it stamps {flags_text(actual)}): "
            f"{rx_port.RX_LIMITS}")
    notes = [f"backend: {rx_port.kind} port {rx_port.name} stamps rx {flags_text(actual)}; "
             f"{tx_port.kind} port {tx_port.name} offers tx {tx_port.tx.id}"
             + (" + TSO" if tx_port.tso else "")]
    return Expressed(actual, tx_port.tx, notes)
