"""Seed 000 (ovs-dev, "Add support for TSO with DPDK", 2020): iperf3 TCP between
two namespaces through the userspace datapath, userspace TSO off and on.

The thread reports userspace TSO collapsing TCP throughput (6 Mbit/s with
thousands of retransmits) where it should multiply it.  This case measures both
settings, records Gbit/s and retransmits for each (results, report, JUnit), and
fails only on a collapse: TSO-on throughput below a tenth of TSO-off.  It never
fails on a timing threshold; the figures are there to be read.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from datapath.backends import dpdk, tap
from datapath.backends.env import RealEnv
from datapath.backends.kernel import KernelPort
from fixtures.records import record_for
from harness.wait import WaitTimeout, wait_until

SECONDS = 3  # per measurement
COLLAPSE_FACTOR = 10
NET = "10.77.0"
PORT = 5201


class MeasurementFailed(AssertionError):
    """A throughput run that produced no usable measurement."""


def _pair(env, backend: str) -> tuple[KernelPort, KernelPort]:  # type: ignore[no-untyped-def]
    """br1 (NORMAL) with two ports whose kernel sides are 10.77.0.1 and .2."""
    tap.add_bridge(env.sb, "br1")
    env.sb.ofctl("add-flow", "br1", "actions=NORMAL")
    ports = []
    for i in (1, 2):
        ns = env.peer(f"p{i}")
        if backend == "tap":
            port = tap.TapPort(env.sb, "br1", f"p{i}", i, env.switch_ns, ns)
        else:
            port = dpdk.DpdkTapPort(env.sb, "br1", f"p{i}", i, env.switch_ns, ns)
        env.own(port)
        ns.ip("addr", "add", f"{NET}.{i}/24", "dev", f"p{i}")
        ports.append(port)
    return ports[0], ports[1]


def measure(env, backend: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """One iperf3 run, client in p1's namespace, server in p2's."""
    _pair(env, backend)
    client_ns, server_ns = env.peer("p1"), env.peer("p2")
    server = env.spawn("iperf3 server", ["iperf3", "-s", "-1", "-B", f"{NET}.2", "-p",
                                         str(PORT)], server_ns,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: server.poll() is not None or f":{PORT}" in server_ns.run(
            ["ss", "-Hltn"]).stdout, 10, what="iperf3 server to listen")
    except WaitTimeout as exc:
        raise MeasurementFailed(str(exc)) from None
    proc = client_ns.run(["iperf3", "-c", f"{NET}.2", "-p", str(PORT), "-t", str(SECONDS),
                          "-J"], timeout=SECONDS + 30, check=False)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise MeasurementFailed(f"iperf3 printed no JSON (rc {proc.returncode}):\n"
                                f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}") from None
    if "error" in data:
        raise MeasurementFailed(f"iperf3: {data['error']}\n"
                                f"{env.sb.dpctl('dump-flows').stdout}")
    end = data["end"]
    return {"gbps": round(end["sum_received"]["bits_per_second"] / 1e9, 3),
            "retransmits": float(end["sum_sent"].get("retransmits", 0))}


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.requires(backend=b))
                                     for b in ("tap", "dpdk")])
def test_iperf3_tso_off_and_on(real_env: Callable[..., RealEnv], request: pytest.FixtureRequest,
                               backend: str) -> None:
    """iperf3 -t 3 through br1 (NORMAL) between two namespaces, on tap ports (or
    DPDK net_tap ports), once with userspace TSO off and once on, each in a fresh
    ovs-vswitchd (the setting is read at start).

    Verifies that both runs transfer data and that TSO-on throughput is at least
    a tenth of TSO-off (the seed's collapse).  Records gbps_tso_off/on and
    retransmits_tso_off/on."""
    record = record_for(request.node)
    results: dict[bool, dict[str, float]] = {}
    for tso in (False, True):
        env = real_env(backend, tso=tso, label=f"tso_{'on' if tso else 'off'}")
        try:  # TCP that does not get through is OVS's failure on any backend
            results[tso] = measure(env, backend)
        finally:
            env.close()
        name = "on" if tso else "off"
        for key, value in results[tso].items():
            metric = f"{key}_tso_{name}"
            record.metrics[metric] = value
            record.params[metric] = f"{value:g}"
            request.node.user_properties.append((metric, value))  # JUnit property
    off, on = results[False]["gbps"], results[True]["gbps"]
    summary = (f"{backend}: TSO off {off:.2f} Gbit/s ({results[False]['retransmits']:g} "
               f"retransmits), TSO on {on:.2f} Gbit/s ({results[True]['retransmits']:g})")
    record.params["throughput"] = summary
    print(summary)
    assert off > 0 and on > 0, summary
    assert on >= off / COLLAPSE_FACTOR, f"TSO collapse: {summary}"
