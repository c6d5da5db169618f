"""The pure parts of the Linux-peer checks: ping's summary,
802.1Q tags, tunnel frame recognition, the kernel-feature probe's answer."""
from __future__ import annotations

import os

import pytest

from datapath import model
from datapath.model.actions import PushTunnel, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import TxOffloads
from fixtures.frames import compose
from fixtures.system_userspace.kernel_peer import insert_vlan, strip_vlan, tunnel_frame, udp_src, vlan_of
from fixtures.upstream_system import format_ping

PING = """PING 10.1.1.100 (10.1.1.100) 56(84) bytes of data.

--- 10.1.1.100 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 402ms
rtt min/avg/max/mdev = 0.081/0.120/0.190/0.049 ms
"""


def test_format_ping_is_upstreams_filter() -> None:
    assert format_ping(PING) == "3 packets transmitted, 3 received, 0% packet loss, time 0ms\n"
    assert format_ping("7 packets transmitted, 0 received, 100% packet loss, time 6133ms") == \
        "7 packets transmitted, 0 received, 100% packet loss, time 0ms\n"
    assert format_ping("connect: Network is unreachable") == ""


def _pushed(kind: str, ul: int, key: int | None = 0) -> bytes:
    local, remote = ("172.31.1.100", "172.31.1.1") if ul == 4 else ("fc00::100", "fc00::1")
    spec = TunnelSpec(kind, local, remote, "aa:55:aa:55:00:00", "aa:55:aa:55:00:01", key=key,
                      csum=False, udp_src=40000)
    return model.forward(compose("udp", 4), [PushTunnel(spec, "t"), output("p0")],
                         TxOffloads()).frames[0]


def test_tunnel_frames_are_recognised() -> None:
    for kind in ("vxlan", "geneve", "gre"):
        for ul in (4, 6):
            assert tunnel_frame(_pushed(kind, ul)), (kind, ul)
    assert not tunnel_frame(compose("udp", 4)) and not tunnel_frame(compose("tcp", 6))
    assert udp_src(_pushed("vxlan", 4)) == 40000 and udp_src(_pushed("gre", 4)) is None


def test_gre_without_key_has_no_key_field() -> None:
    with_key, without = _pushed("gre", 4, key=5), _pushed("gre", 4, key=None)
    assert len(with_key) - len(without) == 4
    assert without[34:38] == bytes.fromhex("00006558")  # upstream's GRE(flags=0, proto=0x6558)


def test_vlan_tags() -> None:
    frame = compose("tcp", 4)
    tagged = insert_vlan(frame, 42)
    assert vlan_of(tagged) == 42 and vlan_of(frame) is None
    assert tagged[12:16] == bytes.fromhex("8100002a") and strip_vlan(tagged) == frame


@pytest.mark.skipif(os.geteuid() != 0, reason="the probe makes a namespace (root)")
def test_probe_names_the_kernel_feature() -> None:
    from datapath.backends.native_tunnel import KINDS, missing
    for kind, spec in KINDS.items():
        why = missing(kind)
        assert why is None or (spec.feature in why and spec.link_type in why), why


def test_link_chatter_is_ipv6_housekeeping_only() -> None:
    """MLD and neighbour discovery (behind a VLAN tag too, inside a tunnel too)
    are left out of the wire check; pings and other traffic are not."""
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6MLReport2, ICMPv6ND_NS, IPv6, IPv6ExtHdrHopByHop
    from scapy.layers.l2 import Dot1Q, Ether

    from datapath.backends.kernel import link_chatter
    from fixtures.frames import encapsulate
    from fixtures.system_userspace.kernel_peer import carries_chatter
    mld = bytes(Ether() / IPv6(src="::", dst="ff02::16") / IPv6ExtHdrHopByHop()
                / ICMPv6MLReport2())
    ns = bytes(Ether() / Dot1Q(vlan=5) / IPv6(dst="ff02::1:ff00:1") / ICMPv6ND_NS(tgt="fe80::1"))
    echo = bytes(Ether() / IPv6(dst="2001:db8::1") / ICMPv6EchoRequest())
    ping = bytes(Ether() / IP(dst="10.1.1.1") / ICMP())
    assert link_chatter(mld) and link_chatter(ns)
    assert not link_chatter(echo) and not link_chatter(ping)
    outer = ("1.1.2.88", "1.1.2.92", "aa:66:aa:66:00:00", "aa:66:aa:66:00:01")
    assert carries_chatter(encapsulate("vxlan", *outer, mld, csum=False))
    assert not carries_chatter(encapsulate("vxlan", *outer, echo, csum=False))
    assert not carries_chatter(mld)
