"""Software segmentation in the model, against upstream's 'dpif-netdev - tso'
expected frames (transcribed facts) and against invariants of TCP itself."""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.actions import output
from datapath.model.packet import Packet
from datapath.offloads import RxFlags, TxOffloads
from fixtures.dpif_netdev.upstream_tso_vectors import V4_BIG, V4_SEGS, V6_BIG, V6_SEGS
from fixtures.frames import compose, tso_frame
from fixtures.tunnel import FALLBACK_TUNNELS, fallback_spec


def big(ipv: int) -> bytes:
    return tso_frame(ipv, 2000)


@pytest.mark.parametrize("ipv,segs,whole", [(4, V4_SEGS, V4_BIG), (6, V6_SEGS, V6_BIG)])
def test_upstream_tso_vectors(ipv: int, segs: list[str], whole: str) -> None:
    rx = RxFlags(tso_segsz=500)
    frame = big(ipv)
    assert frame.hex() == whole  # our scapy frame is upstream's --len frame
    assert [f.hex() for f in model.forward(frame, [output("p2")], TxOffloads(), rx).frames] == segs
    tso_port = TxOffloads(tso_segsz=500)
    assert [f.hex() for f in model.forward(frame, [output("p2")], tso_port, rx).frames] == [whole]


@pytest.mark.parametrize("payload,segsz", [(1500, 500), (1501, 500), (499, 500), (65000, 1448),
                                           (1, 1)])
@pytest.mark.parametrize("flags", ["A", "PA", "FPA", "UA"])
def test_segments_reassemble_and_are_valid(payload: int, segsz: int, flags: str) -> None:
    data = bytes(i % 251 for i in range(payload))
    frame = compose("tcp", 4, payload=data, ttl=64)
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    pkt = Ether(frame)
    pkt[TCP].flags = flags
    pkt[TCP].seq = 0xFFFFFF00  # wraps within the packet
    del pkt[TCP].chksum
    frame = bytes(pkt)
    out = model.forward(frame, [output("p2")], TxOffloads(), RxFlags(tso_segsz=segsz))
    n = -(-payload // segsz)
    assert len(out.frames) == n
    got = b""
    for i, seg in enumerate(out.frames):
        p = Ether(seg)
        assert p[IP].id == i and p[IP].len == len(seg) - 14
        assert p[TCP].seq == (0xFFFFFF00 + i * segsz) & 0xFFFFFFFF
        want = set(flags) if i == n - 1 else set(flags) - {"P", "F"}
        assert set(str(p[TCP].flags)) == want
        assert out.csum_state[i] == {"IP": "good", "TCP": "good"}
        got += bytes(p[TCP].payload)
    assert got == data


def test_upstream_tunnel_tso_fallback_vectors() -> None:
    """The model's frames as OVS sends them equal upstream's 48; the correct frames
    differ only where the known GRE checksum bug applies (IPv6 GRE with csum)."""
    from datapath.model.actions import PushTunnel
    from datapath.model.bugs import GRE_CSUM_AT_PUSH
    from evidence.compare import diff_frames
    from fixtures.dpif_netdev.upstream_tso_vectors import FRAMES, expand
    actions = []
    for n, (kind, ul, csum) in enumerate(FALLBACK_TUNNELS, start=2):
        actions += [PushTunnel(fallback_spec(kind, ul, csum), str(n)), output("p1")]
    rx = RxFlags(tso_segsz=500)
    exp = model.Expected(frames=[])
    for ipv in (4, 6):
        exp.extend(model.forward(big(ipv), actions, TxOffloads(), rx))
    assert len(exp.frames) == 48
    assert sorted(f.hex() for f in exp.ovs_frames) == sorted(expand(f) for f in FRAMES)
    assert exp.bugs == [GRE_CSUM_AT_PUSH]
    changed = [(c, o) for c, o in zip(exp.frames, exp.ovs_frames) if c != o]
    assert changed and all(Packet.parse(c).outer.ipv == 6 for c, _ in changed)
    for c, o in changed:
        assert [ln.split(":")[0] for ln in diff_frames(c, o)] == ["outer.GRE.chksum"]


@pytest.mark.parametrize("ipv,times", [(4, 1), (6, 2)])
def test_tso_without_payload_names_the_outer_udp_deviation(ipv: int, times: int) -> None:
    """A TSO packet with no payload pushed into VXLAN with csum: the right outer
    UDP checksum covers the datagram as it is (RFC 768); OVS's differs by the
    segment size per length it adjusts (tso-empty-tunnel-csum), and nothing
    aborts (no payload divides into zero segments).  One payload byte aborts."""
    from datapath.model import csum
    from datapath.model.actions import PushTunnel
    from datapath.model.bugs import TSO_EMPTY_TUNNEL_CSUM, TSO_SHORT_TUNNEL_ASSERT
    from datapath.offloads import CsumState
    from fixtures.tunnel import spec
    tun = spec("vxlan", 4, True)
    rx = RxFlags(l4=CsumState.PARTIAL, tso_segsz=500)
    exp = model.forward(tso_frame(ipv, 0), [PushTunnel(tun, "11"), output("p2")], TxOffloads(), rx)
    assert exp.bugs == [TSO_EMPTY_TUNNEL_CSUM]
    right, ovs = Packet.parse(exp.frames[0]), Packet.parse(exp.ovs_frames[0])
    ofs = right.outer.l4_csum_ofs
    assert exp.csum_state[0]["outer.UDP"] == "good"
    want = right.u16(ofs)
    for _ in range(times):
        want = csum.incremental(want, b"\0\0", (500).to_bytes(2, "big"))
    assert ovs.u16(ofs) == want and bytes(ovs.data[:ofs]) == bytes(right.data[:ofs])
    one = model.forward(tso_frame(ipv, 1), [PushTunnel(tun, "11"), output("p2")], TxOffloads(), rx)
    assert TSO_SHORT_TUNNEL_ASSERT in one.bugs
