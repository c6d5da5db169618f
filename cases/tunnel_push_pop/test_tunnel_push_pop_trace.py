"""tunnel-push-pop.at: translations checked by ofproto/trace.

Flow translation on unrelated bridges, VXLAN access port, no clone when the
push is the last action, a non-local port as tunnel endpoint, mirrors over
tunnels, the tunnel drop and two VTEPs in one subnet with route rules.
Upstream sends no packet into a tunnel in these; where the case adds one
after upstream's checks (mirrors, tunnel drop), the frames that leave are
compared with the model.
"""
from __future__ import annotations

import pytest

from datapath import model
from datapath.model.actions import output
from datapath.offloads import TxOffloads
from fixtures.frames import compose
from fixtures.tunnel_push_pop.pushpop import PushPop, arp_reply
from harness.vsctl import add_port, chain, set_interface

FILE = "tunnel-push-pop.at"
VXLAN_TO_11 = ("tnl_push(tnl_port(4789),header(size=50,type=4,eth(dst=aa:55:aa:66:00:00,"
               "src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=10.0.0.2,dst=10.0.0.11,proto=17,"
               "tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),"
               "vxlan(flags=0x8000000,vni=0x0)),out_port(100))")
ARP_FROM_11 = ("in_port(8),eth(src=aa:55:aa:66:00:00,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),"
               "arp(sip=10.0.0.11,tip=10.0.0.2,op=2,sha=aa:55:aa:66:00:00,tha=00:00:00:00:00:00)")


@pytest.mark.upstream("tunnel_push_pop - flow translation on unrelated bridges", file=FILE)
def test_unrelated_bridges(pushpop: PushPop) -> None:
    """With a tunnel configured elsewhere, a bridge without tunnels still gets
    bare-minimum megaflows (in_port and dl_type only)."""
    t = pushpop
    t.start("add-port", "br0", "p0", "--", "set", "Interface", "p0", "type=dummy",
            "ofport_request=1", "other-config:hwaddr=aa:55:aa:55:00:00")
    t.appctl("vlog/set", "dpif_netdev:dbg")
    t.vsctl("add-br", "int-br", "--", "set", "bridge", "int-br", "datapath_type=dummy")
    t.vsctl(*add_port("int-br", "t2", type="geneve", options={"remote_ip": "1.1.2.92", "key": 123},
                      ofport_request=2))
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.88/24")
    assert t.routes(sort=False) == ("Cached: 1.1.2.88/32 dev br0 SRC 1.1.2.88 local\n"
                                    "Cached: 1.1.2.0/24 dev br0 SRC 1.1.2.88\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()
    t.receive("p0", arp_reply("1.1.2.92", "f8:bc:12:44:34:b6", in_port=2))
    t.vsctl("add-br", "br-non-tunnel", "--", "set", "bridge", "br-non-tunnel",
            "datapath_type=dummy", "fail-mode=secure")
    t.vsctl("--",
            *chain(add_port("br-non-tunnel", "p7", type="dummy", ofport_request=7),
                   add_port("br-non-tunnel", "p8", type="dummy", ofport_request=8)))  # add_of_ports
    t.ofctl("del-flows", "br-non-tunnel")
    t.ofctl("add-flow", "br-non-tunnel", "in_port=p7,action=p8")
    t.ofctl("add-flow", "br-non-tunnel", "in_port=p8,action=p7")
    for src, dst in ((7, 8), (8, 7)):
        assert t.trace_tail("br-non-tunnel", f"in_port=p{src}", n=2) == (
            f"Megaflow: recirc_id=0,eth,in_port={src},dl_type=0x0000\n"
            f"Datapath actions: {dst}\n")
    t.finish()


def access_setup(t: PushPop) -> None:
    """br0 (with hwaddr) and p8; ovs-tun0 with VXLAN tun0 to 10.0.0.11 and p7."""
    t.start("set", "bridge", "br0", "datapath_type=dummy", "--", "set", "Interface", "br0",
            "other-config:hwaddr=aa:55:aa:55:00:00")
    t.vsctl(*add_port("br0", "p8", type="dummy", ofport_request=8))
    t.vsctl("add-br", "ovs-tun0", "--", "set", "bridge", "ovs-tun0", "datapath_type=dummy")
    t.vsctl(*chain(["add-port", "ovs-tun0", "tun0"],
                   ["set", "int", "tun0", "type=vxlan", "options:remote_ip=10.0.0.11"],
                   add_port("ovs-tun0", "p7", type="dummy", ofport_request=7)))


@pytest.mark.upstream("tunnel_push_pop - VXLAN access port", file=FILE)
def test_vxlan_access_port(pushpop: PushPop) -> None:
    """br0 and p8 on VLAN 42, p7 on VLAN 200: the flood from p7 pushes its VLAN
    for the LOCAL port and encapsulates (untagged) towards p8."""
    t = pushpop
    access_setup(t)
    t.vsctl("set", "port", "p8", "tag=42", "--", "set", "port", "br0", "tag=42", "--", "set",
            "port", "p7", "tag=200")
    t.ok("netdev-dummy/ip4addr", "br0", "10.0.0.2/24")
    assert t.routes() == ("Cached: 10.0.0.0/24 dev br0 SRC 10.0.0.2\n"
                          "Cached: 10.0.0.2/32 dev br0 SRC 10.0.0.2 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.revalidate()
    t.receive("p8", ARP_FROM_11)
    assert t.trace_tail("ovs-tun0", "in_port=p7", n=2) == (
        "Megaflow: recirc_id=0,eth,in_port=7,dl_src=00:00:00:00:00:00,"
        "dl_dst=00:00:00:00:00:00,dl_type=0x0000\n"
        f"Datapath actions: push_vlan(vid=200,pcp=0),1,{VXLAN_TO_11},8\n")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - no clone when is_last_action", file=FILE)
def test_no_clone_when_last(pushpop: PushPop) -> None:
    """Output to the tunnel as the last action needs no clone; with an action
    after it (in_port), the push is wrapped in clone()."""
    t = pushpop
    access_setup(t)
    t.ok("netdev-dummy/ip4addr", "br0", "10.0.0.2/24")
    assert t.routes() == ("Cached: 10.0.0.0/24 dev br0 SRC 10.0.0.2\n"
                          "Cached: 10.0.0.2/32 dev br0 SRC 10.0.0.2 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    for actions, want in (("tun0", f"{VXLAN_TO_11},8"),
                          ("tun0,in_port", f"clone({VXLAN_TO_11},8),7")):
        t.ofctl("del-flows", "ovs-tun0")
        t.ofctl("add-flow", "ovs-tun0", f"in_port=p7,actions={actions}")
        t.revalidate()
        t.receive("p8", ARP_FROM_11)
        assert t.trace_tail("ovs-tun0", "in_port=p7", n=2) == (
            f"Megaflow: recirc_id=0,eth,in_port=7,dl_type=0x0000\nDatapath actions: {want}\n")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - use non-local port as tunnel endpoint", file=FILE)
def test_non_local_endpoint(pushpop: PushPop) -> None:
    """The tunnel endpoint address is on vtep0, a port of br0 (not its LOCAL
    port): pop on packets to it, push out of vtep0 with vtep0's MAC."""
    t = pushpop
    t.start("add-port", "br0", "p0", "--", "set", "Interface", "p0", "type=dummy",
            "ofport_request=1")
    t.vsctl(*add_port("br0", "vtep0", type="dummy", ofport_request=2))
    t.vsctl("--",
            *chain(["add-br", "int-br"], ["set", "bridge", "int-br", "datapath_type=dummy"],
                   set_interface("int-br", ofport_request=3)))
    t.vsctl("--", *add_port("int-br", "t1", type="gre", ofport_request=4, options={"remote_ip": "1.1.2.92"}))
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n    vtep0 2/2: (dummy)\n  int-br:\n"
        "    int-br 65534/3: (dummy-internal)\n    t1 4/4: (gre: remote_ip=1.1.2.92)\n"))
    t.ok("netdev-dummy/ip4addr", "vtep0", "1.1.2.88/24")
    assert t.routes() == ("Cached: 1.1.2.0/24 dev vtep0 SRC 1.1.2.88\n"
                          "Cached: 1.1.2.88/32 dev vtep0 SRC 1.1.2.88 local\n")
    t.ofctl("add-flow", "br0", "action=normal")
    t.ofctl("add-flow", "int-br", "action=normal")
    t.revalidate()
    t.receive("vtep0", "recirc_id(0),in_port(2),eth(dst=ff:ff:ff:ff:ff:ff,src=aa:55:aa:55:00:03),"
              "eth_type(0x0806),arp(tip=1.1.2.92,sip=1.1.2.88,op=1,sha=aa:55:aa:55:00:03,"
              "tha=00:00:00:00:00:00)")
    t.receive("p0", arp_reply("1.1.2.92", "f8:bc:12:44:34:b6", dst="aa:55:aa:55:00:03",
                              tha="aa:55:aa:55:00:03"))
    assert t.neigh() == f"{'1.1.2.92':<46}{'f8:bc:12:44:34:b6':<20}br0\n"
    assert t.trace_tail("ovs-dummy", "in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:03),"
                        "eth_type(0x0800),ipv4(src=1.1.2.92,dst=1.1.2.88,proto=47,tos=0,ttl=64,"
                        "frag=no)") == "Datapath actions: tnl_pop(4)\n"
    assert t.trace_tail("ovs-dummy", "in_port(3),eth(dst=f9:bc:12:44:34:b6,src=af:55:aa:55:00:03),"
                        "eth_type(0x0800),ipv4(src=1.1.3.88,dst=1.1.3.92,proto=1,tos=0,ttl=64,"
                        "frag=no)") == (
        "Datapath actions: tnl_push(tnl_port(4),header(size=38,type=3,eth(dst=f8:bc:12:44:34:b6,"
        "src=aa:55:aa:55:00:03,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,"
        "ttl=64,frag=0x4000),gre((flags=0x0,proto=0x6558))),out_port(2)),1\n")
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - tunnel drop", file=FILE)
def test_tunnel_drop(pushpop: PushPop) -> None:
    """A Geneve port whose remote cannot be routed: its copy is a clone(drop)
    and the output to p2 after it is unaffected.  Beyond upstream (its ports
    made with add_of_ports --pcap), a packet from p1 leaves p2 unchanged.

    Note: t1 takes OpenFlow port 1 first, so p1's request for 1 is honoured
    only at the next reconfiguration (vswitch.xml: the other port is then
    renumbered), which would also leave the rule's in_port (resolved from the
    name when it was added) pointing at another port: nothing here may change
    the database after add-flow."""
    t = pushpop
    t.start("--", "add-port", "br0", "t1", "--", "set", "Interface", "t1", "type=geneve",
            "options:remote_ip=1.1.1.1")
    t.vsctl(*[a for n in (1, 2) for a in (  # add_of_ports --pcap br0 1 2
        "--", "add-port", "br0", f"p{n}", "--", "set", "Interface", f"p{n}", "type=dummy",
        f"ofport_request={n}", "--", "set", "Interface", f"p{n}",
        f"options:rxq_pcap=p{n}-rx.pcap", f"options:tx_pcap=p{n}-tx.pcap")])
    t.ofctl("add-flow", "br0", "in_port=p1,action=t1,p2")
    assert t.trace_tail("--names", "br0", "in_port=p1") == "Datapath actions: clone(drop),p2\n"
    t.capture("p2", "p2-tx.pcap", combined=False)
    frame = compose("udp", 4, ttl=64)
    t.receive("p1", frame.hex())
    t.expect("p2", model.forward(frame, [output("p2")], TxOffloads()),
             "p1 -> p2 beside the dropped tunnel copy", [frame])
    t.finish()


@pytest.mark.upstream("tunnel_push_pop - use two VTEPs in same subnet with rules", file=FILE)
def test_two_vteps_with_rules(pushpop: PushPop) -> None:
    """Two GRE ports with local IPs on br0 and br1 in one subnet: by the main
    table both tunnel via br1; with a table per source and rules, each via its
    own bridge."""
    t = pushpop
    t.start("set", "bridge", "br0", "datapath_type=dummy", "--", "set", "Interface", "br0",
            "other-config:hwaddr=aa:55:aa:55:00:00")
    t.vsctl(*add_port("br0", "p0", type="dummy", ofport_request=1))
    t.vsctl("add-br", "br1", "--", "set", "bridge", "br1", "datapath_type=dummy", "--", "set",
            "Interface", "br1", "other-config:hwaddr=aa:66:aa:66:00:00")
    t.vsctl(*add_port("br1", "p1", type="dummy", ofport_request=2))
    t.vsctl("--", "add-br", "int-br", "--", "set", "bridge", "int-br", "datapath_type=dummy",
            "--", "set", "Interface", "int-br", "other-config:hwaddr=aa:77:aa:77:00:00")
    for name, ofport, local, remote in (("t0", 3, "1.1.2.80", "1.1.2.90"),
                                        ("t1", 4, "1.1.2.81", "1.1.2.91")):
        t.vsctl("--",
                *add_port("int-br", name, type="gre", ofport_request=ofport,
                          options={"local_ip": local, "remote_ip": remote}))
    t.appctl("dpif/show", stdout=(
        "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n"
        "    p0 1/1: (dummy)\n  br1:\n    br1 65534/101: (dummy-internal)\n"
        "    p1 2/2: (dummy)\n  int-br:\n    int-br 65534/3: (dummy-internal)\n"
        "    t0 3/4: (gre: local_ip=1.1.2.80, remote_ip=1.1.2.90)\n"
        "    t1 4/4: (gre: local_ip=1.1.2.81, remote_ip=1.1.2.91)\n"))
    t.ok("netdev-dummy/ip4addr", "br0", "1.1.2.80/24")
    t.ok("netdev-dummy/ip4addr", "br1", "1.1.2.81/24")
    assert t.routes(sort=False) == ("Cached: 1.1.2.80/32 dev br0 SRC 1.1.2.80 local\n"
                                    "Cached: 1.1.2.81/32 dev br1 SRC 1.1.2.81 local\n"
                                    "Cached: 1.1.2.0/24 dev br1 SRC 1.1.2.81\n")
    for br in ("br0", "br1", "int-br"):
        t.ofctl("add-flow", br, "action=normal")
    t.receive("p0", arp_reply("1.1.2.90", "f8:bc:12:44:34:b0", tip="1.1.2.80",
                              dst="aa:55:aa:55:00:00"))
    t.receive("p1", arp_reply("1.1.2.91", "f8:bc:12:44:34:b1", tip="1.1.2.81", in_port=2,
                              dst="aa:66:aa:66:00:00"))
    assert t.neigh() == (f"{'1.1.2.90':<46}{'f8:bc:12:44:34:b0':<20}br0\n"
                         f"{'1.1.2.91':<46}{'f8:bc:12:44:34:b1':<20}br1\n")
    t.ok("ovs/route/add", "1.1.2.0/24", "br0", "src=1.1.2.80", "table=10")
    t.ok("ovs/route/add", "1.1.2.0/24", "br1", "src=1.1.2.81", "table=11")
    assert "".join(sorted(ln + "\n" for ln in t.appctl("ovs/route/show", "table=all")
                          .stdout.splitlines())) == (
        "Cached: 1.1.2.0/24 dev br1 SRC 1.1.2.81\n"
        "Cached: 1.1.2.80/32 dev br0 SRC 1.1.2.80 local\n"
        "Cached: 1.1.2.81/32 dev br1 SRC 1.1.2.81 local\n"
        "User: 1.1.2.0/24 dev br0 SRC 1.1.2.80 table 10\n"
        "User: 1.1.2.0/24 dev br1 SRC 1.1.2.81 table 11\n")
    flow = ("in_port(int-br),eth(src=00:00:00:00:00:00,dst=f8:bc:12:44:34:b0),eth_type(0x0800),"
            "ipv4(src=1.1.3.100,dst=1.1.3.200,proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)")

    def via() -> list[str]:
        return [ln for ln in t.trace("ovs-dummy", flow).splitlines()
                if "tunneling to" in ln and "via" in ln]
    assert via() == ["     -> tunneling to 1.1.2.90 via br1",
                     "     -> tunneling to 1.1.2.91 via br1"]
    t.ok("ovs/route/rule/add", "from=1.1.2.80/32", "table=10")
    t.ok("ovs/route/rule/add", "from=1.1.2.81/32", "table=11")
    t.appctl("ovs/route/rule/show", stdout=(
        "Cached: 0: from all lookup local\nUser: 32764: from 1.1.2.81 lookup 11\n"
        "User: 32765: from 1.1.2.80 lookup 10\nCached: 32766: from all lookup main\n"
        "Cached: 32767: from all lookup default\n"))
    assert via() == ["     -> tunneling to 1.1.2.90 via br0",
                     "     -> tunneling to 1.1.2.91 via br1"]
    t.finish()
