"""TSO on DPDK ports: the one DPDK port kind that hands OVS TSO packets is a
vhost-user port whose guest negotiated host TSO.

testpmd plays the guest (virtio-user): its csum engine with `tso set SEGSZ`
hands a large TCP frame to OVS as one virtio GSO packet (L4 checksum left
partial, segment size SEGSZ).  OVS, with userspace TSO on, must segment it in
software for a net_pcap port, which offers no TSO: every segment is compared
with the model field by field, and the payload reassembled byte for byte.
(net_tap and net_pcap receive no TSO packets: the two_ports TSO cases skip on
them, as the capability matrix says.)
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends.env import RealEnv
from datapath.backends.testpmd import CsumLayer, CsumMode, FwdMode
from datapath.backends.vhost import GuestInjector
from datapath.expect import send_and_expect
from datapath.model import gso
from datapath.model.actions import output
from datapath.offloads import CsumState, RxFlags
from fixtures.frames import reassembled, tcp_payload, tso_frame
from fixtures.records import record_for
from fixtures.vhost_guest import vhost_guest_ports

pytestmark = pytest.mark.requires(backend="dpdk")

SEGSZ = 500
# Environment facts: this guest negotiates no guest TSO, net_pcap has no TSO.
LOG_ALLOW = (r"netdev_dpdk\|WARN\|v1: Tx TSO offload is not supported",
             r"netdev_dpdk\|WARN\|p2: Tx TSO offload is not supported")


@pytest.mark.parametrize("ipv", [4, 6], ids=["in4", "in6"])
def test_vhost_guest_tso_to_net_pcap(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest,
                                     ipv: int) -> None:
    """A 2000-byte TCP payload sent by the guest as one TSO packet (segsz 500).

    Verifies: the vhost port negotiated host TSO with the guest (the guest's
    virtio-user port offers and uses TCP_TSO); OVS received one packet and p2
    sent the four segments the model computes (RFC 9293 segmentation: sequence
    numbers, flags, IPv4 total length and id, IPv6 payload length, every
    checksum); the payload reassembles to what was sent."""
    frame = tso_frame(ipv, 2000)
    env = real_env("dpdk", tso=True)
    env.sb.allow_log(*LOG_ALLOW)
    v1, p2, guest = vhost_guest_ports(env, [frame])
    pmd = guest.pmd
    pmd.stop_port(0)
    for layer in (CsumLayer.TCP, CsumLayer.UDP):  # virtio has no IPv4 header checksum offload
        pmd.set_csum(0, layer, CsumMode.HW)
    pmd.set_tso(0, SEGSZ)
    pmd.start_port(0)
    v1.wait_connected()
    conf = pmd.tx_offload_configuration(0)
    assert "TCP_TSO" in conf, f"the guest does not use TSO: {conf}; OVS's port: {v1.status}"
    env.sb.ofctl("add-flow", "br1", "in_port=1,actions=output:2")
    rx = RxFlags(l4=CsumState.PARTIAL, tso_segsz=SEGSZ)
    expected = model.forward(frame, [output("p2")], p2.tx, rx)
    assert len(expected.frames) == gso.n_segments(model.receive(frame, rx)) == 4
    pmd.clear_port_stats()
    captured = send_and_expect(GuestInjector(guest, v1, FwdMode.CSUM), [frame], p2, expected,
                               title=f"testpmd tso {SEGSZ} -> v1 -> p2 (net_pcap)",
                               steps=record_for(request.node).steps, timeout=15)
    assert reassembled(captured, frame) == tcp_payload(frame)
    assert pmd.port_stats(0).tx_packets == 1, "the guest sent more than one packet"
    pmd.stop_forwarding()

