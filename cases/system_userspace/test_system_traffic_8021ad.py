"""system-traffic.at's 802.1ad tests, as `make check-system-userspace` (and
check-system-tso) run them: QinQ pings between two namespaces, with OVS
matching on two tags (vlan_limit, double vlan match), pushing and popping an
outer 802.1ad or 802.1Q tag between three bridges, and as an 802.1Q tunnel
(vlan_mode=dot1q-tunnel).

Each case keeps upstream's topology, flows, addresses, ping commands and
checks (ping's summary after FORMAT_PING, the exit status of the pings that
must fail).  Every case needs OVS to parse two tags: upstream's
OVS_CHECK_8021AD (the probed VLAN header stack length, else a skip saying so).

The kernel here has no VLAN devices; the far ends (upstream's ADD_SVLAN and
ADD_CVLAN devices in the namespaces) are then built by OVS rules
(fixtures/system_userspace/system_l2.py TagEdge): the frames on the veth into OVS are the ones
upstream's devices send.  Where the kernel has VLAN devices the cases build
upstream's own far ends.

Beyond upstream, every frame that crosses a bridge under test is captured on
both sides and judged (fixtures/system_userspace/system_l2.py Crossings): each push and pop
against IEEE 802.1Q §9.6 and 802.1ad as datapath/model/l2tags.py has them,
the tunnel port's S-tag as ovs-vswitchd.conf.db(5) documents vlan_mode
dot1q-tunnel, NORMAL switching as the model's output.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends.native_tunnel import Captured
from datapath.backends.netns import KernelSide, Netns
from datapath.deviations.vlan import follows_one_tag_flow
from datapath.model import l2tags
from datapath.model.hooks import NOT_SENT
from datapath.verdict import conclude
from fixtures.records import record_for
from fixtures.system_userspace.system_l2 import (
    Crossings,
    Outcome,
    Rule,
    TagEdge,
    TagSniffer,
    add_tag_edge,
    port_tx,
    switched,
    tagged,
    under_test,
)
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.wait import wait_until

pytestmark = [pytest.mark.requires(backend="tap"), pytest.mark.requires(kernel_optional="vlan")]

VLAN_LIMIT_0 = ("set", "Open_vSwitch", ".", "other_config:vlan-limit=0")
QINQ = ((l2tags.TPID_STAG, 4094), (l2tags.TPID_CTAG, 100))


def start(system_traffic: Callable[..., Traffic], flavour: str) -> Traffic:
    """OVS_TRAFFIC_VSWITCHD_START([set Open_vSwitch . other_config:vlan-limit=0]),
    OVS_CHECK_8021AD()."""
    t: Traffic = system_traffic(flavour, VLAN_LIMIT_0)
    t.check_8021ad()
    return t


def wait_ping(t: Traffic, ns: Netns, dst: str) -> None:
    """OVS_WAIT_UNTIL([ip netns exec ns ping -c 1 dst])."""
    wait_until(lambda: t.run(["ping", "-c", "1", "-W", "1", dst], ns, timeout=30,
                             rc=None).rc == 0, 30,
               what=f"ping {dst} to answer")


def check_no_ping(t: Traffic, ns: Netns, dst: str) -> None:
    """NS_CHECK_EXEC([ns], [ping -q -c 1 -W 3 dst], [1], [ignore])."""
    t.run(["ping", "-q", "-c", "1", "-W", "3", dst], ns, timeout=30, rc=1)


def edge_hops(wire: Crossings, t: Traffic, edges: list[TagEdge],
              one_way: tuple[TagEdge, ...] = ()) -> None:
    """Each TagEdge's push (device -> port) and pop (port -> device) on
    br-vlan (only the push for those `one_way`: nothing comes back to them);
    on a port several devices share, each hop's frames are those untagged
    (the device's side) or with the device's outer VID."""
    for edge in edges:
        outer = edge.tags[0][1]

        def keep(frame: bytes, outer: int = outer) -> bool:
            return under_test(frame) and vids(frame)[:1] in ([], [outer])
        wire.hop(f"{edge.device} -> br-vlan -> {edge.port}: push",
                 (edge.ns, edge.device, True), (t.host, edge.port, True), tagged(edge.push),
                 keep=keep)
        if edge in one_way:
            continue
        wire.hop(f"{edge.port} -> br-vlan -> {edge.device}: pop",
                 (t.host, edge.port, False), (edge.ns, edge.device, False), tagged(edge.pop),
                 keep=keep)


def vids(frame: bytes) -> list[int]:
    """The VIDs of the frame's tags, outermost first."""
    out, ofs = [], 12
    while struct.unpack_from("!H", frame, ofs)[0] in (l2tags.TPID_CTAG, l2tags.TPID_STAG):
        out.append(struct.unpack_from("!H", frame, ofs + 2)[0] & 0xFFF)
        ofs += 4
    return out


# ----------------------------------------------------------------------------
# two tags from the namespaces straight into br0: vlan_limit, double vlan match


def qinq_into_br0(t: Traffic, ipv6: bool = True) -> tuple[Netns, Netns, list[TagEdge]]:
    """ADD_NAMESPACES(at_ns0, at_ns1), ADD_VETH p0 and p1 on br0, ADD_SVLAN 4094
    and ADD_CVLAN 100 on each (TagEdge where the kernel has no VLAN devices);
    without IPv6 in the namespaces if not `ipv6`."""
    ns0, ns1 = t.add_namespace("at_ns0", ipv6), t.add_namespace("at_ns1", ipv6)
    edges = [TagEdge("p0", ns0, QINQ), TagEdge("p1", ns1, QINQ)]
    for edge, i in zip(edges, (1, 2)):
        if t.has("vlan"):
            t.add_veth(edge.port, edge.ns, "br0", f"10.1.1.{i}/24")
            t.add_svlan(edge.port, edge.ns, 4094, f"10.255.2.{i}/24")
            t.add_cvlan(f"{edge.port}.4094", edge.ns, 100, f"10.2.2.{i}/24")
        else:
            add_tag_edge(t, edge, f"10.2.2.{i}/24", 1492)
    return ns0, ns1, edges


def crossings(t: Traffic, request: pytest.FixtureRequest, edges: list[TagEdge],
              there: Rule, back: Rule) -> Crossings:
    """br0's two ways (p0 -> p1 by `there`, p1 -> p0 by `back`), and the TagEdges."""
    wire = Crossings(t, request)
    wire.hop("p0 -> br0 -> p1", (t.host, "ovs-p0", False), (t.host, "ovs-p1", True), there)
    wire.hop("p1 -> br0 -> p0", (t.host, "ovs-p1", False), (t.host, "ovs-p0", True), back)
    if not t.has("vlan"):
        edge_hops(wire, t, edges)
    return wire


@FLAVOUR
@upstream("802.1ad - vlan_limit")
def test_vlan_limit(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                    flavour: str) -> None:
    """With vlan-limit=0, br0's NORMAL flow (priority 1) switches the QinQ
    frames (S-tag 4094, C-tag 100) and a ping between the C-VLAN devices
    gets through (upstream's OVS_WAIT_UNTIL).  Then revalidator/purge,
    vlan-limit=1 and a priority-100 flow dl_type=0x8100 actions=drop: OVS
    now parses one tag only, so the C-tag's TPID is the frame's dl_type
    (ovs-vswitchd.conf.db(5) other_config:vlan-limit) and the flow drops it:
    ping -c 1 -W 3 must exit 1.  Judged: every frame br0 forwarded in the
    first part unchanged (NORMAL, the model's output), none in the second.

    The namespaces have no IPv6: a C-VLAN device's own start-up traffic (its
    duplicate address detection's neighbour solicitation, router
    solicitations, MLD reports) that reaches br0 between the purge and
    vlan-limit=1 installs a flow with two tags, which the revalidators then
    cannot parse under the new limit ("internal error parsing flow key",
    "failed to put[modify]"): the log lines that made upstream's own run of
    this test fail at random, and skip it on GitHub (OVS_CHECK_GITHUB_ACTION,
    6660fccb1).  Under load our run showed them too.  The test's packets are
    IPv4; nothing it sends or checks changes."""
    t = start(system_traffic, flavour)
    ns0, _, edges = qinq_into_br0(t, ipv6=False)
    t.sb.ofctl("add-flow", "br0", "priority=1 action=normal")
    wire = crossings(t, request, edges, switched(port_tx(t, "ovs-p1")),
                     switched(port_tx(t, "ovs-p0")))
    wait_ping(t, ns0, "10.2.2.2")
    assert wire.verify() >= 4
    t.sb.appctl("revalidator/purge")
    t.sb.vsctl("set", "Open_vSwitch", ".", "other_config:vlan-limit=1")
    t.sb.ofctl("add-flow", "br0", "priority=100 dl_type=0x8100 action=drop")
    dropped = Crossings(t, request)
    dropped.hop("p0 -> br0 (vlan-limit=1: dl_type 0x8100, dropped)",
                (t.host, "ovs-p0", False), (t.host, "ovs-p1", True), lambda c: [])
    check_no_ping(t, ns0, "10.2.2.2")
    dropped.verify()


@FLAVOUR
@upstream("802.1ad - double vlan match")
def test_double_vlan_match(system_traffic: Callable[..., Traffic],
                           request: pytest.FixtureRequest, flavour: str) -> None:
    """br0's two tables: dl_vlan=4094 pops the S-tag and goes to table 1,
    where dl_vlan=100 (the C-tag, now outermost) pushes an 802.1ad tag with
    VID 4094 again and switches NORMAL; the rest is dropped.  Upstream's
    pings of 56 and 1600 bytes between the C-VLAN devices, all answered.
    Judged: every frame br0 forwarded as pop then push (the pushed tag's PCP
    copied from the C-tag, 0 here: ovs-actions(7) push_vlan), i.e. the frame
    that came in; a frame with other tags must not come out."""
    t = start(system_traffic, flavour)
    ns0, _, edges = qinq_into_br0(t)
    flows = t.sb.rundir / "flows-br0.txt"
    flows.write_text("table=0,priority=1                action=drop\n"
                     "table=0,priority=100 dl_vlan=4094 action=pop_vlan,goto_table:1\n"
                     "table=1,priority=100 dl_vlan=100  action=push_vlan:0x88a8,"
                     "mod_vlan_vid:4094,normal\n")
    t.sb.ofctl("--bundle", "add-flows", "br0", str(flows))
    rematch = tagged([l2tags.PopVlan(), l2tags.PushVlan(l2tags.TPID_STAG, 4094)])

    def rule(c: Captured) -> Outcome:
        return rematch(c) if vids(c.frame)[:2] == [4094, 100] else []
    wire = crossings(t, request, edges, rule, rule)
    wait_ping(t, ns0, "10.2.2.2")
    t.check_ping(ns0, "10.2.2.2")
    t.check_ping(ns0, "10.2.2.2", "-s", "1600")
    assert wire.verify() >= 12


# ----------------------------------------------------------------------------
# three bridges: br1 (at_ns0's side) - br0 (the provider) - br2 (at_ns1's side)


def three_bridges(t: Traffic, cvlans: tuple[int, ...]) -> tuple[Netns, Netns, list[TagEdge]]:
    """ADD_BR br1 and br2; veths ovs-p0/ovs-p1 (br0/br1) and ovs-p2/ovs-p3
    (br0/br2); ADD_VETH p4 (at_ns0, br1) and p5 (at_ns1, br2); ADD_CVLAN on
    p4 and p5 for each of `cvlans` (10.<n>.2.1 and .2, n = 2, 3, ...)."""
    t.add_br("br1")
    t.add_br("br2")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    for near, far, bridge in (("ovs-p0", "ovs-p1", "br1"), ("ovs-p2", "ovs-p3", "br2")):
        t.ip("link", "add", near, "type", "veth", "peer", "name", far)
        t.ip("link", "set", "dev", near, "up")
        t.ip("link", "set", "dev", far, "up")
        t.sb.vsctl("add-port", "br0", near)
        t.sb.vsctl("add-port", bridge, far)
    edges: list[TagEdge] = []
    for port, ns, bridge, i in (("p4", ns0, "br1", 1), ("p5", ns1, "br2", 2)):
        if t.has("vlan"):
            t.add_veth(port, ns, bridge, f"10.1.1.{i}/24")
        for n, vid in enumerate(cvlans, start=2):
            edge = TagEdge(port, ns, ((l2tags.TPID_CTAG, vid),))
            edges.append(edge)
            if t.has("vlan"):
                t.add_cvlan(port, ns, vid, f"10.{n}.2.{i}/24")
            else:
                add_tag_edge(t, edge, f"10.{n}.2.{i}/24", 1492, bridge=bridge)
    return ns0, ns1, edges


def provider_crossings(t: Traffic, request: pytest.FixtureRequest, edges: list[TagEdge],
                       br0: Rule, customer_in: Callable[[str], Rule],
                       blocked: int | None = None) -> Crossings:
    """br1 and br2 each way (from the customer's port NORMAL, unchanged; from
    br0's side by `customer_in(the customer's port)`), br0 each way by `br0`,
    and the TagEdges (at_ns1's edge of VID `blocked` sends nothing, at_ns0's
    gets nothing back: their push only)."""
    wire = Crossings(t, request)
    for bridge, near, far, cust in (("br1", "ovs-p1", "ovs-p0", "ovs-p4"),
                                    ("br2", "ovs-p3", "ovs-p2", "ovs-p5")):
        wire.hop(f"{cust} -> {bridge} -> {near}", (t.host, cust, False), (t.host, near, True),
                 switched(port_tx(t, near)))
        wire.hop(f"{near} -> {bridge} -> {cust}", (t.host, near, False), (t.host, cust, True),
                 customer_in(cust))
    wire.hop("ovs-p0 -> br0 -> ovs-p2", (t.host, "ovs-p0", False), (t.host, "ovs-p2", True), br0)
    wire.hop("ovs-p2 -> br0 -> ovs-p0", (t.host, "ovs-p2", False), (t.host, "ovs-p0", True), br0)
    if not t.has("vlan"):
        silent = [e for e in edges if e.tags[0][1] == blocked]
        edge_hops(wire, t, [e for e in edges if e.port == "p4" or e not in silent],
                  tuple(silent))
    return wire


@FLAVOUR
@pytest.mark.parametrize("tpid", [
    pytest.param(l2tags.TPID_STAG, id="802.1ad",
                 marks=upstream("802.1ad - push/pop outer 802.1ad")),
    pytest.param(l2tags.TPID_CTAG, id="802.1q",
                 marks=upstream("802.1ad - push/pop outer 802.1q"))])
def test_push_pop_outer(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                        flavour: str, tpid: int) -> None:
    """at_ns0's and at_ns1's C-VLAN 100 devices behind br1 and br2 (NORMAL);
    br0 between them pushes an outer tag (TPID 0x88a8, or 0x8100 for the
    802.1q title) with VID 4094 on whatever crosses it, and br1 and br2 pop
    the outer tag of what comes from br0 (vlan_tci=0x1000/0x1000) before
    NORMAL.  Upstream's pings of 56 and 1600 bytes (after its
    OVS_WAIT_UNTIL), all answered.  Judged: br0's push (IEEE 802.1Q §9.6,
    the new tag outermost), br1's and br2's pop of it, and their NORMAL
    switching of the customer's tagged frames, unchanged."""
    t = start(system_traffic, flavour)
    ns0, _, edges = three_bridges(t, (100,))
    flows_br0 = t.sb.rundir / "flows-br0.txt"
    flows_br0.write_text("priority=1 action=drop\n"
                         f"priority=100 in_port=1 action=push_vlan:0x{tpid:04x},"
                         "mod_vlan_vid=4094,output:2\n"
                         f"priority=100 in_port=2 action=push_vlan:0x{tpid:04x},"
                         "mod_vlan_vid=4094,output:1\n")
    flows_customer = t.sb.rundir / "flows-customer-br.txt"
    flows_customer.write_text("priority=1 action=normal\n"
                              "priority=100 in_port=1 vlan_tci=0x1000/0x1000 "
                              "action=pop_vlan,normal\n")
    t.sb.ofctl("--bundle", "add-flows", "br0", str(flows_br0))
    t.sb.ofctl("--bundle", "add-flows", "br1", str(flows_customer))
    t.sb.ofctl("--bundle", "add-flows", "br2", str(flows_customer))
    wire = provider_crossings(t, request, edges, tagged([l2tags.PushVlan(tpid, 4094)]),
                              lambda cust: tagged([l2tags.PopVlan()]))
    wait_ping(t, ns0, "10.2.2.2")
    t.check_ping(ns0, "10.2.2.2")
    t.check_ping(ns0, "10.2.2.2", "-s", "1600")
    assert wire.verify() >= 40


TUNNEL_DROPS = r"dropping VLAN (0|300) packet received on dot1q-tunnel port"


@FLAVOUR
@upstream("802.1ad - 802.1q tunnel")
def test_8021q_tunnel(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                      flavour: str) -> None:
    """C-VLANs 100, 200 and 300 between at_ns0 and at_ns1, through br1, br0
    and br2 (all NORMAL); br0's ports ovs-p0 and ovs-p2 are vlan_mode
    dot1q-tunnel, tag 4094, cvlans 100,200.  Upstream's pings of 56 and 1600
    bytes on C-VLANs 100 and 200, all answered; on 300 the ping must fail
    (exit 1), OVS logging the drops (upstream's allowlist).  Judged, from
    ovs-vswitchd.conf.db(5): a dot1q-tunnel port puts what it receives with a
    permitted C-VLAN into S-VLAN 4094 (an 802.1ad tag pushed), and a
    dot1q-tunnel port of that S-VLAN removes the S-tag on output, so br0
    forwards a permitted frame unchanged and nothing of C-VLAN 300; br1 and
    br2 switch the customer's frames unchanged."""
    t = start(system_traffic, flavour)
    t.sb.allow_log(TUNNEL_DROPS)
    ns0, _, edges = three_bridges(t, (100, 200, 300))
    for bridge in ("br0", "br1", "br2"):
        t.sb.ofctl("add-flow", bridge, "action=normal")
    for port in ("ovs-p0", "ovs-p2"):
        t.sb.vsctl("set", "port", port, "vlan_mode=dot1q-tunnel", "tag=4094",
                   "cvlans=100,200")
    through = tagged([l2tags.PushVlan(l2tags.TPID_STAG, 4094), l2tags.PopVlan()])

    def br0(c: Captured) -> Outcome:
        return through(c) if vids(c.frame)[:1] in ([100], [200]) else []
    wire = provider_crossings(t, request, edges, br0, lambda cust: switched(port_tx(t, cust)),
                              blocked=300)
    wait_ping(t, ns0, "10.2.2.2")
    wait_ping(t, ns0, "10.3.2.2")
    t.check_ping(ns0, "10.2.2.2")
    t.check_ping(ns0, "10.3.2.2")
    t.check_ping(ns0, "10.2.2.2", "-s", "1600")
    t.check_ping(ns0, "10.3.2.2", "-s", "1600")
    check_no_ping(t, ns0, "10.4.2.2")
    assert wire.verify() >= 48


# ----------------------------------------------------------------------------
# ours: a frame with one tag, then one with a second tag under the same outer tag

HOST_MAC, OTHER_MAC = "f2:00:00:00:0a:01", "f2:00:00:00:0a:02"
ONE_THEN_TWO = ("table=0,priority=1,actions=drop\n"
                "table=0,priority=100,in_port=ovs-p0,dl_vlan=4094,actions=pop_vlan,resubmit(,1)\n"
                "table=1,priority=100,in_port=ovs-p0,vlan_tci=0,actions=output:ovs-p1\n"
                "table=1,priority=100,in_port=ovs-p0,dl_vlan=100,actions=output:ovs-p2\n")


def tagged_udp(*vlans: tuple[int, int]) -> bytes:
    """A UDP datagram from at_ns0's host with these tags (TPID, VID), outermost first."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    frame = bytes(Ether(src=HOST_MAC, dst=OTHER_MAC, type=0x0800)
                  / IP(src="10.1.1.1", dst="10.1.1.9") / UDP(sport=4000, dport=4001)
                  / (b"q" * 40))
    for tpid, vid in reversed(vlans):
        frame = frame[:12] + struct.pack("!HH", tpid, vid) + frame[12:]
    return frame


def one_then_two(frame: bytes, headers: int) -> tuple[str, bytes] | None:
    """ONE_THEN_TWO on a frame from ovs-p0, OVS parsing `headers` VLAN headers
    (vswitch.xml other_config:vlan-limit: further headers are payload): table
    0 matches the outermost header's VID 4094 and pops it (ovs-actions(7)
    pop_vlan), table 1 forwards by what is left of the parsed headers
    (vlan_tci=0: none; dl_vlan=100: a header of VID 100).  The port and the
    frame, or None (dropped)."""
    parsed = vids(frame)[:headers]
    if not parsed or parsed[0] != 4094:
        return None
    popped = l2tags.run(frame, [l2tags.PopVlan()])
    if len(parsed) == 1:
        return "ovs-p1", popped
    return ("ovs-p2", popped) if parsed[1] == 100 else None


def expectation(frames: list[bytes]) -> model.Expected:
    """The frames a port must send, checksums as sent (a tag action touches none)."""
    return model.Expected(frames=list(frames), csum_state=[{} for _ in frames])


@FLAVOUR
@pytest.mark.parametrize("limit", [0, 1, 2], ids=lambda n: f"vlan_limit_{n}")
def test_one_tag_then_two_under_it(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str,
                                   limit: int) -> None:
    """Ours: at_ns0's host sends into ovs-p0 a UDP frame with an S-tag of VID
    4094, then the same frame with a C-tag of VID 100 under that S-tag.  br0
    (ONE_THEN_TWO) pops the outer tag and forwards by what is under it: to
    ovs-p1 if nothing (the S-VLAN's own frames), to ovs-p2 if VID 100 (the
    customer VLAN inside it).  The second frame is sent once the datapath
    flow of the first is installed.  Judged by the table (one_then_two): with
    other_config:vlan-limit 0 or 2 OVS sees both tags, so the second frame
    leaves ovs-p2 with its C-tag; with vlan-limit 1 the C-tag is payload
    (vswitch.xml), and it leaves ovs-p1.  OVS 4.0.0 with two headers sends the
    second frame by the first one's datapath flow, out of ovs-p1 (known bug
    vlan-second-tag-wildcarded: across VLAN domains)."""
    t: Traffic = system_traffic(flavour, ("set", "Open_vSwitch", ".",
                                          f"other_config:vlan-limit={limit}"))
    t.spec.skip_if("OVS_CHECK_8021AD")  # upstream's test calls it whatever the limit
    if limit != 1:
        t.check_8021ad()
    headers = min(limit or 2, 2, t.vlan_stack_probed())
    spaces = [t.add_namespace(f"at_ns{i}") for i in range(3)]
    for i, ns in enumerate(spaces):
        t.add_veth(f"p{i}", ns, "br0", f"10.1.1.{i + 1}/24")
    flows = t.sb.rundir / "flows-br0.txt"
    flows.write_text(ONE_THEN_TWO)
    t.sb.ofctl("--bundle", "add-flows", "br0", str(flows))
    host = KernelSide(spaces[0], "p0")
    t.env.cleanup.defer("close at_ns0's sender", host.close)
    outs = {f"ovs-p{i}": TagSniffer(spaces[i], f"p{i}") for i in (1, 2)}
    for sniffer in outs.values():
        t.env.cleanup.defer("close a capture", sniffer.close)

    def arrived() -> list[bytes]:
        for sniffer in outs.values():
            sniffer.read()
        return [c.frame for s in outs.values() for c in s.frames
                if not c.outgoing and c.frame[6:12] == bytes.fromhex(HOST_MAC.replace(":", ""))]
    one, two = tagged_udp((l2tags.TPID_STAG, 4094)), tagged_udp((l2tags.TPID_STAG, 4094),
                                                                (l2tags.TPID_CTAG, 100))
    host.send([one])
    wait_until(lambda: len(arrived()) >= 1, 10, what="the S-tagged frame to leave br0")
    wait_until(lambda: "vlan(vid=4094" in t.sb.appctl("dpctl/dump-flows").stdout, 10,
               what="the S-tagged frame's datapath flow")
    host.send([two])
    wait_until(lambda: len(arrived()) >= 2, 10, what="the S+C-tagged frame to leave br0")
    correct: dict[str, list[bytes]] = {port: [] for port in outs}
    ovs: dict[str, list[bytes]] = {port: [] for port in outs}
    bug = follows_one_tag_flow(one, two, headers)
    first = one_then_two(one, headers)
    for frame in (one, two):
        out = one_then_two(frame, headers)
        if out is not None:
            correct[out[0]].append(out[1])
        known = first if frame is two and bug is not None else out
        if known is not None:
            ovs[known[0]].append(l2tags.run(frame, [l2tags.PopVlan()]))
    steps = record_for(request.node).steps
    verdicts = []
    for port, sniffer in outs.items():
        exp = expectation(correct[port])
        if bug is not None and ovs[port] != correct[port]:
            exp = model.deviation(exp, expectation(ovs[port] or [NOT_SENT]), bug)
        got = [c.frame for c in sniffer.frames if not c.outgoing
               and c.frame[6:12] == bytes.fromhex(HOST_MAC.replace(":", ""))]
        verdicts.append(conclude(steps, exp, got, title=f"at_ns0 -> br0 -> {port}",
                                 rx_port="ovs-p0", tx_port=port, sent=[one, two]))
    for verdict in verdicts:
        verdict.check()
