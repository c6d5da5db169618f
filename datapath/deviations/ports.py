"""The kind of tx port the model's frames leave by, where what OVS sends
depends on it.

netdev-dummy does a checksum it offers with OVS's own software path
(dp_packet_ol_send_prepare()), so what leaves is what OVS computes.  A Linux
port (netdev-linux: a tap, or a veth as a system port with userspace TSO) is
handed a TCP/UDP checksum it offers in a virtio-net header
(netdev_linux_prepend_vnet_hdr()): NEEDS_CSUM, csum_start and csum_offset, the
field seeded with the pseudo-header sum of the IP header's own lengths; the
kernel, or the NIC, sums from csum_start to the end of the frame.  The kernel
refuses a header whose checksum field does not lie within the frame
(net/packet/af_packet.c __packet_snd_vnet_parse(): hdr_len is raised to
csum_start + csum_offset + 2, and a hdr_len past the frame is -EINVAL), which
OVS logs as an error sending on the port.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from datapath.model import Expected
from datapath.model.hooks import NOT_SENT

_LINUX: list[bool] = [False]

# What OVS logs where the kernel refuses a frame it hands to a system port
# (netdev_linux_send(), rate-limited: 20 at once, then 5 a minute).
EINVAL_SEND_LOG = r"netdev_linux\|WARN\|error sending Ethernet packet on {port}: Invalid argument"


@contextlib.contextmanager
def linux_egress() -> Iterator[None]:
    """The frames the model computes in this block leave by a Linux port."""
    _LINUX.append(True)
    try:
        yield
    finally:
        _LINUX.pop()


def linux() -> bool:
    """Whether the tx port is a Linux one (see the module's docstring)."""
    return _LINUX[-1]


def lost_with_the_refused(expected: Expected) -> None:
    """The frames of one packet's outputs to one port go out in one batch, and
    netdev_linux_sock_batch_send() gives up on a batch at its first failed
    sendmmsg(): every frame after one the port refuses is lost with it
    (TRUNC_CSUM_PAST_END, already named by the refused one)."""
    known = expected.padded("ovs_allowed")
    refused = [i for i, ovs in enumerate(known) if set(ovs) == {NOT_SENT}]
    if not refused:
        return
    for i in range(refused[0] + 1, len(known)):
        if set(known[i]) != {NOT_SENT}:
            known[i] = {NOT_SENT: {}}
            expected.notes.append(f"frame {i}: lost with frame {refused[0]}, which the port "
                                  "refused, in the same output batch")
    expected.ovs_allowed = known
