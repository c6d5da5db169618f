"""datapath/model/l2tags.py against frames built by scapy (an independent
encoder of IEEE 802.1Q/802.1ad tags and RFC 3032 label stack entries)."""
from __future__ import annotations

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether

from datapath.model import l2tags
from datapath.model.l2tags import (
    Decap,
    EncapEthernet,
    EncapMpls,
    PopMpls,
    PopVlan,
    PushMpls,
    PushVlan,
    SetEthAddrs,
    run,
)

A, B = "36:b1:ee:7c:01:03", "36:b1:ee:7c:01:02"
PING = Ether(src=A, dst=B) / IP(src="10.1.1.1", dst="10.1.1.2", ttl=61, tos=0x28) / ICMP()
ARP_REQ = Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.1.1.1", pdst="10.1.1.2")


def b(pkt) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(pkt)


def test_push_vlan_ctag_then_stag_is_qinq() -> None:
    got = run(b(PING), [PushVlan(0x8100, 100), PushVlan(0x88A8, 4094)])
    want = Ether(src=A, dst=B, type=0x88A8) / Dot1AD(vlan=4094) / Dot1Q(vlan=100) / PING[IP]
    assert got == b(want)


def test_push_vlan_keeps_pcp_given_and_pop_restores() -> None:
    tagged = run(b(PING), [PushVlan(0x8100, 7, pcp=5)])
    assert tagged == b(Ether(src=A, dst=B) / Dot1Q(vlan=7, prio=5) / PING[IP])
    assert run(tagged, [PopVlan()]) == b(PING)
    assert run(b(PING), [PopVlan()]) == b(PING)  # no tag: nothing to pop


def test_first_push_mpls_takes_ip_ttl_and_dscp_low_bits() -> None:
    got = run(b(PING), [PushMpls(0x8847, 4)])
    # DSCP 0x28 >> 2 = 10 -> low 3 bits 2; TTL 61; bottom of stack.
    want = Ether(src=A, dst=B, type=0x8847) / MPLS(label=4, cos=2, s=1, ttl=61) / PING[IP]
    assert got == b(want)


def test_push_mpls_on_non_ip_uses_ttl_64() -> None:
    got = run(b(ARP_REQ), [PushMpls(0x8848, 9)])
    assert l2tags.lse_fields(got) == [(9, 0, 1, 64)]


def test_second_push_copies_top_with_s_clear_and_pops_undo() -> None:
    three = run(b(PING), [PushMpls(0x8847, 4), PushMpls(0x8847, 2), PushMpls(0x8847, 1)])
    want = (Ether(src=A, dst=B, type=0x8847) / MPLS(label=1, cos=2, s=0, ttl=61)
            / MPLS(label=2, cos=2, s=0, ttl=61) / MPLS(label=4, cos=2, s=1, ttl=61) / PING[IP])
    assert three == b(want)
    back = run(three, [PopMpls(0x8847), PopMpls(0x8847), PopMpls(0x0800)])
    assert back == b(PING)


def test_encap_mpls_carries_the_whole_ethernet_frame() -> None:
    actions = [EncapMpls(3), EncapMpls(2, ), EncapEthernet("00:00:00:00:00:02",
                                                         "00:00:00:00:00:01")]
    got = run(b(PING), actions)
    want = (Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x8847)
            / MPLS(label=2, s=0, ttl=0) / MPLS(label=3, s=1, ttl=0) / b(PING))
    assert got == b(want)
    assert run(got, [Decap(), Decap(0x8847), Decap(l2tags.ETHERNET)]) == b(PING)


def test_encap_mpls_mc_uses_the_multicast_ethertype() -> None:
    got = run(b(PING), [EncapMpls(2, multicast=True), EncapEthernet()])
    assert got[12:14] == b"\x88\x48"


def test_decap_ip_then_encap_mpls_and_pop_to_ipv4() -> None:
    wire = run(b(PING), [Decap(), EncapMpls(2), EncapEthernet(B, A)])
    assert wire == b(Ether(dst=B, src=A, type=0x8847) / MPLS(label=2, s=1, ttl=0) / PING[IP])
    assert run(wire, [PopMpls(0x0800)]) == b(Ether(dst=B, src=A) / PING[IP])


def test_push_mpls_then_decap_to_ipv4_and_new_ethernet() -> None:
    wire = run(b(PING), [PushMpls(0x8847, 2)])
    back = run(wire, [Decap(), Decap(0x0800), EncapEthernet(), SetEthAddrs(A, B)])
    assert back == b(Ether(dst=A, src=B) / PING[IP])


def test_mask_lse_hides_tc_and_ttl_only() -> None:
    one = b(Ether(type=0x8847) / MPLS(label=2, cos=5, s=1, ttl=9) / PING[IP])
    other = b(Ether(type=0x8847) / MPLS(label=2, cos=0, s=1, ttl=200) / PING[IP])
    relabelled = b(Ether(type=0x8847) / MPLS(label=3, cos=5, s=1, ttl=9) / PING[IP])
    assert l2tags.mask_lse(one) == l2tags.mask_lse(other)
    assert l2tags.mask_lse(one) != l2tags.mask_lse(relabelled)
    assert l2tags.mask_lse(b(PING)) == b(PING)


def test_decap_refuses_a_tagged_frame() -> None:
    with pytest.raises(ValueError, match="tagged"):
        run(run(b(PING), [PushVlan(0x8100, 5)]), [Decap()])


def test_the_known_bug_layer_reuses_a_one_tag_flow_only_for_the_same_outer_tag() -> None:
    """datapath/deviations/vlan.py: OVS 4.0.0 forwards a frame with two tags by the
    flow of the same frame with one (vlan-second-tag-wildcarded), with two headers
    parsed only; not with vlan-limit 1, nor for another outer tag or payload."""
    import struct as st

    from datapath.deviations.vlan import follows_one_tag_flow
    from datapath.model.bugs import VLAN_SECOND_TAG_WILDCARDED
    base = bytes(12) + b"\x08\x00" + bytes(28)

    def tag(frame: bytes, tpid: int, vid: int) -> bytes:
        return frame[:12] + st.pack("!HH", tpid, vid) + frame[12:]
    one = tag(base, 0x88A8, 4094)
    two = one[:16] + st.pack("!HH", 0x8100, 100) + one[16:]
    assert follows_one_tag_flow(one, two, 2) is VLAN_SECOND_TAG_WILDCARDED
    assert follows_one_tag_flow(one, two, 1) is None
    assert follows_one_tag_flow(tag(base, 0x88A8, 4093), two, 2) is None
    assert follows_one_tag_flow(one, two[:-1] + b"\x01", 2) is None
