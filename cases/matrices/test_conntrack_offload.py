"""Conntrack and NAT on dummy ports, over rx checksum flags and tx offloads (issue 20, item 3).

Ours: the scenarios are drawn from system-traffic.at's conntrack tests (named in
each scenario), but those run ping, nc and curl between namespaces over veths;
here the same connections are written frame by frame and sent with
netdev-dummy/receive, so no upstream title is claimed.

One bridge, three dummy ports: p1 the client side, p2 the server side, p3 a
sink.  Table 0 sends every IP packet through `ct(zone=Z,nat,table=1)`; table 1
forwards by ct_state, one rule per state, so the port a packet leaves by and the
rules' packet counters both show the state conntrack gave it:

    cookie 1  +trk+inv                                   -> p3
    cookie 2  +trk+rel-rpl, in_port=p1                   -> p2
    cookie 3  +trk+rel+rpl, in_port=p2                   -> p1
    cookie 4  +trk+new, in_port=p1  -> ct(commit,zone=Z,exec(mark,label),nat(...)) -> p2
              (twice: ip and ipv6, as ct needs)
    cookie 5  +trk+est-rpl, in_port=p1, ct_mark, ct_label -> p2
    cookie 6  +trk+est+rpl, in_port=p2, ct_mark, ct_label -> p1
    cookie 7  anything else (a new connection from p2, a wrong mark)  -> p3

Every frame that leaves is judged against the model
(datapath/model/conntrack.py), invalid ones included (conntrack leaves them as
they came), and at the end of a scenario each rule's n_packets must be the
model's count.  The rx flags are those of both p1 and p2: a bad flag makes
conntrack call the packet invalid without a look, good and partial ones are
trusted, and a NAT rewrite of a partial checksum is left for the tx port to
finish, by its offload or in software.

The scenarios, the flow table and the model's side of each (which rule a state
matches, the connection table advanced packet by packet) are in
fixtures/conntrack_scenarios.py; here are the case and its step for a packet
whose state OVS is known to get otherwise.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.deviations.conntrack import ovs_crash, ovs_frame, ovs_state
from datapath.expect import send_and_expect
from datapath.model import Expected
from datapath.model.actions import output
from datapath.model.bugs import OvsBug
from datapath.model.conntrack import Conntrack, Result
from datapath.model.packet import Packet
from datapath.offloads import RxFlags, TxOffloads
from datapath.verdict import PortFrames, conclude_ports
from evidence.compare import FrameMismatch
from evidence.tshark import Tshark
from fixtures.conntrack_scenarios import (
    OUT_PORT,
    RULES,
    RX,
    SCENARIOS,
    TX,
    ModelSide,
    Scenario,
    flows,
    rule_for,
)
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.wait import wait_until


def known_state(sb: Sandbox, ports: dict[int, DummyPort], in_port: int, data: bytes,
                cookie: int, expected: Expected, deviation: tuple[OvsBug, int],
                model_side: ModelSide,
                case_record: CaseRecord, title: str) -> None:
    """A packet OVS is known to classify otherwise (datapath/deviations/conntrack.py):
    a sighting if it leaves exactly by the port of OVS's state, as the model
    forwards it there (the case then ends: OVS's table and the model's differ
    from here on, so no later packet could be judged, and the collector makes the
    id an xfail); a failure if it leaves as the model says (the entry is stale)
    or anywhere else."""
    bug, state = deviation
    ovs_cookie = rule_for(in_port, Result(state, conn=model_side.probe(in_port, data).conn), None)
    ovs_port, model_port = OUT_PORT[ovs_cookie], OUT_PORT[cookie]
    ovs_sends = model.forward(data, [output(f"p{ovs_port}")], model_side.tx, model_side.rx)
    ovs_sends.bugs.insert(0, bug)
    base = ports[in_port].rx_count()
    ports[in_port].send([data])
    got: dict[int, list[bytes]] = {n: [] for n in ports}

    def left() -> bool:
        for n, port in ports.items():
            got[n] += port.read_tx()
        return ports[in_port].rx_count() > base and any(got.values())
    wait_until(left, 5, what=f"the frame sent to p{in_port} to leave somewhere")
    # Every port: the model's frames (on the model's port, none elsewhere), or,
    # as a whole, OVS's known ones (on the port of OVS's state, none elsewhere).
    nothing = Expected(frames=[])
    conclude_ports(case_record.steps, [PortFrames(
        f"p{n}", expected if n == model_port else nothing, got[n], [data], f"p{in_port}",
        known_instead=(ovs_sends if n == ovs_port else Expected(frames=[], bugs=[bug]))
        if n in (model_port, ovs_port) else None,
        notes=[f"the model: {RULES[cookie]} (p{model_port}); OVS: {RULES[ovs_cookie]} "
               f"(p{ovs_port})"]) for n in ports],
        title=f"{title}: {RULES[cookie]} (OVS: {RULES[ovs_cookie]})").check()


def rule_counts(sb: Sandbox) -> dict[int, int]:
    out: dict[int, int] = {}
    for line in sb.ofctl("dump-flows", "br0", "table=1").stdout.splitlines():
        match = re.search(r"cookie=0x(\w+),.*n_packets=(\d+),", line)
        if match:
            cookie = int(match.group(1), 16)
            out[cookie] = out.get(cookie, 0) + int(match.group(2))
    return out


@pytest.mark.parametrize("tx", TX, ids=lambda t: t.id)
@pytest.mark.parametrize("rx", RX, ids=lambda r: r.id)
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_conntrack_offload(sandbox: Sandbox, case_record: CaseRecord,
                           second_opinion: Tshark | None, sc: Scenario, rx: RxFlags,
                           tx: TxOffloads) -> None:
    """Each frame of the scenario leaves by the port of the ct_state the model
    gives it, translated as the model says, with its checksums finished as the
    tx port's offloads require; each state rule counts the model's packets."""
    sb = sandbox
    sb.add_of_br("br0")
    ports = {n: DummyPort(sb, "br0", f"p{n}", n) for n in (1, 2, 3)}
    for n, port in ports.items():
        port.configure(rx=rx if n != 3 else RxFlags(), tx=tx)
    table = Path(sb.rundir) / "flows.txt"
    table.write_text("\n".join(flows(sc)) + "\n")
    sb.ofctl("del-flows", "br0")
    sb.ofctl("add-flows", "br0", str(table))  # one call for the whole table
    model_side = ModelSide(Conntrack(), sc, rx, tx)
    steps = list(sc.steps)
    for i, (side, data) in enumerate(steps):  # grows once if a NAT range chose
        in_port = 1 if side == "c" else 2
        cookie, expected, choices = model_side.expect(in_port, data)
        res = model_side.probe(in_port, data)
        pkt = Packet.parse(data)
        crash = ovs_crash(res, rx, pkt.ipv, pkt.proto)
        if crash is not None:
            expected.bugs.append(crash)
        elif expected.frames:
            known = ovs_frame(data, expected.frames[0], res, rx)
            if known is not None:
                expected.bugs.append(known[0])
                expected.ovs_allowed = [{known[1]: expected.csum_state[0]}]
        deviation = ovs_state(res)
        if deviation is not None:
            known_state(sb, ports, in_port, data, cookie, expected, deviation, model_side,
                        case_record, f"{sc.name} step {i}")
            return  # a sighting, decided at the case's end (datapath/verdict.py)
        try:
            captured = send_and_expect(ports[in_port], [data], ports[OUT_PORT[cookie]], expected,
                                       title=f"{sc.name} step {i}: {RULES[cookie]}",
                                       steps=case_record.steps, second_opinion=second_opinion)
        except FrameMismatch as exc:
            elsewhere = {f"p{n}": [f.hex() for f in p.read_tx()] for n, p in ports.items()}
            flows_now = sb.appctl("dpctl/dump-flows").stdout
            exc.context = (f"{exc.context}; expected by the rule for {RULES[cookie]!r}; the "
                           f"frames that left elsewhere: {elsewhere}; datapath flows:\n"
                           f"{flows_now}")
            raise
        model_side.commit_step(in_port, data, captured[0], choices)
        if i == len(sc.steps) - 1 and sc.server is not None and sc.nat is not None:
            # The server answers whatever the range gave (its first address and
            # port when the packet was invalid and nothing was chosen).
            conn = next((c for c in model_side.ct.conns if c.nat), None)
            ports_lo = sc.nat.ports[0] if sc.nat.ports else 0
            chosen = (sc.nat.addrs[0], ports_lo) if conn is None else \
                (conn.reply.dst, conn.reply.dport)
            steps += [("s", f) for f in sc.server(chosen)]
    for n, port in ports.items():
        assert port.read_tx() == [], f"p{n} sent frames the model does not expect"
    sb.appctl("revalidator/purge")  # the datapath flows' stats go to the rules
    assert rule_counts(sb) == model_side.counts, \
        "packets per ct_state rule (" + ", ".join(f"{c}={RULES[c]}" for c in RULES) + ")"

