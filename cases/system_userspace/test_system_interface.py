"""system-interface.at, as `make check-system-userspace` runs it: system
devices that come and go under ovs-vswitchd (veths deleted and re-created
with the same name, a bridge's internal device at exit), what OVS reads from
them into the Interface table (link speed, duplex, a veth's peer ifindex),
and names the kernel cannot take.

ovs-vswitchd runs in the run's switch namespace (fixtures/system_userspace/system_traffic.py),
upstream's host; the devices are made there and go with it at teardown
(upstream's on_exit).  No frame crosses OVS in these tests, so there is
nothing for the model to judge.

Only the userspace flavour: check-system-tso's suite does not include
system-interface.at.  Three of its tests are for the kernel datapath only
(upstream skips them when `dpctl/show` has no ovs-system):
harness/system_userspace.NOT_HERE says so.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from datapath.backends.netns import Netns
from fixtures.system_userspace.system_traffic import Traffic
from harness.wait import settled

pytestmark = pytest.mark.requires(backend="tap")

FILE = "system-interface.at"
# OVS_TRAFFIC_VSWITCHD_STOP's allowlist in the tests that delete ovs-veth0 under OVS.
VETH0_GONE = (r"could not open network device ovs-veth0",
              r"cannot get .*STP status on nonexistent port",
              r"ethtool command .*on network device ovs-veth0 failed",
              r"error receiving .*ovs-veth0",
              r"ovs-veth0: removing policing failed")


def upstream(title: str) -> pytest.MarkDecorator:
    return pytest.mark.upstream(title, file=FILE)


@pytest.fixture
def iface(system_traffic: Callable[..., Traffic]) -> Traffic:
    """OVS_TRAFFIC_VSWITCHD_START() (userspace flavour)."""
    t: Traffic = system_traffic("userspace")
    return t


def vsctl_get(t: Traffic, *args: str) -> str:
    return t.sb.vsctl("get", *args).stdout


@upstream("interface - add delete add same interface")
def test_add_delete_add_same_interface(iface: Traffic) -> None:
    """A veth on br0 deleted and re-created under the same name, then its port
    deleted: OVS neither crashes nor logs beyond upstream's allowlist."""
    t = iface
    t.sb.allow_log(*VETH0_GONE)
    t.ip("link", "add", "ovs-veth0", "type", "veth", "peer", "name", "ovs-veth1")
    t.sb.vsctl("add-port", "br0", "ovs-veth0")
    t.ip("link", "del", "ovs-veth0")
    t.ip("link", "add", "ovs-veth0", "type", "veth", "peer", "name", "ovs-veth1")
    t.sb.vsctl("del-port", "br0", "ovs-veth0")


@upstream("interface - add route to br and verify clean-up")
def test_route_to_br_cleaned_up(iface: Traffic) -> None:
    """A netdev bridge br-p1 with a tap, an address, an OVS route and a tunnel
    ARP entry on it: once ovs-vswitchd exits (exit --cleanup), br-p1's
    device is gone from the system."""
    t = iface
    hwaddr = "aa:55:00:00:00:01"
    t.ip("tuntap", "add", "name", "p1-0", "mode", "tap")
    t.ip("link", "set", "p1-0", "up")
    t.sb.vsctl("add-br", "br-p1", "--", "set", "bridge", "br-p1", "datapath_type=netdev",
               "fail-mode=standalone", f"other-config:hwaddr={hwaddr}")
    t.sb.vsctl("add-port", "br-p1", "p1-0")
    t.sb.ofctl("del-flows", "br-p1")
    t.ip("addr", "add", "10.0.0.1/24", "dev", "br-p1")
    t.ip("link", "set", "br-p1", "up")
    t.sb.appctl("ovs/route/add", "10.0.0.0/24", "br-p1")
    t.sb.appctl("tnl/arp/set", "br-p1", "10.0.0.1", hwaddr)
    t.sb.stop()  # OVS_TRAFFIC_VSWITCHD_STOP
    res = t.run(["ip", "link", "show", "br-p1"], rc=1)
    assert res.stderr == 'Device "br-p1" does not exist.\n', \
        f"br-p1 outlived ovs-vswitchd:\n{res}"


def strip_xids(text: str) -> str:
    """strip_xids: ' (xid=0x...)' and ' (OF1.x) (xid=...)' lose the xid."""
    return re.sub(r" \(xid=0x[0-9a-fA-F]*\)", "", text)


@upstream("interface - current speed")
def test_current_speed(iface: Traffic) -> None:
    """A tap whose speed (50 Gb/s) and duplex ethtool set: OpenFlow's port
    description (OTHER speed, current rate), and the Interface's link_speed
    and duplex; then half duplex.  Upstream reads duplex once right after
    the link comes up; here the read waits for OVS to take the change."""
    t = iface
    t.ip("tuntap", "add", "tap0", "mode", "tap")
    t.ip("link", "set", "dev", "tap0", "address", "aa:55:aa:55:00:01")
    t.run(["ethtool", "-s", "tap0", "speed", "50000", "duplex", "full"])
    t.ip("link", "set", "dev", "tap0", "up")
    t.sb.vsctl("add-port", "br0", "tap0", "--", "set", "int", "tap0", "type=tap")
    out = t.sb.ofctl("-O", "OpenFlow15", "-vwarn", "dump-ports-desc", "br0", "tap0").stdout
    want = ("OFPST_PORT_DESC reply (OF1.5):\n"
            " 1(tap0): addr:aa:55:aa:55:00:01\n"
            "     config:     0\n"
            "     state:      LIVE\n"
            "     current:    OTHER COPPER\n"
            "     speed: 50000 Mbps now, 0 Mbps max\n")
    assert strip_xids(out) == want, f"dump-ports-desc: expected\n{want}got\n{strip_xids(out)}"
    assert vsctl_get(t, "interface", "tap0", "link_speed") == "50000000000\n"
    assert vsctl_get(t, "interface", "tap0", "duplex") == "full\n"
    t.ip("link", "set", "dev", "tap0", "down")
    t.run(["ethtool", "-s", "tap0", "duplex", "half"])
    t.ip("link", "set", "dev", "tap0", "up")
    got = settled(lambda: vsctl_get(t, "interface", "tap0", "duplex"), "half\n", 10,
                  what="tap0's duplex to read half")
    assert got == "half\n", f"duplex: expected half, got {got!r}"


@upstream("interface - name too long")
def test_name_too_long(iface: Traffic) -> None:
    """A bridge named with 16 characters (IFNAMSIZ is 16 with the NUL):
    ovs-vsctl fails (65) saying the name is too long."""
    t = iface
    t.sb.allow_log(r"could not open network device.*name too long")
    res = t.sb.vsctl("--", *Traffic.br_args("a234567890b23456"), rc=65)
    assert "name too long" in res.stderr, res.stderr


def ifindex(t: Traffic, ns: Netns) -> str:
    """`ip netns exec NS ip link show ovs-veth1`'s ifindex (upstream's sed)."""
    out = t.run(["ip", "link", "show", "ovs-veth1"], ns).stdout
    m = re.match(r"^(\d+):", out)
    assert m, out
    return m.group(1)


@upstream("interface - veth peer_ifindex status")
def test_veth_peer_ifindex_status(iface: Traffic) -> None:
    """A veth on br0 whose peer is in another namespace: the Interface's
    status:peer_ifindex is the peer's ifindex, and follows a pair re-created
    under the same names (a different peer ifindex)."""
    t = iface
    t.sb.allow_log(*VETH0_GONE)
    testns = t.add_namespace("testns")

    def peer_index() -> str:
        # rc=None: until the status is there, get fails and its message is the answer
        res = t.sb.vsctl("get", "interface", "ovs-veth0", "status:peer_ifindex", rc=None)
        return res.stdout if res.rc == 0 else res.stderr
    indexes = []
    for attempt in range(2):
        if attempt:
            t.ip("link", "del", "ovs-veth0")
        t.ip("link", "add", "ovs-veth0", "type", "veth", "peer", "name", "ovs-veth1")
        t.ip("link", "set", "ovs-veth1", "netns", testns.name)
        if not attempt:
            t.sb.vsctl("add-port", "br0", "ovs-veth0")
        indexes.append(ifindex(t, testns))
        want = f'"{indexes[-1]}"\n'
        got = settled(peer_index, want, 10, what="status:peer_ifindex")
        assert got == want, f"status:peer_ifindex: expected {want!r}, got {got!r}"
    assert indexes[0] != indexes[1], indexes
