"""Checksum offload, upstream's sequences: dpif-netdev.at tests 1116-1121, one id each.

The ids of cases/dpif_netdev/test_csum_offload.py send each combination as the first packet
of a fresh sandbox (always a miss and an upcall).  Here each upstream test runs
as upstream runs it (fixtures/dpif_netdev/sequence.py): one ovs-vswitchd, one rule, the
forwards of CHECK_IP_CHECKSUMS / CHECK_L4_CHECKSUMS in order with p1's rx flags
and p2's tx offloads changed between them, so every packet after the first
hits the datapath flow the first one installed.  After each forward the last
frame of p2.pcap must be upstream's expected frame, and every frame the model's.
Upstream's expected frames are built as upstream builds them: compose-packet
(fixtures.frames.compose) and upstream's sed substitutions on the hex.
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.expect import send_and_expect
from datapath.model.actions import mod_nw_dst, mod_tp_dst, output
from datapath.offloads import CsumState, RxFlags, TxOffloads
from evidence.tshark import Tshark
from fixtures.dpif_netdev.sequence import FwdSequence, csum_sequence
from fixtures.frames import MICROGRAM, OPT_PKT, compose, with_ip_csum_flipped
from harness.records import CaseRecord
from harness.sandbox import Sandbox

G, B, P, U = CsumState.GOOD, CsumState.BAD, CsumState.PARTIAL, CsumState.UNKNOWN


def sed(hex_text: str, old: str, new: str) -> str:
    """sed -e "s/OLD/NEW/": the first occurrence."""
    return hex_text.replace(old, new, 1)


def check_checksums(seq: FwdSequence, layer: str, actions, tx: TxOffloads,  # type: ignore[no-untyped-def]
                    frames: dict[str, str], label: str) -> None:
    """CHECK_IP_CHECKSUMS / CHECK_L4_CHECKSUMS: good frame with no, good, bad, partial
    rx flag -> good_exp; bad frame: none -> bad_exp, good -> good_exp, bad -> bad_exp,
    partial -> good_exp."""
    for kind, state, exp in (("good_frame", U, "good_expected"), ("good_frame", G, "good_expected"),
                             ("good_frame", B, "good_expected"), ("good_frame", P, "good_expected"),
                             ("bad_frame", U, "bad_expected"), ("bad_frame", G, "good_expected"),
                             ("bad_frame", B, "bad_expected"), ("bad_frame", P, "good_expected")):
        rx = RxFlags(ip=state) if layer == "ip" else RxFlags(l4=state)
        seq.forward(bytes.fromhex(frames[kind]), actions, rx=rx, tx=tx,
                    upstream_hex=frames[exp], title=f"{label}: {kind} {rx.id} -> {exp}")


@pytest.mark.upstream("dpif-netdev - ip csum offload")
def test_ip_csum_offload_sequence(sandbox: Sandbox, case_record: CaseRecord,
                                  second_opinion: Tshark | None) -> None:
    """mod_nw_dst with p2's IP offload off, then on, then advertised but not done
    (the bad IP checksum stays, TCP is updated); then an IPv4 header with options
    (checksum fixed to dd2e) and one that claims options it lacks (unchanged)."""
    seq = csum_sequence(sandbox, case_record.steps, second_opinion)
    actions = [mod_nw_dst("192.168.1.1"), output("p2")]
    sandbox.ofctl("add-flow", "br1", "in_port=p1,actions=mod_nw_dst:192.168.1.1,output:p2")
    good = compose("tcp", 4)
    good_expected = compose("tcp", 4, dst="192.168.1.1")
    frames = {"good_frame": good.hex(), "bad_frame": with_ip_csum_flipped(good).hex(),
              "good_expected": good_expected.hex(),
              "bad_expected": with_ip_csum_flipped(good_expected).hex()}
    for tx in (TxOffloads(), TxOffloads.parse("ip")):
        check_checksums(seq, "ip", actions, tx, frames, tx.id)
    # The bad IP checksum is left untouched, but the IP address and the TCP checksum got updated.
    first_part_bad = frames["bad_frame"].split("c0a87b02c0a87b01")[0]
    second_part_good = "c0a87b02c0a80101" + frames["good_expected"].split("c0a87b02c0a80101", 1)[1]
    seq.forward(bytes.fromhex(frames["bad_frame"]), actions, rx=RxFlags(ip=G),
                tx=TxOffloads.parse("ip_disabled"), upstream_hex=first_part_bad + second_part_good,
                title="tx_ip_disabled: bad_frame rx_ip_good -> composed_expected")
    # IPv4 options (a valid header) and a header that claims options it lacks.
    seq.p2.configure(tx=TxOffloads.parse("ip"))
    seq.p1.configure(rx=RxFlags(ip=G))
    expected = model.Expected(frames=[])
    for frame in (OPT_PKT, MICROGRAM):
        expected.extend(model.forward(frame, actions, TxOffloads.parse("ip"), RxFlags(ip=G)))
    def one_by_one(frames: list[bytes]) -> None:  # two netdev-dummy/receive calls
        for frame in frames:
            sandbox.appctl("netdev-dummy/receive", "p1", frame.hex())
    captured = send_and_expect(seq.p1, [OPT_PKT, MICROGRAM], seq.p2, expected,
                               title="OPT_PKT and MICROGRAM", steps=case_record.steps,
                               second_opinion=second_opinion, send=one_by_one)
    assert [f.hex() for f in captured[-2:]] == [  # tail -n 2 p2.pcap.txt
        sed(sed(OPT_PKT.hex(), "0a000002", "c0a80101"), "eeee", "dd2e"), MICROGRAM.hex()]


# Upstream's checksum field values: (good frame's, good expected's), per traffic.
L4_SEDS = {("tcp", 4): ("6b72", "7715"), ("udp", 4): ("bb3b", "c6de"),
           ("tcp", 6): ("e5c2", "f165"), ("udp", 6): ("358c", "412f")}
L4_TITLES = {("tcp", 4): "dpif-netdev - tcp csum offload",
             ("udp", 4): "dpif-netdev - udp csum offload",
             ("tcp", 6): "dpif-netdev - IPv6 tcp csum offload",
             ("udp", 6): "dpif-netdev - IPv6 udp csum offload"}


@pytest.mark.parametrize("l4,ipv", [
    pytest.param(l4, ipv, id=f"{l4}{ipv}", marks=pytest.mark.upstream(title))
    for (l4, ipv), title in L4_TITLES.items()])
def test_l4_csum_offload_sequence(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None,
                                  l4: str, ipv: int) -> None:
    """mod_tp_dst:2222 with p2's L4 offload off, then on, then advertised but not
    done (0xdead stays)."""
    seq = csum_sequence(sandbox, case_record.steps, second_opinion)
    match = f"{l4}{'6' if ipv == 6 else ''}"
    sandbox.ofctl("add-flow", "br1", f"in_port=p1,{match},actions=mod_tp_dst:2222,output:p2")
    actions = [mod_tp_dst(2222), output("p2")]
    good, good_csum = compose(l4, ipv).hex(), L4_SEDS[(l4, ipv)][0]
    good_expected, exp_csum = compose(l4, ipv, dport=2222).hex(), L4_SEDS[(l4, ipv)][1]
    frames = {"good_frame": good, "bad_frame": sed(good, good_csum, "dead"),
              "good_expected": good_expected, "bad_expected": sed(good_expected, exp_csum, "ea50")}
    for tx in (TxOffloads(), TxOffloads.parse("l4")):
        check_checksums(seq, "l4", actions, tx, frames, tx.id)
    seq.forward(bytes.fromhex(frames["bad_frame"]), actions, rx=RxFlags(l4=G),
                tx=TxOffloads.parse("l4_disabled"),
                upstream_hex=sed(good_expected, exp_csum, "dead"),
                title="tx_l4_disabled: bad_frame rx_l4_good -> bad_updated")
    seq.p2.configure(tx=TxOffloads())  # both options removed again, as upstream ends


@pytest.mark.upstream("dpif-netdev - tcp csum offload (simple match)")
def test_tcp_csum_simple_match_sequence(sandbox: Sandbox, case_record: CaseRecord,
                                        second_opinion: Tshark | None) -> None:
    """in_port -> output: a bad TCP checksum is forwarded as it is, except under
    the rx partial flag (completed at send); from the second packet on the simple
    match cache is used: its hits go 0..4 with upstream's percentages."""
    seq = csum_sequence(sandbox, case_record.steps, second_opinion)
    sandbox.ofctl("add-flow", "br1", "in_port=p1,actions=output:p2")
    good = compose("tcp", 4).hex()
    bad = sed(good, "6b72", "dead")
    for hits, (state, pct, exp) in enumerate(((U, "0.0", bad), (U, "50.0", bad), (G, "66.7", bad),
                                              (B, "75.0", bad), (P, "80.0", good))):
        seq.forward(bytes.fromhex(bad), [output("p2")], rx=RxFlags(l4=state), tx=TxOffloads(),
                    upstream_hex=exp, title=f"bad_frame rx_l4_{state.value}")
        perf = sandbox.appctl("dpif-netdev/pmd-perf-show").stdout
        assert [ln for ln in perf.splitlines() if "Simple Match hits" in ln] == [
            f"  - Simple Match hits: {hits:>11}  ({pct:>5} %)"], perf
