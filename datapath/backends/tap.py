"""tap backend: OVS ports of type `tap`, and `system` ports on veth pairs.

ovs-vswitchd runs in a "switch" namespace of its own; the kernel side of each
port is moved to (tap) or created in (veth) a peer namespace the test made.
Frames go in by an AF_PACKET socket on that kernel interface and are captured
there when they come out (datapath/backends/netns.py).

What the ports can express, read from what OVS and the kernel negotiated:
- tap: OVS opens the tap with a virtio-net header and asks TUNSETOFFLOAD for
  TUN_F_CSUM (+ TSO4/TSO6 with userspace TSO).  The kernel shows the result as
  the tap's features (tx-checksum-ip-generic, tx-tcp-segmentation).  tx: L4
  checksums (done by the kernel side, never "forgotten"); rx: a frame sent
  as CHECKSUM_PARTIAL arrives L4-partial, any other frame with no flags.
- veth (system port): OVS reads the veth's ethtool features, but only with
  userspace TSO enabled (without it the AF_PACKET socket has no virtio-net
  header and no offloads at all).  tx: none, or L4 checksums when the veth's
  tx-checksumming is on; the port is re-added to change it, because OVS reads
  the features once, when it opens the device.
"""
from __future__ import annotations

from datapath.backends.kernel import (
    MOVED_DEVICE_LOG,
    KernelPort,
    datapath_rx_packets,
    tx_from_status,
)
from datapath.backends.netns import KernelSide, Netns, ethtool_features, l4_offsets, link_mac
from datapath.backends.offload_check import OffloadMismatch
from datapath.offloads import CsumState, RxFlags, TxOffloads
from harness.ifstatus import read_interface
from harness.sandbox import Sandbox, SandboxOptions
from harness.vsctl import add_port

NAME = "tap"
LOG_ALLOW = MOVED_DEVICE_LOG


def sandbox_options(switch_ns: Netns, tso: bool) -> SandboxOptions:
    """Sandbox keyword arguments: plain --enable-dummy (=override would turn
    `tap` and `system` ports into dummies), vswitchd inside the switch
    namespace, userspace TSO as asked (OVS reads it at start only)."""
    return {"enable_dummy": "", "vswitchd_preexec": switch_ns.preexec(),
            "other_config": {"userspace-tso-enable": "true" if tso else "false"},
            "log_allow": LOG_ALLOW}


def add_bridge(sb: Sandbox, name: str) -> None:
    """A userspace-datapath bridge without the NORMAL flow (the case adds flows)."""
    sb.vsctl("add-br", name, "--", "set", "bridge", name, "datapath-type=netdev",
             "fail-mode=secure", "other-config:hwaddr=aa:55:aa:55:00:00")


def negotiated(switch_ns: Netns, name: str) -> tuple[dict[str, bool], TxOffloads, bool]:
    """What TUNSETOFFLOAD negotiated for OVS's tap `name`, read with ethtool -k
    while the tap is still where OVS made it: (its features, the tx checksum
    offloads OVS may leave to the tap (L4, through the virtio-net header), TSO)."""
    features = ethtool_features(switch_ns, name)
    csum = features.get("tx-checksum-ip-generic", False)
    tx = TxOffloads(frozenset({"l4"})) if csum else TxOffloads()
    return features, tx, features.get("tx-tcp-segmentation", False)


class TapPort(KernelPort):
    """A tap port: the kernel side of the tap is in a peer namespace, where the test sends and captures."""

    kind = "tap"
    RX_LIMITS = ("a tap port can only hand over L4-partial packets (virtio-net NEEDS_CSUM; "
                 "TCP GSO packets too with userspace TSO) or packets with no flags; OVS 4.0 "
                 "reads no good/bad state from the tap "
                 "(it ignores DATA_VALID) and none for the IP header, which netdev-dummy's "
                 "ol_*_rx_csum_set_* options stamp")

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int, switch_ns: Netns,
                 peer: Netns) -> None:
        super().__init__(sb, bridge, name, ofport, peer)
        sb.vsctl(*add_port(bridge, name, type="tap", ofport_request=ofport))
        self.features, self.tx, self.tso = negotiated(switch_ns, name)
        self.csum = "l4" in self.tx.advertised
        # OVS 4.0 gives tap ports no tx_*_offload status keys (dpif_port_add()
        # skips netdev_set_dpif_type() for them); kept as evidence all the same.
        self.status = read_interface(sb, name).status
        switch_ns.ip("link", "set", name, "netns", peer.name)
        peer.ip("link", "set", name, "up")
        self.kernel = KernelSide(peer, name)

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        offs = l4_offsets(frame)
        segsz = self.rx.tso_segsz
        if segsz and self.tso and offs is not None and offs[1] == 16:
            # A GSO packet: OVS reads the segment size, and the L4 checksum as partial.
            return RxFlags(l4=CsumState.PARTIAL, tso_segsz=segsz)
        if self.rx.l4 is CsumState.PARTIAL and self.csum and offs is not None:
            return RxFlags(l4=CsumState.PARTIAL)
        return RxFlags()

    def send(self, frames: list[bytes]) -> None:
        assert self.kernel is not None
        for frame in frames:
            got = self.rx_flags_for(frame)
            self.kernel.send([frame], partial=got.l4 is CsumState.PARTIAL,
                             gso_size=got.tso_segsz)

    def rx_count(self) -> int:
        """The whole datapath's received packets: OVS reads a tap's counters from
        the kernel by name, which fails once the tap is in another namespace.
        The test's ports are the only ones with traffic (IPv6 is off everywhere)."""
        return datapath_rx_packets(self.sb)


class VethPort(KernelPort):
    """A veth port: OVS holds one end as a system port, the other end is in a peer namespace."""

    kind = "veth"
    RX_LIMITS = ("a veth (system) port hands over L4-partial packets only with userspace TSO "
                 "on, and never good/bad or IP checksum flags")

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int, switch_ns: Netns,
                 peer: Netns, *, userspace_tso: bool, csum: bool = False,
                 tso: bool = False) -> None:
        super().__init__(sb, bridge, name, ofport, peer)
        self.switch_ns = switch_ns
        self.userspace_tso = userspace_tso
        self.peer_if = f"{name}-peer"
        switch_ns.ip("link", "add", name, "type", "veth", "peer", "name", self.peer_if,
                     "netns", peer.name)
        self._set_features(csum, tso)
        switch_ns.ip("link", "set", name, "up")
        peer.ip("link", "set", self.peer_if, "up")
        self._add()
        self.kernel = KernelSide(peer, self.peer_if, ignore_src=(link_mac(switch_ns, name),))

    def _set_features(self, csum: bool, tso: bool) -> None:
        self.switch_ns.run(["ethtool", "-K", self.name, "tx", "on" if csum else "off"])
        if csum:
            self.switch_ns.run(["ethtool", "-K", self.name, "tso", "on" if tso else "off"])
        self.features = ethtool_features(self.switch_ns, self.name)

    def _add(self) -> None:
        self.sb.vsctl(*add_port(self.bridge, self.name, ofport_request=self.ofport))
        self.status = read_interface(self.sb, self.name).status
        self.tx, self.tso = tx_from_status(self.status)

    def apply_tx(self, tx: TxOffloads) -> None:
        want = "l4" in tx.advertised
        if want == ("l4" in self.tx.advertised):
            return
        if want and not self.userspace_tso:
            return  # no offloads at all without userspace TSO; express() says so
        # OVS reads the features when it opens the device: delete and add again
        # (two transactions, or OVS keeps the open netdev).
        self.sb.vsctl("del-port", self.bridge, self.name)
        self._set_features(want, False)
        self._add()
        got = "l4" in self.tx.advertised
        if got != want:  # OVS misreads the device: a failure, never a skip
            shown = {k: v for k, v in self.features.items()
                     if k.startswith(("tx-checksum", "tx-tcp"))}
            raise OffloadMismatch(
                f"veth port {self.name}: the kernel negotiated tx-checksumming "
                f"{'on' if want else 'off'} (ethtool -k: {shown}), but OVS reports tx "
                f"{self.tx.id} (Interface status: {self.status})")

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        if (self.rx.l4 is CsumState.PARTIAL and self.userspace_tso
                and l4_offsets(frame) is not None):
            return RxFlags(l4=CsumState.PARTIAL)
        return RxFlags()

    def send(self, frames: list[bytes]) -> None:
        assert self.kernel is not None
        for frame in frames:
            self.kernel.send([frame], partial=self.rx_flags_for(frame).l4 is CsumState.PARTIAL)
