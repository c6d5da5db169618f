"""Property-based exploration of nested tunnels and check_pkt_len.

`test_explore_nested` lets Hypothesis draw scenarios (fixtures/explore.py,
nested_scenarios): a frame (maybe a TSO one), p1's rx flags, any of the 81 tx
offload sets on p3, header rewrites, maybe check_pkt_larger(N) (a larger
packet goes on, a smaller one is dropped), then a push into tunnel t1 whose
underlay bridge br2 pushes it into tunnel t2, whose underlay bridge br3 sends
it out of p3: VXLAN, Geneve or GRE in either, over IPv4 or IPv6, csum on or
off.  This is upstream's "tso + dual tunnel encap" topology, with everything
it fixes drawn instead.  Every example runs on both datapath paths and every
frame is checked against the model and tshark.  The seed is fixed; a
deviation is shrunk, saved to cases/regressions.json and replayed by
`test_nested_regression`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from datapath import model
from datapath.backends.base import BackendError
from datapath.backends.dummy import DummyPort
from datapath.expect import send_and_expect
from datapath.model import gso
from datapath.model.actions import PushTunnel, ofctl_actions, output
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import TxOffloads
from datapath.paths import CACHE_MODES, both_paths, mode_for
from evidence.tshark import Tshark
from fixtures.explore import (
    Rigs,
    Scenario,
    build_frame,
    explore,
    load_regressions,
    nested_scenarios,
    rewrites,
    rx_flags,
    scenario_id,
)
from harness.control import Transcript, check
from harness.install import OvsInstall
from harness.logscan import scan_lines
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, set_interface


@dataclass(frozen=True)
class Hop:
    """One tunnel port and the underlay bridge its packets leave through."""

    port: str
    ofport: int
    bridge: str  # the tunnel port's bridge
    underlay: str  # the bridge that holds the tunnel's local address
    mac: str  # that bridge's hwaddr
    neighbour: str  # the remote endpoint's MAC
    key: int
    addresses: dict[int, tuple[str, str, int]]  # family: (local, remote, prefix length)


HOPS = (Hop("t1", 11, "br1", "br2", "aa:66:aa:66:00:00", "aa:66:aa:66:00:01", 123,
            {4: ("1.1.2.88", "1.1.2.92", 24), 6: ("2001:cafe::88", "2001:cafe::92", 64)}),
        Hop("t2", 21, "br2", "br3", "aa:66:bb:66:00:00", "aa:66:bb:66:00:01", 456,
            {4: ("1.1.3.88", "1.1.3.92", 24), 6: ("2001:beef::88", "2001:beef::92", 64)}))


class NestedRig:
    """br1 (p1, t1) -> br2 (t1's underlay; t2) -> br3 (t2's underlay; p3), one
    ovs-vswitchd for all examples, reconfigured per example where it differs."""

    def __init__(self, install: OvsInstall, rundir: Path, record: CaseRecord,
                 tshark: Tshark | None) -> None:
        self.record, self.tshark = record, tshark
        self.sb = Sandbox(install, rundir, Transcript(record.commands.append),
                          other_config={"userspace-tso-enable": "true", **CACHE_MODES["emc"]})
        self.sb.start()
        self.mode = "emc"
        self.state: dict[str, object] = {}
        try:
            self._build()
        except BaseException:
            self.sb.kill()
            raise

    def _build(self) -> None:
        sb = self.sb
        args = ["add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy"]
        for hop in HOPS:
            args += ["--", "add-br", hop.underlay, "--", "set", "bridge", hop.underlay,
                     "datapath-type=dummy", f"other-config:hwaddr={hop.mac}"]
        sb.vsctl(*args)
        self.p1 = DummyPort(sb, "br1", "p1", 1)
        self.p3 = DummyPort(sb, "br3", "p3", 3)
        for hop in HOPS:
            local, remote, _ = hop.addresses[4]
            sb.vsctl(*add_port(hop.bridge, hop.port, type="vxlan",
                               options={"remote_ip": remote, "key": hop.key},
                               ofport_request=hop.ofport))
            for family, (local, remote, plen) in hop.addresses.items():
                cmd = "ip4addr" if family == 4 else "ip6addr"
                check(sb.appctl(f"netdev-dummy/{cmd}", hop.underlay, f"{local}/{plen}"),
                      stdout="OK\n")
                check(sb.appctl("tnl/neigh/set", hop.underlay, remote, hop.neighbour),
                      stdout="OK\n")
        check(sb.appctl("tnl/egress_port_range", "57363", "57363"), stdout="OK\n")
        sb.ofctl("del-flows", "br2")
        sb.ofctl("add-flow", "br2", "in_port=br2,actions=output:21")

    def alive(self) -> bool:
        return self.sb.vswitchd is not None and self.sb.vswitchd.alive()

    def _set(self, key: str, value: object, apply: Callable[[], object]) -> None:
        """Run `apply` if this setting differs from the last example's."""
        if self.state.get(key) != value:
            apply()
            self.state[key] = value

    def specs(self, scenario: Scenario) -> list[TunnelSpec]:
        out = []
        for hop, t in zip(HOPS, scenario["tunnels"]):
            local, remote, _ = hop.addresses[int(t["underlay"])]
            out.append(TunnelSpec(t["kind"], local, remote, hop.mac, hop.neighbour,
                                  key=hop.key, csum=bool(t["csum"])))
        return out

    def run(self, scenario: Scenario) -> None:
        """One scenario: configure what differs, send on both paths, check."""
        sb, record = self.sb, self.record
        frame = build_frame(scenario["frame"])
        rx = rx_flags(scenario["rx"], int(scenario["tso"]))
        tx = TxOffloads.parse(scenario["tx"])
        match, rw = rewrites(scenario)
        specs = self.specs(scenario)
        limit = scenario["check_pkt_len"]
        sid = scenario_id(scenario)
        mode = mode_for(sid)
        since = sb.log.mark()
        self._set("mode", mode, lambda: sb.vsctl(
            "set", "Open_vSwitch", ".",
            *(f"other_config:{k}={v}" for k, v in CACHE_MODES[mode].items())))
        self.mode = mode
        for hop, spec in zip(HOPS, specs):
            self._set(hop.port, spec, lambda h=hop, s=spec: sb.vsctl(*set_interface(
                h.port, type=s.kind, options={"remote_ip": s.remote_ip, "csum": bool(s.csum)})))
        rw_text = ofctl_actions(rw)
        head = f"in_port=p1{',' + match if match else ''},actions={rw_text + ',' if rw else ''}"
        flows = ([head + "output:11"] if limit is None else
                 [head + f"check_pkt_larger({limit})->NXM_NX_REG0[0],resubmit(,1)",
                  "table=1,reg0=0x1,actions=output:11", "table=1,reg0=0,actions=drop"])

        def set_flows() -> None:
            sb.ofctl("del-flows", "br1")
            for flow in flows:
                sb.ofctl("add-flow", "br1", flow)
        self._set("flows", flows, set_flows)
        try:
            self.p1.configure(rx=rx)
            self.p3.configure(tx=tx)
        except BackendError as exc:
            pytest.skip(str(exc))
        larger = limit is None or gso.check_pkt_len(model.receive(frame, rx)) > int(limit)
        if larger:
            expected = model.forward(frame, [*rw, PushTunnel(specs[0], "11"),
                                             PushTunnel(specs[1], "21"), output("p3")], tx, rx)
        else:
            expected = model.Expected(frames=[], notes=[
                f"check_pkt_larger({limit}): {gso.check_pkt_len(model.receive(frame, rx))} "
                "bytes are not larger: dropped"])
        title = f"{sid} {'/'.join(s.id for s in specs)} {rx.id} {tx.id}"
        both_paths(sb, mode, lambda path: send_and_expect(
            self.p1, [frame], self.p3, expected, title=f"{title} [{path}]", steps=record.steps,
            second_opinion=self.tshark), record.steps)
        bad = scan_lines(sb.log.lines(after=since), ())
        assert not bad, "unexpected lines in ovs-vswitchd.log:\n" + "\n".join(bad)


@pytest.fixture
def nested(ovs_install: OvsInstall, case_record: CaseRecord, second_opinion: Tshark | None,
           tmp_path: Path) -> Iterator[Rigs[NestedRig]]:
    rigs = Rigs(lambda rundir: NestedRig(ovs_install, rundir, case_record, second_opinion),
                tmp_path, case_record, "nested")
    yield rigs
    rigs.close()


def test_explore_nested(nested: Rigs[NestedRig], request: pytest.FixtureRequest) -> None:
    """Verifies, for each drawn scenario, every frame and field of the nested
    encapsulation (or the drop check_pkt_len asks for) against the model on both
    paths; a deviation becomes a saved regression and fails the case."""
    explore(nested_scenarios(), nested.run,
            max(1, request.config.getoption("explore") // 3), request.node,
            "a tunnel inside a tunnel, check_pkt_len")


@pytest.mark.parametrize("scenario", [pytest.param(e["scenario"], id=e["id"])
                                      for e in load_regressions()
                                      if e["scenario"].get("direction") == "nested"])
def test_nested_regression(nested: Rigs[NestedRig], scenario: Scenario) -> None:
    """A nested scenario exploration once found deviating, replayed as it was saved."""
    nested.run(scenario)
