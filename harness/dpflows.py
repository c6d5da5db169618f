"""The datapath's installed flows, and the wait for a reconfiguration to reach them.

`ovs-vsctl` returns once ovs-vswitchd has taken a database change (its cur_cfg),
but flows already installed in the datapath keep their old actions until a
revalidator round re-translates them.  In OVS 4.0.0, for a tunnel port's
options, the chain is: bridge_reconfigure() hands the netdev its new options
and commits cur_cfg; on the main loop's next pass ofproto_run() sees the
connectivity change and port_modify() marks the backer for revalidation; on
the pass after that type_run() bumps the revalidators' sequence; and only a
revalidator round begun after that bump rewrites the flow.  A packet sent in
between meets the old actions.  Upstream's own tests wait for this with
`ovs-appctl revalidator/wait` where it matters (ofproto-dpif.at); the wait
here is on the event itself: the installed flows' actions.
"""
from __future__ import annotations

import re
from typing import Callable, Protocol

from harness.control import Result
from harness.wait import wait_until

_STATS = re.compile(r", (packets|bytes|used|dp|offloaded|dp-extra-info):[^,]*(?=,)")


class Appctl(Protocol):
    """Anything that runs ovs-appctl commands (a Sandbox)."""

    def appctl(self, command: str, *args: str, target: str = ...,
               rc: int | None = ...) -> Result: ...


def installed(sb: Appctl) -> dict[str, str]:
    """`dpctl/dump-flows`: each installed flow's match (PMD and statistics left
    out) and its actions.  Flows with the same match in several PMD threads
    appear once, with the actions of the last one listed."""
    flows: dict[str, str] = {}
    for line in sb.appctl("dpctl/dump-flows").stdout.splitlines():
        match, sep, actions = line.partition(", actions:")
        if not sep or line.startswith("flow-dump from"):
            continue
        flows[_STATS.sub("", match + ",").rstrip(",").strip()] = actions
    return flows


def wait_retranslated(sb: Appctl, before: dict[str, str], *,
                      affected: Callable[[str], bool] = lambda actions: True,
                      to: Callable[[str], bool] | None = None,
                      timeout: float = 10.0, what: str = "the reconfiguration") -> None:
    """After a change that alters what installed flows do: wait until every
    flow of `before` (from installed(), read before the change) whose actions
    are `affected` is gone from the datapath or carries other actions; with
    `to`, actions for which `to` holds.  `to` is for a change made of several
    commands (del-flows, then add-flow): a revalidator round between them may
    leave a flow with an intermediate table's actions for a while.  Each look
    that finds one not yet retranslated waits out a revalidator round first.
    The caller must know the change alters those actions; if OVS never applies
    it to them, this fails saying which flows kept their old actions."""
    stale = {m: a for m, a in before.items() if affected(a)}

    def pending() -> dict[str, str]:
        """The stale flows still installed without their new actions, with the
        actions they have now."""
        now = installed(sb)
        return {m: now[m] for m, a in stale.items() if m in now
                and (now[m] == a if to is None else not to(now[m]))}

    def applied() -> bool:
        if not pending():
            return True
        sb.appctl("revalidator/wait")
        return not pending()

    def describe() -> str:
        left = pending()
        old = [f"{m} -> {a}" for m, a in left.items() if a == stale[m]]
        other = [f"{m} -> {a} (was {stale[m]})" for m, a in left.items() if a != stale[m]]
        return "; ".join((["still with the old actions: " + "; ".join(old)] if old else [])
                         + (["with neither the old nor the new actions: " + "; ".join(other)]
                            if other else []))

    wait_until(applied, timeout, what=f"the datapath's installed flows to follow {what}",
               describe=describe)
