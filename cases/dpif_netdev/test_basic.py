"""Basic receive and port status: dpif-netdev.at tests 1093 and 1114."""
from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from datapath.offloads import TX_FEATURES, TxOffloads
from fixtures.dpif_netdev.sequence import capture, expect_unchanged
from fixtures.frames import L7
from harness.ifstatus import read_interface
from harness.logscan import miss_upcall_keys
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain
from harness.wait import settled, wait_until

KEY_PREFIX = ("recirc_id(0),dp_hash(0),skb_priority(0),in_port(1),skb_mark(0),ct_state(0),"
              "ct_zone(0),ct_mark(0),ct_label(0),packet_type(ns=0,id=0),")
FLOWS = [
    ("eth(src=50:54:00:00:00:01,dst=50:54:00:00:02:00),eth_type(0x0800),"
     "ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,tos=0,ttl=64,frag=no),tcp(src=8,dst=9),"
     "tcp_flags(ack)", []),
    ("eth(src=50:54:00:00:00:05,dst=50:54:00:00:06:00),eth_type(0x0800),"
     "ipv4(src=10.0.0.5,dst=10.0.0.6,proto=6,tos=0,ttl=64,frag=no),tcp(src=8,dst=9),"
     "tcp_flags(ack)", ["--len", "1024"]),
]


def tcp_frame(n: int, length: int = 0) -> bytes:
    """netdev-dummy's frame for FLOWS[n]: the 64-byte payload 00..3f, or with
    --len LENGTH zero padding to LENGTH bytes."""
    a, b = (1, 2) if n == 0 else (5, 6)
    head = (Ether(src=f"50:54:00:00:00:0{a}", dst=f"50:54:00:00:0{b}:00")
            / IP(src=f"10.0.0.{a}", dst=f"10.0.0.{b}", ttl=64, id=0, flags=0)
            / TCP(sport=8, dport=9, flags="A", seq=0, ack=0, window=0))
    return bytes(head / Raw(L7 if not length else bytes(length - 54)))


FRAMES = [tcp_frame(0), tcp_frame(1, 1024)]


@pytest.mark.upstream("dpif-netdev - netdev-dummy/receive")
def test_netdev_dummy_receive(sandbox: Sandbox, case_record: CaseRecord) -> None:
    """A packet given as an ODP flow (with and without --len) misses and upcalls;
    the line after 'miss upcall' in the log must be the full datapath key.  The
    frames flooded to br0 (captured) must be the packets, unchanged."""
    sandbox.add_of_br("br0", *add_port("br0", "p1", type="dummy", ofport_request=1))
    sandbox.appctl("vlog/set", "dpif:dbg", "dpif_netdev:dbg")
    sandbox.ofctl("add-flow", "br0", "action=normal")
    local = capture(sandbox, "br0")
    sandbox.appctl("time/stop")
    sandbox.appctl("time/warp", "5000")
    for n, (flow, extra) in enumerate(FLOWS, start=1):
        sandbox.appctl("netdev-dummy/receive", "p1", f"in_port(1),{flow}", *extra)
        # Beyond upstream: NORMAL floods it, unchanged, to br0 (captured).
        expect_unchanged(local, [FRAMES[n - 1]], rx_name="p1", title=f"packet {n} to br0",
                         steps=case_record.steps)

        def miss_lines() -> list[str]:
            return miss_upcall_keys(sandbox.log.lines(after=sandbox.log.case))
        misses = wait_until(lambda: len(miss_lines()) >= n and miss_lines(), 5,
                            what=f"{n} 'miss upcall' log entries")
        assert misses[-1] == KEY_PREFIX + flow


STATUS_KEYS = ("tx_geneve_tso_offload", "tx_gre_tso_offload", "tx_ip_csum_offload",
               "tx_out_ip_csum_offload", "tx_out_udp_csum_offload", "tx_sctp_csum_offload",
               "tx_tcp_csum_offload", "tx_tcp_seg_offload", "tx_udp_csum_offload",
               "tx_vxlan_tso_offload")
# Which status keys each advertised netdev-dummy feature turns on (reference section 3).
FEATURE_KEYS = {"ip": ("tx_ip_csum_offload",), "l4": ("tx_tcp_csum_offload", "tx_udp_csum_offload"),
                "out_ip": ("tx_out_ip_csum_offload",), "out_udp": ("tx_out_udp_csum_offload",)}


def expected_status(tx: TxOffloads) -> dict[str, str]:
    on = {k for feat in tx.advertised for k in FEATURE_KEYS[feat]}  # _disabled changes nothing
    return {k: "true" if k in on else "false" for k in STATUS_KEYS}


@pytest.mark.upstream("dpif-netdev - check tx packet checksum offloading")
def test_tx_offload_status_defaults(sandbox: Sandbox) -> None:
    """A plain dummy port and the bridge's internal port advertise no tx offload."""
    sandbox.add_of_br("br0",
                      *chain(add_port("br0", "p1", type="dummy",
                                      options={"pstream": f"punix:{sandbox.rundir}/p0.sock"}),
                             ["set", "bridge", "br0", "datapath-type=dummy", "other-config:datapath-id=1234",
                              "fail-mode=secure"]))
    for iface in ("p1", "br0"):
        status = read_interface(sandbox, iface).status
        assert status.raw == expected_status(TxOffloads()), (iface, status)


@pytest.mark.parametrize("spec", ["ip", "l4", "out_ip", "out_udp", "ip,l4,out_ip,out_udp",
                                  "ip_disabled,l4_disabled,out_ip_disabled,out_udp_disabled"])
def test_tx_offload_status_follows_options(sandbox: Sandbox, spec: str) -> None:
    """Beyond upstream: each ol_*_tx_csum option turns on exactly its status keys,
    `_disabled` does not change them, and removing the options turns them off again."""
    from datapath.backends.dummy import DummyPort
    sandbox.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy")
    port = DummyPort(sandbox, "br1", "p1", 1)
    tx = TxOffloads.parse(spec)
    # ovs-vsctl returns once vswitchd applied the options (cur_cfg); the bridge
    # writes the Interface status in a transaction of its own afterwards.
    port.configure(tx=tx)
    want = expected_status(tx)
    assert settled(lambda: port.status().raw, want, what="p1's status to follow its options") \
        == want
    port.configure(tx=TxOffloads())
    want = expected_status(TxOffloads())
    assert settled(lambda: port.status().raw, want, what="p1's status to follow its options") \
        == want
    assert set(TX_FEATURES) == set(FEATURE_KEYS)
