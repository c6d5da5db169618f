"""The tunnel model against the facts of upstream's tunnel-push-pop suites.

Every tunnel header template upstream expects in a datapath action is built
by the model from the port's options and compared byte for byte (lengths,
checksums and per-packet fields being zero in a template); so are the frames
upstream expects on the wire, the address resolution requests, and the
lengths of what decapsulation yields.
"""
from __future__ import annotations

import re
import struct

import pytest

from datapath import model
from datapath.model.decap import pop
from datapath.model.neigh import arp_request, neighbor_solicitation, solicited_node
from datapath.model.packet import Packet, with_vlan
from datapath.model.tnl_headers import GeneveOpt, erspan_base
from datapath.model.tunnel import TunnelError, TunnelSpec, push
from datapath.offloads import RxFlags
from evidence.compare import diff_frames
from fixtures.tunnel_push_pop import pushpop_frames as F
from tests import upstream_pushpop_vectors as V
from tests.odp_header import parse

# OVS_VPORT_TYPE_* of the datapath interface (openvswitch.h), by kind and underlay.
VPORT_TYPE = {("gre", 4): 3, ("vxlan", 4): 4, ("vxlan", 6): 4, ("geneve", 4): 5,
              ("geneve", 6): 5, ("erspan", 4): 107, ("erspan", 6): 108, ("gre", 6): 109,
              ("gtpu", 4): 110, ("srv6", 6): 112}
INNER = bytes.fromhex("aa55aa550000f8bc124434b60800450000140000000040" "2f0000"
                      "01010358010103700000")  # IPv4 to 1.1.3.112, as the traces send


def spec_of(args: dict) -> TunnelSpec:
    args = dict(args)
    opts = args.pop("opts", [])
    args["geneve_opts"] = tuple(GeneveOpt(c, t, bytes.fromhex(d)) for _, (c, t, d) in opts)
    return TunnelSpec(**args)


def template(spec: TunnelSpec, inner: bytes) -> bytes:
    """The model's header for `inner`, with what a template leaves zero zeroed."""
    pkt = Packet.parse(inner)
    push(pkt, spec, seq=0, timestamp=0, udp_src=0)
    size = len(pkt.data) - (len(inner) - (14 if spec.carries_l3 else 0))
    hdr = bytearray(pkt.data[:size])
    if spec.underlay == 4:
        hdr[16:18] = hdr[24:26] = b"\0\0"  # total length, header checksum
        l4 = 34
    else:
        hdr[18:20] = b"\0\0"  # payload length
        l4 = 54
    if spec.ip_proto == 17:
        hdr[l4 + 4:l4 + 6] = b"\0\0"  # UDP length
        if spec.kind == "gtpu":
            hdr[l4 + 10:l4 + 12] = b"\0\0"  # GTP-U length
    return bytes(hdr)


@pytest.mark.parametrize("name,text,args,inner_type", V.HEADERS, ids=[h[0] for h in V.HEADERS])
def test_model_builds_upstream_header(name: str, text: str, args: dict, inner_type: int) -> None:
    spec = spec_of(args)
    want = parse(text, inner_type)
    got = template(spec, INNER)
    assert want.type == VPORT_TYPE[(spec.kind, spec.underlay)]
    assert len(got) == want.size, f"model header {len(got)} bytes, upstream size={want.size}"
    assert got.hex() == want.data.hex(), diff_frames(want.data + INNER[14:], got + INNER[14:])


@pytest.mark.parametrize("name,masked,args", V.MASKED, ids=[m[0] for m in V.MASKED])
def test_model_frames_match_upstream_masked(name: str, masked: str, args: dict) -> None:
    """Upstream masks the UDP source port (and over IPv6 the UDP checksum, which
    depends on it); the model's frame for any port must match the rest."""
    for port in (32768, 40000, 61000):
        frame = model.encapsulate(bytes.fromhex(V.PACKET), spec_of(args), udp_src=port)
        assert re.fullmatch(masked, frame.frames[0].hex()), (name, port)
        assert all(v in ("good", "none") for v in frame.csum_state[0].values())


def test_l3_gre_echo_is_upstreams_frame() -> None:
    inner = bytes(12) + b"\x08\x00" + bytes.fromhex(F.ICMP_IP)
    spec = TunnelSpec("gre", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", "00:1b:21:3c:ab:64",
                      key=456, l3=True)
    assert model.encapsulate(inner, spec).frames[0].hex() == V.L3GRE_ECHO


def test_address_resolution_requests() -> None:
    mac = "aa:55:aa:55:00:00"
    assert arp_request(mac, "1.1.2.88", "1.1.2.92").hex() == V.ARP_92
    assert arp_request(mac, "1.1.2.88", "1.1.2.93").hex() == V.ARP_93
    assert neighbor_solicitation(mac, "2001:cafe::88", "2001:cafe::92").hex() == V.NS_92
    assert neighbor_solicitation(mac, "2001:cafe::88", "2001:cafe::93").hex() == V.NS_93
    assert str(solicited_node("2001:cafe::1234:5678")) == "ff02::1:ff34:5678"


@pytest.mark.parametrize("frame,length", [
    (F.VXLAN, 42), (F.GPE, 42), (F.GRE, 98), (F.GRE_L3, 84), (F.ERSPAN1, 98), (F.ERSPAN2, 98),
    (F.GENEVE_OPTS, 98), (F.GRE6, 98), (F.GRE6_L3, 84), (F.ERSPAN6_1, 98), (F.ERSPAN6_2, 98),
    (F.GENEVE6_OPTS, 98)], ids=lambda v: str(v)[:12])
def test_decap_lengths_are_upstreams_counts(frame: str, length: int) -> None:
    """dump-ports counts these bytes per decapsulated packet in upstream."""
    inner = pop(bytes.fromhex(frame), RxFlags()).inner
    assert inner is not None and len(inner) == length


def test_decap_drops_what_upstream_counts_as_errors() -> None:
    for frame, counter in ((F.VXLAN_BAD_IP, "native_tnl_l3csum_err"),
                           (F.VXLAN_BAD_UDP, "native_tnl_l4csum_err"),
                           (F.GPE6_FROM_CAFE_BAD_UDP, "native_tnl_l4csum_err")):
        out = pop(bytes.fromhex(frame), RxFlags())
        assert out.inner is None and out.counters[counter] == 1


def test_erspan_fields_follow_the_draft() -> None:
    """Type II: Ver 1, VLAN/COS/En of a tagged mirrored frame; type III: the
    timestamp and the HW ID/D bits where the draft puts them."""
    tagged = with_vlan(bytes.fromhex(F.ICMP_FRAME), 42, pcp=5)
    spec = TunnelSpec("erspan", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", V.B6, key=0x3FF,
                      erspan_idx=0xABCDE)
    pkt = Packet.parse(tagged)
    push(pkt, spec, seq=7)
    gre = bytes(pkt.data[34:42])
    assert struct.unpack("!HHI", gre) == (0x1000, 0x88BE, 7)
    first, second, index = struct.unpack("!HHI", pkt.data[42:50])
    assert (first >> 12, first & 0xFFF) == (1, 42)
    assert (second >> 13, (second >> 11) & 3, second & 0x3FF) == (5, 3, 0x3FF)
    assert index == 0xABCDE
    v2 = TunnelSpec("erspan", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", V.B6, key=1,
                    erspan_ver=2, erspan_dir=1, erspan_hwid=0x3F)
    pkt = Packet.parse(bytes.fromhex(F.ICMP_FRAME))
    push(pkt, v2, seq=1, timestamp=0x12345678)
    ts, sgt, last = struct.unpack("!IHH", pkt.data[46:54])
    assert (ts, sgt, last) == (0x12345678, 0, (0x3F << 4) | (1 << 3))
    with pytest.raises(ValueError, match="10 bits"):
        erspan_base(1, 0x400)


def test_srv6_flow_label_modes() -> None:
    ip6 = bytes.fromhex("aa55aa550000f8bc124434b686dd6000000300000640" + "20" * 32)
    ip4 = INNER
    mk = lambda mode: TunnelSpec("srv6", "2001:cafe::88", "2001:cafe::92",  # noqa: E731
                                 "aa:55:aa:55:00:00", V.B6, key=None, flow_label=mode)
    label = lambda frame, mode, **kw: int.from_bytes(  # noqa: E731
        model.encapsulate(frame, mk(mode), **kw).frames[0][14:18], "big") & 0xFFFFF
    assert (label(ip6, "copy"), label(ip4, "copy")) == (3, 0)
    assert (label(ip6, "zero"), label(ip6, "compute", flow_label=0x12345)) == (0, 0x12345)
    with pytest.raises(TunnelError, match="input"):
        model.encapsulate(ip6, mk("compute"))
    # vswitch.xml: copy is the default
    default = TunnelSpec("srv6", "2001:cafe::88", "2001:cafe::92", "aa:55:aa:55:00:00", V.B6,
                         key=None)
    assert int.from_bytes(model.encapsulate(ip6, default).frames[0][14:18], "big") & 0xFFFFF == 3


def test_l3_tunnels_carry_ip_only() -> None:
    arp = bytes.fromhex(V.ARP_92)
    for spec in (TunnelSpec("gre", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", V.B6, l3=True),
                 TunnelSpec("gtpu", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", V.B6)):
        with pytest.raises(TunnelError, match="IP packet only"):
            model.encapsulate(arp, spec)
