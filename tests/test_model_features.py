"""Model features of the dpif-netdev.at reproductions, against upstream's facts:
meters (1102), conntrack NAT of a related ICMP error (1134), the dummy offload
provider's tunnel source port (1110), mod_vlan_vid (1107/1108)."""
from __future__ import annotations

import pytest

from datapath.model.meter import DropMeter


def test_kbps_bucket_follows_upstream_rounds() -> None:
    meter = DropMeter("kbps", rate=1, burst=2)
    meter.advance(5000)
    assert [meter.offer(60) for _ in range(7)] == [True] * 4 + [False] * 3  # 1920 of 2000 bits
    meter.advance(870)  # 80 + 870 bits
    assert [meter.offer(60) for _ in range(5)] == [True] + [False] * 4
    meter.advance(10)  # 470 + 10 bits
    assert [meter.offer(60) for _ in range(5)] == [True] + [False] * 4
    assert (meter.packet_in, meter.byte_in, meter.band_packets, meter.band_bytes) == (17, 1020, 11, 660)


def test_pktps_bucket_needs_a_whole_packet() -> None:
    meter = DropMeter("pktps", rate=1, burst=1)
    assert [meter.offer(60) for _ in range(5)] == [True] + [False] * 4
    meter.advance(870)
    assert not any(meter.offer(60) for _ in range(5))  # 0.87 of a packet is not enough
    meter.advance(130)
    assert meter.offer(60)
    assert meter.stats(1) == ("meter:1 flow_count:1 packet_in_count:11 byte_in_count:660 "
                              "duration:0.0s bands:\n0: packet_count:9 byte_count:540\n")


def test_bucket_never_holds_more_than_its_burst() -> None:
    meter = DropMeter("kbps", rate=1000, burst=1)
    meter.advance(60000)
    assert meter.tokens == 1000
    with pytest.raises(ValueError):
        DropMeter("bps", 1, 1)


def test_conntrack_nats_a_related_icmp_error_as_upstream_expects() -> None:
    from datapath import model
    from datapath.model.actions import output
    from datapath.model.conntrack import Conntrack, CtCommitDnat
    from datapath.offloads import CsumState, RxFlags, TxOffloads
    from fixtures.frames import compose, with_ip_csum_flipped
    ct = Conntrack()
    nat = CtCommitDnat(ct, "192.168.1.1")
    good = compose("tcp", 4)
    model.forward(good, [nat, output("p2")], TxOffloads())  # commits the connection
    assert (ct.checked, ct.err) == (1, 0)
    bad = with_ip_csum_flipped(good)
    out = model.forward(bad, [nat, output("p2")], TxOffloads())
    assert out.frames == [bad] and (ct.checked, ct.err) == (2, 1)  # invalid: left as it is
    model.forward(bad, [nat, output("p2")], TxOffloads(), RxFlags(ip=CsumState.BAD))
    assert (ct.checked, ct.err) == (2, 2)  # no look, one more error
    icmp = bytes.fromhex(
        "0a8f393fe0738abf7e2f05840800450000440001000040010364c0a87b02c0a87b010303746c00000000"
        "45000028000100004006037bc0a87b01c0a87b021451d4780000000000000000500220002fc40000")
    out = model.forward(icmp, [nat, output("p2")], TxOffloads.parse("ip"), RxFlags(ip=CsumState.GOOD))
    assert out.frames[0].hex() == (
        "0a8f393fe0738abf7e2f05840800450000440001000040017d64c0a87b02c0a801010303fa6b"
        "00000000450000280001000040067d7bc0a80101c0a87b021451d478000000000000000050022000"
        "a9c40000")


def test_dummy_offload_source_port_is_upstreams_43938() -> None:
    from datapath.model.tunnel import fnv1a_32
    from fixtures.frames import ndp_solicit
    assert fnv1a_32(b"") == 2166136261 and fnv1a_32(b"a") == 0xE40C292C  # FNV-1a test vectors
    assert fnv1a_32(ndp_solicit()) & 0xFFFF == 43938


def test_mod_vlan_vid_keeps_pcp() -> None:
    from datapath.model.actions import SetVlanVid
    from datapath.model.packet import Packet
    pkt = Packet.parse(bytes.fromhex("000102030405" "00060708090a" "8100" "e063" "0806") + bytes(46))
    SetVlanVid(11).apply(pkt)
    assert pkt.data[14:16].hex() == "e00b"
    with pytest.raises(NotImplementedError):
        SetVlanVid(11).apply(Packet.parse(bytes(60)))
