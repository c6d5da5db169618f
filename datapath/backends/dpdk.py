"""dpdk backend: ovs-vswitchd with DPDK, initialised without hugepages.

Port kinds:
- `DpdkTapPort`: type=dpdk on a net_tap vdev.  The PMD creates a kernel tap in
  the switch namespace; its kernel side is moved to a peer namespace and used
  like a tap port's.  net_tap needs as many rx as tx queues: options:n_rxq=2.
  On rx the PMD verifies IPv4, TCP and UDP checksums in software and stamps
  good or bad (`net_tap_rx_flags`); on tx it completes the checksums OVS
  offloads to it.
- `DpdkPcapPort`: type=dpdk on a net_pcap vdev; frames in through an rx pcap
  file (the PMD replays it when the port starts, so each send() starts the
  port again on a new file) and out through a tx pcap file.  No offloads.
- `VhostUserClientPort` (datapath/backends/vhost.py): dpdkvhostuserclient
  towards dpdk-testpmd's virtio-user device.

`--enable-dummy=override` would not hide the dpdk types (they register after
the override is applied, when DPDK initialises), but it replaces `tap` and
`system`, so the DPDK sandbox uses plain --enable-dummy like the tap one.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from datapath.backends.kernel import MOVED_DEVICE_LOG, KernelPort, tx_from_status
from datapath.backends.netns import KernelSide, Netns
from datapath.model import csum
from datapath.model.packet import (
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    ETH_TYPE_QINQ,
    ETH_TYPE_VLAN,
    IPV4_MIN_HEADER,
    IPV6_HEADER,
    L4_CSUM_OFS,
    PROTO_TCP,
    PROTO_UDP,
    ether_type,
    ipv4_header,
    ipv6_header,
)
from datapath.offloads import CsumState, RxFlags
from evidence.pcap import PcapError, PcapReader, write_pcap
from harness.ifstatus import read_interface
from harness.install import OvsInstall
from harness.sandbox import Sandbox, SandboxOptions
from harness.vsctl import add_port, set_interface
from harness.wait import WaitTimeout, wait_until

NAME = "dpdk"
# EAL options checked on our machines: no hugepages, no PCI bus, nothing shared on disk.
EAL_ARGS = "--no-huge -m 1024 --no-pci --in-memory"
# net_tap cannot add its multiq qdisc (and so its rte_flow support) where the kernel
# lacks sch_multiq; the port works all the same.
LOG_ALLOW = (
    *MOVED_DEVICE_LOG,
    r"dpdk\|ERR\|TAP: tap_nl_dump_ext_ack\(\): Specified qdisc kind is unknown",
    r"dpdk\|ERR\|TAP: qdisc_create_multiq\(\)",
    r"dpdk\|ERR\|TAP: eth_dev_tap_create\(\): \S+: failed to create multiq qdisc",
    r"dpdk\|ERR\|TAP: eth_dev_tap_create\(\):\s+Disabling rte flow support",
    # What net_pcap (and other simple drivers) lack, said at every (re)configuration.
    r"netdev_dpdk\|WARN\|Rx checksum offload is not supported on port \d+",
    r"netdev_dpdk\|WARN\|Interface \S+ does not support MTU configuration, max packet "
    r"size supported is \d+",
    # With userspace TSO, OVS says which tunnel TSO offloads the driver lacks.
    r"netdev_dpdk\|WARN\|\S+: Tx (Vxlan|Geneve|GRE) tunnel TSO offload is not supported",
)
STDERR_ALLOW = (r"\|dpdk\|", r"\|netdev_dpdk\|")
VSCTL_TIMEOUT = 60.0

_vdev_ids = itertools.count()


def sandbox_options(install: OvsInstall, switch_ns: Netns, tso: bool) -> SandboxOptions:
    """The Sandbox options of a DPDK-enabled ovs-vswitchd in the switch namespace."""
    if install.vswitchd_dpdk is None:
        raise RuntimeError("no DPDK-enabled ovs-vswitchd")
    return {
        "enable_dummy": "", "vswitchd_exe": str(install.vswitchd_dpdk),
        "vswitchd_preexec": switch_ns.preexec(),
        "other_config": {"dpdk-init": "true", "dpdk-extra": EAL_ARGS,
                         "userspace-tso-enable": "true" if tso else "false"},
        "log_allow": LOG_ALLOW, "stderr_allow": STDERR_ALLOW,
        # Adding a DPDK port fills its mempool (about 1 GB of 4 KiB pages without
        # hugepages): seconds on a loaded machine.
        "vsctl_timeout": VSCTL_TIMEOUT,
    }


def wait_initialized(sb: Sandbox, timeout: float = 30.0) -> None:
    """vswitchd initialises DPDK after start, when it first reads its configuration."""
    def done() -> bool:
        sb.assert_alive()
        return sb.vsctl("get", "Open_vSwitch", ".",
                        "dpdk_initialized").stdout.strip() == "true"
    try:
        wait_until(done, timeout, what="DPDK to initialise (dpdk_initialized=true)")
    except WaitTimeout as exc:
        tail = "\n".join(sb.log.lines()[-20:])
        raise WaitTimeout(f"{exc}\n--- tail of ovs-vswitchd.log ---\n{tail}") from None


# ----------------------------------------------------------------------------
# net_tap


def net_tap_rx_flags(frame: bytes) -> RxFlags:
    """The checksum flags net_tap's software verification (tap_verify_csum(),
    with RX checksum offload on, as OVS enables it) puts on a received frame:
    IPv4 header good/bad; TCP/UDP over IPv4 without options or over IPv6
    without extension headers good/bad; nothing for anything else, nor for a
    header that claims more bytes than the frame has."""
    eth_type, l3 = ether_type(frame, tpids=(ETH_TYPE_VLAN, ETH_TYPE_QINQ), max_tags=None)
    ip = CsumState.UNKNOWN
    if eth_type == ETH_TYPE_IPV4:
        if len(frame) < l3 + IPV4_MIN_HEADER:
            return RxFlags()
        v4 = ipv4_header(frame, l3)
        ihl, proto = v4.ihl, v4.proto
        if ihl < IPV4_MIN_HEADER or l3 + ihl > len(frame) or l3 + v4.total_len > len(frame):
            return RxFlags()
        ip = CsumState.GOOD if csum.checksum(frame[l3:l3 + ihl]) == 0 else CsumState.BAD
        if ihl != IPV4_MIN_HEADER or v4.frag & 0x3FFF or proto not in (PROTO_TCP, PROTO_UDP):
            return RxFlags(ip=ip)
        start, end = l3 + ihl, l3 + v4.total_len
        pseudo = csum.pseudo_header_v4(v4.src, v4.dst, proto, end - start)
    elif eth_type == ETH_TYPE_IPV6:
        if len(frame) < l3 + IPV6_HEADER:
            return RxFlags()
        v6 = ipv6_header(frame, l3)
        plen, proto = v6.payload_len, v6.next_header
        if l3 + IPV6_HEADER + plen > len(frame) or proto not in (PROTO_TCP, PROTO_UDP):
            return RxFlags()
        start, end = l3 + IPV6_HEADER, l3 + IPV6_HEADER + plen
        pseudo = csum.pseudo_header_v6(v6.src, v6.dst, proto, plen)
    else:
        return RxFlags()
    if end - start < (20 if proto == PROTO_TCP else 8):
        return RxFlags(ip=ip)
    csum_ofs = start + L4_CSUM_OFS[PROTO_UDP]
    if proto == PROTO_UDP and eth_type == ETH_TYPE_IPV4 and frame[csum_ofs:csum_ofs + 2] == b"\0\0":
        return RxFlags(ip=ip, l4=CsumState.GOOD)  # no UDP checksum over IPv4
    ok = csum.ones_sum(frame[start:end], pseudo) == 0xFFFF
    return RxFlags(ip=ip, l4=CsumState.GOOD if ok else CsumState.BAD)


class DpdkTapPort(KernelPort):
    """A DPDK net_tap port: OVS reads it through DPDK, the test uses its kernel side in a peer namespace."""

    kind = "dpdk net_tap"
    RX_LIMITS = ("net_tap verifies IPv4/TCP/UDP checksums in software and stamps exactly "
                 "good or bad; it cannot leave a TCP/UDP checksum unknown or mark it partial")

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int, switch_ns: Netns,
                 peer: Netns) -> None:
        super().__init__(sb, bridge, name, ofport, peer)
        self.vdev = f"net_tap{next(_vdev_ids)}"
        sb.vsctl(*add_port(bridge, name, type="dpdk",
                           options={"dpdk-devargs": f"{self.vdev},iface={name}", "n_rxq": 2},
                           ofport_request=ofport))
        self.status = read_interface(sb, name).status
        self.tx, self.tso = tx_from_status(self.status)
        self.rx_csum = self.status.rx_csum_offload is True
        switch_ns.ip("link", "set", name, "netns", peer.name)
        peer.ip("link", "set", name, "up")
        self.kernel = KernelSide(peer, name)

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        return net_tap_rx_flags(frame) if self.rx_csum else RxFlags()


# ----------------------------------------------------------------------------
# net_pcap


class DpdkPcapPort(KernelPort):
    """Frames in and out through pcap files; no kernel interface, no offloads.

    net_pcap reads its rx file from the start whenever the device starts, and
    truncates its tx file then.  send() therefore rewrites the rx file and has
    OVS restart the device by changing options:n_rxq_desc: the port stays in
    the bridge all along, so no frame reaches the datapath before OpenFlow knows
    the port (deleting and adding the port again loses the first upcalls).
    """

    kind = "dpdk net_pcap"
    RX_LIMITS = "net_pcap sets no checksum flags on the frames it reads"
    RXQ_DESC = ("2048", "1024")

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int) -> None:
        super().__init__(sb, bridge, name, ofport, peer=None)
        self.dir = Path(sb.rundir) / f"{name}-pcap"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rx_file, self.tx_file = self.dir / "rx.pcap", self.dir / "tx.pcap"
        write_pcap(self.rx_file, [])
        self.vdev = f"net_pcap{next(_vdev_ids)}"
        self._desc = 0
        self._rx_last = self._rx_offset = 0
        # Paths relative to vswitchd's working directory (the run directory): DPDK
        # refuses long devargs (E2BIG).
        rel = self.dir.relative_to(self.sb.rundir)
        devargs = f"{self.vdev},rx_pcap={rel / 'rx.pcap'},tx_pcap={rel / 'tx.pcap'}"
        self.sb.vsctl(*add_port(self.bridge, self.name, type="dpdk",
                                options={"dpdk-devargs": devargs,
                                         "n_rxq_desc": self.RXQ_DESC[0]},
                                ofport_request=self.ofport))
        self._reader = PcapReader(self.tx_file)
        self._pending: list[bytes] = []
        self.status = read_interface(self.sb, self.name).status
        self.tx, self.tso = tx_from_status(self.status)

    def send(self, frames: list[bytes]) -> None:
        """Rewrite the rx file and restart the device: net_pcap replays the file."""
        self._pending += self._reader.read_new()  # the restart truncates the tx file
        self.rx_count()
        tmp = self.dir / "rx.pcap.new"
        write_pcap(tmp, frames)
        tmp.replace(self.rx_file)
        self._desc ^= 1
        self.sb.vsctl(*set_interface(self.name, options={"n_rxq_desc": self.RXQ_DESC[self._desc]}))
        self._reader = PcapReader(self.tx_file)

    def read_tx(self) -> list[bytes]:
        try:
            frames = self._pending + self._reader.read_new()
        except PcapError:  # truncated by a restart between two reads
            self._reader = PcapReader(self.tx_file)
            frames = self._pending + self._reader.read_new()
        self._pending = []
        return frames

    def rx_count(self) -> int:
        """Received packets over all starts of the device (a restart may reset them)."""
        raw = self.sb.port_stats().get(self.name, {}).get("rx_packets", 0)
        if raw < self._rx_last:
            self._rx_offset += self._rx_last
        self._rx_last = raw
        return self._rx_offset + raw

    def close(self) -> None:
        self._reader.close()
