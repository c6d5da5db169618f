"""The Linux kernel as the remote tunnel endpoint: it judges what OVS sends,
and OVS must take what it sends.

Topology (system-traffic.at's): br0 (10.1.1.100, the switch namespace's
kernel behind it) with an OVS tunnel port; br-underlay with ovs-p0, a veth to
p0 in at_ns0; in at_ns0 a Linux VXLAN, Geneve, GRE (gretap) or ip6gre device
(10.1.1.1) over an IPv4 or IPv6 underlay, checksums on or off on both ends.

- OVS encapsulates, the kernel decapsulates: UDP, TCP and ping from the host
  to at_ns0.  The verdict is the kernel's: the payload reaches the socket in
  at_ns0 or not, and at_ns0's checksum and header error counters
  (/proc/net/snmp, snmp6: what `nstat -az` shows) and the device's rx
  errors move or not.  Every encapsulated frame on p0 is also compared with
  the model's push.
- The kernel encapsulates, OVS decapsulates: the same from at_ns0 to the
  host; every frame out of br0 is compared with the model's pop, and OVS's
  tunnel-pop drop and checksum-error coverage counters must stay at zero.
- iperf3 through each tunnel kind the kernel has, userspace TSO off and on
  (seed 001: OVS segments tunnelled TSO packets in software): Gbit/s and
  retransmits go to the case's metrics; only a collapse fails.

A kind this kernel cannot make skips, naming the kernel feature (each id
declares its native device: fixtures/requires.py).
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from datapath.backends.native_tunnel import link_errors
from fixtures.records import record_for
from fixtures.system_userspace.kernel_peer import WireCheck
from fixtures.system_userspace.system_traffic import Traffic, payload, start, underlay
from fixtures.tunnel import csum_id
from harness.wait import WaitTimeout

POP_COUNTERS = ("datapath_drop_tunnel_pop_error", "native_tnl_l3csum_err",
                "native_tnl_l4csum_err")
KINDS = ["vxlan", "geneve", "gre"]
IPERF_SECONDS = 3
COLLAPSE_FACTOR = 10


def native_kind(kind: str, ul: int) -> str:
    if kind == "gre":
        return "gre" if ul == 4 else "ip6gre"
    return kind if ul == 4 else f"{kind}6"


# kind x underlay, each id declaring the Linux device it needs.
KIND_UNDERLAY = pytest.mark.parametrize(
    "kind,underlay_ip", [pytest.param(kind, ul, id=f"{kind}-ul{ul}",
                                      marks=pytest.mark.requires(kernel=native_kind(kind, ul)))
                         for kind in KINDS for ul in (4, 6)])
pytestmark = pytest.mark.requires(backend="tap")


def build(system_traffic, kind: str, ul: int, csum: bool, flavour: str):  # type: ignore[no-untyped-def]
    """The topology with checksums on or off at both ends."""
    native = native_kind(kind, ul)
    t: Traffic = system_traffic(flavour)
    start(t)
    ns = underlay(t, ul == 6)
    remote_ovs, remote_ns = ("fc00::1", "fc00::100") if ul == 6 else ("172.31.1.1",
                                                                      "172.31.1.100")
    ovs_type = "ip6gre" if native == "ip6gre" else kind
    extra = ("options:packet_type=legacy_l2",) if ovs_type == "ip6gre" else ()
    t.add_ovs_tunnel(ovs_type, "br0", "at_tnl0", remote_ovs, "10.1.1.100/24",
                     f"options:csum={'true' if csum else 'false'}", *extra, v6=ul == 6)
    if kind == "gre":
        args: tuple[str, ...] = (("local", remote_ovs) if ul == 6 else ()) + \
            (("csum",) if csum else ())
    else:
        args = ("id", "0", "dstport", "4789") if kind == "vxlan" else ("vni", "0")
        if ul == 4:
            args += ("udpcsum",) if csum else ("noudpcsum",)
        elif not csum:
            args += ("udp6zerocsumtx", "udp6zerocsumrx")
    t.add_native_tunnel(native, "ns_tnl0", ns, remote_ns, "10.1.1.1/24", args, v6=ul == 6)
    if ul == 6:
        t.wait_ping6(ns, remote_ns)
    t.check_ping(ns, remote_ns, six=ul == 6)
    return t, ns, ovs_type


@pytest.mark.parametrize("flavour", ["userspace", "tso"])
@pytest.mark.parametrize("csum", [True, False], ids=[csum_id(True), csum_id(False)])
@KIND_UNDERLAY
def test_kernel_judges_both_directions(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                                       kind: str, underlay_ip: int, csum: bool,
                                       flavour: str) -> None:
    """UDP (600 bytes), TCP (60000 bytes) and ping, host -> at_ns0 (OVS
    encapsulates, Linux decapsulates) and at_ns0 -> host (Linux encapsulates,
    OVS decapsulates).  Verifies: every payload arrives intact and every ping
    is answered; no checksum or header error in either kernel's counters nor
    on the Linux device; OVS's tunnel-pop error counters stay at zero; and
    every frame on the wire in both directions against the model."""
    t, ns, ovs_type = build(system_traffic, kind, underlay_ip, csum, flavour)
    record = record_for(request.node)
    wire = WireCheck.start(t, request, ovs_type, ns, csum=csum, title=f"{kind} csum "
                           f"{'on' if csum else 'off'}")
    dev_before = link_errors(ns, "ns_tnl0")
    pop_before = {c: t.sb.coverage(c) for c in POP_COUNTERS}
    # OVS encapsulates, the kernel decapsulates.
    t.nc_transfer(payload(600), ns, "10.1.1.1", 4321, None, udp=True)
    t.nc_transfer(payload(60000), ns, "10.1.1.1", 1234, None)
    t.check_ping(None, "10.1.1.1")
    # The kernel encapsulates, OVS decapsulates.
    t.nc_transfer(payload(600), None, "10.1.1.100", 4322, ns, udp=True)
    t.nc_transfer(payload(60000), None, "10.1.1.100", 1235, ns)
    t.check_ping(ns, "10.1.1.100")
    dev_after = link_errors(ns, "ns_tnl0")
    pop_after = {c: t.sb.coverage(c) for c in POP_COUNTERS}
    record.params["kernel device errors"] = json.dumps(dev_after)
    assert dev_after == dev_before, f"at_ns0's {kind} device counted errors: {dev_after}"
    moved = {c: pop_after[c] - pop_before[c] for c in POP_COUNTERS
             if pop_after[c] != pop_before[c]}
    assert not moved, f"OVS dropped tunnel packets from the Linux endpoint: {moved}"
    wire.verify()


# ----------------------------------------------------------------------------
# iperf3 through each kernel tunnel kind, userspace TSO off and on


def iperf(t: Traffic, ns) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """iperf3 -c from the host (OVS encapsulates) to a server in at_ns0."""
    server = t.env.spawn("iperf3 server", ["iperf3", "-s", "-1", "-B", "10.1.1.1", "-p", "5201"],
                         ns, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        t.wait_listen(ns, 5201)
    except WaitTimeout as exc:
        raise AssertionError(f"iperf3 server did not listen: {exc}") from None
    # rc=None: a failed run says why in its JSON ("error"), reported below
    res = t.run(["iperf3", "-c", "10.1.1.1", "-p", "5201", "-t", str(IPERF_SECONDS), "-J"],
                None, timeout=IPERF_SECONDS + 30, rc=None)
    server.wait(10)
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"iperf3 printed no JSON through OVS (rc {res.rc}):\n"
                             f"{res.stdout[-1500:]}\n{res.stderr[-1500:]}") from None
    if "error" in data:
        raise AssertionError(f"iperf3 through OVS failed: {data['error']}\n"
                             f"{t.sb.dpctl('dump-flows').stdout[-3000:]}")
    end = data["end"]
    return {"gbps": round(end["sum_received"]["bits_per_second"] / 1e9, 3),
            "retransmits": float(end["sum_sent"].get("retransmits", 0))}


@KIND_UNDERLAY
def test_iperf3_through_kernel_tunnel(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                                      kind: str, underlay_ip: int) -> None:
    """iperf3 -t 3 from the host through OVS's tunnel (checksums on) to the Linux
    endpoint, in a fresh ovs-vswitchd with userspace TSO off, then on (OVS then
    gets 64 KB TCP packets from br0 and segments them in software before the
    push).  Verifies that both runs transfer data and that TSO-on reaches at
    least a tenth of TSO-off; records gbps/retransmits per setting."""
    record = record_for(request.node)
    results: dict[str, dict[str, float]] = {}
    for flavour in ("userspace", "tso"):
        name = "off" if flavour == "userspace" else "on"
        t, ns, _ = build(lambda f: system_traffic(f, label=f"tso_{name}"), kind,
                         underlay_ip, True, flavour)
        # Not an upstream test: seconds of iperf3 (segmented in software with TSO
        # on) grow packet batches, so OVS_VSWITCHD_STOP's batch check is not ours.
        t.env.sb.expected_batch_grow = None
        try:
            results[name] = iperf(t, ns)
        finally:
            t.env.close()
        for key, value in results[name].items():
            metric = f"{key}_tso_{name}"
            record.metrics[metric] = value
            record.params[metric] = f"{value:g}"
            request.node.user_properties.append((metric, value))
    off, on = results["off"]["gbps"], results["on"]["gbps"]
    summary = (f"{kind} over IPv{underlay_ip}: TSO off {off:.2f} Gbit/s "
               f"({results['off']['retransmits']:g} retransmits), TSO on {on:.2f} Gbit/s "
               f"({results['on']['retransmits']:g})")
    record.params["throughput"] = summary
    print(summary)
    assert off > 0 and on > 0, summary
    assert on >= off / COLLAPSE_FACTOR, f"TSO collapse: {summary}"
