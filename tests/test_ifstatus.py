"""harness/ifstatus.py on what `ovs-vsctl get Interface NAME status statistics`
printed (OVS 4.0.0, recorded from the suite's ports; the vhost-user socket path
shortened, and the net_tap and tap counters made non-zero and distinct so that
each typed field is told apart): typed fields, `raw` for the rest, one clear
error for a malformed value."""
from __future__ import annotations

import pytest

from harness.control import Result
from harness.ifstatus import (
    TX_OFFLOAD_KEYS,
    IfStatusError,
    Statistics,
    Status,
    parse_interface,
    parse_map,
    read_interface,
)

OFFLOADS_OFF = ", ".join(f'{k}="false"' for k in sorted(TX_OFFLOAD_KEYS))

DUMMY = (
    '{tx_geneve_tso_offload="false", tx_gre_tso_offload="false", tx_ip_csum_offload="true", '
    'tx_out_ip_csum_offload="false", tx_out_udp_csum_offload="false", '
    'tx_sctp_csum_offload="false", tx_tcp_csum_offload="false", tx_tcp_seg_offload="false", '
    'tx_udp_csum_offload="false", tx_vxlan_tso_offload="false"}\n'
    "{rx_bytes=0, rx_custom_packets_1=0, rx_custom_packets_2=0, rx_packets=0, rx_q0_bytes=0, "
    "rx_q0_packets=0, tx_bytes=0, tx_packets=0, tx_q0_bytes=0, tx_q0_packets=0}\n")

NET_TAP = (
    '{bus_info="bus_name=vdev", driver_name=net_tap, if_descr="DPDK 25.11.4 net_tap", '
    'if_type="6", link_speed="10Gbps", max_hash_mac_addrs="0", max_mac_addrs="1", '
    'max_rx_pktlen="1518", max_rx_queues="64", max_tx_queues="64", max_vfs="0", '
    'max_vmdq_pools="0", min_rx_bufsize="0", n_rxq="2", n_txq="2", numa_id="0", port_no="0", '
    'rx-steering=rss, rx_csum_offload="true", tx_geneve_tso_offload="false", '
    'tx_gre_tso_offload="false", tx_ip_csum_offload="true", tx_out_ip_csum_offload="false", '
    'tx_out_udp_csum_offload="false", tx_sctp_csum_offload="false", '
    'tx_tcp_csum_offload="true", tx_tcp_seg_offload="true", tx_udp_csum_offload="true", '
    'tx_vxlan_tso_offload="false"}\n'
    "{ovs_rx_qos_drops=0, ovs_tx_failure_drops=0, ovs_tx_invalid_hwol_drops=0, "
    "ovs_tx_mtu_exceeded_drops=0, ovs_tx_qos_drops=0, rx_bytes=1420, rx_dropped=0, "
    "rx_errors=0, rx_mbuf_allocation_errors=0, rx_missed_errors=0, rx_packets=10, "
    "rx_q0_bytes=1420, rx_q0_errors=0, rx_q0_packets=10, rx_q1_bytes=0, rx_q1_errors=0, "
    "rx_q1_packets=0, tx_bytes=840, tx_dropped=2, tx_errors=1, tx_packets=6, tx_q0_bytes=840, "
    "tx_q0_packets=6, tx_q1_bytes=0, tx_q1_packets=0}\n")

AFXDP = (
    '{driver_name=veth, driver_version="1.0", firmware_version="", peer_ifindex="2", '
    + OFFLOADS_OFF + ", xdp-mode=native}\n"
    "{rx_bytes=0, rx_packets=0, tx_bytes=0, tx_packets=0, xsk_queue_0_rx_dropped=0, "
    "xsk_queue_0_rx_invalid_descs=0, xsk_queue_0_tx_invalid_descs=0}\n")

VHOST = (
    '{features="0x0000000950008000", mode=client, n_rxq="1", n_txq="1", num_of_vrings="2", '
    'numa="0", socket="v1.sock", status=connected, ' + OFFLOADS_OFF
    + ', vring_0_size="256", vring_1_size="256"}\n'
    "{ovs_rx_qos_drops=0, ovs_tx_failure_drops=0, ovs_tx_invalid_hwol_drops=0, "
    "ovs_tx_mtu_exceeded_drops=0, ovs_tx_qos_drops=0, ovs_tx_retries=0}\n")

TAP = ('{driver_name=tun, driver_version="1.6", firmware_version=""}\n'
       "{collisions=0, rx_bytes=0, rx_crc_err=0, rx_dropped=0, rx_errors=0, rx_frame_err=0, "
       "rx_missed_errors=0, rx_multicast_packets=0, rx_over_err=0, rx_packets=3, tx_bytes=0, "
       "tx_dropped=0, tx_errors=0, tx_packets=0}\n")


def test_dummy_port_offloads_and_counters() -> None:
    got = parse_interface("p1", DUMMY)
    assert got.status.tx_ip_csum_offload is True
    assert {k: got.status.tx_offload(k) for k in TX_OFFLOAD_KEYS} == {
        k: k == "tx_ip_csum_offload" for k in TX_OFFLOAD_KEYS}
    assert (got.status.driver_name, got.status.xdp_mode, got.status.rx_csum_offload) == (None,) * 3
    assert got.statistics.raw["rx_custom_packets_2"] == 0 and len(got.statistics.raw) == 10
    assert got.status.raw["tx_ip_csum_offload"] == "true" and len(got.status.raw) == 10


def test_dpdk_net_tap_driver_keys_and_counters() -> None:
    got = parse_interface("p1", NET_TAP)
    st = got.status
    assert (st.driver_name, st.rx_csum_offload, st.tx_tcp_seg_offload, st.tx_vxlan_tso_offload) \
        == ("net_tap", True, True, False)
    assert st.raw["bus_info"] == "bus_name=vdev" and st.raw["rx-steering"] == "rss"
    assert st.raw["if_descr"] == "DPDK 25.11.4 net_tap"
    s = got.statistics
    assert (s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.tx_dropped, s.tx_errors,
            s.rx_dropped, s.rx_errors) == (10, 1420, 6, 840, 2, 1, 0, 0)
    assert s.raw["rx_q0_packets"] == 10 and s.raw["ovs_tx_qos_drops"] == 0


def test_afxdp_mode_vhost_and_tap() -> None:
    assert parse_interface("p1", AFXDP).status.xdp_mode == "native"
    v1 = parse_interface("v1", VHOST).status
    assert (v1.features, v1.mode, v1.connection) == (0x950008000, "client", "connected")
    assert v1.raw["socket"] == "v1.sock"
    tap = parse_interface("p1", TAP)
    assert tap.status.driver_name == "tun" and tap.status.tx_tcp_seg_offload is None
    assert tap.status.raw["firmware_version"] == ""
    assert tap.statistics.rx_packets == 3


def test_absent_counters_read_zero_and_raw_says_so() -> None:
    s = parse_interface("v1", VHOST).statistics
    assert s.rx_packets == 0 and "rx_packets" not in s.raw
    assert Statistics.parse("{}") == Statistics({})


def test_quoted_values_with_escapes_commas_and_equals() -> None:
    assert parse_map(r'{a="x, y=z", b="say \"hi\"\\", c=3}') == {
        "a": "x, y=z", "b": 'say "hi"\\', "c": "3"}
    assert parse_map("{}") == {} and parse_map(" { } \n") == {}


@pytest.mark.parametrize("text, message", [
    ("tx_ip_csum_offload=true", "not an OVSDB map"),
    ('{a="1", b}', "malformed OVSDB map at 'b'"),
    ('{a="1",}', "malformed OVSDB map"),
    ('{a="1" b="2"}', "malformed OVSDB map"),
    ('{a="unterminated}', "malformed OVSDB map"),
    ("{a=1, a=2}", "key 'a' twice"),
])
def test_malformed_map_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(IfStatusError, match=message):
        parse_map(text)


@pytest.mark.parametrize("line, message", [
    ('{tx_tcp_seg_offload="yes"}', r"status:tx_tcp_seg_offload='yes' is not true or false"),
    ('{rx_csum_offload=""}', r"status:rx_csum_offload='' is not true or false"),
    ('{features="950008000"}', "status:features='950008000' is not a hexadecimal bit set"),
])
def test_malformed_status_value(line: str, message: str) -> None:
    with pytest.raises(IfStatusError, match=message):
        Status.parse(line)


def test_malformed_statistics_value_and_line_count() -> None:
    with pytest.raises(IfStatusError, match="statistics:rx_packets='12a' is not an integer"):
        Statistics.parse("{rx_packets=12a}")
    with pytest.raises(IfStatusError, match="expected the status and statistics lines for p1"):
        parse_interface("p1", DUMMY.splitlines()[0] + "\n")
    with pytest.raises(KeyError, match="not a tx offload status key"):
        Status.parse("{}").tx_offload("rx_csum_offload")


def test_frozen() -> None:
    got = parse_interface("p1", DUMMY)
    with pytest.raises(AttributeError):
        got.status.tx_ip_csum_offload = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        got.status.raw["x"] = "y"  # type: ignore[index]


def test_read_interface_is_one_pastable_vsctl_call() -> None:
    calls: list[tuple[str, ...]] = []

    class Fake:
        def vsctl(self, *args: str) -> Result:
            calls.append(args)
            return Result(["ovs-vsctl", *args], 0, AFXDP, "")

    assert read_interface(Fake(), "p1").status.xdp_mode == "native"
    assert calls == [("get", "Interface", "p1", "status", "statistics")]
