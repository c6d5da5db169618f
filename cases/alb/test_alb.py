"""alb.at (tests 1161-1168): PMD auto load balance.

Upstream's sequence in one ovs-vswitchd with its --dummy-numa layout: the same
vsctl settings, the same `time/warp 600000 10000` to let the load balancer's
interval pass, and the same log lines waited for after a noted log position
(upstream's get_log_next_line_num: a log mark here).  The shell removes the
quotes of upstream's `other_config:pmd-auto-lb="true"`: vsctl gets none.  CHECK_ALB_PARAM compares
the last "PMD auto load balance PARAM set to" line exactly.  No frame crosses
a port in alb.at (the dry runs balance no traffic), so there is nothing to
judge with the model.
"""
from __future__ import annotations

import re

import pytest

from harness.filters import bre
from harness.ovslog import START, LogMark
from harness.sandbox import Sandbox

ALB_AT = {"file": "alb.at"}
DUMMY_NUMA = "0,0"  # alb.at's DUMMY_NUMA

ENABLED = bre("PMD auto load balance is enabled")
DISABLED = bre("PMD auto load balance is disabled")
DRY_RUN = bre("PMD auto load balance performing dry run.")
TOO_FEW = bre("PMD auto load balance nothing to do, not enough non-isolated PMDs or RxQs.")
NO_CHANGE = bre("PMD auto load balance nothing to do, no configuration changes since last check.")
CROSS_NUMA = bre("PMD auto load balance detected cross-numa polling")


def vsctl_mark(sandbox: Sandbox, *args: str) -> LogMark:
    """get_log_next_line_num; AT_CHECK([ovs-vsctl ARGS]): the mark from before."""
    since = sandbox.log.mark()
    sandbox.vsctl(*args)
    return since


def other_config(sandbox: Sandbox, key: str, value: str) -> LogMark:
    return vsctl_mark(sandbox, "set", "Open_vSwitch", ".", f"other_config:{key}={value}")


def warp(sandbox: Sandbox) -> None:
    """ovs-appctl time/warp 600000 10000: ten minutes in ten-second steps."""
    sandbox.appctl("time/warp", "600000", "10000")


def warp_and_wait(sandbox: Sandbox, *patterns: str) -> None:
    """get_log_next_line_num; time/warp 600000 10000; OVS_WAIT_UNTIL each pattern."""
    since = sandbox.log.mark()
    warp(sandbox)
    for pattern in patterns:
        sandbox.log.wait(pattern, after=since)


def check_alb_param(sandbox: Sandbox, param: str, value: str, after: LogMark = START) -> None:
    """CHECK_ALB_PARAM: wait for a "PMD auto load balance PARAM set to" line
    after `after`; the last such line says VALUE."""
    head = f"PMD auto load balance {param} set to"
    sandbox.log.wait(bre(head), after=after)
    said = [m.group(1) for ln in sandbox.log.lines(after=after)
            for m in [re.search(rf".*({re.escape(head)}.*)", ln)] if m]
    assert said[-1] == f"{head} {value}", said


def with_p0(*settings: str) -> list[str]:
    """OVS_VSWITCHD_START's `add-port br0 p0 -- set Interface p0 type=dummy-pmd ...`."""
    return ["add-port", "br0", "p0", "--", "set", "Interface", "p0", "type=dummy-pmd",
            *settings]


def open_vswitch(**config: str) -> list[str]:
    args: list[str] = []
    for key, value in config.items():
        args += ["--", "set", "Open_vSwitch", ".", f"other_config:{key.replace('_', '-')}={value}"]
    return args


@pytest.mark.upstream("ALB - default state", **ALB_AT)
def test_default_state(sandbox: Sandbox) -> None:
    """Without configuration the load balancer is off."""
    sandbox.add_of_br("br0")
    sandbox.log.wait(DISABLED)


@pytest.mark.upstream("ALB - enable/disable", **ALB_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_enable_disable(sandbox: Sandbox) -> None:
    """pmd-auto-lb turns it on and off, each change logged."""
    sandbox.add_of_br("br0", *with_p0("options:n_rxq=1"),
                      *open_vswitch(pmd_cpu_mask="1", pmd_auto_lb="true"))
    sandbox.log.wait(ENABLED)
    since = other_config(sandbox, "pmd-auto-lb", "false")
    sandbox.log.wait(DISABLED, after=since)
    since = other_config(sandbox, "pmd-auto-lb", "true")
    sandbox.log.wait(ENABLED, after=since)


@pytest.mark.upstream("ALB - min num PMD/RxQ", **ALB_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_min_num_pmd_rxq(sandbox: Sandbox) -> None:
    """A dry run needs two PMDs and more rx queues than PMDs; an unchanged
    configuration is not rechecked."""
    sandbox.add_of_br("br0", *with_p0("options:n_rxq=2"),
                      *open_vswitch(pmd_cpu_mask="1", pmd_auto_lb="true",
                                    pmd_auto_lb_load_threshold="0"))
    sandbox.log.wait(ENABLED)
    sandbox.appctl("vlog/set", "dpif_netdev:dbg")
    # 1 pmds 2 rxqs
    warp_and_wait(sandbox, TOO_FEW)
    # 2 pmds 2 rxq
    since = other_config(sandbox, "pmd-cpu-mask", "0x3")
    sandbox.log.wait(bre("There are 2 pmd threads on numa node"), after=since)
    warp(sandbox)
    sandbox.log.wait(TOO_FEW, after=since)
    # 2 pmds 3 rxqs
    since = vsctl_mark(sandbox, "set", "interface", "p0", "options:n_rxq=3")
    warp(sandbox)
    sandbox.log.wait(DRY_RUN, after=since)
    # 1 pmds 3 rxqs
    since = other_config(sandbox, "pmd-cpu-mask", "0x1")
    sandbox.log.wait(bre("There are 1 pmd threads on numa node"), after=since)
    warp(sandbox)
    sandbox.log.wait(TOO_FEW, after=since)
    # Same config as last time
    warp_and_wait(sandbox, NO_CHANGE)


@pytest.mark.upstream("ALB - cross-numa", **ALB_AT)
@pytest.mark.sandbox(dummy_numa="1,2,1,2")
def test_cross_numa(sandbox: Sandbox) -> None:
    """Queues polled across NUMA are a reason to rebalance unless every queue
    is pinned."""
    sandbox.add_of_br("br0", *with_p0("options:n_rxq=4"),
                      "--", "set", "Interface", "p0", "options:numa_id=0",
                      *open_vswitch(pmd_cpu_mask="0x3", pmd_rxq_assign="group",
                                    pmd_rxq_isolate="false", pmd_auto_lb="true",
                                    pmd_auto_lb_load_threshold="0"))
    sandbox.log.wait(ENABLED)
    sandbox.appctl("vlog/set", "dpif_netdev:dbg")
    # no pinned rxqs - cross-numa pmd could change
    warp_and_wait(sandbox, DRY_RUN, CROSS_NUMA)
    # all pinned rxqs - cross-numa pmd will not change
    sandbox.vsctl("set", "Interface", "p0", "other_config:pmd-rxq-affinity=0:0,1:0,2:1,3:1")
    warp_and_wait(sandbox, DRY_RUN, bre("Variance improvement 0%."))
    # mix of pinned (non-isolated) and non-pinned rxqs - cross-numa pmd could change
    sandbox.vsctl("remove", "Interface", "p0", "other_config", "pmd-rxq-affinity")
    sandbox.vsctl("set", "Interface", "p0", "other_config:pmd-rxq-affinity=0:0,1:0,2:1")
    warp_and_wait(sandbox, DRY_RUN, CROSS_NUMA)
    # mix of pinned (isolated) and non-pinned rxqs - cross-numa pmd could change
    sandbox.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0xf")
    sandbox.vsctl("set", "Interface", "p0", "options:n_rxq=6")
    sandbox.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-rxq-isolate=true")
    warp_and_wait(sandbox, DRY_RUN, CROSS_NUMA)


def mode_changed(algorithm: str) -> str:
    return bre(f"mode changed to: '{algorithm}'")


@pytest.mark.upstream("ALB - PMD/RxQ assignment type", **ALB_AT)
@pytest.mark.sandbox(dummy_numa=DUMMY_NUMA)
def test_assignment_type(sandbox: Sandbox) -> None:
    """The load balancer survives each assignment type change and off/on;
    roundrobin assignment is never dry-run, cycles and group are."""
    sandbox.add_of_br("br0", *with_p0("options:n_rxq=3"),
                      *open_vswitch(pmd_cpu_mask="3", pmd_auto_lb="true",
                                    pmd_auto_lb_load_threshold="0"))
    sandbox.log.wait(ENABLED)
    for algorithm in ("roundrobin", "cycles", "group"):
        since = other_config(sandbox, "pmd-rxq-assign", algorithm)
        sandbox.log.wait(mode_changed(algorithm), after=since)
        since = other_config(sandbox, "pmd-auto-lb", "false")
        sandbox.log.wait(DISABLED, after=since)
        since = other_config(sandbox, "pmd-auto-lb", "true")
        sandbox.log.wait(ENABLED, after=since)
    # Enable debug and test dryrun config checks
    sandbox.appctl("vlog/set", "dpif_netdev:dbg")
    # Just to be sure it is still set to group
    sandbox.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-rxq-assign=group")
    warp_and_wait(sandbox, DRY_RUN)
    for algorithm, outcome in (
            ("cycles", DRY_RUN),
            ("roundrobin", bre("PMD auto load balance nothing to do, "
                               "pmd-rxq-assign=roundrobin assignment type configured.")),
            ("group", DRY_RUN)):
        since = other_config(sandbox, "pmd-rxq-assign", algorithm)
        sandbox.log.wait(mode_changed(algorithm), after=since)
        warp(sandbox)
        sandbox.log.wait(outcome, after=since)


# (value set, value the log says): out of range means the default.
INTERVAL = [("10", "10 mins"), ("1", "1 mins"), ("20000", "20000 mins"), ("0", "1 mins"),
            ("100", "100 mins"), ("20001", "1 mins"), ("1000", "1000 mins"), ("-1", "1 mins")]
IMPROVEMENT = [("60", "60%"), ("0", "0%"), ("-1", "25%"), ("100", "100%"), ("101", "25%")]
LOAD = [("70", "70%"), ("0", "0%"), ("-1", "95%"), ("100", "100%"), ("101", "95%")]


@pytest.mark.upstream("ALB - interval param", **ALB_AT)
def test_interval_param(sandbox: Sandbox) -> None:
    """pmd-auto-lb-rebal-interval: 1 minute by default, 1..20000 taken, the
    default otherwise."""
    sandbox.add_of_br("br0")
    sandbox.log.wait(DISABLED)
    check_alb_param(sandbox, "interval", "1 mins")
    for value, said in INTERVAL:
        since = other_config(sandbox, "pmd-auto-lb-rebal-interval", value)
        check_alb_param(sandbox, "interval", said, since)


@pytest.mark.upstream("ALB - improvement param", **ALB_AT)
def test_improvement_param(sandbox: Sandbox) -> None:
    """pmd-auto-lb-improvement-threshold: 25 % by default, 0..100 taken, the
    default otherwise."""
    sandbox.add_of_br("br0")
    sandbox.log.wait(DISABLED)
    check_alb_param(sandbox, "improvement threshold", "25%")
    for value, said in IMPROVEMENT:
        since = other_config(sandbox, "pmd-auto-lb-improvement-threshold", value)
        check_alb_param(sandbox, "improvement threshold", said, since)


@pytest.mark.upstream("ALB - load param", **ALB_AT)
def test_load_param(sandbox: Sandbox) -> None:
    """pmd-auto-lb-load-threshold: 95 % by default, 0..100 taken, the default
    otherwise."""
    sandbox.add_of_br("br0")
    sandbox.log.wait(DISABLED)
    check_alb_param(sandbox, "load threshold", "95%")
    for value, said in LOAD:
        since = other_config(sandbox, "pmd-auto-lb-load-threshold", value)
        check_alb_param(sandbox, "load threshold", said, since)
