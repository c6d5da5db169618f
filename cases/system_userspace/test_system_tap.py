"""system-tap.at (Open vSwitch 4.0.0), as `make check-system-tso` runs it:
its one test, with the tso flavour's OVS_TRAFFIC_VSWITCHD_START
(system-tso-macros.at: userspace-tso-enable=true).

Upstream's sequence: br0 with actions=normal, two tap devices added to br0
as `type=tap` ports and then moved into at_ns0 and at_ns1, a ping of three
and an HTTP GET between the namespaces.  Beyond upstream, every frame that
crosses OVS, both ways, is captured on the two taps and judged against the
model's NORMAL output for the tx port's offloads
(fixtures/system_userspace/system_l2.py's Crossings; with TSO on, a tap hands
OVS its segments with checksums pending, and OVS must finish or segment them
for the other tap as that port's offloads say).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath.backends.tap import negotiated
from datapath.offloads import TxOffloads
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_l2 import Crossings, switched, with_tso
from fixtures.system_userspace.system_traffic import Traffic

pytestmark = pytest.mark.requires(backend="tap")

FILE = "system-tap.at"
# OVS_TRAFFIC_VSWITCHD_STOP's own argument in the test.
STOP_ALLOW = r".*ethtool command ETHTOOL_G.*"


def tap_tx(t: Traffic, tap: str) -> TxOffloads:
    """What `tap`'s tx can finish, as TUNSETOFFLOAD negotiated it (read while
    the tap is still in OVS's namespace; OVS 4.0 reports no tx offload keys in
    a tap's Interface status)."""
    _, tx, tso = negotiated(t.host, tap)
    return with_tso(tx, tso)


@pytest.mark.upstream("traffic between namespaces using tap", file=FILE)
def test_traffic_between_namespaces_using_tap(system_traffic: Callable[..., Traffic],
                                              request: pytest.FixtureRequest) -> None:
    """Upstream's ping (3 answered, FORMAT_PING) and OVS_GET_HTTP (curl exits
    0) from at_ns0 to at_ns1 over two tap ports; every ARP, ICMP and TCP
    frame OVS forwarded, both ways, as the model says it leaves the other tap."""
    t: Traffic = system_traffic("tso")
    t.sb.allow_log(STOP_ALLOW)
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    for tap in ("tap0", "tap1"):
        t.ip("tuntap", "add", tap, "mode", "tap")
    for tap in ("tap0", "tap1"):
        t.sb.vsctl("add-port", "br0", tap, "--", "set", "int", tap, "type=tap")
    tx = {tap: tap_tx(t, tap) for tap in ("tap0", "tap1")}
    t.ip("link", "set", "tap0", "netns", ns0.name)
    t.ip("link", "set", "tap1", "netns", ns1.name)
    for ns, tap, addr in ((ns0, "tap0", "10.1.1.1/24"), (ns1, "tap1", "10.1.1.2/24")):
        t.ip("link", "set", "dev", tap, "up", ns=ns)
        t.ip("addr", "add", addr, "dev", tap, ns=ns)

    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "tap0", True), (ns1, "tap1", False),
             switched(tx["tap1"]))
    wire.hop("at_ns1 -> br0 -> at_ns0", (ns1, "tap1", True), (ns0, "tap0", False),
             switched(tx["tap0"]))

    t.check_ping(ns0, "10.1.1.2")
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    # 3 requests, 3 replies, the ARP exchange and curl's TCP connection
    assert wire.verify() >= 10
