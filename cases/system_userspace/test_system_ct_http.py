"""system-traffic.at's conntrack tests whose traffic is HTTP (OVS_START_L7 and
OVS_GET_HTTP, fixtures/system_userspace/system_ct_macros.py): zones, marks, labels, registers, two
bridges.  Upstream's topology, flows, traffic and checks (curl's exit code,
dpctl/dump-conntrack | FORMAT_CT, the datapath flows where upstream reads
them); beyond upstream, every frame that crossed OVS judged by the model's
connection tracker running the same flow table (fixtures/system_userspace/system_ct.py's CtWire).

The model's TCP tracking is RFC 9293's states as a middlebox sees them
(datapath/model/conntrack.py); a verdict that differs from OVS's without
changing where a frame goes (e.g. +inv against +new under a flow that matches
both) is not visible on the wire, so it is not judged.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath.model.actions import Action
from datapath.model.conntrack import EST, INV, NEW, TRK, Ct
from fixtures.system_userspace.l7 import check_http, start_http
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports
from fixtures.system_userspace.system_ct_macros import Out, l2_icmp, tcp_ct
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream

pytestmark = pytest.mark.requires(backend="tap")

Factory = Callable[..., Traffic]


@FLAVOUR
@upstream("conntrack - preserve registers")
def test_preserve_registers(system_traffic: Factory, request: pytest.FixtureRequest,
                            flavour: str) -> None:
    """Two pairs: ns0->ns1 through ct(commit,table=0); ns2->ns3 loads reg0=0,
    ct(table=0), then on reg0=0 loads 1 and ct(commit,table=0): reg0 must
    survive each recirculation or the packet never reaches port 4.  Both
    HTTP gets must succeed."""
    t: Traffic = system_traffic(flavour)
    spaces = ct_ports(t, n=4)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(commit,table=0)",
                  "priority=100,in_port=1,tcp,ct_state=+trk,action=2",
                  "priority=100,in_port=2,tcp,ct_state=-trk,action=ct(table=0)",
                  "priority=100,in_port=2,tcp,ct_state=+trk,action=1",
                  "priority=100,in_port=3,tcp,ct_state=-trk,action=load:0->NXM_NX_REG0[],"
                  "ct(table=0)",
                  "priority=100,in_port=3,tcp,ct_state=+trk,reg0=0,action=load:1->NXM_NX_REG0[],"
                  "ct(commit,table=0)",
                  "priority=100,in_port=3,tcp,ct_state=+trk,reg0=1,action=4",
                  "priority=100,in_port=4,tcp,ct_state=-trk,action=ct(commit,table=0)",
                  "priority=100,in_port=4,tcp,ct_state=+trk,action=3"])

    wire = CtWire.on(t, request, spaces)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    check_http(t, spaces[0], "10.1.1.2")
    check_http(t, spaces[2], "10.1.1.4")
    assert wire.verify() >= 12


@FLAVOUR
@upstream("conntrack - invalid")
def test_invalid(system_traffic: Factory, request: pytest.FixtureRequest,
                 flavour: str) -> None:
    """Requests pass through ct() uncommitted, so a reply cannot be matched to
    them: ns1's SYN+ACK opens no connection (RFC 9293 3.10.7: it is +inv) and
    port 2 lets only +new back, so ns0's get fails (curl 28); port 4 lets +inv
    back too, so ns2's get works."""
    t: Traffic = system_traffic(flavour)
    spaces = ct_ports(t, n=4)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,action=ct(),2",
                  "priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=0)",
                  "priority=100,in_port=2,ct_state=+trk+new,tcp,action=1",
                  "priority=100,in_port=3,tcp,action=ct(),4",
                  "priority=100,in_port=4,ct_state=-trk,tcp,action=ct(table=0)",
                  "priority=100,in_port=4,ct_state=+trk+inv,tcp,action=3",
                  "priority=100,in_port=4,ct_state=+trk+new,tcp,action=3"])

    wire = CtWire.on(t, request, spaces)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    check_http(t, spaces[0], "10.1.1.2", 28)
    check_http(t, spaces[2], "10.1.1.4")
    assert wire.verify() >= 12


def zones_flows(z1: str, z2: str, load1: str = "", load2: str = "") -> list[str]:
    """`conntrack - zones` (zone=1, 2) and `zones from field` (loaded into reg0)."""
    return ["priority=1,action=drop", "priority=10,arp,action=normal",
            "priority=10,icmp,action=normal",
            f"priority=100,in_port=1,tcp,action={load1}ct(commit,zone={z1}),2",
            f"priority=100,in_port=2,ct_state=-trk,tcp,action={load1}ct(table=0,zone={z1})",
            f"priority=100,in_port=2,ct_state=+trk,ct_zone={'1' if not load1 else '0x1001'},"
            "tcp,action=1",
            f"priority=100,in_port=3,tcp,action={load2}ct(commit,zone={z2}),4",
            f"priority=100,in_port=4,ct_state=-trk,tcp,action={load2}ct(table=0,zone={z2})",
            f"priority=100,in_port=4,ct_state=+trk,ct_zone={'1' if not load1 else '0x1001'},"
            "tcp,action=3"]


def zones_case(t: Traffic, request: pytest.FixtureRequest, flows: list[str],
               zone1: int, zone2: int) -> None:
    """Pair ns0/ns1 commits in `zone1` and lets back what is tracked in it; pair
    ns2/ns3 commits in `zone2` but lets back only what is in `zone1`: its get
    fails (curl 28), and its connection is in `zone2`."""
    spaces = ct_ports(t, n=4)
    add_flows(t, flows)

    wire = CtWire.on(t, request, spaces)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    check_http(t, spaces[0], "10.1.1.2")
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", f",zone={zone1}"))
    check_http(t, spaces[2], "10.1.1.4", 28)
    check_ct(t, "10.1.1.4", tcp_ct("10.1.1.3", "10.1.1.4", f",zone={zone2}"))
    assert wire.verify() >= 12


@FLAVOUR
@upstream("conntrack - zones")
def test_zones(system_traffic: Factory, request: pytest.FixtureRequest, flavour: str) -> None:
    """zone=1 for ns0/ns1, zone=2 for ns2/ns3, replies matched on ct_zone=1."""
    zones_case(system_traffic(flavour), request, zones_flows("1", "2"), 1, 2)


@FLAVOUR
@upstream("conntrack - zones from field")
def test_zones_from_field(system_traffic: Factory, request: pytest.FixtureRequest,
                          flavour: str) -> None:
    """As `conntrack - zones`, the zone loaded into reg0[0..15] (0x1001, 0x1002)
    and ct(zone=NXM_NX_REG0[0..15])."""
    zone = "NXM_NX_REG0[0..15]"
    flows = zones_flows(zone, zone, "load:0x1001->NXM_NX_REG0[0..15],",
                        "load:0x1002->NXM_NX_REG0[0..15],")
    zones_case(system_traffic(flavour), request, flows, 0x1001, 0x1002)


def dp_flows_p0(t: Traffic) -> list[str]:
    """ovs-appctl dpctl/dump-flows --names filter=in_port=ovs-p0 | grep "+trk"."""
    out = t.sb.appctl("dpctl/dump-flows", "--names", "filter=in_port=ovs-p0").stdout
    return [line for line in out.splitlines() if "+trk" in line]


@FLAVOUR
@upstream("conntrack - zones from other field")
def test_zones_from_other_field(system_traffic: Factory, request: pytest.FixtureRequest,
                                flavour: str) -> None:
    """ns0's packets are tracked in zone 5, then committed in the zone read from
    NXM_NX_CT_ZONE: the datapath flow must match ct_zone(0x5).  The first flow
    then changes to zone 15: the old megaflow must not be reused, the new one
    matches ct_zone(0xf), and the get still works (ns1's replies, looked up
    in zone 5, match `+trk,ct_zone=5` whatever their state)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(zone=5,table=0)",
                  "priority=100,in_port=1,tcp,ct_state=+trk,action=ct(commit,"
                  "zone=NXM_NX_CT_ZONE[]),2",
                  "priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=0,zone=5)",
                  "priority=100,in_port=2,ct_state=+trk,ct_zone=5,tcp,action=1"])

    def table(zone: int) -> Callable[[Arrival], Out]:
        def pipeline(a: Arrival) -> Out:
            base = l2_icmp(a)
            if base is not None:
                return base
            if a.ofport == 1:
                return [("ovs-p1", [Ct(a.table, zone=zone), Ct(a.table, zone=zone, commit=True)])]
            return [("ovs-p0", [Ct(a.table, zone=5)])]
        return pipeline

    wire = CtWire.on(t, request, [ns0, ns1], table(5))
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", ",zone=5"))
    flows = dp_flows_p0(t)
    assert any("ct_zone(0x5)" in f for f in flows), \
        "no +trk datapath flow from ovs-p0 matches ct_zone(0x5):\n" + "\n".join(flows)
    t.sb.ofctl("mod-flows", "br0", 'priority=100,ct_state=-trk,tcp,in_port="ovs-p0" '
               "actions=ct(table=0,zone=15)")
    wire.event("mod-flows: zone 15", lambda w: setattr(w, "pipeline", table(15)))
    t.sb.appctl("revalidator/wait")
    check_http(t, ns0, "10.1.1.2")
    flows = dp_flows_p0(t)
    assert any("ct_zone(0xf)" in f for f in flows), \
        "no +trk datapath flow from ovs-p0 matches ct_zone(0xf):\n" + "\n".join(flows)
    assert wire.verify() >= 12


@FLAVOUR
@upstream("conntrack - zones from other field, more tests")
def test_zones_from_other_field_more(system_traffic: Factory, request: pytest.FixtureRequest,
                                     flavour: str) -> None:
    """ns0's first ct commits in zone 5 with ct_label[0..31]=0xffff0005, the
    second commits in the zone read from ct_label[0..15]: the datapath flow
    matches ct_label(0x5/0xffff) (upstream's sed folds 0xffff0005/0xffff to
    it).  After the flow changes to zone 15 and label 0xffff000f, the new
    megaflow matches ct_label(0xf/0xffff).  OVS_CHECK_GITHUB_ACTION
    skips this on GitHub only."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(zone=5,table=0,commit,"
                  "exec(load:0xffff0005->NXM_NX_CT_LABEL[0..31]))",
                  "priority=100,in_port=1,tcp,ct_state=+trk,action=ct(commit,"
                  "zone=NXM_NX_CT_LABEL[0..15]),2",
                  "priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=0,zone=5)",
                  "priority=100,in_port=2,ct_state=+trk,ct_zone=5,tcp,action=1"])

    def table(zone: int) -> Callable[[Arrival], Out]:
        label = (0xFFFF0000 | zone, 0xFFFFFFFF)

        def pipeline(a: Arrival) -> Out:
            base = l2_icmp(a)
            if base is not None:
                return base
            if a.ofport == 1:
                first = Ct(a.table, zone=zone, commit=True, label=label)
                if a.state(zone).state & INV:  # no commit, label 0: the second ct is in zone 0
                    return [("ovs-p1", [first, Ct(a.table, zone=0, commit=True)])]
                return [("ovs-p1", [first, Ct(a.table, zone=zone, commit=True)])]
            return [("ovs-p0", [Ct(a.table, zone=5)])]
        return pipeline

    wire = CtWire.on(t, request, [ns0, ns1], table(5))
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", ",zone=5,labels=0xffff0005"))
    flows = [f.replace("0xffff0005/0xffff", "0x5/0xffff") for f in dp_flows_p0(t)]
    assert any("ct_label(0x5/0xffff)" in f for f in flows), \
        "no +trk datapath flow from ovs-p0 matches ct_label(0x5/0xffff):\n" + "\n".join(flows)
    t.sb.ofctl("mod-flows", "br0", 'priority=100,ct_state=-trk,tcp,in_port="ovs-p0" '
               "actions=ct(table=0,zone=15,commit,exec(load:0xffff000f->"
               "NXM_NX_CT_LABEL[0..31]))")
    wire.event("mod-flows: zone 15", lambda w: setattr(w, "pipeline", table(15)))
    t.sb.appctl("revalidator/wait")
    check_http(t, ns0, "10.1.1.2")
    flows = [f.replace("0xffff000f/0xffff", "0xf/0xffff") for f in dp_flows_p0(t)]
    assert any("ct_label(0xf/0xffff)" in f for f in flows), \
        "no +trk datapath flow from ovs-p0 matches ct_label(0xf/0xffff):\n" + "\n".join(flows)
    assert wire.verify() >= 12


@FLAVOUR
@upstream("conntrack - multiple bridges")
def test_multiple_bridges(system_traffic: Factory, request: pytest.FixtureRequest,
                          flavour: str) -> None:
    """br0 and br1 joined by patch ports (patch+ is br0's port 1, patch- br1's
    port 1: they are added before the veths).  br0 commits ns0's traffic in
    zone 1 and lets back what is +est there; br1 tracks in zone 2, commits
    +new from br0, and lets ns1's +est replies back, committing them.  The
    get must succeed.  The judge runs both bridges' tables for each frame:
    the conntrack state does not cross a patch port (br1's flows match
    ct_state=-trk on what br0 tracked), the zones keep the two apart."""
    t: Traffic = system_traffic(flavour, vsctl_extra=(
        *Traffic.br_args("br1"), "--", "add-port", "br0", "patch+", "--", "set", "int",
        "patch+", "type=patch", "options:peer=patch-", "--", "add-port", "br1", "patch-",
        "--", "set", "int", "patch-", "type=patch", "options:peer=patch+"))
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.add_veth("p1", ns1, "br1", "10.1.1.2/24")
    common = ["priority=1,action=drop", "priority=10,arp,action=normal",
              "priority=10,icmp,action=normal"]
    add_flows(t, common + [
        "priority=100,in_port=2,tcp,ct_state=-trk,action=ct(commit,zone=1),1",
        "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(table=0,zone=1)",
        "priority=100,in_port=1,tcp,ct_state=+trk+est,ct_zone=1,action=2"])
    add_flows(t, common + [
        "priority=100,in_port=1,tcp,ct_state=-trk,action=ct(table=0,zone=2)",
        "priority=100,in_port=1,tcp,ct_state=+trk+new,ct_zone=2,action=ct(commit,zone=2),2",
        "priority=100,in_port=1,tcp,ct_state=+trk+est,ct_zone=2,action=2",
        "priority=100,in_port=2,tcp,ct_state=-trk,action=ct(table=0,zone=2)",
        "priority=100,in_port=2,tcp,ct_state=+trk+est,ct_zone=2,action=ct(commit,zone=2),1"],
        "br1")

    def est(st: int) -> bool:
        return bool(st & TRK and st & EST)

    def pipeline(a: Arrival) -> Out:
        base = l2_icmp(a)
        if base is not None:
            return base
        if a.port == "ovs-p0":  # br0: commit in zone 1, to patch+; br1 from patch-
            acts: list[Action] = [Ct(a.table, zone=1, commit=True), Ct(a.table, zone=2)]
            st = a.state(2).state
            if st & TRK and st & NEW:
                return [("ovs-p1", [*acts, Ct(a.table, zone=2, commit=True)])]
            return [("ovs-p1" if est(st) else None, acts)]
        acts = [Ct(a.table, zone=2)]  # br1 from ovs-p1
        if not est(a.state(2).state):
            return [(None, acts)]
        acts += [Ct(a.table, zone=2, commit=True), Ct(a.table, zone=1)]  # then br0 from patch+
        return [("ovs-p0" if est(a.state(1).state) else None, acts)]

    wire = CtWire.on(t, request, [ns0, ns1], pipeline)
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    assert wire.verify() >= 6


@FLAVOUR
@upstream("conntrack - multiple zones")
def test_multiple_zones(system_traffic: Factory, request: pytest.FixtureRequest,
                        flavour: str) -> None:
    """ns0's traffic is committed in zone 1 and in zone 2; ns1's is let back on
    +trk in zone 2.  Two gets work, and both zones hold the connection."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, ["priority=1,action=drop", "priority=10,arp,action=normal",
                  "priority=10,icmp,action=normal",
                  "priority=100,in_port=1,tcp,action=ct(commit,zone=1),ct(commit,zone=2),2",
                  "priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=0,zone=2)",
                  "priority=100,in_port=2,ct_state=+trk,ct_zone=2,tcp,action=1"])

    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_http(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", ",zone=1")
             + tcp_ct("10.1.1.1", "10.1.1.2", ",zone=2"))
    assert wire.verify() >= 12


def mark_case(t: Traffic, request: pytest.FixtureRequest, flows: list[str],
              field: str, ours: int, theirs: int, dumped: bool = True) -> None:
    """ns0's connection committed with `field`=ours, ns1's replies let back on
    `field`=ours; ns2's committed with theirs, let back on ours: its get
    fails (curl 28)."""
    spaces = ct_ports(t, n=4)
    add_flows(t, flows)

    wire = CtWire.on(t, request, spaces)
    start_http(t, spaces[1])
    start_http(t, spaces[3])
    name = "labels" if field == "label" else field
    check_http(t, spaces[0], "10.1.1.2")
    if dumped:
        check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", f",{name}={ours}"))
    check_http(t, spaces[2], "10.1.1.4", 28)
    if dumped:
        check_ct(t, "10.1.1.4", tcp_ct("10.1.1.3", "10.1.1.4", f",{name}={theirs}"))
    assert wire.verify() >= 12


def mark_flows(set1: str, set2: str, match: str) -> list[str]:
    return ["priority=1,action=drop", "priority=10,arp,action=normal",
            "priority=10,icmp,action=normal",
            f"priority=100,in_port=1,tcp,action={set1},2",
            "priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=0)",
            f"priority=100,in_port=2,ct_state=+trk,{match},tcp,action=1",
            f"priority=100,in_port=3,tcp,action={set2},4",
            "priority=100,in_port=4,ct_state=-trk,tcp,action=ct(table=0)",
            f"priority=100,in_port=4,ct_state=+trk,{match},tcp,action=3"]


@FLAVOUR
@upstream("conntrack - ct_mark")
def test_ct_mark(system_traffic: Factory, request: pytest.FixtureRequest,
                 flavour: str) -> None:
    """ct(commit,exec(set_field:1->ct_mark)) for ns0, 2 for ns2; replies let
    back on ct_mark=1."""
    flows = mark_flows("ct(commit,exec(set_field:1->ct_mark))",
                       "ct(commit,exec(set_field:2->ct_mark))", "ct_mark=1")
    mark_case(system_traffic(flavour), request, flows, "mark", 1, 2)


@FLAVOUR
@upstream("conntrack - ct_mark from register")
def test_ct_mark_from_register(system_traffic: Factory, request: pytest.FixtureRequest,
                               flavour: str) -> None:
    """As ct_mark, the mark loaded into reg0 and moved into ct_mark by exec."""
    def sets(v: int) -> str:
        return (f"load:{v}->NXM_NX_REG0[0..31],ct(commit,exec(move:NXM_NX_REG0[0..31]->"
                "NXM_NX_CT_MARK[]))")
    mark_case(system_traffic(flavour), request, mark_flows(sets(1), sets(2), "ct_mark=1"),
              "mark", 1, 2)


@FLAVOUR
@upstream("conntrack - ct_label")
def test_ct_label(system_traffic: Factory, request: pytest.FixtureRequest,
                  flavour: str) -> None:
    """ct_label 0x0a000d000005000001 (past 64 bits) for ns0, 0x2 for ns2;
    replies let back on the first.  Upstream checks the gets only."""
    big = 0x0A000D000005000001
    flows = mark_flows(f"ct(commit,exec(set_field:{big:#020x}->ct_label))",
                       "ct(commit,exec(set_field:0x2->ct_label))", f"ct_label={big:#020x}")
    mark_case(system_traffic(flavour), request, flows, "label", big, 2, dumped=False)


def fiddle_case(t: Traffic, request: pytest.FixtureRequest, flows: list[str],
                expected: str, zones: bool = False) -> None:
    """ns0's +new commits set bits 0x5/0x5; ns1's replies commit 0x2/0x6 (or the
    label's 0x200000000/0x200000004) on top, and are let back (ct_mark=3 or
    ct_label=0x200000001; `zones`: all in zone 1, and a second ct in zone 2
    without metadata)."""
    ns0, ns1 = ct_ports(t)
    add_flows(t, flows)

    wire = CtWire.on(t, request, [ns0, ns1])
    start_http(t, ns1)
    check_http(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", expected)
    assert wire.verify() >= 6


@FLAVOUR
@upstream("conntrack - ct_mark bit-fiddling")
def test_ct_mark_bit_fiddling(system_traffic: Factory, request: pytest.FixtureRequest,
                              flavour: str) -> None:
    """ns0's +new commits ct_mark 0x5/0x5; ns1's replies commit 0x2/0x6 and go
    back on ct_mark=3.  Upstream adds at_ns2 and at_ns3,
    with no veth."""
    t: Traffic = system_traffic(flavour)
    t.add_namespace("at_ns2")
    t.add_namespace("at_ns3")
    fiddle_case(t, request, [
        "table=0,priority=1,action=drop", "table=0,priority=10,arp,action=normal",
        "table=0,priority=10,icmp,action=normal",
        "table=0,priority=100,in_port=1,tcp,action=ct(table=1)",
        "table=0,priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=1,commit,"
        "exec(set_field:0x2/0x6->ct_mark))",
        "table=1,in_port=1,ct_state=+new,tcp,action=ct(commit,exec(set_field:0x5/0x5->"
        "ct_mark)),2",
        "table=1,in_port=1,ct_state=-new,tcp,action=2",
        "table=1,in_port=2,ct_state=+trk,ct_mark=3,tcp,action=1"],
        tcp_ct("10.1.1.1", "10.1.1.2", ",mark=3"))


@FLAVOUR
@upstream("conntrack - ct_label bit-fiddling")
def test_ct_label_bit_fiddling(system_traffic: Factory, request: pytest.FixtureRequest,
                               flavour: str) -> None:
    """ns0's +new commits ct_label 0x5/0x5; ns1's replies commit
    0x200000000/0x200000004 and go back on ct_label=0x200000001."""
    t: Traffic = system_traffic(flavour)
    t.add_namespace("at_ns2")
    t.add_namespace("at_ns3")
    fiddle_case(t, request, [
        "table=0,priority=1,action=drop", "table=0,priority=10,arp,action=normal",
        "table=0,priority=10,icmp,action=normal",
        "table=0,priority=100,in_port=1,tcp,action=ct(table=1)",
        "table=0,priority=100,in_port=2,ct_state=-trk,tcp,action=ct(table=1,commit,"
        "exec(set_field:0x200000000/0x200000004->ct_label))",
        "table=1,in_port=1,tcp,ct_state=+new,action=ct(commit,exec(set_field:0x5/0x5->"
        "ct_label)),2",
        "table=1,in_port=1,tcp,ct_state=-new,action=2",
        "table=1,in_port=2,ct_state=+trk,ct_label=0x200000001,tcp,action=1"],
        tcp_ct("10.1.1.1", "10.1.1.2", ",labels=0x200000001"))


@FLAVOUR
@upstream("conntrack - ct metadata, multiple zones")
def test_ct_metadata_multiple_zones(system_traffic: Factory, request: pytest.FixtureRequest,
                                    flavour: str) -> None:
    """Mark and label bit-fiddling in zone 1, a second ct in zone 2 without
    metadata: both zones hold the connection, only zone 1's has mark=3 and
    labels=0x200000001."""
    t: Traffic = system_traffic(flavour)
    t.add_namespace("at_ns2")
    t.add_namespace("at_ns3")
    fiddle_case(t, request, [
        "table=0,priority=1,action=drop", "table=0,priority=10,arp,action=normal",
        "table=0,priority=10,icmp,action=normal",
        "table=0,priority=100,in_port=1,tcp,action=ct(zone=1,table=1)",
        "table=0,priority=100,in_port=2,ct_state=-trk,tcp,action=ct(zone=1,table=1,commit,"
        "exec(set_field:0x200000000/0x200000004->ct_label,set_field:0x2/0x6->ct_mark))",
        "table=1,in_port=1,tcp,ct_state=+new,action=ct(zone=1,commit,exec(set_field:0x5/0x5->"
        "ct_label,set_field:0x5/0x5->ct_mark)),ct(commit,zone=2),2",
        "table=1,in_port=1,tcp,ct_state=-new,action=ct(zone=2),2",
        "table=1,in_port=2,tcp,action=ct(zone=2),1"],
        tcp_ct("10.1.1.1", "10.1.1.2", ",zone=1,mark=3,labels=0x200000001")
        + tcp_ct("10.1.1.1", "10.1.1.2", ",zone=2"), zones=True)
