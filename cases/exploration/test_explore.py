"""Property-based exploration beyond the hand-picked matrices (fixtures/explore.py).

`test_explore` lets Hypothesis draw scenarios (frames, rx flags, any of the 81
tx offload sets, rewrites, plain output or tunnel push (either maybe with an
output max_len), or tunnel pop), runs each through
ovs-vswitchd on both datapath paths, and checks every frame against the model
and tshark.  The seed is fixed (derandomized): the suite explores the same
examples every run, `--explore N` (default 300) of them.  A known OVS bug that
shows exactly as known is not a finding.  A deviation is shrunk by Hypothesis
to a minimal scenario, saved to cases/regressions.json, and the case fails
naming it; `test_regression` replays every saved scenario as an id of its own.
"""
from __future__ import annotations

import pytest

from datapath.model.actions import PushTunnel, Truncate, output
from datapath.offloads import TxOffloads
from fixtures.explore import Scenario, build_frame, explore, load_regressions, rewrites, rx_flags, scenarios
from fixtures.frames import corrupt_outer, encapsulate
from fixtures.tunnel import LOCAL_MAC, REMOTE_MAC, TUNNEL_OFPORT, UNDERLAY, spec


def corrupted(frame: bytes, what: str) -> bytes:
    if what == "none":
        return frame
    return corrupt_outer(frame, "bad_outer_ip" if what == "outer_ip" else "bad_outer_csum")


def run(tunnel_rig, scenario: Scenario) -> None:  # type: ignore[no-untyped-def]
    """One scenario through OVS: both paths, every frame against the model."""
    frame = build_frame(scenario["frame"])
    rx, tx = rx_flags(scenario["rx"]), TxOffloads.parse(scenario["tx"])
    match, rw = rewrites(scenario)
    t = scenario["tunnel"]
    tun = spec(t["kind"], int(t["underlay"]), bool(t["csum"]))
    if scenario["direction"] == "decap":
        what = scenario["corrupt"]
        if (what == "outer_ip" and tun.underlay == 6) or (what == "outer_l4" and not tun.csum):
            what = "none"  # no such checksum to break
        local, remote, _ = UNDERLAY[tun.underlay]
        sent = corrupted(encapsulate(tun.kind, local, remote, LOCAL_MAC, REMOTE_MAC, frame,
                                     csum=bool(tun.csum)), what)
        rig, record = tunnel_rig(tun.kind, tun.underlay)
        _fresh(record)
        rig.receive(record, tun, "in_port=t1" + (f",{match}" if match else ""),
                    [*rw, output("p1")], sent, rx, tx)
        return
    cut = [Truncate(scenario["max_len"])] if scenario.get("max_len") else []
    if scenario["topology"] == "plain":
        rig, record = tunnel_rig("plain", 4)
        _fresh(record)
        rig.forward(record, None, "in_port=p1" + (f",{match}" if match else ""),
                    [*rw, *cut, output("p2")], [frame], rx, tx)
        return
    rig, record = tunnel_rig(tun.kind, tun.underlay)
    _fresh(record)
    rig.forward(record, tun, "in_port=p1" + (f",{match}" if match else ""),
                [*rw, *cut, PushTunnel(tun, str(TUNNEL_OFPORT)), output("p2")], [frame],
                rx, tx)


def _fresh(record) -> None:  # type: ignore[no-untyped-def]
    """One example's evidence at a time: the record keeps the last one only."""
    record.steps.clear()
    record.commands.clear()


def test_explore(tunnel_rig, request: pytest.FixtureRequest) -> None:
    """Verifies, for each drawn scenario, every frame and field against the model
    on both paths; a deviation becomes a saved regression and fails the case."""
    explore(scenarios(), lambda scenario: run(tunnel_rig, scenario),
            request.config.getoption("explore"), request.node,
            "frames, checksums, rewrites, tunnel push and pop, TSO")


@pytest.mark.parametrize("scenario", [pytest.param(e["scenario"], id=e["id"])
                                      for e in load_regressions()
                                      if e["scenario"].get("direction") in ("encap", "decap")])
def test_regression(tunnel_rig, scenario: Scenario) -> None:
    """A scenario exploration once found deviating, replayed as it was saved."""
    run(tunnel_rig, scenario)
