"""datapath/model/nsh.py against independent encoders of RFC 8300's header:
`ovs-ofctl compose-packet --bare` (upstream's expected bytes in
system-traffic.at's nsh tests, facts) and scapy's NSH layer."""
from __future__ import annotations

import pytest
from scapy.contrib.nsh import NSH
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from datapath.model import nsh
from datapath.model.nsh import Nsh

# compose-packet --bare of upstream's NSH_HEADER (nsh - encap header) and
# NSH_HEADER_1 (nsh - replace header), and of its TCP_SYN_PKT.
ENCAP_HEADER = ("f2ff00000002f2ff00000001894f0fc60103001234ff11223344"
                "000000000000000000000000")
REPLACE_HEADER_1 = ("f2ff00000002f2ff00000001894f02060103000100030102030405060708090a0b0c"
                    "0d0e0f10")
TCP_SYN = ("f20000000002f20000000001080045000028000000004006b014c0a8000a0a00000a0400080000"
           "0000000000000050020000d9260000")
DST, SRC = "f2:ff:00:00:00:02", "f2:ff:00:00:00:01"


def test_encap_default_ttl_against_upstream() -> None:
    header = Nsh(spi=0x1234, si=255, context=(0x11223344, 0, 0, 0))
    got = nsh.encap(bytes.fromhex(TCP_SYN), header, DST, SRC)
    assert got.hex() == ENCAP_HEADER + TCP_SYN


def test_header_against_upstream_and_back() -> None:
    header = Nsh(spi=0x100, si=3, ttl=8,
                 context=(0x01020304, 0x05060708, 0x090A0B0C, 0x0D0E0F10))
    frame = nsh.encap(bytes.fromhex(TCP_SYN), header, DST, SRC)
    assert frame.hex() == REPLACE_HEADER_1 + TCP_SYN
    assert Nsh.unpack(frame[14:]) == (header, bytes.fromhex(TCP_SYN))
    assert nsh.decap(frame) == bytes.fromhex(TCP_SYN)


def test_header_against_scapy() -> None:
    inner = Ether(src="f2:00:00:00:00:01", dst="f2:00:00:00:00:02") / IP() / TCP()
    want = Ether(src=SRC, dst=DST, type=0x894F) / NSH(
        ttl=7, length=6, mdtype=1, nextproto=3, spi=0x101, si=4,
        context_header=bytes.fromhex("100f0e0d0c0b0a090807060504030201")) / inner
    header = Nsh(spi=0x101, si=4, ttl=7,
                 context=(0x100F0E0D, 0x0C0B0A09, 0x08070605, 0x04030201))
    assert nsh.encap(bytes(inner), header, DST, SRC) == bytes(want)


def test_mask_si_only_touches_nsh_frames() -> None:
    frame = bytes.fromhex(ENCAP_HEADER + TCP_SYN)
    masked = nsh.mask_si(frame)
    assert masked[nsh.SI_OFFSET] == 0 and masked[:nsh.SI_OFFSET] == frame[:nsh.SI_OFFSET]
    assert masked[nsh.SI_OFFSET + 1:] == frame[nsh.SI_OFFSET + 1:]
    assert nsh.mask_si(bytes.fromhex(TCP_SYN)) == bytes.fromhex(TCP_SYN)


def test_decap_refuses_what_it_does_not_model() -> None:
    with pytest.raises(AssertionError):
        nsh.decap(bytes.fromhex(TCP_SYN))
