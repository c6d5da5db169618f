"""system-traffic.at's MPLS tests without a tunnel, as `make
check-system-userspace` (and check-system-tso) run them: at_ns0 on br0,
at_ns1 on br1, the two bridges joined by a veth (patch0/patch1) that carries
what br0 and br1 push, encapsulate and decapsulate; pings both ways must all
be answered (upstream's check, ping's summary after FORMAT_PING).

Beyond upstream, every frame that crosses OVS is judged on both sides
(fixtures/system_userspace/system_l2.py): what at_ns0 sent against what br0 put on patch0,
what arrived from patch1 against what br1 delivered to at_ns1, and the same
the other way, each with the model of the flow table's actions
(datapath/model/l2tags.py: RFC 3032 label stack entries, ovs-actions(7)
push_mpls, pop_mpls, encap and decap).  The TC and TTL of an entry made by
encap(mpls) are not in OVS's documentation: those two fields are masked on
the wire between the bridges (and only there); everything else is compared.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from datapath.backends.native_tunnel import Captured
from datapath.model import l2tags
from datapath.model.l2tags import Decap, EncapEthernet, EncapMpls, L2Action, PopMpls, PushMpls, SetEthAddrs
from fixtures.system_userspace.system_l2 import Crossings, Outcome, Rule, ipv4_only, same, tagged
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream

pytestmark = pytest.mark.requires(backend="tap")

MAC0, MAC1 = "36:b1:ee:7c:01:03", "36:b1:ee:7c:01:02"
ENC_SRC, ENC_DST = "00:00:00:00:00:01", "00:00:00:00:00:02"


@dataclass(frozen=True)
class Mpls:
    """One upstream test: its flows for br0 and br1, the model of what each
    bridge does with a frame from its namespace (`out`) and from the patch
    veth (`back`), per bridge (the two differ only in MACs)."""

    flows0: tuple[str, ...]
    flows1: tuple[str, ...]
    out: Callable[[int], Rule]  # bridge 0/1: a frame from its namespace
    back: Callable[[int], Rule]  # bridge 0/1: a frame from the patch veth
    macs: bool = False  # ADD_VETH with upstream's MACs
    ofport: bool = False  # patch ports at ofport 100
    of13: bool = False
    payload: str = "ip"  # what the label stack carries on the patch veth
    masked: bool = False  # entries made by encap(mpls): TC, TTL open


def rule(actions: list[L2Action]) -> Rule:
    return tagged(actions)


def unicast_mpls(yes: Rule, no: Rule) -> Rule:
    """A flow table that matches dl_type=0x8847 (`yes`), the rest (`no`)."""
    def pick(c: Captured) -> Outcome:
        return (yes if c.frame[12:14] == b"\x88\x47" else no)(c)
    return pick


def encap_flows(port: str, mc: bool, labels: tuple[int, ...]) -> tuple[str, ...]:
    kind = "mpls_mc" if mc else "mpls"
    ethertype = "0x8848" if mc else "0x8847"
    encaps = ", ".join(f"encap({kind}),set_mpls_label:{label}" for label in labels)
    decaps = "".join(f"decap(packet_type(ns=1,type={ethertype}))," for _ in labels[1:])
    return (f"table=0,priority=100,in_port={port} actions={encaps.replace(', ', ', ', 1)},"
            f"encap(ethernet),set_field:{ENC_DST}->dl_dst,set_field:{ENC_SRC}->dl_src,"
            "output:100",
            f"table=0,priority=100,in_port=100,dl_type={ethertype},mpls_label={labels[-1]} "
            f"actions=decap(),{decaps}decap(packet_type(ns=0,type=0)),{port}")


def encap_case(mc: bool, labels: tuple[int, ...]) -> Mpls:
    ethertype = l2tags.MPLS_MC if mc else l2tags.MPLS_UC
    push: list[L2Action] = [EncapMpls(label, mc) for label in labels]
    push.append(EncapEthernet(ENC_DST, ENC_SRC))
    pop: list[L2Action] = [Decap(), *[Decap(ethertype) for _ in labels[1:]],
                           Decap(l2tags.ETHERNET)]
    return Mpls(encap_flows("ovs-p0", mc, labels), encap_flows("ovs-p1", mc, labels),
                lambda b: rule(push), lambda b: rule(pop), ofport=True, of13=True,
                payload="ethernet", masked=True)


def mac_of(bridge: int) -> tuple[str, str]:
    """(this side's namespace MAC, the other's)."""
    return (MAC0, MAC1) if bridge == 0 else (MAC1, MAC0)


CASES = {
    "datapath - mpls actions": Mpls(
        ("table=0,priority=100,dl_type=0x0800 actions=push_mpls:0x8847,set_mpls_label:4,"
         "resubmit(,1)",
         "table=0,priority=100,dl_type=0x8847,mpls_label=4 actions=pop_mpls:0x0800,"
         "resubmit(,1)",
         "table=0,priority=10 actions=resubmit(,1)",
         "table=1,priority=10 actions=normal"), (),
        lambda b: ipv4_only(rule([PushMpls(0x8847, 4)]), same()),
        lambda b: unicast_mpls(rule([PopMpls(0x0800)]), same())),
    "datapath - multiple mpls label pop": Mpls(
        ("table=0,priority=100,dl_type=0x0800 actions=push_mpls:0x8847,set_mpls_label:4,"
         "push_mpls:0x8847,set_mpls_label:2,push_mpls:0x8847,set_mpls_label:1,resubmit(,3)",
         "table=0,priority=100,dl_type=0x8847,mpls_label=1 actions=pop_mpls:0x8847,"
         "resubmit(,1)",
         "table=1,priority=100,dl_type=0x8847,mpls_label=2 actions=pop_mpls:0x8847,"
         "resubmit(,2)",
         "table=2,priority=100,dl_type=0x8847,mpls_label=4 actions=pop_mpls:0x0800,"
         "resubmit(,3)",
         "table=0,priority=10 actions=resubmit(,3)",
         "table=3,priority=10 actions=normal"), (),
        lambda b: ipv4_only(rule([PushMpls(0x8847, 4), PushMpls(0x8847, 2),
                                  PushMpls(0x8847, 1)]), same()),
        lambda b: unicast_mpls(rule([PopMpls(0x8847), PopMpls(0x8847), PopMpls(0x0800)]),
                               same())),
    "datapath - encap decap mpls actions": encap_case(False, (2,)),
    "datapath - encap decap mpls_mc actions": encap_case(True, (2,)),
    "datapath - multiple encap decap mpls actions": encap_case(False, (3, 2)),
    "datapath - multiple encap decap mpls_mc actions": encap_case(True, (3, 2)),
    "datapath - encap mpls pop mpls actions": Mpls(
        tuple(f"table=0,priority=100,dl_type=0x0800 actions=decap,encap(mpls),"
              f"set_mpls_label:2,encap(ethernet),mod_dl_dst:{dst},mod_dl_src:{src},output:100"
              for src, dst in [(MAC0, MAC1)]) + (
            "table=0,priority=100,dl_type=0x8847,mpls_label=2 actions=pop_mpls:0x0800,"
            "resubmit(,3)",
            "table=0,priority=10 actions=resubmit(,3)", "table=3,priority=10 actions=normal"),
        (f"table=0,priority=100,dl_type=0x0800 actions=decap,encap(mpls),set_mpls_label:2,"
         f"encap(ethernet),mod_dl_dst:{MAC0},mod_dl_src:{MAC1},output:100",
         "table=0,priority=100,dl_type=0x8847,mpls_label=2 actions=pop_mpls:0x0800,"
         "resubmit(,3)",
         "table=0,priority=10 actions=resubmit(,3)", "table=3,priority=10 actions=normal"),
        lambda b: ipv4_only(rule([Decap(), EncapMpls(2), EncapEthernet(mac_of(b)[1],
                                                                       mac_of(b)[0])]), same()),
        lambda b: unicast_mpls(rule([PopMpls(0x0800)]), same()),
        macs=True, ofport=True, of13=True, masked=True),
    "datapath - push mpls decap mpls actions": Mpls(
        ("table=0,priority=100,dl_type=0x0800 actions=push_mpls:0x8847,"
         "set_field:2->mpls_label,output:100",
         f"table=0,priority=100,dl_type=0x8847,mpls_label=2 actions=decap,"
         f"decap(packet_type(ns=1,type=0x0800)),encap(ethernet),mod_dl_dst:{MAC0},"
         f"mod_dl_src:{MAC1},resubmit(,3)",
         "table=0,priority=10 actions=resubmit(,3)", "table=3,priority=10 actions=normal"),
        ("table=0,priority=100,dl_type=0x0800 actions=push_mpls:0x8847,"
         "set_field:2->mpls_label,output:100",
         f"table=0,priority=100,dl_type=0x8847,mpls_label=2 actions=decap,"
         f"decap(packet_type(ns=1,type=0x0800)),encap(ethernet),mod_dl_dst:{MAC1},"
         f"mod_dl_src:{MAC0},resubmit(,3)",
         "table=0,priority=10 actions=resubmit(,3)", "table=3,priority=10 actions=normal"),
        lambda b: ipv4_only(rule([PushMpls(0x8847, 2)]), same()),
        lambda b: unicast_mpls(rule([Decap(), Decap(0x0800), EncapEthernet(),
                                     SetEthAddrs(*mac_of(b))]), same()),
        macs=True, ofport=True, of13=True),
}
# The first two tests load the same flows.txt into both bridges.
for _title in ("datapath - mpls actions", "datapath - multiple mpls label pop"):
    CASES[_title] = Mpls(**{**CASES[_title].__dict__, "flows1": CASES[_title].flows0})


def short(title: str) -> str:
    return title.removeprefix("datapath - ").removesuffix(" actions").replace(" ", "_")


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t), id=short(t))
                                   for t in CASES])
def test_mpls(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
              flavour: str, title: str) -> None:
    """Upstream's topology, flows and pings (at_ns0 -> at_ns1, then back),
    every ping answered; then each frame of both pings against the model on
    each of the four hops (module docstring)."""
    case = CASES[title]
    t: Traffic = system_traffic(flavour, vsctl_extra=tuple(Traffic.br_args("br1")))
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24", MAC0 if case.macs else "")
    t.add_veth("p1", ns1, "br1", "10.1.1.2/24", MAC1 if case.macs else "")
    t.ip("link", "add", "patch0", "type", "veth", "peer", "name", "patch1")
    t.ip("link", "set", "dev", "patch0", "up")
    t.ip("link", "set", "dev", "patch1", "up")
    for bridge, port in (("br0", "patch0"), ("br1", "patch1")):
        t.sb.vsctl("add-port", bridge, port, *(("--", "set", "interface", port,
                                                "ofport_request=100")
                                               if case.ofport else ()))
    of = ("-Oopenflow13",) if case.of13 else ()
    for bridge, flows in (("br0", case.flows0), ("br1", case.flows1)):
        path = t.sb.rundir / f"flows-{bridge}.txt"
        path.write_text("".join(f + "\n" for f in flows))
        t.sb.ofctl(*of, "add-flows", bridge, str(path))
    mask = l2tags.mask_lse if case.masked else None
    wire = Crossings(t, request)
    host = t.host
    wire.hop("at_ns0 -> br0 -> patch0", (ns0, "p0", True), (host, "patch0", True),
             case.out(0), case.payload, mask)
    wire.hop("patch1 -> br1 -> at_ns1", (host, "patch1", False), (ns1, "p1", False),
             case.back(1), case.payload, mask)
    wire.hop("at_ns1 -> br1 -> patch1", (ns1, "p1", True), (host, "patch1", True),
             case.out(1), case.payload, mask)
    wire.hop("patch0 -> br0 -> at_ns0", (host, "patch0", False), (ns0, "p0", False),
             case.back(0), case.payload, mask)
    t.check_ping(ns0, "10.1.1.2")
    t.check_ping(ns1, "10.1.1.1")
    assert wire.verify() >= 24  # 6 requests and 6 replies, each on two hops


# ----------------------------------------------------------------------------
# mpls[_mc] - encap header / decap header, dp-support and slow-path

ICMP_PKT = ("eth_src=36:b1:ee:7c:01:03,eth_dst=36:b1:ee:7c:01:02,eth_type=0x0800,"
            "nw_src=10.1.1.1,nw_dst=10.1.1.2,nw_proto=1,nw_ttl=64,nw_frag=no,"
            "icmp_type=8,icmp_code=0")


def mpls_header(ethertype: str) -> str:
    return (f"eth_src={ENC_SRC},eth_dst={ENC_DST},eth_type={ethertype},"
            "mpls_label=2,mpls_ttl=64,mpls_bos=1")


HEADER_TESTS = [(f"{kind} - {way} header {path}", kind, way, path)
                for kind, way in (("mpls", "encap"), ("mpls_mc", "encap"), ("mpls", "decap"))
                for path in ("dp-support", "slow-path")]


@FLAVOUR
@pytest.mark.parametrize("kind,way,path", [
    pytest.param(kind, way, path, marks=upstream(title), id=f"{kind}-{way}-{path}")
    for title, kind, way, path in HEADER_TESTS])
def test_mpls_header(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str, kind: str, way: str, path: str) -> None:
    """One ICMP echo request (ovs-ofctl compose-packet --bare, sent from p0 as
    upstream's sendpkt.py does) through br0's single flow: encap(mpls[_mc])
    with label 2 and a new Ethernet header, or decap of such a packet; the
    datapath does it (dp-support: skipped unless dpif/show-dp-features says
    "MPLS Label add: Yes", as upstream) or the slow path does (add_mpls
    false).  Upstream's check: tcpdump's capture in at_ns1 holds the exact
    packet (ovs-pcap, the composed MPLS header with TTL 64 and the ICMP packet).
    Beyond: the frame against the model's encap/decap (RFC 3032,
    ovs-actions(7); TC and TTL masked there, upstream's hex checks them)."""
    t: Traffic = system_traffic(flavour)
    if path == "slow-path":
        t.sb.appctl("dpif/set-dp-features", "br0", "add_mpls", "false")
    elif "MPLS Label add: Yes" not in t.sb.appctl("dpif/show-dp-features", "br0").stdout:
        pytest.skip("dpif/show-dp-features br0 does not say 'MPLS Label add: Yes'")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24", MAC0)
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24", MAC1)
    mc = kind == "mpls_mc"
    ethertype = "0x8848" if mc else "0x8847"
    if way == "encap":
        flow = (f"table=0,priority=100,dl_type=0x0800 actions=encap({kind}),set_mpls_label:2,"
                f"encap(ethernet),set_field:{ENC_DST}->dl_dst,set_field:{ENC_SRC}->dl_src,"
                "ovs-p1")
        model = ipv4_only(rule([EncapMpls(2, mc), EncapEthernet(ENC_DST, ENC_SRC)]),
                          lambda c: [])
    else:
        flow = ("table=0,priority=100,dl_type=0x8847,mpls_label=2 actions=decap(),"
                "decap(packet_type(ns=0,type=0)),ovs-p1")
        model = unicast_mpls(rule([Decap(), Decap(l2tags.ETHERNET)]), lambda c: [])
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0", flow)
    pcap, err = t.sb.rundir / "p1.pcap", t.sb.rundir / "tcpdump_err"
    t.daemonize("tcpdump", ["sh", "-c", f"exec tcpdump -l -n -xx -U -i p1 -w {pcap} 2>{err}"],
                ns1, t.sb.rundir / "tcpdump.out")
    from harness.wait import wait_until
    wait_until(lambda: err.exists() and "listening" in err.read_text(), 10,
               what="tcpdump to listen on p1")
    icmp = t.run(["ovs-ofctl", "compose-packet", "--bare", ICMP_PKT]).stdout.strip()
    header = t.run(["ovs-ofctl", "compose-packet", "--bare",
                    mpls_header(ethertype)]).stdout.strip()
    wire = Crossings(t, request)
    wire.hop("at_ns0 -> br0 -> at_ns1", (ns0, "p0", True), (ns1, "p1", False), model,
             "ethernet", l2tags.mask_lse)
    from datapath.backends.netns import KernelSide
    side = KernelSide(ns0, "p0")
    t.env.cleanup.defer("close p0", side.close)
    sent = header + icmp if way == "decap" else icmp
    side.send([bytes.fromhex(sent)])
    want = f"{header}{icmp}" if way == "encap" else icmp

    def captured() -> bool:
        dump = t.run(["ovs-pcap", str(pcap)]).stdout
        return any(line.strip() == want for line in dump.splitlines())
    wait_until(captured, 10, what=f"ovs-pcap p1.pcap to show ^{want}$")
    assert wire.verify() >= 1
