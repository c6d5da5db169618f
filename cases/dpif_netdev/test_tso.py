"""TSO and software segmentation: dpif-netdev.at 1135-1137 per combination, and beyond.

Upstream's own sequences (1135-1139, one id each) are cases/dpif_netdev/test_tso_sequences.py;
here every combination of them is also an id of its own, in a fresh sandbox.

With userspace TSO enabled, a port with ol_tso_segsz stamps a segment size on
what it receives.  A tx port that cannot segment (no TSO; or, for tunnelled
packets, no tunnel TSO, which netdev-dummy never offers) gets the software
segments; a TSO port gets the large frame.  Every segment is compared with
the model field by field, and the payload is reassembled and compared byte for
byte with what was sent.
"""
from __future__ import annotations

import itertools

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import send_and_expect
from datapath.model import gso
from datapath.model.actions import PushTunnel, output
from datapath.offloads import CsumState, RxFlags, TxOffloads
from evidence.tshark import Tshark
from fixtures.frames import reassembled, tcp_payload, tso_frame
from fixtures.tunnel import FALLBACK_MAC, FALLBACK_REMOTE, FALLBACK_TUNNELS, csum_id, fallback_spec, spec
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port

TSO = pytest.mark.sandbox(other_config={"userspace-tso-enable": "true"})


@TSO
@pytest.mark.upstream("dpif-netdev - tso")
@pytest.mark.parametrize("tx", [TxOffloads(), TxOffloads(tso_segsz=500)], ids=lambda t: t.id)
@pytest.mark.parametrize("inner", ["in4", "in6"])
def test_tso(two_ports, inner: str, tx: TxOffloads) -> None:
    """A 2000-byte TCP payload from a TSO port (segsz 500): four segments out of a
    port without TSO, the frame unchanged out of a TSO port."""
    frame = tso_frame(int(inner[-1]), 2000)
    two_ports.flow("in_port=p1", [output("p2")])
    captured = two_ports.forward([frame], [output("p2")], rx=RxFlags(tso_segsz=500), tx=tx)
    assert reassembled(captured, frame) == tcp_payload(frame)


def fallback_topology(sb, tunnels: list[int]):  # type: ignore[no-untyped-def]
    """int-br (rx port p0, tunnels t1..t6) and br1 (p1, both underlay addresses)."""
    sb.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy",
             f"other-config:hwaddr={FALLBACK_MAC}", "--", "add-br", "int-br", "--",
             "set", "bridge", "int-br", "datapath-type=dummy")
    p0 = DummyPort(sb, "int-br", "p0", 1)
    p1 = DummyPort(sb, "br1", "p1", 1)
    for n, (kind, ul, csum) in enumerate(FALLBACK_TUNNELS, start=2):
        remote = FALLBACK_REMOTE[ul][1]
        sb.vsctl(*add_port("int-br", f"t{n - 1}", type=kind,
                           options={"remote_ip": remote, "key": 123, "csum": csum}, ofport_request=n))
    for ul, cmd in ((4, "ip4addr"), (6, "ip6addr")):
        local, remote, mac = FALLBACK_REMOTE[ul]
        sb.appctl(f"netdev-dummy/{cmd}", "br1", f"{local}/24")
        sb.appctl("tnl/neigh/set", "br1", remote, mac)
    sb.appctl("tnl/egress_port_range", "57363", "57363")
    sb.ofctl("add-flow", "br1", "actions=normal")
    outputs = ",".join(f"output:{n + 2}" for n in tunnels)
    sb.ofctl("add-flow", "int-br", f"in_port=p0,actions={outputs}")
    return p0, p1


FALLBACK_IDS = [f"t{i + 1}-{k}-ul{u}-{csum_id(c)}"
                for i, (k, u, c) in enumerate(FALLBACK_TUNNELS)]


@TSO
@pytest.mark.upstream("dpif-netdev - tunnel tso fallback")
@pytest.mark.parametrize("tunnels", [[i] for i in range(6)] + [list(range(6))],
                         ids=FALLBACK_IDS + ["all_six"])
@pytest.mark.parametrize("inner", ["in4", "in6"])
def test_tunnel_tso_fallback(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None,
                             inner: str, tunnels: list[int]) -> None:
    """A TSO packet pushed into VXLAN, Geneve or GRE over IPv4 or IPv6 is segmented
    in software (no tunnel TSO): per segment, inner and outer IPv4 ids, lengths,
    TCP seq and checksums, outer UDP length and checksum, GRE checksum.  Upstream
    floods to all six at once and checks the sorted output; here each tunnel is
    also an id of its own, and the flood keeps OpenFlow's output order."""
    p0, p1 = fallback_topology(sandbox, tunnels)
    actions = []
    for n in tunnels:
        actions += [PushTunnel(fallback_spec(*FALLBACK_TUNNELS[n]), str(n + 2)), output("p1")]
    rx = RxFlags(tso_segsz=500)
    p0.configure(rx=rx)
    frame = tso_frame(int(inner[-1]), 2000)
    expected = model.forward(frame, actions, TxOffloads(), rx)
    captured = send_and_expect(p0, [frame], p1, expected, title=f"{inner} tunnels {tunnels}",
                               steps=case_record.steps, second_opinion=second_opinion)
    for i in range(len(tunnels)):  # each tunnel's segments carry the whole payload
        assert reassembled(captured[i * 4:(i + 1) * 4], frame) == tcp_payload(frame)


@TSO
@pytest.mark.upstream("dpif-netdev - tso + check_pkt_len")
@pytest.mark.parametrize("segsz,length", [(0, 0), (460, 0), (460, 974), (462, 974)],
                         ids=["no_tso-64B", "tso460-64B", "tso460-974B", "tso462-974B"])
def test_tso_check_pkt_len(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None,
                           segsz: int, length: int) -> None:
    """check_pkt_larger(514) on a TSO packet measures headers plus one segment,
    not the whole frame: 974 bytes with segsz 460 is 'not larger' (54 + 460 = 514),
    with segsz 462 it is (516); the segments then leave the chosen port."""
    sandbox.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath-type=dummy")
    p1, p2, p3 = (DummyPort(sandbox, "br0", f"p{n}", n) for n in (1, 2, 3))
    sandbox.ofctl("del-flows", "br0")
    for flow in ("table=0,in_port=1,ip,actions=check_pkt_larger(514)->NXM_NX_REG0[0],"
                 "resubmit(,1)", "table=1,ip,reg0=0x0,actions=output:2",
                 "table=1,ip,reg0=0x1,actions=output:3"):
        sandbox.ofctl("add-flow", "br0", flow)
    rx = RxFlags(tso_segsz=segsz)
    p1.configure(rx=rx)
    frame = tso_frame(4, (length - 54) if length else 64)
    larger = gso.check_pkt_len(model.receive(frame, rx)) > 514
    chosen, other = (p3, p2) if larger else (p2, p3)
    expected = model.forward(frame, [output(chosen.name)], TxOffloads(), rx)
    send_and_expect(p1, [frame], chosen, expected, title=f"segsz {segsz} len {len(frame)}",
                    steps=case_record.steps, second_opinion=second_opinion)
    assert other.read_tx() == [], f"{other.name} must send nothing"


# -- beyond upstream ----------------------------------------------------------------

SHAPES = [(400, "PA"), (1500, "A"), (1501, "FPA"), (1501, "UA"), (64000, "PA")]
TX_PORTS = [TxOffloads(), TxOffloads(tso_segsz=500)]
RX_L4 = {"rx_l4_none": CsumState.UNKNOWN, "rx_l4_partial": CsumState.PARTIAL}


def edge_frame(ipv: int, size: int, flags: str) -> tuple[bytes, bytes]:
    payload = bytes((i * 7) % 256 for i in range(size))
    return tso_frame(ipv, payload, flags=flags, seq=0xFFFFF000), payload


PLAIN_EDGES = [pytest.param(inner, size, flags, tx, rx, id=f"{inner}-{size}B-{flags}-{tx.id}-{rx}")
               for inner, (size, flags), tx, rx in itertools.product(
                   ("in4", "in6"), SHAPES, TX_PORTS, RX_L4)]


@TSO
@pytest.mark.parametrize("inner,size,flags,tx,rx", PLAIN_EDGES)
def test_tso_edges_plain(two_ports, inner: str, size: int, flags: str, tx: TxOffloads,
                         rx: str) -> None:
    """Payloads smaller than a segment, an exact multiple, one byte over, and 64000
    bytes (128 segments); PSH, FIN and URG (PSH/FIN only on the last segment); to
    a TSO port (the frame unchanged, its TCP checksum left to the NIC when it
    was partial) and to a port without TSO.  The sequence number wraps."""
    frame, payload = edge_frame(int(inner[-1]), size, flags)
    if size > 32 * 500 and not tx.tso_segsz:  # more segments than a batch holds: it grows
        two_ports.sb.expected_batch_grow = None  # (how often is not this case's question)
    two_ports.flow("in_port=p1", [output("p2")])
    captured = two_ports.forward([frame], [output("p2")], tx=tx,
                                 rx=RxFlags(l4=RX_L4[rx], tso_segsz=500))
    assert reassembled(captured, frame) == payload


TUNNEL_EDGES = [
    pytest.param(kind, ul, csum, inner, size, flags, tx, rx,
                 id=f"{kind}-ul{ul}-{csum_id(csum)}-{inner}-{size}B-"
                    f"{flags}-{tx.id}-{rx}")
    for (kind, ul, csum), inner, (size, flags), tx, rx in itertools.product(
        [(k, u, c) for k in ("vxlan", "geneve", "gre") for u in (4, 6) for c in (True, False)],
        ("in4", "in6"), SHAPES, TX_PORTS, RX_L4)]


@pytest.mark.parametrize("tunnel,underlay,csum,inner,size,flags,tx,rx", TUNNEL_EDGES)
def test_tso_edges_tunnel(tunnel_rig, tunnel: str, underlay: int, csum: bool, inner: str,
                          size: int, flags: str, tx: TxOffloads, rx: str) -> None:
    """The same shapes pushed into every tunnel type over both underlays, csum on
    and off: always segmented in software (no tunnel TSO), each segment with its
    own outer and inner lengths, ids and checksums."""
    rig, record = tunnel_rig(tunnel, underlay, tso=True)
    frame, payload = edge_frame(int(inner[-1]), size, flags)
    tun = spec(tunnel, underlay, csum)
    captured = rig.forward(record, tun, "in_port=p1", [PushTunnel(tun, "11"), output("p2")],
                           [frame], RxFlags(l4=RX_L4[rx], tso_segsz=500), tx)
    assert reassembled(captured, frame) == payload
