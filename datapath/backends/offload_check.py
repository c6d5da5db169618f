"""What OVS reports about a port's tx offloads against what the device negotiated.

OVS documents the rule (Documentation/topics/userspace-checksum-offloading.rst,
userspace-tso.rst): a netdev announces the offloads its driver supports, and
the datapath uses them; TSO only with userspace-tso-enable.  The Interface
status keys tx_*_offload show what OVS took.  A difference from the device's
side is a failure that shows both sides, never a skip.

The device's side comes from outside OVS: dpdk-testpmd's `show port N
tx_offload capabilities` for a DPDK driver, the negotiated virtio feature bits
for a vhost-user port, ethtool's features for a kernel device.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable

from harness.ifstatus import Status

# DPDK tx offload capability -> the Interface status key OVS reports it under.
DPDK_TX_KEYS = {
    "IPV4_CKSUM": "tx_ip_csum_offload",
    "TCP_CKSUM": "tx_tcp_csum_offload",
    "UDP_CKSUM": "tx_udp_csum_offload",
    "SCTP_CKSUM": "tx_sctp_csum_offload",
    "OUTER_IPV4_CKSUM": "tx_out_ip_csum_offload",
    "OUTER_UDP_CKSUM": "tx_out_udp_csum_offload",
    "TCP_TSO": "tx_tcp_seg_offload",
    "VXLAN_TNL_TSO": "tx_vxlan_tso_offload",
    "GENEVE_TNL_TSO": "tx_geneve_tso_offload",
    "GRE_TNL_TSO": "tx_gre_tso_offload",
}
TSO_KEYS = frozenset({"tx_tcp_seg_offload", "tx_vxlan_tso_offload", "tx_geneve_tso_offload",
                      "tx_gre_tso_offload"})
# virtio-net feature bits (virtio 1.x, 5.1.3): what the guest accepts from us.
VIRTIO_NET_F_GUEST_CSUM = 1
VIRTIO_NET_F_GUEST_TSO4 = 7
VIRTIO_NET_F_GUEST_TSO6 = 8


class OffloadMismatch(AssertionError):
    """OVS reports other tx offloads than the device (driver, virtio features,
    kernel ethtool features) negotiated; says both."""


def _said(value: bool | None) -> str:
    return "(no key)" if value is None else str(value).lower()


def _report(port: str, lines: list[str], ovs: Status, device: str) -> None:
    if lines:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(ovs.raw.items()) if k.startswith("tx_"))
        raise OffloadMismatch(f"offload mismatch on {port}:\n  " + "\n  ".join(lines)
                              + f"\n  OVS (Interface status): {shown or '(no tx_* keys)'}"
                              + f"\n  device: {device}")


def check_dpdk(port: str, status: Status, capabilities: Iterable[str],
               userspace_tso: bool) -> None:
    """A DPDK port: each offload the driver offers is in use (TSO ones only with
    userspace TSO), and OVS claims none the driver lacks."""
    caps = set(capabilities)
    lines = []
    for cap, key in DPDK_TX_KEYS.items():
        want = cap in caps and (userspace_tso or key not in TSO_KEYS)
        got = status.tx_offload(key)
        if got is not want:
            lines.append(f"{key}: OVS says {_said(got)}, the driver "
                         f"{'offers' if cap in caps else 'lacks'} {cap}"
                         + ("" if key not in TSO_KEYS else
                            f" (userspace TSO {'on' if userspace_tso else 'off'})"))
    _report(port, lines, status, "tx_offload capabilities " + " ".join(sorted(caps)))


def check_vhost(port: str, status: Status, userspace_tso: bool) -> None:
    """A vhost-user port: OVS may leave TCP/UDP checksums to the guest only if
    the guest negotiated VIRTIO_NET_F_GUEST_CSUM, and TSO only with GUEST_TSO4
    and GUEST_TSO6 (and userspace TSO); it must use what was negotiated."""
    features = status.features or 0

    def has(bit: int) -> bool:
        return bool(features >> bit & 1)
    want = {"tx_tcp_csum_offload": has(VIRTIO_NET_F_GUEST_CSUM),
            "tx_udp_csum_offload": has(VIRTIO_NET_F_GUEST_CSUM),
            "tx_tcp_seg_offload": userspace_tso and has(VIRTIO_NET_F_GUEST_CSUM)
            and has(VIRTIO_NET_F_GUEST_TSO4) and has(VIRTIO_NET_F_GUEST_TSO6)}
    lines = [f"{key}: OVS says {_said(status.tx_offload(key))}, the negotiated features "
             f"{'allow' if on else 'do not allow'} it"
             for key, on in want.items() if status.tx_offload(key) is not on]
    names = [n for bit, n in ((VIRTIO_NET_F_GUEST_CSUM, "GUEST_CSUM"),
                              (VIRTIO_NET_F_GUEST_TSO4, "GUEST_TSO4"),
                              (VIRTIO_NET_F_GUEST_TSO6, "GUEST_TSO6")) if has(bit)]
    _report(port, lines, status, f"negotiated virtio features {features:#x} "
            f"({', '.join(names) or 'no guest offloads'})")


def check_kernel(port: str, status: Status, features: dict[str, bool],
                 userspace_tso: bool) -> None:
    """A system port on a kernel device: with userspace TSO (the AF_PACKET socket
    then carries a virtio-net header) TCP/UDP checksum offload follows
    tx-checksum-ip-generic and TCP segmentation tx-tcp-segmentation; without
    it, nothing; IPv4 header checksum offload never (no such kernel offload)."""
    csum = userspace_tso and features.get("tx-checksum-ip-generic", False)
    want = {"tx_ip_csum_offload": False, "tx_tcp_csum_offload": csum,
            "tx_udp_csum_offload": csum,
            "tx_tcp_seg_offload": csum and features.get("tx-tcp-segmentation", False)}
    lines = [f"{key}: OVS says {_said(status.tx_offload(key))}, expected {_said(on)}"
             for key, on in want.items() if status.tx_offload(key) is not on]
    shown = {k: v for k, v in features.items() if k.startswith(("tx-checksum", "tx-tcp"))}
    _report(port, lines, status, f"ethtool -k: {shown}; userspace TSO "
            f"{'on' if userspace_tso else 'off'}")


@functools.cache
def driver_tx_capabilities(vdev: str) -> frozenset[str]:
    """The tx offload capabilities of a DPDK vdev driver, as dpdk-testpmd shows
    them (its own EAL, in a namespace of its own, so a net_tap's device goes
    when the namespace does).  `vdev` is the --vdev argument, e.g. net_tap0."""
    from datapath.backends.netns import Netns, unique_name
    from datapath.backends.testpmd import TestPmd
    ns = Netns(unique_name("probe"))
    try:
        pmd = TestPmd(["--no-huge", "-m", "256", "--in-memory", "--no-pci", "--lcores=(0-1)@(0)",
                       f"--vdev={vdev}"], ["--total-num-mbufs=2048"],
                      preexec_fn=ns.preexec())
        with pmd:
            return frozenset(pmd.tx_offload_capabilities(0))
    finally:
        ns.delete()
