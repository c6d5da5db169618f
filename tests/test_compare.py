"""Unit tests for evidence.compare: field diffs, sequence diffs, FrameMismatch."""

from __future__ import annotations

import pickle
import struct

import pytest
from scapy.contrib.geneve import GENEVE
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.layers.vxlan import VXLAN

import evidence.compare as compare
from evidence.compare import (
    FrameMismatch,
    assert_frames_equal,
    compare_frames,
    diff_frames,
    frame_summary,
)

MAC_A = "0a:8f:39:4f:e0:73"
MAC_B = "aa:55:aa:55:00:01"
PAYLOAD = b"0123456789abcdefghij"

TCP4 = bytes(
    Ether(dst=MAC_A, src=MAC_B)
    / IP(src="10.1.1.1", dst="10.1.1.2", id=0x1234, ttl=64)
    / TCP(sport=40000, dport=2222, seq=1, flags="PA")
    / PAYLOAD
)
UDP6 = bytes(
    Ether(dst=MAC_A, src=MAC_B)
    / IPv6(src="fd00::1", dst="fd00::2")
    / UDP(sport=1000, dport=2000)
    / PAYLOAD
)
INNER6 = (
    Ether(dst=MAC_B, src=MAC_A)
    / IPv6(src="fd01::1", dst="fd01::2")
    / UDP(sport=3000, dport=4000)
    / PAYLOAD
)
VXLAN4 = bytes(
    Ether(dst=MAC_A, src=MAC_B)
    / IP(src="172.31.1.1", dst="172.31.1.100")
    / UDP(sport=49152, dport=4789)
    / VXLAN(vni=1000)
    / INNER6
)
GENEVE4 = bytes(
    Ether(dst=MAC_A, src=MAC_B)
    / IP(src="172.31.1.1", dst="172.31.1.100")
    / UDP(sport=49152, dport=6081)
    / GENEVE(vni=123, proto=0x6558)
    / Ether(dst=MAC_B, src=MAC_A)
    / IP(src="10.2.2.1", dst="10.2.2.2")
    / TCP(sport=1234, dport=80, flags="S")
)
ARP_REQ = bytes(
    Ether(dst="ff:ff:ff:ff:ff:ff", src=MAC_B)
    / ARP(op=1, hwsrc=MAC_B, psrc="10.1.1.1", hwdst="00:00:00:00:00:00", pdst="10.1.1.2")
)

# Byte offsets used by the mutations below.
ETH, IP4, UDP_LEN, VXLAN_LEN, IP6 = 14, 20, 8, 8, 40
IP4_CHKSUM = ETH + 10
TCP4_DPORT = ETH + IP4 + 2
TCP4_FLAGS = ETH + IP4 + 13
OUTER_UDP_CHKSUM = ETH + IP4 + 6
INNER_IP6 = ETH + IP4 + UDP_LEN + VXLAN_LEN + ETH


def u16(frame: bytes, offset: int) -> int:
    return int(struct.unpack_from("!H", frame, offset)[0])


def mutate(frame: bytes, offset: int, new: bytes) -> bytes:
    """Return ``frame`` with ``new`` written at ``offset`` (no recomputation)."""
    out = bytearray(frame)
    out[offset : offset + len(new)] = new
    return bytes(out)


@pytest.mark.parametrize(
    "frame", [TCP4, UDP6, VXLAN4, GENEVE4, ARP_REQ], ids=["tcp4", "udp6", "vxlan", "geneve", "arp"]
)
def test_identical_frames_have_no_diff(frame: bytes) -> None:
    assert diff_frames(frame, bytes(frame)) == []
    assert compare_frames([frame, frame], [frame, frame]) == []


def test_ip_checksum_flip_is_reported_as_dissected() -> None:
    """A wrong IPv4 checksum is shown as received: scapy must not fix it."""
    good = u16(TCP4, IP4_CHKSUM)
    bad = good ^ 0x0100
    got = mutate(TCP4, IP4_CHKSUM, bad.to_bytes(2, "big"))
    assert diff_frames(TCP4, got) == [f"IP.chksum: expected 0x{good:04x}, got 0x{bad:04x}"]


def test_tcp_port_is_decimal() -> None:
    got = mutate(TCP4, TCP4_DPORT, (5201).to_bytes(2, "big"))
    assert diff_frames(TCP4, got) == ["TCP.dport: expected 2222, got 5201"]


def test_fields_are_listed_in_wire_order() -> None:
    """MAC, IP id/ttl, TCP flags: one line each, outermost first."""
    got = mutate(TCP4, 0, bytes.fromhex("0a8f394fe074"))
    got = mutate(got, ETH + 4, b"\x43\x21")  # IP.id
    got = mutate(got, ETH + 8, b"\x3f")  # IP.ttl 63
    got = mutate(got, TCP4_FLAGS, b"\x10")  # ACK only
    assert diff_frames(TCP4, got) == [
        "Ether.dst: expected 0a:8f:39:4f:e0:73, got 0a:8f:39:4f:e0:74",
        "IP.id: expected 0x1234, got 0x4321",
        "IP.ttl: expected 64, got 63",
        "TCP.flags: expected 0x018 (PA), got 0x010 (A)",
    ]


def test_ipv6_udp_fields() -> None:
    got = mutate(UDP6, ETH + 8 + 15, b"\x09")  # last byte of IPv6 src
    got = mutate(got, ETH + IP6 + 6, b"\x00\x00")  # UDP checksum
    assert diff_frames(UDP6, got) == [
        "IPv6.src: expected fd00::1, got fd00::9",
        f"UDP.chksum: expected 0x{u16(UDP6, ETH + IP6 + 6):04x}, got 0x0000",
    ]


def test_vxlan_outer_udp_checksum_zeroed() -> None:
    """The outer UDP checksum of a VXLAN frame is named outer.UDP."""
    expected_csum = u16(VXLAN4, OUTER_UDP_CHKSUM)
    assert expected_csum != 0
    got = mutate(VXLAN4, OUTER_UDP_CHKSUM, b"\x00\x00")
    assert diff_frames(VXLAN4, got) == [
        f"outer.UDP.chksum: expected 0x{expected_csum:04x}, got 0x0000"
    ]


def test_vxlan_inner_ipv6_plen() -> None:
    """Layers after the tunnel header are inner.*, even for a class seen once."""
    plen = u16(VXLAN4, INNER_IP6 + 4)
    got = mutate(VXLAN4, INNER_IP6 + 4, (plen + 1).to_bytes(2, "big"))
    assert diff_frames(VXLAN4, got) == [f"inner.IPv6.plen: expected {plen}, got {plen + 1}"]


def test_vxlan_vni_and_inner_udp_port() -> None:
    vni_offset = ETH + IP4 + UDP_LEN + 4
    inner_udp = INNER_IP6 + IP6
    got = mutate(VXLAN4, vni_offset, (1001).to_bytes(3, "big"))
    got = mutate(got, inner_udp + 2, (4001).to_bytes(2, "big"))
    assert diff_frames(VXLAN4, got) == [
        "outer.VXLAN.vni: expected 1000, got 1001",
        "inner.UDP.dport: expected 4000, got 4001",
    ]


def test_geneve_is_dissected_to_the_inner_frame() -> None:
    inner_ip = ETH + IP4 + UDP_LEN + 8 + ETH
    got = mutate(GENEVE4, inner_ip + IP4 + 2, (8080).to_bytes(2, "big"))
    got = mutate(got, ETH + 8, b"\x01")  # outer IP ttl
    assert diff_frames(GENEVE4, got) == [
        "outer.IP.ttl: expected 64, got 1",
        "inner.TCP.dport: expected 80, got 8080",
    ]


def test_arp_fields() -> None:
    got = mutate(ARP_REQ, ETH + 7, b"\x02")  # op reply
    got = mutate(got, ETH + 14, bytes([10, 1, 1, 9]))  # psrc
    assert diff_frames(ARP_REQ, got) == [
        "ARP.op: expected 1, got 2",
        "ARP.psrc: expected 10.1.1.1, got 10.1.1.9",
    ]


def test_payload_difference_is_summarised() -> None:
    offset = len(TCP4) - len(PAYLOAD) + 5
    got = mutate(TCP4, offset, b"XY")
    assert diff_frames(TCP4, got) == [
        "Raw.load: 2 bytes differ, first at offset 5 (expected 0x35, got 0x58)"
    ]


def test_trailing_bytes_change_length_and_layers() -> None:
    assert diff_frames(TCP4, TCP4 + b"\x00" * 4) == [
        "layers: expected Ether/IP/TCP/Raw, got Ether/IP/TCP/Raw/Padding",
        f"length: expected {len(TCP4)} bytes, got {len(TCP4) + 4} bytes",
    ]


def test_different_layer_stacks_are_named_first_then_common_prefix() -> None:
    udp4 = bytes(
        Ether(dst=MAC_A, src=MAC_B)
        / IP(src="10.1.1.1", dst="10.1.1.2", id=0x1234, ttl=64)
        / UDP(sport=40000, dport=2222)
        / PAYLOAD
    )
    lines = diff_frames(TCP4, udp4)
    assert lines[0] == "layers: expected Ether/IP/TCP/Raw, got Ether/IP/UDP/Raw"
    assert lines[1] == f"length: expected {len(TCP4)} bytes, got {len(udp4)} bytes"
    assert "IP.proto: expected 6, got 17" in lines
    assert not any(line.startswith(("TCP.", "UDP.", "Raw.")) for line in lines)


def test_fallback_when_dissection_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Differing bytes always yield at least one line."""
    monkeypatch.setattr(compare, "dissect_layers", lambda data: [])
    assert diff_frames(b"\x01\x02\x03", b"\x01\x02\x07") == [
        "bytes: first difference at offset 2 (expected 0x03, got 0x07)"
    ]


def test_empty_frame() -> None:
    lines = diff_frames(ARP_REQ, b"")
    assert lines[0] == "layers: expected Ether/ARP, got (empty)"
    assert lines[1] == f"length: expected {len(ARP_REQ)} bytes, got 0 bytes"


def test_compare_count_mismatch_missing_frame() -> None:
    lines = compare_frames([TCP4, UDP6, ARP_REQ], [TCP4, ARP_REQ])
    assert lines[0] == "frame count: expected 3, got 2"
    assert lines[1].startswith("frame 1: missing, expected Ether / IPv6 / UDP")
    assert len(lines) == 2


def test_compare_count_mismatch_extra_frame() -> None:
    lines = compare_frames([TCP4], [TCP4, ARP_REQ])
    assert lines == [
        "frame count: expected 1, got 2",
        f"frame 1: unexpected extra frame {frame_summary(ARP_REQ)}",
    ]
    assert "ARP" in lines[1] and f"({len(ARP_REQ)} bytes)" in lines[1]


def test_compare_changed_and_extra_frames_per_index() -> None:
    bad = mutate(TCP4, TCP4_DPORT, (5201).to_bytes(2, "big"))
    lines = compare_frames([UDP6, TCP4], [UDP6, bad, ARP_REQ])
    assert lines == [
        "frame count: expected 2, got 3",
        "frame 1:",
        "  TCP.dport: expected 2222, got 5201",
        f"frame 2: unexpected extra frame {frame_summary(ARP_REQ)}",
    ]


def test_compare_same_count_diff() -> None:
    bad = mutate(VXLAN4, OUTER_UDP_CHKSUM, b"\x00\x00")
    lines = compare_frames([TCP4, VXLAN4], [TCP4, bad])
    csum = u16(VXLAN4, OUTER_UDP_CHKSUM)
    assert lines == ["frame 1:", f"  outer.UDP.chksum: expected 0x{csum:04x}, got 0x0000"]


def test_compare_reordered_frames() -> None:
    lines = compare_frames([TCP4, UDP6, ARP_REQ], [ARP_REQ, TCP4, UDP6])
    assert lines == ["same frames, different order: got[i] = expected[p[i]] with p = [2, 0, 1]"]


def test_compare_reordered_duplicates() -> None:
    lines = compare_frames([TCP4, TCP4, UDP6], [UDP6, TCP4, TCP4])
    assert lines == ["same frames, different order: got[i] = expected[p[i]] with p = [2, 0, 1]"]


def test_frame_mismatch_lists_fields_before_hex() -> None:
    bad = mutate(TCP4, TCP4_DPORT, (5201).to_bytes(2, "big"))
    with pytest.raises(FrameMismatch) as info:
        assert_frames_equal([TCP4], [bad], context="p2 tx")
    err = info.value
    assert isinstance(err, AssertionError)
    text = str(err)
    assert text.splitlines()[:3] == ["p2 tx", "frame 0:", "  TCP.dport: expected 2222, got 5201"]
    assert text.index("TCP.dport") < text.index(TCP4.hex()) < text.index(bad.hex())
    assert err.lines == ["frame 0:", "  TCP.dport: expected 2222, got 5201"]
    assert err.expected == [TCP4] and err.got == [bad]
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == text


def test_frame_mismatch_computes_lines_itself() -> None:
    err = FrameMismatch([TCP4], [])
    assert str(err).startswith(
        "frame count: expected 1, got 0\nframe 0: missing, expected Ether / IP / TCP"
    )


def test_assert_frames_equal_passes_on_equal() -> None:
    assert_frames_equal([TCP4, bytearray(UDP6)], [bytes(TCP4), UDP6])
