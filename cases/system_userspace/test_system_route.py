"""system-route.at, as `make check-system-userspace` runs it: ovs-vswitchd's
route cache (`ovs/route/show`, `ovs/route/lookup`, `ovs/route/rule/show`)
following the kernel's routes, addresses and rules, and OVS's route-table
library read directly (`ovstest test-lib-route-table-dump` and `-monitor`).

ovs-vswitchd runs in the run's switch namespace with system routes on
(fixtures/system_userspace/system_traffic.py): that namespace is upstream's host, where the
tap devices, addresses, routes and rules are made; it goes away with every
device and route at teardown (upstream's on_exit).  No frame crosses OVS in
these tests, so there is nothing for the model to judge.

Only the userspace flavour: check-system-tso's suite does not include
system-route.at.

Where upstream compares an output once (after `revalidator/wait`, its
"chance to act"), so do we, including the negative checks (a route or rule
OVS must not take): there is no event to wait for there.  Where upstream
waits (OVS_WAIT_UNTIL_EQUAL), we wait for that output.

The route-table library checks run `tests/ovstest` of an OVS build tree (a
test program that install prefixes and distribution packages do not ship):
with `--ovs-bindir BUILD`, those tests run whole; otherwise they skip,
naming the program.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from fixtures.system_userspace.system_traffic import Traffic
from harness.control import Result
from harness.install import InstallError, OvsInstall, real_program
from harness.wait import settled, wait_until

pytestmark = pytest.mark.requires(backend="tap")

FILE = "system-route.at"
NOT_FOUND_42 = "Table 'table=42' not found\novs-appctl: ovs-vswitchd: server returned an error\n"


def upstream(title: str) -> pytest.MarkDecorator:
    return pytest.mark.upstream(title, file=FILE)


@pytest.fixture
def route(system_traffic: Callable[..., Traffic]) -> Traffic:
    """OVS_TRAFFIC_VSWITCHD_START() (userspace flavour)."""
    t: Traffic = system_traffic("userspace")
    return t


@pytest.fixture
def ovstest(ovs_install: OvsInstall) -> Path:
    """tests/ovstest of the OVS under test, or a skip naming it."""
    layout = ovs_install.layout
    cand = layout.root / "tests" / "ovstest"
    if not layout.kind.startswith("build tree") or not cand.is_file():
        pytest.skip(f"needs ovstest (tests/ovstest of an OVS build tree): {layout.describe()} "
                    "has none; run with --ovs-bindir BUILD_TREE")
    try:
        return real_program(cand)
    except InstallError as exc:
        pytest.skip(str(exc))


def route_show(t: Traffic, *args: str, rc: int | None = 0) -> Result:
    return t.sb.appctl("ovs/route/show", *args, rc=rc)


def cached(t: Traffic, pattern: str, *args: str) -> str:
    """ovs-appctl ovs/route/show | grep PATTERN | sort (a fixed string)."""
    text = route_show(t, *args).stdout
    return "".join(sorted(ln + "\n" for ln in text.splitlines() if pattern in ln))


def wait_cached(t: Traffic, pattern: str, want: str) -> None:
    """OVS_WAIT_UNTIL_EQUAL([ovs-appctl ovs/route/show | grep PATTERN | sort], [want])."""
    got = settled(lambda: cached(t, pattern), want, 10,
                  what=f"ovs/route/show's {pattern} routes")
    assert got == want, f"ovs/route/show | grep {pattern}: expected\n{want}got\n{got}"


def tap(t: Traffic, *names: str) -> None:
    """ip tuntap add name NAME mode tap; ip link set NAME up (removed with the
    switch namespace, upstream's on_exit)."""
    for name in names:
        t.ip("tuntap", "add", "name", name, "mode", "tap")
    for name in names:
        t.ip("link", "set", name, "up")


def table_dump(t: Traffic, ovstest: Path, *cmd: str) -> list[str]:
    """`ovstest test-lib-route-table-dump` (or another ovstest command) in the
    switch namespace: its output lines."""
    env = [f"{k}={v}" for k, v in t.sb.install.env.items()]
    res = t.run(["env", *env, str(ovstest), *cmd], timeout=60)
    return res.stdout.splitlines()


def awk(lines: list[str], regex: str, *cols: int) -> str:
    """awk '/REGEX/{print $C1" "$C2...}'."""
    out = ""
    for line in lines:
        if re.search(regex, line):
            words = line.split()
            out += " ".join(words[c - 1] if c <= len(words) else "" for c in cols) + "\n"
    return out


def nexthops(lines: list[str], prefix: str) -> str:
    """grep PREFIX.*nexthop | sort."""
    return "".join(sorted(ln + "\n" for ln in lines if prefix in ln and "nexthop" in
                          ln[ln.index(prefix):]))


def wait_dad(t: Traffic, dev: str) -> None:
    """The event upstream's retried `ip -6 route add ... src` waits for: the
    device's IPv6 addresses leave the tentative state (duplicate address
    detection, RFC 4862 §5.4), after which the kernel takes them as sources."""
    wait_until(lambda: not t.host.run(["ip", "-6", "addr", "show", "dev", dev,
                                       "tentative"]).stdout.strip(), 10,
               what=f"{dev}'s IPv6 addresses to finish duplicate address detection")


# ----------------------------------------------------------------------------


@upstream("ovs-route - add/remove system route")
def test_add_remove_system_route(route: Traffic) -> None:
    """An address on a tap adds its subnet and local routes to OVS's cache;
    deleting it removes them."""
    t = route
    tap(t, "p1-route")
    t.ip("addr", "add", "10.0.0.17/24", "dev", "p1-route")
    wait_cached(t, "p1-route", "Cached: 10.0.0.0/24 dev p1-route SRC 10.0.0.17\n"
                "Cached: 10.0.0.17/32 dev p1-route SRC 10.0.0.17 local\n")
    t.ip("addr", "del", "10.0.0.17/24", "dev", "p1-route")
    wait_cached(t, "p1-route", "")


@upstream("ovs-route - add system route with src - ipv4")
def test_system_route_with_src_ipv4(route: Traffic) -> None:
    """Routes with a gateway and a preferred source: OVS caches both."""
    t = route
    t.ip("link", "set", "br0", "up")
    t.ip("addr", "add", "192.168.9.2/24", "dev", "br0")
    t.ip("addr", "add", "192.168.9.3/24", "dev", "br0")
    t.ip("route", "add", "192.168.10.12/32", "dev", "br0", "via", "192.168.9.1", "src",
         "192.168.9.2")
    t.ip("route", "add", "192.168.10.13/32", "dev", "br0", "via", "192.168.9.1", "src",
         "192.168.9.3")
    wait_cached(t, "192.168.10.1", "Cached: 192.168.10.12/32 dev br0 GW 192.168.9.1 SRC 192.168.9.2\n"
                "Cached: 192.168.10.13/32 dev br0 GW 192.168.9.1 SRC 192.168.9.3\n")


@upstream("ovs-route - add system route with src - ipv6")
def test_system_route_with_src_ipv6(route: Traffic) -> None:
    """The same over IPv6.  Upstream retries `ip -6 route add ... src` until
    the kernel takes the source; here the route is added once the source
    addresses finished duplicate address detection (wait_dad)."""
    t = route
    t.ip("link", "set", "br0", "up")
    t.ip("-6", "addr", "add", "fc00:db8:cafe::2/64", "dev", "br0")
    t.ip("-6", "addr", "add", "fc00:db8:cafe::3/64", "dev", "br0")
    wait_dad(t, "br0")
    t.ip("-6", "route", "add", "fc00:db8:beef::12/128", "via", "fc00:db8:cafe::1", "dev", "br0",
         "src", "fc00:db8:cafe::3")
    t.ip("-6", "route", "add", "fc00:db8:beef::13/128", "via", "fc00:db8:cafe::1", "dev", "br0",
         "src", "fc00:db8:cafe::2")
    wait_cached(t, "fc00:db8:beef::1",
                "Cached: fc00:db8:beef::12/128 dev br0 GW fc00:db8:cafe::1 SRC fc00:db8:cafe::3\n"
                "Cached: fc00:db8:beef::13/128 dev br0 GW fc00:db8:cafe::1 SRC fc00:db8:cafe::2\n")


@upstream("ovs-route - add system route - ipv4 via ipv6 nexthop")
def test_system_route_ipv4_via_ipv6_nexthop(route: Traffic) -> None:
    """An IPv4 route via an IPv6 link-local gateway (RFC 5549): OVS caches it
    with the bridge's link-local address (from its hwaddr, RFC 4291 §2.5.1)
    as the source."""
    t = route
    t.sb.vsctl("set", "bridge", "br0", "other-config:hwaddr=00:53:00:00:00:42")
    t.ip("link", "set", "br0", "up")
    t.ip("addr", "add", "192.168.9.2/24", "dev", "br0")
    t.ip("route", "add", "192.168.10.12/32", "via", "inet6", "fe80::253:ff:fe00:51", "dev", "br0")
    t.sb.appctl("revalidator/wait")
    wait_cached(t, "192.168.10.12/32",
                "Cached: 192.168.10.12/32 dev br0 GW fe80::253:ff:fe00:51 "
                "SRC fe80::253:ff:fe00:42\n")


@upstream("ovs-route - route tables")
def test_route_tables(route: Traffic, ovstest: Path) -> None:
    """Routes of the main table are cached, routes of other tables (42, 1042)
    are not, though the route-table library sees them."""
    t = route
    tap(t, "p1-route")
    t.ip("addr", "add", "10.0.0.17/24", "dev", "p1-route")
    base = ("Cached: 10.0.0.0/24 dev p1-route SRC 10.0.0.17\n"
            "Cached: 10.0.0.17/32 dev p1-route SRC 10.0.0.17 local\n")
    wait_cached(t, "p1-route", base)
    t.ip("route", "add", "10.0.0.18/32", "dev", "p1-route")
    with18 = base + "Cached: 10.0.0.18/32 dev p1-route SRC 10.0.0.17\n"
    wait_cached(t, "p1-route", with18)
    dump = table_dump(t, ovstest, "test-lib-route-table-dump")
    for table in ("42", "1042"):
        assert not [ln for ln in dump if f"rta_table_id: {table}" in ln], \
            f"route-table dump shows table {table} before any route is in it"
    t.ip("route", "add", "10.0.0.19/32", "dev", "p1-route", "table", "42")
    t.ip("route", "add", "10.0.0.20/32", "dev", "p1-route", "table", "1042")
    assert "10.0.0.19" in t.ip("route", "show", "table", "42").stdout
    t.sb.appctl("revalidator/wait")
    assert cached(t, "p1-route") == with18
    dump = table_dump(t, ovstest, "test-lib-route-table-dump")
    got = "".join(sorted(awk(dump, r"rta_table_id:.*42", 1, 15, 16).splitlines(True)))
    assert got == "10.0.0.19/32 rta_table_id: 42\n10.0.0.20/32 rta_table_id: 1042\n", got
    t.ip("route", "del", "10.0.0.18/32", "dev", "p1-route")
    wait_cached(t, "p1-route", base)
    t.ip("route", "del", "10.0.0.19/32", "dev", "p1-route", "table", "42")
    t.sb.appctl("revalidator/wait")
    assert cached(t, "p1-route") == base
    t.ip("addr", "del", "10.0.0.17/24", "dev", "p1-route")
    wait_cached(t, "p1-route", "")


MULTI_NEXTHOP = {
    "ovs-route - add system route with multiple nexthop - ipv4": (
        ("192.168.42.10/24", "192.168.51.10/24"),
        ("172.16.42.0/24", "nexthop", "via", "192.168.42.1", "dev", "p1-route", "nexthop", "via",
         "192.168.51.1", "dev", "p2-route"),
        "172.16.42.0/24",
        "Cached: 172.16.42.0/24 dev p1-route GW 192.168.42.1 SRC 192.168.42.10\n",
        "    172.16.42.0/24 nexthop family: AF_INET addr: 192.168.42.1 ifname: p1-route\n"
        "    172.16.42.0/24 nexthop family: AF_INET addr: 192.168.51.1 ifname: p2-route\n"),
    "ovs-route - add system route - ipv4 via multiple ipv6 nexthop": (
        ("fc00:db8:dead::10/64", "fc00:db8:beef::10/64"),
        ("172.16.42.0/24", "nexthop", "via", "inet6", "fc00:db8:dead::1", "dev", "p1-route",
         "nexthop", "via", "inet6", "fc00:db8:beef::1", "dev", "p2-route"),
        "172.16.42.0/24",
        "Cached: 172.16.42.0/24 dev p1-route GW fc00:db8:dead::1 SRC fc00:db8:dead::10\n",
        "    172.16.42.0/24 nexthop family: AF_INET6 addr: fc00:db8:beef::1 ifname: p2-route\n"
        "    172.16.42.0/24 nexthop family: AF_INET6 addr: fc00:db8:dead::1 ifname: p1-route\n"),
    "ovs-route - add system route with multiple nexthop - ipv6": (
        ("fc00:db8:dead::10/64", "fc00:db8:beef::10/64"),
        ("-6", "fc00:db8:cafe::/64", "nexthop", "via", "fc00:db8:dead::1", "dev", "p1-route",
         "nexthop", "via", "fc00:db8:beef::1", "dev", "p2-route"),
        "fc00:db8:cafe::/64",
        "Cached: fc00:db8:cafe::/64 dev p1-route GW fc00:db8:dead::1 SRC fc00:db8:dead::10\n",
        "    fc00:db8:cafe::/64 nexthop family: AF_INET6 addr: fc00:db8:beef::1 ifname: p2-route\n"
        "    fc00:db8:cafe::/64 nexthop family: AF_INET6 addr: fc00:db8:dead::1 ifname: p1-route\n"),
}


@pytest.mark.parametrize("title", [pytest.param(title, marks=upstream(title), id=ident)
                                   for title, ident in zip(MULTI_NEXTHOP, ("ipv4", "ipv4_via_ipv6",
                                                                           "ipv6"))])
def test_system_route_multiple_nexthop(route: Traffic, ovstest: Path, title: str) -> None:
    """A multipath route: OVS caches its first nexthop only (upstream's note:
    as of this writing), the route-table library reports both."""
    t = route
    addrs, spec, prefix, want, hops = MULTI_NEXTHOP[title]
    tap(t, "p1-route", "p2-route")
    family = ["-6"] if ":" in addrs[0] else []
    t.ip(*family, "addr", "add", addrs[0], "dev", "p1-route")
    t.ip(*family, "addr", "add", addrs[1], "dev", "p2-route")
    six = spec[0] == "-6"
    t.ip(*(["-6"] if six else []), "route", "add", *spec[1 if six else 0:])
    wait_cached(t, prefix, want)
    got = nexthops(table_dump(t, ovstest, "test-lib-route-table-dump"), prefix)
    assert got == hops, f"route-table dump's nexthops: expected\n{hops}got\n{got}"


@upstream("route-table - exported functions work for netlink-notifier")
def test_route_table_netlink_notifier(route: Traffic, ovstest: Path) -> None:
    """The route-table library's netlink notifier reports both IPv6 nexthops
    of an IPv4 multipath route as `ip route add` makes it.  (Upstream runs
    this without ovs-vswitchd; here the switch namespace it runs in has one)."""
    t = route
    tap(t, "p1-route", "p2-route")
    t.ip("-6", "addr", "add", "fc00:db8:dead::10/64", "dev", "p1-route")
    t.ip("-6", "addr", "add", "fc00:db8:beef::10/64", "dev", "p2-route")
    lines = table_dump(t, ovstest, "test-lib-route-table-monitor",
                       "ip route add 172.16.42.0/24 nexthop via inet6 fc00:db8:dead::1 dev "
                       "p1-route nexthop via inet6 fc00:db8:beef::1 dev p2-route")
    want = ("    172.16.42.0/24 nexthop family: AF_INET6 addr: fc00:db8:beef::1 ifname: p2-route\n"
            "    172.16.42.0/24 nexthop family: AF_INET6 addr: fc00:db8:dead::1 ifname: p1-route\n")
    got = nexthops(lines, "172.16.42.0")
    assert got == want, f"route-table monitor's nexthops: expected\n{want}got\n{got}"


@upstream("route-table - route attributes")
def test_route_table_route_attributes(route: Traffic, ovstest: Path) -> None:
    """The library's protocol and priority of a kernel route and of routes
    `ip route add` makes, with and without a metric."""
    t = route
    tap(t, "p1-route")
    t.ip("addr", "add", "10.0.0.17/24", "dev", "p1-route")

    def dump(start: str, *cols: int) -> str:
        return awk(table_dump(t, ovstest, "test-lib-route-table-dump"), f"^{start}", *cols)
    assert dump("10.0.0.17", 1, 6, 7) == "10.0.0.17/32 rtm_protocol: RTPROT_KERNEL\n"
    t.ip("route", "add", "192.168.10.12/32", "dev", "p1-route", "via", "10.0.0.18")
    assert dump("192.168.10.12", 1, 17, 18) == "192.168.10.12/32 rta_priority: 0\n"
    assert dump("192.168.10.12", 1, 6, 7) == "192.168.10.12/32 rtm_protocol: RTPROT_BOOT\n"
    t.ip("route", "del", "192.168.10.12/32", "dev", "p1-route", "via", "10.0.0.18")
    t.ip("route", "add", "192.168.10.12/32", "dev", "p1-route", "via", "10.0.0.18", "metric", "42")
    assert dump("192.168.10.12", 1, 17, 18) == "192.168.10.12/32 rta_priority: 42\n"
    assert dump("192.168.10.12", 1, 6, 7) == "192.168.10.12/32 rtm_protocol: RTPROT_BOOT\n"


UNSUPPORTED_RULES = (
    ("100", "fwmark", "0x16"), ("101", "from", "10.0.0.1", "dport", "22"),
    ("102", "from", "10.0.0.1", "sport", "22"), ("103", "from", "10.0.0.1", "tun_id", "22"),
    ("104", "iif", "p1-route"), ("105", "ipproto", "udp"), ("106", "from", "all", "tun_id", "22"))


@upstream("ovs-route - unsupported rules")
def test_unsupported_rules(route: Traffic) -> None:
    """Rules with selectors OVS does not support (fwmark, dport, sport,
    tun_id, iif, ipproto) leave OVS's rule cache, IPv4 and IPv6, unchanged."""
    t = route
    tap(t, "p1-route")

    def rules(*args: str) -> str:
        return "".join(sorted(ln + "\n" for ln in
                              t.sb.appctl("ovs/route/rule/show", *args).stdout.splitlines()))
    initial_v4, initial_v6 = rules(), rules("-6")
    for prio, *selector in UNSUPPORTED_RULES:
        t.ip("rule", "add", "priority", prio, *selector, "lookup", "42")
    t.sb.appctl("revalidator/wait")
    assert rules() == initial_v4, "ovs/route/rule/show changed"
    assert rules("-6") == initial_v6, "ovs/route/rule/show -6 changed"


def assert_no_table(t: Traffic, table: str) -> None:
    """AT_CHECK([ovs-appctl ovs/route/show table=N], [2], [], [stderr]) and its tail."""
    res = route_show(t, f"table={table}", rc=2)
    assert res.stdout == "", res.stdout
    tail = "".join(ln + "\n" for ln in res.stderr.splitlines()[-2:])
    assert tail == NOT_FOUND_42.replace("42", table), tail


@upstream("ovs-route - route tables + rules")
def test_route_tables_and_rules(route: Traffic) -> None:
    """A rule that looks up table 42 makes OVS cache that table's routes
    (and drop them with the rule); table 43, which no rule names, is ignored."""
    t = route
    tap(t, "p1-route")
    t.ip("addr", "add", "10.0.0.17/24", "dev", "p1-route")
    t.ip("rule", "add", "from", "10.0.0.1", "lookup", "42")
    assert "from 10.0.0.1 lookup 42" in t.ip("rule", "show").stdout
    t.sb.appctl("revalidator/wait")
    assert "lookup 42" in t.sb.appctl("ovs/route/rule/show").stdout
    assert_no_table(t, "42")
    t.ip("route", "add", "10.0.0.18/32", "dev", "p1-route", "table", "42")
    t.ip("route", "add", "10.0.0.19/32", "dev", "p1-route", "table", "42")
    shown = t.ip("route", "show", "table", "42").stdout
    assert "10.0.0.18" in shown and "10.0.0.19" in shown, shown
    t.sb.appctl("revalidator/wait")
    got = "".join(sorted(ln + "\n" for ln in
                         route_show(t, "table=42").stdout.splitlines()))
    assert got == ("Cached: 10.0.0.18/32 dev p1-route SRC 10.0.0.17\n"
                   "Cached: 10.0.0.19/32 dev p1-route SRC 10.0.0.17\n"
                   "Route Table #42:\n"), got
    t.ip("route", "del", "10.0.0.18/32", "dev", "p1-route", "table", "42")
    want = "Route Table #42:\nCached: 10.0.0.19/32 dev p1-route SRC 10.0.0.17\n"
    got = settled(lambda: route_show(t, "table=42").stdout, want, 10,
                  what="table 42 without 10.0.0.18")
    assert got == want, got
    t.ip("rule", "del", "from", "10.0.0.1", "lookup", "42")
    t.sb.appctl("revalidator/wait")
    assert_no_table(t, "42")
    t.ip("route", "add", "10.0.0.18/32", "dev", "p1-route", "table", "43")
    assert "10.0.0.18" in t.ip("route", "show", "table", "43").stdout
    t.sb.appctl("revalidator/wait")
    assert_no_table(t, "43")


def lookup(t: Traffic, dst: str, src: str) -> str:
    return t.sb.appctl("ovs/route/lookup", dst, f"src={src}").stdout


@upstream("ovs-route - route lookup + rules")
def test_route_lookup_and_rules(route: Traffic) -> None:
    """Two taps in one subnet: the main table keeps one route to it (p2-route);
    a rule from p1-route's address to a table with p1-route's route makes
    OVS's lookup from that source return p1-route, and from the other, p2-route."""
    t = route
    tap(t, "p1-route", "p2-route")
    t.ip("addr", "add", "10.0.0.11/24", "dev", "p1-route")
    t.ip("addr", "add", "10.0.0.12/24", "dev", "p2-route")
    t.sb.appctl("revalidator/wait")
    subnet = [ln for ln in route_show(t).stdout.splitlines() if "10.0.0.0/24" in ln]
    assert not [ln for ln in subnet if "p1-route" in ln], subnet
    assert [ln for ln in subnet if "p2-route" in ln], subnet
    assert lookup(t, "10.0.0.10", "10.0.0.11") == "src 10.0.0.11\ngateway ::\ndev p2-route\n"
    t.ip("route", "add", "10.0.0.0/24", "dev", "p1-route", "table", "42")
    assert "10.0.0.0/24" in t.ip("route", "show", "table", "42").stdout
    t.ip("rule", "add", "from", "10.0.0.11", "lookup", "42")
    assert "from 10.0.0.11 lookup 42" in t.ip("rule", "show").stdout
    t.sb.appctl("revalidator/wait")
    assert lookup(t, "10.0.0.10", "10.0.0.11") == "src 10.0.0.11\ngateway ::\ndev p1-route\n"
    assert lookup(t, "10.0.0.10", "10.0.0.12") == "src 10.0.0.12\ngateway ::\ndev p2-route\n"
