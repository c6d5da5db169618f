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
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPerror, TCPerror, UDPerror
from scapy.layers.inet6 import (
    ICMPv6DestUnreach,
    ICMPv6EchoReply,
    ICMPv6EchoRequest,
    ICMPv6PacketTooBig,
    IPerror6,
    IPv6,
)
from scapy.layers.l2 import Ether
from scapy.packet import Packet as ScapyPacket
from scapy.packet import Raw

from datapath import model
from datapath.backends.dummy import DummyPort
from datapath.deviations.conntrack import ovs_crash, ovs_frame, ovs_state
from datapath.expect import send_and_expect
from datapath.model import Expected
from datapath.model.actions import Action, output
from datapath.model.bugs import OvsBug
from datapath.model.conntrack import EST, INV, NEW, REL, RPL, Conntrack, Ct, Nat, Result
from datapath.model.packet import Packet
from datapath.offloads import CsumState, RxFlags, TxOffloads
from datapath.verdict import ABSENT, PRESENT, record_step
from harness.compare import FrameMismatch
from harness.control import check
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.tshark import Tshark
from harness.wait import wait_until

G, B, P = CsumState.GOOD, CsumState.BAD, CsumState.PARTIAL
RX = [RxFlags(), RxFlags(ip=G, l4=G), RxFlags(ip=B), RxFlags(l4=B), RxFlags(l4=P),
      RxFlags(ip=P, l4=P)]
TX = [TxOffloads(), TxOffloads.parse("ip,l4")]
MARK, LABEL = 0x1234, 0xFF << 120 | 0xABCD
CLIENT_MAC, SERVER_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02"
A, S, VIP = "10.1.1.1", "10.1.1.2", "10.1.1.100"
A6, S6 = "fc00::1", "fc00::2"
RULES = {1: "inv", 2: "rel", 3: "rel rpl", 4: "new", 5: "est", 6: "est rpl", 7: "other"}


def l3(src: str, dst: str) -> ScapyPacket:
    return IPv6(src=src, dst=dst) if ":" in src else IP(src=src, dst=dst)


def to_server(pkt: ScapyPacket) -> bytes:
    return bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / pkt)


def to_client(pkt: ScapyPacket) -> bytes:
    return bytes(Ether(src=SERVER_MAC, dst=CLIENT_MAC) / pkt)


def tcp(src: str, dst: str, sport: int, dport: int, flags: str, seq: int, ack: int = 0,
        data: bytes = b"") -> ScapyPacket:
    return l3(src, dst) / TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack,
                              window=8192) / Raw(data)


@dataclass
class Scenario:
    """What the client (p1) and the server (p2) send, in order; the server's
    frames are written as the server sees the connection (after NAT)."""

    name: str
    drawn_from: str  # the system-traffic.at title the scenario follows
    steps: list[tuple[str, bytes]]  # ("c" from p1 | "s" from p2, frame)
    nat: Nat | None = None
    zone: int = 0
    zone_rpl: int | None = None  # the zone of p2's packets (default: zone)
    # A range leaves the choice to OVS: the server's frames are then written
    # by a function of the (address, port) chosen.
    server: Callable[[tuple[str, int]], list[bytes]] | None = None


def handshake(c: str, s: str, sport: int, dport: int,
              seen: tuple[str, str, int, int] | None = None) -> list[tuple[str, bytes]]:
    """SYN, SYN+ACK, ACK, a request and its answer (RFC 9293 3.5).  `seen` is
    (client address, server address, client port, server port) as the server
    sees them, after NAT."""
    sc, ss, scp, ssp = seen or (c, s, sport, dport)
    return [("c", to_server(tcp(c, s, sport, dport, "S", 1000))),
            ("s", to_client(tcp(ss, sc, ssp, scp, "SA", 5000, 1001))),
            ("c", to_server(tcp(c, s, sport, dport, "A", 1001, 5001))),
            ("c", to_server(tcp(c, s, sport, dport, "PA", 1001, 5001, b"GET / HTTP/1.1\r\n"))),
            ("s", to_client(tcp(ss, sc, ssp, scp, "PA", 5001, 1018, b"HTTP/1.1 200 OK\r\n")))]


def udp_query(c: str, s: str, sport: int = 40000, dport: int = 53) -> bytes:
    return to_server(l3(c, s) / UDP(sport=sport, dport=dport) / Raw(b"query"))


def udp_answer(s: str, c: str, sport: int = 53, dport: int = 40000) -> bytes:
    return to_client(l3(s, c) / UDP(sport=sport, dport=dport) / Raw(b"answer"))


def port_unreachable(s: str, c: str, cport: int) -> bytes:
    """The server's ICMP error about the client's query, as it received it."""
    if ":" in s:
        return to_client(IPv6(src=s, dst=c) / ICMPv6DestUnreach(code=4)
                         / IPerror6(src=c, dst=s) / UDPerror(sport=cport, dport=53) / Raw(b"query"))
    return to_client(IP(src=s, dst=c) / ICMP(type=3, code=3)
                     / IPerror(src=c, dst=s) / UDPerror(sport=cport, dport=53) / Raw(b"query"))


def range_server(choice: tuple[str, int]) -> list[bytes]:
    addr, port = choice
    return [udp_answer(S, addr, dport=port), port_unreachable(S, addr, port)]


SCENARIOS = [
    Scenario("tcp4", "conntrack - IPv4 HTTP", handshake(A, S, 40000, 80)),
    Scenario("tcp6", "conntrack - IPv6 HTTP", handshake(A6, S6, 40000, 80)),
    Scenario("udp4_zone", "conntrack - zones",
             [("c", udp_query(A, S)), ("c", udp_query(A, S)), ("s", udp_answer(S, A)),
              ("c", udp_query(A, S))], zone=1),
    Scenario("udp4_other_zone", "conntrack - multiple zones",
             [("c", udp_query(A, S)), ("s", udp_answer(S, A)), ("c", udp_query(A, S))],
             zone=1, zone_rpl=2),
    Scenario("icmp4_ping", "conntrack - IPv4 ping",
             [("c", to_server(IP(src=A, dst=S) / ICMP(type=8, id=7, seq=1) / Raw(b"ping"))),
              ("s", to_client(IP(src=S, dst=A) / ICMP(type=0, id=7, seq=1) / Raw(b"ping"))),
              ("s", to_client(IP(src=S, dst=A) / ICMP(type=0, id=8, seq=1) / Raw(b"ping")))]),
    Scenario("icmp6_ping", "conntrack - IPv6 ping",
             [("c", to_server(IPv6(src=A6, dst=S6) / ICMPv6EchoRequest(id=7, seq=1))),
              ("s", to_client(IPv6(src=S6, dst=A6) / ICMPv6EchoReply(id=7, seq=1)))]),
    Scenario("snat_port", "conntrack - SNAT with port range",
             handshake(A, S, 40000, 80, seen=("10.1.1.240", S, 34567, 80)),
             nat=Nat.of("src", "10.1.1.240", 34567)),
    Scenario("dnat_port", "conntrack - more complex DNAT",
             handshake(A, VIP, 40000, 80, seen=(A, S, 40000, 8080)),
             nat=Nat.of("dst", S, 8080)),
    Scenario("snat_range_icmp_related", "conntrack - ICMP related with SNAT",
             [("c", udp_query(A, S))], nat=Nat.of("src", "10.1.1.240-10.1.1.241", (34567, 34568)),
             server=range_server),
    Scenario("snat6_icmp6_related", "conntrack - IPv6 ICMP6 Related with SNAT",
             [("c", udp_query(A6, S6)), ("s", port_unreachable(S6, "fc00::240", 40000)),
              ("s", udp_answer(S6, "fc00::240"))], nat=Nat.of("src", "fc00::240")),
    Scenario("dnat6_icmp6_related", "conntrack - IPv6 HTTP with DNAT",
             handshake(A6, "fc00::100", 40000, 80, seen=(A6, S6, 40000, 8080))[:3]
             + [("s", to_client(IPv6(src=S6, dst=A6) / ICMPv6PacketTooBig(mtu=1280)
                                / IPerror6(src=A6, dst=S6)
                                / TCPerror(sport=40000, dport=8080, flags="A", seq=1001,
                                           ack=5001)))],
             nat=Nat.of("dst", S6, 8080)),
    Scenario("invalid", "conntrack - invalid",
             [("c", to_server(tcp(A, S, 40000, 80, "SA", 1000, 1))),
              ("s", udp_answer(S, A)),
              ("s", port_unreachable(S, A, 40001)),
              ("c", to_server(tcp(A, S, 40000, 80, "S", 1000))),
              ("s", to_client(tcp(S, A, 80, 40000, "A", 5000, 1001)))]),
]


# -- the flow table, and the model's reading of it --------------------------------

def flows(sc: Scenario) -> list[str]:
    z1 = sc.zone
    z2 = sc.zone if sc.zone_rpl is None else sc.zone_rpl
    commit = Ct(Conntrack(), zone=z1, commit=True, mark=(MARK, 0xFFFFFFFF),
                label=(LABEL, (1 << 128) - 1), nat=sc.nat).ofctl()
    meta = f"ct_mark={MARK:#x},ct_label={LABEL:#x}"
    return [
        f"table=0,priority=100,in_port=1,ip,actions=ct(zone={z1},nat,table=1)",
        f"table=0,priority=100,in_port=1,ipv6,actions=ct(zone={z1},nat,table=1)",
        f"table=0,priority=100,in_port=2,ip,actions=ct(zone={z2},nat,table=1)",
        f"table=0,priority=100,in_port=2,ipv6,actions=ct(zone={z2},nat,table=1)",
        "table=0,priority=1,actions=drop",
        "table=1,cookie=1,priority=100,ct_state=+trk+inv,actions=3",
        "table=1,cookie=2,priority=95,in_port=1,ct_state=+trk+rel-rpl,actions=2",
        "table=1,cookie=3,priority=95,in_port=2,ct_state=+trk+rel+rpl,actions=1",
        *(f"table=1,cookie=4,priority=90,in_port=1,{eth},ct_state=+trk+new,actions={commit},2"
          for eth in families(sc.nat)),  # ct needs an IP match (of the NAT's family)
        f"table=1,cookie=5,priority=90,in_port=1,ct_state=+trk+est-rpl,{meta},actions=2",
        f"table=1,cookie=6,priority=90,in_port=2,ct_state=+trk+est+rpl,{meta},actions=1",
        "table=1,cookie=7,priority=1,actions=3",
    ]


def families(nat: Nat | None) -> tuple[str, ...]:
    if nat is None or not nat.kind:
        return ("ip", "ipv6")
    return ("ipv6",) if ":" in nat.addrs[0] else ("ip",)


def rule_for(in_port: int, res: Result, nat: Nat | None) -> int:
    """The cookie of the table 1 rule a packet in this state matches."""
    s = res.state
    committed = res.committed and res.conn is not None
    meta_ok = committed and res.conn is not None and (res.conn.mark, res.conn.label) == (MARK, LABEL)
    if s & INV:
        return 1
    if s & REL:
        return 2 if in_port == 1 and not s & RPL else 3 if in_port == 2 and s & RPL else 7
    if s & NEW and in_port == 1 and (res.key is None or ("ipv6" if ":" in res.key.src else "ip")
                                     in families(nat)):
        return 4
    if s & EST and meta_ok:
        if in_port == 1 and not s & RPL:
            return 5
        if in_port == 2 and s & RPL:
            return 6
    return 7


OUT_PORT = {1: 3, 2: 2, 3: 1, 4: 2, 5: 2, 6: 1, 7: 3}


@dataclass
class ModelSide:
    """The model's side of a scenario: its connection table, the scenario, the
    ports' offloads, and the packets each state rule must have counted."""

    ct: Conntrack
    sc: Scenario
    rx: RxFlags
    tx: TxOffloads
    counts: dict[int, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))

    def zone(self, in_port: int) -> int:
        return self.sc.zone if in_port == 1 or self.sc.zone_rpl is None else self.sc.zone_rpl

    def actions(self, table: Conntrack, in_port: int, data: bytes) -> tuple[int, list[Action]]:
        """The rule the packet matches and the actions it goes through."""
        zone = self.zone(in_port)
        probe = copy.deepcopy(table)
        model.forward(data, [Ct(probe, zone=zone, nat=Nat(), recirc=1)], self.tx, self.rx)
        cookie = rule_for(in_port, probe.last, self.sc.nat)
        acts: list[Action] = [Ct(table, zone=zone, nat=Nat(), recirc=1)]
        if cookie == 4:
            acts.append(Ct(table, zone=zone, commit=True, mark=(MARK, 0xFFFFFFFF),
                           label=(LABEL, (1 << 128) - 1), nat=self.sc.nat))
        return cookie, acts + [output(f"p{OUT_PORT[cookie]}")]

    def probe(self, in_port: int, data: bytes) -> Result:
        """The state table 0's ct gives the packet (the table left as it is)."""
        probe = copy.deepcopy(self.ct)
        model.forward(data, [Ct(probe, zone=self.zone(in_port), nat=Nat(), recirc=1)],
                      self.tx, self.rx)
        return probe.last

    def _forward(self, in_port: int, data: bytes, choice: tuple[str, int] | None,
                 table: Conntrack) -> Expected:
        if choice is not None:
            key = self.probe(in_port, data).key
            assert key is not None
            table.pin(self.zone(in_port), key, *choice)
        return model.forward(data, self.actions(table, in_port, data)[1], self.tx, self.rx)

    def expect(self, in_port: int, data: bytes) -> tuple[int, Expected, list[tuple[str, int]]]:
        """What must leave, and by which rule.  A NAT range allows every choice
        in it ("any address/port in the range"): the frames of each are allowed
        in place of the first's."""
        res = self.probe(in_port, data)
        cookie = rule_for(in_port, res, self.sc.nat)
        choices: list[tuple[str, int]] = []
        if cookie == 4 and self.sc.nat is not None and self.sc.nat.kind and res.key is not None:
            choices = self.sc.nat.candidates(res.key)
        first: Expected | None = None
        options: list[tuple[str, int] | None] = [*choices] or [None]
        for choice in options:
            out = self._forward(in_port, data, choice, copy.deepcopy(self.ct))
            if first is None:
                first = out
                first.allowed = first.padded("allowed")
            else:
                first.allowed[0][out.frames[0]] = out.csum_state[0]
        assert first is not None
        return cookie, first, choices

    def commit_step(self, in_port: int, data: bytes, captured: bytes,
                    choices: list[tuple[str, int]]) -> None:
        """Advance the model's table by the packet, pinning the NAT choice OVS made
        (consistent for the connection from then on)."""
        pick = next((c for c in choices
                     if self._forward(in_port, data, c, copy.deepcopy(self.ct)).frames[0]
                     == captured), choices[0] if choices else None)
        cookie = rule_for(in_port, self.probe(in_port, data), self.sc.nat)
        self._forward(in_port, data, pick, self.ct)
        self.counts[cookie] += 1


def known_state(sb: Sandbox, ports: dict[int, DummyPort], in_port: int, data: bytes,
                cookie: int, expected: Expected, deviation: tuple[OvsBug, int],
                model_side: "ModelSide",
                case_record: CaseRecord, title: str) -> None:
    """A packet OVS is known to classify otherwise (datapath/deviations/conntrack.py):
    a sighting if it leaves exactly by the port of OVS's state, as the model
    forwards it there (the case then ends: OVS's table and the model's differ
    from here on, so no later packet could be judged, and the collector makes the
    id an xfail); a failure if it leaves as the model says (the entry is stale)
    or anywhere else."""
    bug, state = deviation
    ovs_cookie = rule_for(in_port, Result(state, conn=model_side.probe(in_port, data).conn), None)
    ovs_port = OUT_PORT[ovs_cookie]
    ovs_frames = model.forward(data, [output(f"p{ovs_port}")], model_side.tx,
                               model_side.rx).frames
    base = ports[in_port].rx_count()
    ports[in_port].send([data])
    got: dict[int, list[bytes]] = {n: [] for n in ports}

    def left() -> bool:
        for n, port in ports.items():
            got[n] += port.read_tx()
        return ports[in_port].rx_count() > base and any(got.values())
    wait_until(left, 5, what=f"the frame sent to p{in_port} to leave somewhere")
    model_port = OUT_PORT[cookie]
    seen = got[ovs_port] == ovs_frames and not any(got[n] for n in got if n != ovs_port)
    record_step(case_record.steps, f"{title}: {RULES[cookie]} (OVS: {RULES[ovs_cookie]})",
                f"p{in_port}", f"p{model_port}", sent=[data], captured=got[model_port],
                expected=expected,
                diff=[f"the model: {RULES[cookie]} (p{model_port}); OVS: {RULES[ovs_cookie]} "
                      f"(p{ovs_port})"] + [f"left by p{n}: {[f.hex() for f in fs]}"
                                           for n, fs in got.items() if fs],
                bugs={bug.key: PRESENT if seen else ABSENT})
    if seen:
        return
    if got[model_port] == expected.frames:
        raise AssertionError(bug.gone())
    raise AssertionError(f"{title}: neither the model's p{model_port} nor OVS's known "
                         f"p{ovs_port}: {[(n, [f.hex() for f in fs]) for n, fs in got.items()]}")


def rule_counts(sb: Sandbox) -> dict[int, int]:
    out: dict[int, int] = {}
    for line in check(sb.ofctl("dump-flows", "br0", "table=1")).stdout.splitlines():
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
    check(sb.ofctl("del-flows", "br0"))
    check(sb.ofctl("add-flows", "br0", str(table)))  # one call for the whole table
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
            flows_now = check(sb.appctl("dpctl/dump-flows")).stdout
            raise FrameMismatch(exc.expected, exc.got, exc.lines, context=(
                f"{exc.context}; expected by the rule for {RULES[cookie]!r}; the frames that "
                f"left elsewhere: {elsewhere}; datapath flows:\n{flows_now}")) from None
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
    check(sb.appctl("revalidator/purge"))  # the datapath flows' stats go to the rules
    assert rule_counts(sb) == model_side.counts, \
        "packets per ct_state rule (" + ", ".join(f"{c}={RULES[c]}" for c in RULES) + ")"

