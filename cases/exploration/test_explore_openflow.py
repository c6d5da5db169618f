"""Property-based exploration of flow tables and packet sequences, judged by the
model's OpenFlow pipeline (fixtures/explore_openflow.py draws them).

`test_explore_openflow` lets Hypothesis draw scenarios: a flow table of three
tables (conntrack in zones, commits with ct_mark, ct_label, SNAT and DNAT,
matches on ct_state, ct_zone, ct_mark and reg0, resubmits, outputs) and up to
eight steps of three hosts on br0's dummy ports p1, p2 and p3 (TCP, UDP and
ICMP echo conversations, answers to what arrived, ICMP errors).  The table
goes into one ovs-vswitchd, each packet in on its host's port, and nothing of
it is written for the case: what must leave comes from the model reading the
same flow table (datapath/model/openflow).  Judged, per packet, every frame on
every port (and tshark's opinion of each); after the sequence, each flow's
n_packets and n_bytes (ovs-ofctl dump-flows after revalidator/purge pushed the
datapath's counts) and the connection table (dpctl/dump-conntrack: both
tuples, zone, ct_mark, ct_label).  The seed is fixed; `--explore N` runs N/2
examples; a deviation is shrunk, saved to cases/regressions.json and replayed
by `test_openflow_regression`.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest

from datapath.backends.dummy import DummyPort
from datapath.model import hooks
from datapath.model.openflow import OpenFlow
from datapath.verdict import PortFrames, observed, settle
from evidence.tshark import Tshark
from fixtures.explore import Rigs, Scenario, counter, explore, load_regressions
from fixtures.explore_openflow import PORTS, Hosts, conntrack_entries, openflow_scenarios, parse_conntrack
from harness.control import Transcript
from harness.install import OvsInstall
from harness.logscan import scan_lines
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.wait import wait_until

STATS = re.compile(r"cookie=0x([0-9a-f]+),.*?\bn_packets=(\d+), n_bytes=(\d+)")


class OpenFlowRig:
    """br0 with dummy ports p1, p2 and p3 (OpenFlow ports 1-3), one ovs-vswitchd
    for every example; each example starts from no flow and no connection."""

    def __init__(self, install: OvsInstall, rundir: Path, record: CaseRecord,
                 tshark: Tshark | None) -> None:
        self.record, self.tshark, self.rundir = record, tshark, rundir
        self.tally = counter(record)  # packets in, frames out, connections
        self.sb = Sandbox(install, rundir, Transcript(record.commands.append))
        self.sb.start()
        try:
            self.sb.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath-type=dummy")
            self.ports = {name: DummyPort(self.sb, "br0", name, num) for num, name in PORTS.items()}
        except BaseException:
            self.sb.kill()
            raise

    def alive(self) -> bool:
        return self.sb.vswitchd is not None and self.sb.vswitchd.alive()

    def run(self, scenario: Scenario) -> None:
        sb, record = self.sb, self.record
        since = sb.log.mark()
        sb.ofctl("del-flows", "br0")
        sb.appctl("dpctl/flush-conntrack")
        sb.appctl("revalidator/purge")
        for port in self.ports.values():
            port.read_tx()
        flows = scenario["flows"]
        table = self.rundir / "flows.txt"
        table.write_text("\n".join(flows) + "\n")
        sb.ofctl("add-flows", "br0", str(table))
        correct, known = OpenFlow.of(flows, PORTS), OpenFlow.of(flows, PORTS)
        hosts = Hosts(int(scenario["ipv"]))
        met: list[Any] = []  # the known bugs the known-bug layer's replay ran into
        for i, step in enumerate(scenario["steps"], 1):
            num, frame, conv, from_client = hosts.packet(step)
            rx_name = PORTS[num]
            with hooks.observing(hooks.Observer()):
                right = correct.run(frame, rx_name).sent
            outcome = known.run(frame, rx_name)
            ovs = outcome.sent
            met += [b for b in outcome.bugs if b not in met]
            hosts.delivered(conv, from_client, {p: e.frames for p, e in right.items()})
            rx = self.ports[rx_name]
            base = rx.rx_count()
            got: dict[str, list[bytes]] = {p: [] for p in PORTS.values()}
            rx.send([frame])
            wait_until(lambda: rx.rx_count() >= base + 1, what=f"{rx_name} to take step {i}'s frame")

            def read() -> list[PortFrames]:
                out = []
                for name, port in self.ports.items():
                    got[name].extend(port.read_tx())
                    differs = ovs[name].frames != right[name].frames
                    instead = replace(ovs[name], bugs=[*ovs[name].bugs, *(
                        b for b in outcome.bugs if b not in ovs[name].bugs)])
                    out.append(PortFrames(name, right[name] if differs else ovs[name],
                                          list(got[name]), sent=[frame], rx_port=rx_name,
                                          known_instead=instead if differs else None))
                return out
            verdict = settle(record.steps, read, title=f"step {i} {step}: {rx_name} in",
                             second_opinion=self.tshark)
            self.tally("packets_in", 1)
            self.tally("frames_out", verdict.check())
        self._check_tables(correct, known, met)
        self.tally("connections", len(conntrack_entries(correct.conntrack.conns)))
        bad = scan_lines(sb.log.lines(after=since), ())
        assert not bad, "unexpected lines in ovs-vswitchd.log:\n" + "\n".join(bad)

    def _check_tables(self, correct: OpenFlow, known: OpenFlow, met: list[Any]) -> None:
        """Each flow's statistics and the connection table, against the model's;
        where they differ as the known-bug layer's replay says (its bugs `met`),
        a sighting of those bugs."""
        sb = self.sb
        sb.appctl("revalidator/purge")  # the datapath flows' counts go to their rules
        stats = {int(c, 16): (int(n), int(b))
                 for c, n, b in STATS.findall(sb.ofctl("dump-flows", "br0").stdout)}
        conns = parse_conntrack(sb.appctl("dpctl/dump-conntrack").stdout)
        wrong = _table_diff(stats, conns, correct)
        if not wrong:
            return
        if met and not _table_diff(stats, conns, known):
            for bug in met:
                observed(self.record.steps, bug, title="flow statistics and connections",
                         what=wrong[0])
            return
        raise AssertionError("\n".join(wrong))


def _table_diff(stats: dict[int, tuple[int, int]], conns: list[str], model: OpenFlow) -> list[str]:
    """What dump-flows' statistics and dump-conntrack's entries show otherwise than `model`."""
    wrong = [f"ovs-ofctl dump-flows br0: {f.text}: n_packets={stats.get(f.cookie, ('?', '?'))[0]}"
             f" n_bytes={stats.get(f.cookie, ('?', '?'))[1]}, model says n_packets={f.n_packets}"
             f" n_bytes={f.n_bytes}"
             for f in model.flows if stats.get(f.cookie) != (f.n_packets, f.n_bytes)]
    expect = conntrack_entries(model.conntrack.conns)
    if conns != expect:
        wrong.append("dpctl/dump-conntrack differs from the model's table:\n"
                     + "".join(f"  OVS only:   {e}\n" for e in conns if e not in expect)
                     + "".join(f"  model only: {e}\n" for e in expect if e not in conns))
    return wrong


@pytest.fixture
def openflow_rigs(ovs_install: OvsInstall, case_record: CaseRecord,
                  second_opinion: Tshark | None, tmp_path: Path) -> Iterator[Rigs[OpenFlowRig]]:
    rigs = Rigs(lambda rundir: OpenFlowRig(ovs_install, rundir, case_record, second_opinion),
                tmp_path, case_record, "openflow")
    yield rigs
    rigs.close()


def test_explore_openflow(openflow_rigs: Rigs[OpenFlowRig], request: pytest.FixtureRequest) -> None:
    """Verifies, for each drawn flow table and packet sequence, every frame on
    every port, the flows' statistics and the connection table against the
    model's pipeline; a deviation becomes a saved regression and fails the case."""
    explore(openflow_scenarios(), openflow_rigs.run,
            max(1, request.config.getoption("explore") // 2), request.node,
            "conntrack and NAT (OpenFlow tables)")


@pytest.mark.parametrize("scenario", [pytest.param(e["scenario"], id=e["id"])
                                      for e in load_regressions()
                                      if e["scenario"].get("direction") == "openflow"])
def test_openflow_regression(openflow_rigs: Rigs[OpenFlowRig], scenario: Scenario) -> None:
    """An OpenFlow scenario exploration once found deviating, replayed as it was saved."""
    openflow_rigs.run(scenario)
