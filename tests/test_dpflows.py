"""harness/dpflows: the installed flows as dpctl/dump-flows shows them, and the
wait for a reconfiguration to reach them, against a stand-in datapath whose
revalidator rewrites the flows only when asked to wait for a round."""
from __future__ import annotations

import pytest

from harness.control import Result
from harness.dpflows import installed, wait_retranslated
from harness.wait import WaitTimeout

OLD = "tnl_push(tnl_port(4789),header(udp(src=0,dst=4789,csum=0x0)),out_port(100))"
NEW = "tnl_push(tnl_port(4789),header(udp(src=0,dst=4789,csum=0xffff)),out_port(100))"
DROP = "drop"
ARP = "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0806)"
IP = "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src=10.0.0.1,frag=no)"


class Datapath:
    """dpctl/dump-flows and revalidator/wait: `rounds` rounds after which the
    flows take their new actions (None: never)."""

    def __init__(self, flows: dict[str, str], new: dict[str, str], rounds: int | None) -> None:
        self.flows, self.new, self.rounds, self.waits = dict(flows), new, rounds, 0

    def appctl(self, command: str, *args: str, target: str = "ovs-vswitchd") -> Result:
        if command == "revalidator/wait":
            self.waits += 1
            if self.rounds is not None and self.waits >= self.rounds:
                self.flows.update(self.new)
            return Result([command], 0, "", "")
        assert command == "dpctl/dump-flows"
        text = "flow-dump from the main thread:\n" + "".join(
            f"{m}, packets:{self.waits}, bytes:42, used:0.{self.waits}s, actions:{a}\n"
            for m, a in self.flows.items())
        return Result([command], 0, text, "")


def test_installed_leaves_statistics_out() -> None:
    dp = Datapath({ARP: OLD, IP: "2"}, {}, None)
    assert installed(dp) == {ARP: OLD, IP: "2"}
    dp.waits = 7  # other statistics, the same flows
    assert installed(dp) == {ARP: OLD, IP: "2"}


def test_waits_rounds_until_the_flows_follow() -> None:
    dp = Datapath({ARP: OLD, IP: "2"}, {ARP: NEW}, rounds=3)
    wait_retranslated(dp, installed(dp), affected=lambda a: "tnl_push" in a)
    assert dp.waits == 3 and installed(dp)[ARP] == NEW


def test_no_wait_when_already_applied_or_unaffected() -> None:
    dp = Datapath({ARP: NEW, IP: "2"}, {}, rounds=None)
    wait_retranslated(dp, {ARP: OLD, IP: "2"}, affected=lambda a: "tnl_push" in a)
    assert dp.waits == 0


def test_a_flow_that_keeps_its_old_actions_fails_naming_it() -> None:
    dp = Datapath({ARP: OLD, IP: "2"}, {}, rounds=None)
    with pytest.raises(WaitTimeout, match=r"still with the old actions: recirc_id.*0806.*csum=0x0"):
        wait_retranslated(dp, installed(dp), affected=lambda a: "tnl_push" in a, timeout=0.2,
                          what="csum=true")



def test_to_waits_past_an_intermediate_table() -> None:
    """del-flows then add-flow: a round between them gives the flow the empty
    table's drop; with `to`, only the new rules' actions end the wait."""
    dp = Datapath({ARP: OLD, IP: "2"}, {ARP: NEW}, rounds=3)
    dp.flows[ARP] = DROP  # a round after del-flows, before add-flow
    wait_retranslated(dp, {ARP: OLD, IP: "2"}, affected=lambda a: "tnl_push" in a,
                      to=lambda a: a == NEW)
    assert dp.waits == 3 and installed(dp)[ARP] == NEW


def test_to_fails_naming_a_flow_left_with_other_actions() -> None:
    dp = Datapath({ARP: DROP, IP: "2"}, {}, rounds=None)
    with pytest.raises(WaitTimeout, match=r"with neither the old nor the new actions: "
                                          r"recirc_id.*0806.* -> drop \(was tnl_push"):
        wait_retranslated(dp, {ARP: OLD, IP: "2"}, affected=lambda a: "tnl_push" in a,
                          to=lambda a: a == NEW, timeout=0.2)
