"""Real port types: what OVS negotiates with the kernel and with DPDK drivers,
and frames through net_pcap and vhost-user (dpdk-testpmd) ports.

These cases are about one backend each and run whenever that backend can run
here (root, a DPDK build), whatever --backend says; --backend selects the
backends of the shared checksum cases (the `two_ports` topology).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends import dpdk, tap
from datapath.backends.env import RealEnv
from datapath.backends.kernel import tx_from_status
from datapath.backends.netns import ethtool_features
from datapath.backends.offload_check import check_dpdk, check_kernel, check_vhost, driver_tx_capabilities
from datapath.backends.testpmd import CsumLayer, CsumMode, FwdMode, TestPmdError
from datapath.backends.vhost import GuestInjector
from datapath.expect import send_and_expect
from datapath.model.actions import mod_tp_dst, output
from datapath.offloads import CsumState, RxFlags, TxOffloads
from fixtures.frames import compose, with_l4_csum
from fixtures.records import record_for
from fixtures.vhost_guest import vhost_guest_ports
from harness.wait import wait_until

TSO = [pytest.param(False, id="tso_off"), pytest.param(True, id="tso_on")]
VIRTIO_NET_F_CSUM = 1 << 0  # the guest may send partial checksums
STATUS_OFFLOAD_KEYS = ("tx_ip_csum_offload", "tx_tcp_csum_offload", "tx_udp_csum_offload",
                       "tx_tcp_seg_offload")


@pytest.mark.requires(backend="tap")
@pytest.mark.parametrize("tso", TSO)
def test_tap_port_offloads_follow_userspace_tso(real_env: Callable[..., RealEnv], tso: bool) -> None:
    """A tap port: OVS asks the kernel (TUNSETOFFLOAD) for checksum offload always
    and for TSO4/TSO6 only with userspace TSO (Documentation/topics/userspace-tso).

    Verifies, on the tap's kernel side, before and after it moves to the peer
    namespace: tx-checksum-ip-generic on; tx-tcp-segmentation on exactly when
    userspace-tso-enable is true.  Interface status must not claim an offload
    the kernel did not grant (OVS 4.0 reports no tx_*_offload keys for tap ports
    at all: dpif_port_add() skips netdev_set_dpif_type() for them)."""
    env = real_env("tap", tso=tso)
    tap.add_bridge(env.sb, "br1")
    port = env.own(tap.TapPort(env.sb, "br1", "p1", 1, env.switch_ns, env.peer("p1")))
    assert port.features.get("tx-checksum-ip-generic") is True, port.features
    assert port.features.get("tx-tcp-segmentation") is tso, port.features
    assert port.features.get("tx-tcp6-segmentation") is tso, port.features
    after = ethtool_features(env.peer("p1"), "p1")
    for key in ("tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-tcp6-segmentation"):
        assert after.get(key) == port.features.get(key), key
    assert port.status.driver_name == "tun", port.status
    for key in STATUS_OFFLOAD_KEYS:  # absent on OVS 4.0; when present, they must be true
        granted = {"tx_tcp_csum_offload": True, "tx_udp_csum_offload": True,
                   "tx_ip_csum_offload": False, "tx_tcp_seg_offload": tso}[key]
        assert port.status.tx_offload(key) in (None, granted), (key, port.status)


@pytest.mark.requires(backend="tap")
@pytest.mark.parametrize("tso", TSO)
@pytest.mark.parametrize("csum", [False, True], ids=["tx_off", "tx_on"])
def test_veth_port_offloads_follow_ethtool(real_env: Callable[..., RealEnv], tso: bool, csum: bool) -> None:
    """A system port on a veth: OVS reads the device's ethtool features when it
    opens it, and only with userspace TSO (the AF_PACKET socket needs a
    virtio-net header to offload anything).

    Verifies Interface status: with userspace TSO off every tx_*_offload is
    false; with it on, TCP and UDP checksum offload follow tx-checksum-ip-generic
    and TCP segmentation follows tx-tcp-segmentation; IPv4 header checksum
    offload is never claimed (a kernel device has no such offload)."""
    env = real_env("tap", tso=tso)
    tap.add_bridge(env.sb, "br1")
    port = env.own(tap.VethPort(env.sb, "br1", "p2", 2, env.switch_ns, env.peer("p2"),
                                userspace_tso=tso, csum=csum, tso=True))
    feats = port.features
    assert feats.get("tx-checksum-ip-generic") is csum, feats
    check_kernel(port.name, port.status, feats, userspace_tso=tso)


@pytest.mark.requires(backend="dpdk")
@pytest.mark.parametrize("tso", TSO)
def test_dpdk_net_tap_offloads(real_env: Callable[..., RealEnv], tso: bool) -> None:
    """A dpdk port on a net_tap vdev (n_rxq=2: net_tap needs as many rx as tx queues).

    Verifies Interface status: driver net_tap, rx checksum offload on, and the
    tx offloads exactly those net_tap offers (dpdk-testpmd's view of the same
    driver), TSO ones only with userspace TSO: IPv4, TCP and UDP checksums
    always, TCP segmentation exactly when userspace TSO is on.  A difference is
    a failure showing both sides.  Also that the PMD's kernel tap moved to the
    peer namespace and is up there."""
    env = real_env("dpdk", tso=tso)
    tap.add_bridge(env.sb, "br1")
    port = env.own(dpdk.DpdkTapPort(env.sb, "br1", "p1", 1, env.switch_ns, env.peer("p1")))
    status = port.status
    assert status.driver_name == "net_tap", status
    assert status.rx_csum_offload is True, status
    check_dpdk(port.name, status, driver_tx_capabilities("net_tap0,iface=ovstcaps0"), tso)
    offloads, seg = tx_from_status(status)
    assert offloads.advertised >= {"ip", "l4"}, status
    assert seg is tso, status
    assert "p1" in env.peer("p1").links()


@pytest.mark.requires(backend="dpdk")
def test_dpdk_net_pcap_forward(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest) -> None:
    """Frames in and out through pcap files: p1 and p2 are net_pcap ports, and a
    flow rewrites the TCP/UDP destination port on the way.

    Verifies every frame that leaves p2 against the model (net_pcap stamps no
    checksum flags and offers no tx offload: incremental checksum updates, a bad
    checksum stays bad), over two sends (the rx port restarts on a new file)."""
    env = real_env("dpdk")
    sb = env.sb
    tap.add_bridge(sb, "br1")
    p1 = dpdk.DpdkPcapPort(sb, "br1", "p1", 1)
    p2 = dpdk.DpdkPcapPort(sb, "br1", "p2", 2)
    env.cleanup.defer("close pcap readers", lambda: (p1.close(), p2.close()))
    assert p1.tx == TxOffloads() and not p1.tso, p1.status
    actions = [mod_tp_dst(2222), output("p2")]
    sb.ofctl("add-flow", "br1", "in_port=1,actions=mod_tp_dst:2222,output:2")
    steps = record_for(request.node).steps
    for title, frames in (("tcp4 good+bad", [compose("tcp", 4),
                                             with_l4_csum(compose("tcp", 4), 0xDEAD)]),
                          ("udp6", [compose("udp", 6)])):
        expected = model.Expected(frames=[])
        for frame in frames:
            expected.extend(model.forward(frame, actions, p2.tx, p1.rx_flags_for(frame)))
        send_and_expect(p1, frames, p2, expected, title=title, steps=steps)


# ----------------------------------------------------------------------------
# vhost-user with dpdk-testpmd as the guest


@pytest.mark.requires(backend="dpdk")
@pytest.mark.parametrize("engine", ["io", "csum"])
def test_vhost_guest_to_ovs(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest,
                            engine: str) -> None:
    """testpmd (virtio-user) sends into OVS through a dpdkvhostuserclient port;
    OVS rewrites the L4 destination port and sends to a net_pcap port.

    io: the guest passes frames as they are: no checksum flags, the good and
    the bad checksum are updated incrementally.  csum with `csum set tcp|udp hw
    0`: the guest hands them over as virtio NEEDS_CSUM, so OVS holds them
    L4-partial and must finish the checksum itself for the net_pcap port (no tx
    offload): both frames leave with a correct checksum.  Also verifies the
    guest's port counters and that the partial flags were negotiated."""
    # One flow: OVS may reorder frames of different flows within one rx batch.
    frames = [compose("tcp", 4), with_l4_csum(compose("tcp", 4), 0xBEEF)]
    env = real_env("dpdk")
    v1, p2, guest = vhost_guest_ports(env, frames)
    pmd = guest.pmd
    rx = RxFlags()
    if engine == "csum":
        pmd.stop_port(0)
        for layer in (CsumLayer.IP, CsumLayer.TCP, CsumLayer.UDP):
            pmd.set_csum(0, layer, CsumMode.SW if layer is CsumLayer.IP else CsumMode.HW)
        assert pmd.csum_show(0).get("TCP") is CsumMode.HW
        pmd.start_port(0)
        v1.wait_connected()
        caps = pmd.tx_offload_capabilities(0)
        features = v1.status.features or 0
        # virtio-user offers TCP/UDP tx checksum offload exactly when the vhost
        # side (OVS) offered VIRTIO_NET_F_CSUM: either missing is OVS's doing.
        if not {"TCP_CKSUM", "UDP_CKSUM"} <= caps or not features & VIRTIO_NET_F_CSUM:
            pytest.fail(f"offload mismatch on {v1.name}: the guest's virtio-user device "
                        f"offers tx offloads {sorted(caps)}; OVS's vhost port negotiated "
                        f"features {features:#x} (VIRTIO_NET_F_CSUM "
                        f"{'on' if features & VIRTIO_NET_F_CSUM else 'off'}), "
                        f"status {v1.status}", pytrace=False)
        assert {"TCP_CKSUM", "UDP_CKSUM"} <= pmd.tx_offload_configuration(0)
        rx = RxFlags(l4=CsumState.PARTIAL)
    env.sb.ofctl("add-flow", "br1", "in_port=1,actions=mod_tp_dst:2222,output:2")
    actions = [mod_tp_dst(2222), output("p2")]
    expected = model.Expected(frames=[])
    for frame in frames:
        expected.extend(model.forward(frame, actions, p2.tx, rx))
    pmd.clear_port_stats()
    send_and_expect(GuestInjector(guest, v1, FwdMode(engine)), frames, p2, expected,
                    title=f"testpmd {engine} -> v1 -> p2",
                    steps=record_for(request.node).steps, timeout=15)
    stats = pmd.port_stats(1)
    assert stats.rx_packets == len(frames), stats
    assert pmd.port_stats(0).tx_packets == len(frames)
    pmd.stop_forwarding()


@pytest.mark.requires(backend="dpdk")
def test_ovs_to_vhost_guest(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest) -> None:
    """OVS sends to a dpdkvhostuserclient port; testpmd (io engine) writes what
    its virtio-user port receives to a pcap file.

    Verifies the frames the guest got against the model (from a net_pcap port:
    no flags, incremental update), the guest's rx counter, and that the OVS
    port's negotiated offloads are in its status."""
    env = real_env("dpdk")
    v1, p2, guest = vhost_guest_ports(env, [])
    pmd = guest.pmd
    for key in STATUS_OFFLOAD_KEYS:
        assert v1.status.tx_offload(key) is not None, v1.status
    check_vhost(v1.name, v1.status, userspace_tso=False)
    info = pmd.port_info(0)
    assert info.driver == "net_virtio_user" and info.link_up, info
    pmd.start_forwarding(FwdMode.IO)
    env.sb.ofctl("add-flow", "br1", "in_port=2,actions=mod_tp_dst:2222,output:1")
    actions = [mod_tp_dst(2222), output("v1")]

    class GuestCapture:
        name = "v1 (testpmd io -> pcap)"

        def read_tx(self) -> list[bytes]:
            return guest.received()
    sent = 0
    # One flow per send: OVS may reorder frames of different flows in one rx batch.
    for title, frames in (("tcp4", [compose("tcp", 4)]),
                          ("udp6 good+bad", [compose("udp", 6),
                                             with_l4_csum(compose("udp", 6), 0x1234)])):
        expected = model.Expected(frames=[])
        for frame in frames:
            expected.extend(model.forward(frame, actions, v1.tx, p2.rx_flags_for(frame)))
        send_and_expect(p2, frames, GuestCapture(), expected,  # type: ignore[arg-type]
                        title=f"p2 -> v1 -> testpmd: {title}",
                        steps=record_for(request.node).steps, timeout=15)
        sent += len(frames)
    wait_until(lambda: pmd.port_stats(0).rx_packets >= sent, 5,
               what="testpmd port 0 to count the frames")
    with pytest.raises(TestPmdError, match="stop port 0 first|Please stop"):
        pmd.set_csum(0, CsumLayer.TCP, CsumMode.HW)  # refused while the port runs: the API says so
    pmd.stop_forwarding()
