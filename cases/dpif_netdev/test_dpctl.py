"""dpctl/add-flow checks: dpif-netdev.at 1111-1113 (no packets, exact outputs)."""
from __future__ import annotations

import re

import pytest

from harness.control import check
from harness.sandbox import Sandbox

FLOW_KEY = ("in_port(1),eth(),eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,"
            "tos={tos},ttl=64,frag=no),tcp(src=80,dst=8080)")
FLOW_ADD = r"flow_add.*tcp\(src=80,dst=8080\)"  # the log line of one of those flows


def br0_with_p1(sandbox, *bridge_settings: str) -> None:
    sandbox.add_of_br("br0", "add-port", "br0", "p1", "--", "set", "interface", "p1",
                      "type=dummy", f"options:pstream=punix:{sandbox.rundir}/p0.sock",
                      "--", "set", "bridge", "br0", "datapath-type=dummy", *bridge_settings)


@pytest.mark.upstream("dpif-netdev - check dpctl/add-flow in_port exact match")
def test_add_flow_needs_exact_in_port(sandbox: Sandbox) -> None:
    """A datapath flow without an exact in_port is refused (EINVAL), with the
    exact error text, and the reason is logged."""
    br0_with_p1(sandbox, "other-config:datapath-id=1234", "fail-mode=secure")
    check(sandbox.appctl("dpctl/add-flow", "eth(),eth_type(0x0800),ipv4()", "3", rc=2),
          stdout="", stderr="ovs-vswitchd: updating flow table (Invalid argument)\n"
                            "ovs-appctl: ovs-vswitchd: server returned an error\n")
    sandbox.log.wait(re.escape("flow: in_port is not an exact match"), after=sandbox.log.case,
                     timeout=5)
    sandbox.allow_log(r"flow: in_port is not an exact match", r"failed to put")


@pytest.mark.upstream("dpif-netdev - check dpctl/add-flow wider ip match")
def test_add_flow_wider_ip_match(sandbox: Sandbox) -> None:
    """Zero and wide IPv4 masks are accepted; the log stays clean (checked at stop)."""
    br0_with_p1(sandbox)
    sandbox.appctl("revalidator/pause")
    for flow in ("in_port(1),eth_type(0x0800),ipv4(src=0.0.0.0/192.0.0.0,"
                 "dst=0.0.0.0/192.0.0.0,frag=no)",
                 "in_port(1),eth_type(0x0800),ipv4(src=192.1.1.1/0.0.0.0,"
                 "dst=49.1.1.1/0.0.0.0,frag=no)"):
        check(sandbox.appctl("dpctl/add-flow", flow, "3"), stdout="")
    sandbox.appctl("revalidator/resume")


@pytest.mark.upstream("dpif-netdev - mega flow ufid uniqueness for different wildcards", since="4.0")
def test_megaflow_ufid_unique_per_wildcards(sandbox: Sandbox) -> None:
    """Two flows whose masked keys are equal (tos 0x20/0 and tos 0) but whose masks
    differ are two megaflows with two distinct mega_ufids."""
    br0_with_p1(sandbox)
    sandbox.appctl("vlog/set", "dpif_netdev:dbg")
    sandbox.appctl("vlog/disable-rate-limit", "dpif_netdev")
    sandbox.appctl("revalidator/pause")
    for tos in ("0x20/0", "0"):
        sandbox.appctl("dpctl/add-flow", FLOW_KEY.format(tos=tos), "3")
    sandbox.appctl("revalidator/resume")
    def ufids() -> set[str]:
        return {m.group(1) for ln in sandbox.log.lines(after=sandbox.log.case)
                if re.search(FLOW_ADD, ln)
                for m in [re.search(r"mega_ufid:([0-9a-f-]+)", ln)] if m}
    # Both flow_add lines reach the log; then exactly two distinct mega_ufids.
    sandbox.log.wait(FLOW_ADD, after=sandbox.log.case, count=2)
    assert len(ufids()) == 2, ufids()
