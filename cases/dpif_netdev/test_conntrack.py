"""Conntrack and checksum offload flags: dpif-netdev.at test 1134.

ct(commit,nat(dst=192.168.1.1),table=0) on good and bad frames, with each rx IP
checksum flag, with p2's IP checksum offload off and then on; then a NATed ICMP
error.  After each forward the conntrack checksum counters must be upstream's;
beyond upstream, every frame that leaves p2 is compared with the model's
(datapath/model/conntrack.py), the ones upstream does not look at ("none")
included: conntrack does not drop a packet with a bad IPv4 checksum, it marks
it invalid and leaves it as it is.

Each forward sends two frames out of p2: the packet recirculated by ct(table=0)
comes back with ct_state +trk, which the rule (-trk) no longer matches, so the
bridge's default NORMAL rule floods it (to p2 and br1); then the original
packet continues to the rule's own output to p2.

Conntrack counters are merged once a second; the case moves vswitchd's clock
by that second (time/warp 1000) before reading them, about the time upstream
spends polling for them, so flows age as they do upstream.
"""
from __future__ import annotations

import re

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.expect import expect_frames, send_and_expect
from datapath.model.actions import output
from datapath.model.conntrack import Conntrack, CtCommitDnat
from datapath.offloads import CsumState, RxFlags, TxOffloads
from evidence.tshark import Tshark
from fixtures.frames import compose, with_ip_csum_flipped
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface
from harness.wait import wait_until

G, B, P, U = CsumState.GOOD, CsumState.BAD, CsumState.PARTIAL, CsumState.UNKNOWN
# (frame, rx IP flag, checked, err) after each forward, as upstream expects them.
UPSTREAM_STEPS = [
    [("good", U, 1, 0), ("good", G, 1, 0), ("good", B, 1, 1), ("good", P, 1, 1),
     ("bad", U, 2, 2), ("bad", G, 2, 2), ("bad", B, 2, 3), ("bad", P, 2, 3)],
    [("good", U, 3, 3), ("good", G, 3, 3), ("good", B, 3, 4), ("good", P, 3, 4),
     ("bad", U, 4, 5), ("bad", G, 4, 5), ("bad", B, 4, 6), ("bad", P, 4, 6)],
]
ICMP_FRAME = ("0a8f393fe0738abf7e2f05840800450000440001000040010364c0a87b02c0a87b010303746c00000000"
              "45000028000100004006037bc0a87b01c0a87b021451d4780000000000000000500220002fc40000")
ICMP_EXPECTED = ("0a8f393fe0738abf7e2f05840800450000440001000040017d64c0a87b02c0a801010303fa6b"
                 "00000000450000280001000040067d7bc0a80101c0a87b021451d478000000000000000050022000"
                 "a9c40000")


def rule_packets(sb: Sandbox) -> dict[str, int]:
    """n_packets of the br1 rules for ip and for icmp, by their protocol."""
    out: dict[str, int] = {}
    for line in sb.ofctl("dump-flows", "br1").stdout.splitlines():
        match = re.search(r"n_packets=(\d+),.*ct_state=-trk,(ip|icmp),", line)
        if match:
            out[match.group(2)] = int(match.group(1))
    return out


def counters(sb: Sandbox, checked: int, err: int) -> None:
    """CHECK_COVERAGE(conntrack_l3csum_checked / _err)."""
    sb.appctl("time/warp", "1000")  # the counters' merge interval
    sb.wait_coverage("conntrack_l3csum_checked", checked)
    sb.wait_coverage("conntrack_l3csum_err", err)


@pytest.mark.upstream("dpif-netdev - conntrack")
def test_conntrack(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None) -> None:
    """Unknown IPv4 checksums are verified (checked+1) and a wrong one makes the
    packet invalid (err+1), as does the bad flag (err+1 without a check); good
    and partial ones are trusted.  A valid packet is NATed with its checksums
    finished at p2; an invalid one leaves as it came.  An ICMP error related to
    the NATed connection gets its outer destination and embedded source NATed."""
    sb = sandbox
    sb.add_of_br("br0",
                 *chain(["add-br", "br1"], ["set", "bridge", "br1", "datapath-type=dummy"],
                        add_port("br1", "p1", type="dummy"), add_port("br1", "p2", type="dummy")))
    sb.appctl("vlog/set", "netdev_dummy:file:dbg")
    sb.ofctl("add-flow", "br1", "in_port=p1,ip,ct_state=-trk,"
             "actions=ct(commit,nat(dst=192.168.1.1),table=0),p2")
    good = compose("tcp", 4)
    frames = {"good": good, "bad": with_ip_csum_flipped(good)}  # compose-packet --bad-csum
    sb.vsctl(*set_interface("p2", options={"tx_pcap": "p2.pcap"}))
    p1 = DummyPort.existing(sb, "p1", 1)
    p2 = DummyPort.existing(sb, "p2", 2, pcap_name="p2.pcap")
    counters(sb, 0, 0)
    ct = Conntrack()
    actions = [CtCommitDnat(ct, "192.168.1.1"), output("p2"), output("p2")]
    for tx, steps in zip((TxOffloads(), TxOffloads.parse("ip")), UPSTREAM_STEPS):
        if tx.advertised:
            sb.vsctl(*set_interface("p2", options={"ol_ip_tx_csum": True}))
        for kind, flag, checked, err in steps:
            rx = RxFlags(ip=flag)
            p1.configure(rx=rx)
            expected = model.forward(frames[kind], actions, tx, rx)
            send_and_expect(p1, [frames[kind]], p2, expected, title=f"{kind} {rx.id} {tx.id}",
                            steps=case_record.steps, second_opinion=second_opinion)
            assert (ct.checked, ct.err) == (checked, err)  # the model agrees with upstream
            counters(sb, checked, err)
            p1.configure(rx=RxFlags())
    # Special case: a NATed ICMP error (traffic flagged good).
    sb.vsctl(*set_interface("p1", options={"ol_ip_rx_csum_set_good": True}))
    sb.ofctl("add-flow", "br1", "in_port=p1,icmp,ct_state=-trk,"
             "actions=ct(commit,nat(dst=192.168.1.1)),p2")
    icmp = bytes.fromhex(ICMP_FRAME)
    taken = p1.rx_count()
    sb.appctl("netdev-dummy/receive", "p1", ICMP_FRAME)
    wait_until(lambda: p1.rx_count() > taken, 5, what="p1 to take the ICMP error")
    # Both rules match the ICMP error at the same priority; OpenFlow leaves the
    # choice open, so the rules' packet counters say which one the datapath used.
    # Rule counters are fed from the datapath's flows by the revalidators.
    def counted() -> dict[str, int] | None:
        hits = rule_packets(sb)
        return hits if sum(hits.values()) >= 17 else None
    hits = wait_until(counted, 5, what="the rules' counters to count the ICMP error",
                      describe=lambda: str(rule_packets(sb)))
    assert sorted(hits.values()) in ([0, 17], [1, 16]), hits  # 16 earlier forwards, then this
    by_icmp_rule = hits["icmp"] == 1
    outs = [output("p2")] if by_icmp_rule else [output("p2"), output("p2")]
    rx = RxFlags(ip=G)
    expected = model.forward(icmp, [CtCommitDnat(ct, "192.168.1.1"), *outs],
                             TxOffloads.parse("ip"), rx)
    captured = expect_frames(p2, expected, sent=[icmp], rx_name="p1", title="NATed ICMP error",
                             steps=case_record.steps, second_opinion=second_opinion)
    assert captured[-1].hex() == ICMP_EXPECTED  # upstream: the last line of p2.pcap
    sb.vsctl("remove", "Interface", "p1", "options", "ol_ip_rx_csum_set_good")
