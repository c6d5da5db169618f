"""system-traffic.at's truncate tests, as `make check-system-userspace` (and
check-system-tso) run them: "datapath - basic truncate action" (at the end
of this module: two veth loops, each copy judged), "datapath - truncate and
output to gre tunnel" (upstream's gretap far end: it needs the kernel's GRE
devices, and skips naming them where there are none) and "datapath -
truncate and output to gre tunnel by simulated packets", which runs here:
a 200-byte UDP datagram from at_ns1 leaves through a GRE port with
output(max_len=100), and a GRE packet simulated on behalf of at_ns0 (a
packet-out into br-underlay) comes back truncated to 100 bytes on a veth
loop (ovs-p2 -> p2).  Then again with the datapath's truncate support off
(dpif/set-dp-features br0 trunc false: the slow-action path).

Upstream checks the bytes the flows counted (242 in, 138 out of br-underlay,
100 back on p2).  Then more, on the wire, for both paths:
- the GRE frame on p0 must be the model's (datapath/model/send.py E8 and
  tunnel.py): the first 100 bytes of the frame at_ns1 sent, as it would leave
  (ovs-actions(7) output max_len), pushed into GRE (RFC 2784, no options);
- the frame that came back on p2 must be the first 100 bytes of the
  packet-out's inner frame (of ns_gre0's GRE packet's, with the gretap);
- both paths are judged against the same frames, so the one the second path
  loops back equals the first's.

In the tso flavour at_ns1's (at_ns0's, in the basic test) veth leaves the UDP checksum to the "NIC": OVS
receives it pending, and completes it over the truncated bytes on both paths
(known OVS bug trunc-pending-csum, datapath/model/bugs.py): the case xfails
only where OVS deviates exactly as the model says.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from datapath import model
from datapath.backends.kernel import link_chatter, tx_from_status
from datapath.backends.native_tunnel import Captured, Sniffer
from datapath.backends.netns import Netns
from datapath.model.actions import Action, PushTunnel, Truncate, output
from datapath.model.packet import PROTO_GRE, PROTO_UDP, parse_layer
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import TxOffloads
from datapath.verdict import PortFrames, settle
from evidence.tshark import Tshark
from fixtures.records import record_for
from fixtures.system_userspace.kernel_peer import rx_flags
from fixtures.system_userspace.system_traffic import FLAVOUR, NC_EOF_OPT, Traffic, payload, upstream
from harness.filters import ofctl_strip
from harness.ifstatus import read_interface
from harness.records import Step
from harness.vsctl import add_port, set_interface
from harness.wait import settled

pytestmark = pytest.mark.requires(backend="tap")

TITLE = "datapath - truncate and output to gre tunnel by simulated packets"
UNDERLAY_MAC, NS0_MAC = "02:90:8c:a8:a1:49", "fa:ad:fa:25:05:60"
FLOWS = ("priority=99,in_port=1,actions=output(port=2,max_len=100),output(port=3,max_len=100)",
         "priority=99,in_port=2,udp,actions=output(port=1,max_len=100)",
         "priority=1,in_port=4,ip,actions=drop",
         "priority=1,actions=drop")
UNDERLAY_FLOWS = ("priority=99,dl_type=0x0800,nw_proto=47,in_port=1,actions=LOCAL",
                  "priority=99,dl_type=0x0800,nw_proto=47,in_port=LOCAL,ip_dst=172.31.1.1/24,"
                  "actions=1",
                  "priority=1,actions=drop")
# The GRE frame upstream simulates on behalf of ns_gre0 (a 200-byte UDP payload inside).
SIMULATED = (
    "02908ca8a149faadfa25056008004500010a9e9d4000402f4084ac1f0101ac1f016400006558e666c1222222"
    "e666c11111110800450000e46f8e40004011b4760a0101010a010102e026162e00d016e6a366ebf904c74132"
    "c6fed42a9e9e46240b4d9fd13c9b47d9704a388e70a5e77db16934a6188dc01d86aa20007ace2cf9cdb111f2"
    "08474b88ffc851c871f0e3fb4fff138c1d288d437efff487e2b86a9c99fbf4229a6485e133bcf3e16f6e3452"
    "07fda0932d9eeb602740456fd077b4847d25481337bd716155cc245be129ccc11bf82b834767b3760b52fe91"
    "3c0e24f31c0e1b27f88acf7bba6b985fb64ee2cd6fc6bba1a9c1f021e253e1728b046fd4d023307e3296361a"
    "37ea2617ebcb2537e0284a81050dd0ee")
MAX_LEN = 100


def p1_and_loop(t: Traffic, ns1: Netns) -> Path:
    """Upstream's ns1 side of both truncate-into-GRE tests: ADD_VETH(p1) with its
    MAC and `arp -s` (a permanent neighbour entry), then the p2/ovs-p2 veth
    looped through br0 (flows deleted first); the 200-byte payload file."""
    t.add_veth("p1", ns1, "br0", "10.1.1.2/24")
    t.sb.vsctl("--", *set_interface("ovs-p1", ofport_request=2))
    t.ip("link", "set", "dev", "p1", "address", "e6:66:c1:22:22:22", ns=ns1)
    t.ip("neigh", "replace", "10.1.1.1", "lladdr", "e6:66:c1:11:11:11", "nud", "permanent",
         "dev", "p1", ns=ns1)
    t.sb.ofctl("del-flows", "br0")  # before both ends of a veth join br0
    t.ip("link", "add", "p2", "type", "veth", "peer", "name", "ovs-p2")
    t.ip("link", "set", "dev", "ovs-p2", "up")
    t.ip("link", "set", "dev", "p2", "up")
    t.sb.vsctl(*add_port("br0", "ovs-p2", ofport_request=3))
    t.sb.vsctl(*add_port("br0", "p2", ofport_request=4))
    data = t.sb.rundir / "payload200.bin"
    data.write_bytes(payload(200))
    return data


@FLAVOUR
@upstream(TITLE)
def test_truncate_and_output_to_gre_by_simulated_packets(
        system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
        second_opinion: Tshark | None, flavour: str) -> None:
    """Upstream's sequence and byte counts on both paths, then the frames on
    the wire (module docstring)."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay", "set", "bridge", "br-underlay",
             f'other-config:hwaddr="{UNDERLAY_MAC}"')
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    t.add_veth("p0", ns0, "br-underlay", "172.31.1.1/24", NS0_MAC)
    t.ip("addr", "add", "dev", "br-underlay", "172.31.1.100/24")
    t.ip("link", "set", "dev", "br-underlay", "up")
    t.add_ovs_tunnel("gre", "br0", "at_gre0", "172.31.1.1", "10.1.1.100/24")
    data = p1_and_loop(t, ns1)

    spec = TunnelSpec("gre", "172.31.1.100", "172.31.1.1", UNDERLAY_MAC, NS0_MAC, key=None,
                      csum=False)
    wire = Wire(t, ns0, ns1, spec, second_opinion)
    load_flows(t)
    round_trip(t, ns1, data, lambda: simulated(t))
    wire.verify("datapath truncate", record_for(request.node).steps)
    # SLOW_ACTION: the datapath's truncate support off, the same again.
    t.sb.appctl("dpif/set-dp-features", "br0", "trunc", "false")
    t.sb.ofctl("del-flows", "br0")
    for flow in FLOWS:
        t.sb.ofctl("add-flow", "br0", flow)
    wire = Wire(t, ns0, ns1, spec, second_opinion)
    load_flows(t)
    round_trip(t, ns1, data, lambda: simulated(t))
    wire.verify("slow action", record_for(request.node).steps)


GRE_TITLE = "datapath - truncate and output to gre tunnel"


@FLAVOUR
@upstream(GRE_TITLE)
@pytest.mark.requires(kernel="gre")
def test_truncate_and_output_to_gre_tunnel(system_traffic: Callable[..., Traffic],
                                           request: pytest.FixtureRequest,
                                           second_opinion: Tshark | None,
                                           flavour: str) -> None:
    """The same as the simulated test above, with upstream's own far end: a
    gretap device (ns_gre0, MAC e6:66:c1:11:11:11) in at_ns0, and the pop
    path's GRE packet sent by it (nc -u 10.1.1.2 5678 from at_ns0).
    Upstream's byte counts on both paths, twice (the second with the
    datapath's truncate support off); beyond, the GRE frames on p0 against
    the model and what came back on p2 against the first 100 bytes of the
    inner frame ns_gre0 sent."""
    t: Traffic = system_traffic(flavour)
    t.add_br("br-underlay")
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    t.sb.ofctl("add-flow", "br0", "actions=normal")
    t.sb.ofctl("add-flow", "br-underlay", "actions=normal")
    t.add_veth("p0", ns0, "br-underlay", "172.31.1.1/24")
    t.ip("addr", "add", "dev", "br-underlay", "172.31.1.100/24")
    t.ip("link", "set", "dev", "br-underlay", "up")
    t.add_ovs_tunnel("gre", "br0", "at_gre0", "172.31.1.1", "10.1.1.100/24")
    t.add_native_tunnel("gre", "ns_gre0", ns0, "172.31.1.100", "10.1.1.1/24", (),
                        ("address", "e6:66:c1:11:11:11"))
    t.sb.vsctl("--", *set_interface("at_gre0", ofport_request=1))
    t.ip("neigh", "replace", "10.1.1.2", "lladdr", "e6:66:c1:22:22:22", "nud", "permanent",
         "dev", "ns_gre0", ns=ns0)
    data = p1_and_loop(t, ns1)
    underlay_mac = t.host.run(["cat", "/sys/class/net/br-underlay/address"]).stdout.strip()
    p0_mac = ns0.run(["cat", "/sys/class/net/p0/address"]).stdout.strip()
    spec = TunnelSpec("gre", "172.31.1.100", "172.31.1.1", underlay_mac, p0_mac, key=None,
                      csum=False)

    def from_ns_gre0() -> None:
        t.run(["ncat", *NC_EOF_OPT, "-u", "10.1.1.2", "5678"], ns0, input_path=data)
    steps = record_for(request.node).steps
    wire = Wire(t, ns0, ns1, spec, second_opinion, native=True)
    load_flows(t)
    round_trip(t, ns1, data, from_ns_gre0)
    wire.verify("datapath truncate", steps)
    # SLOW_ACTION: the datapath's truncate support off, the same again.
    t.sb.appctl("dpif/set-dp-features", "br0", "trunc", "false")
    wire = Wire(t, ns0, ns1, spec, second_opinion, native=True)
    load_flows(t)
    round_trip(t, ns1, data, from_ns_gre0)
    wire.verify("slow action", steps)


def load_flows(t: Traffic) -> None:
    """flows.txt into br0, flows-underlay.txt into br-underlay (add-flows, a line each)."""
    t.sb.ofctl("del-flows", "br0")
    for flow in FLOWS:
        t.sb.ofctl("add-flow", "br0", flow)
    t.sb.ofctl("del-flows", "br-underlay")
    for flow in UNDERLAY_FLOWS:
        t.sb.ofctl("add-flow", "br-underlay", flow)


def n_bytes(t: Traffic, bridge: str, match: str) -> str:
    r"""dump-flows BRIDGE | grep MATCH | sed 's/.*\(n_bytes=[0-9]*\).*/\1/p'."""
    dump = t.sb.ofctl("dump-flows", bridge).stdout
    return "".join(m.group(1) + "\n" for line in dump.splitlines() if match in line
                   for m in [re.search(r"(n_bytes=\d+)", line)] if m)


def simulated(t: Traffic) -> None:
    """The pop path's GRE packet, simulated on behalf of ns_gre0: a packet-out
    into br-underlay as if from p0."""
    t.sb.ofctl("-O", "OpenFlow13", "packet-out", "br-underlay",
               f"in_port=1 packet={SIMULATED} actions=LOCAL")


def round_trip(t: Traffic, ns1: Netns, data: Path, pop: Callable[[], None]) -> None:
    """The push path (nc from at_ns1), then the pop path (`pop`: the simulated
    packet-out, or nc from at_ns0 through its GRE device)."""
    t.run(["ncat", *NC_EOF_OPT, "-u", "10.1.1.1", "1234"], ns1, input_path=data)
    t.sb.appctl("revalidator/purge")
    # Before truncation: ETH(14) + IP(20) + UDP(8) + 200 = 242 bytes.
    assert n_bytes(t, "br0", "in_port=2") == "n_bytes=242\n"
    # After: outer ETH(14) + outer IP(20) + GRE(4) + 100 = 138 bytes.
    want = "n_bytes=138\n"
    assert settled(lambda: n_bytes(t, "br-underlay", "in_port=LOCAL"), want) == want
    pop()
    t.sb.appctl("revalidator/purge")
    want = " n_packets=1, n_bytes=100, priority=1,ip,in_port=4 actions=drop\n"

    def dropped() -> str:
        dump = t.sb.ofctl("dump-flows", "br0").stdout
        return ofctl_strip("".join(ln + "\n" for ln in dump.splitlines() if "in_port=4" in ln))
    assert settled(dropped, want) == want


class Wire:
    """p1 (at_ns1), p0 (at_ns0) and p2 (the loop's far end) captured for one path."""

    def __init__(self, t: Traffic, ns0: Netns, ns1: Netns, spec: TunnelSpec,
                 tshark: Tshark | None, native: bool = False) -> None:
        self.native, self.tshark = native, tshark
        self.p1, self.p0, self.p2 = Sniffer(ns1, "p1"), Sniffer(ns0, "p0"), Sniffer(t.host, "p2")
        t.env.cleanup.defer("close the captures", self.close)
        # A veth offers no tunnel offloads: what the underlay port has for plain packets.
        self.tx = TxOffloads(tx_from_status(read_interface(t.sb, "ovs-p0").status)[0].advertised)
        self.spec = spec

    def close(self) -> None:
        for sniffer in (self.p1, self.p0, self.p2):
            sniffer.close()

    def frames(self) -> tuple[list[Captured], list[bytes], list[bytes]]:
        """at_ns1's datagrams, the GRE packets OVS sent to p0, what p2 got."""
        for sniffer in (self.p1, self.p0, self.p2):
            sniffer.read()
        sent = [c for c in self.p1.frames if c.outgoing and _proto(c.frame) == PROTO_UDP]
        gre = [c.frame for c in self.p0.frames
               if not c.outgoing and _proto(c.frame) == PROTO_GRE]
        # ovs-p2's own kernel side sends IPv6 housekeeping to p2 too
        looped = [c.frame for c in self.p2.frames
                  if not c.outgoing and not link_chatter(c.frame)
                  and (not self.native or _udp4_header(c.frame))]
        return sent, gre, looped

    def verify(self, path: str, steps: list[Step]) -> None:
        """Both directions judged against the rules (datapath/verdict.py); each
        direction a step of the case's record."""
        def into_ovs() -> list[bytes]:
            """The pop path's GRE packets: the simulated one, or those ns_gre0 sent."""
            if not self.native:
                return [bytes.fromhex(SIMULATED)]
            # ns_gre0's own link chatter rides GRE too: the datagrams of nc only
            return [c.frame for c in self.p0.frames if c.outgoing
                    and _proto(c.frame) == PROTO_GRE and _udp4_header(c.frame[14 + 20 + 4:])]

        def read() -> list[PortFrames]:
            sent, gre, looped = self.frames()
            expected = model.Expected(frames=[])
            for c in sent:
                expected.extend(model.forward(c.frame, [Truncate(MAX_LEN), PushTunnel(
                    self.spec, "at_gre0"), output("p0")], self.tx, rx_flags(c)))
            push = PortFrames("p0", expected, gre, sent=[c.frame for c in sent], rx_port="p1",
                              title=f"{path}: output(port=at_gre0,max_len={MAX_LEN})",
                              extra=[] if len(sent) == 1 else [
                                  f"at_ns1 sent {len(sent)} UDP datagrams, not the one of nc"])
            # The rule is ovs-actions(7)'s output max_len on the popped inner frame,
            # not a model.forward: the judge builds the frames (no variants).
            want_loop = [f[14 + 20 + 4:][:MAX_LEN] for f in into_ovs()]
            pop = PortFrames("p2", model.Expected(frames=want_loop), looped, sent=into_ovs(),
                             rx_port="p0", title=f"{path}: output(port=ovs-p2,max_len={MAX_LEN})")
            return [push, pop]
        # A frame seen on one side may still be on its way to the other.
        verdict = settle(steps, read, title=path, second_opinion=self.tshark,
                         what=f"{path}: the frames on the wire")
        self.close()
        verdict.check()


def _proto(frame: bytes) -> int | None:
    return parse_layer(frame).proto


# ----------------------------------------------------------------------------
# datapath - basic truncate action

BASIC = "datapath - basic truncate action"
P0_MAC, P1_MAC = "e6:66:c1:11:11:11", "e6:66:c1:22:22:22"
# flows.txt of the basic test, then of its "more complicated output actions";
# per output port (ovs-p1 = 2, ovs-p2 = 4), each output's max_len (None: whole).
Cuts = dict[str, list[int | None]]
BASIC_FLOW = "in_port=1 dl_dst=e6:66:c1:22:22:22 actions=output(port=2,max_len=100),output:4"
BASIC_CUTS: Cuts = {"p1": [100], "p2": [None]}
MORE_FLOW = ("in_port=1 dl_dst=e6:66:c1:22:22:22 actions=output(port=2,max_len=100),output:4,"
             "output(port=2,max_len=100),output(port=4,max_len=100),output:2,"
             "output(port=4,max_len=200),output(port=2,max_len=65535)")
MORE_CUTS: Cuts = {"p1": [100, 100, None, 65535], "p2": [None, 100, 200]}
SLOW_TRACE = ("Datapath actions: trunc(100),3,5,trunc(100),3,trunc(100),5,3,trunc(200),5,"
              "trunc(65535),3\n"
              "This flow is handled by the userspace slow path because it:\n"
              "  - Uses action(s) not supported by datapath.\n")


@FLAVOUR
@upstream(BASIC)
def test_basic_truncate_action(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest,
                               second_opinion: Tshark | None, flavour: str) -> None:
    """A 200-byte UDP datagram from at_ns0 (nc, to a static ARP entry's MAC)
    through br0's output(port, max_len) actions to two veth loops, ovs-p1 ->
    p1 and ovs-p2 -> p2, whose far ends are br0 ports that drop and count:
    upstream's byte counts after revalidator/purge (100 and 242; then
    100+100+242+242 = 684 and 242+100+200 = 542 for the longer action list),
    then the same with the datapath's truncate support off
    (dpif/set-dp-features br0 trunc false): ofproto/trace must show the
    trunc() datapath actions and the slow path, and the counts again.
    Beyond: every copy that reached p1 and p2, on both paths, against the
    model (ovs-actions(7) output max_len: the first max_len bytes, a
    max_len above the packet's length cutting nothing).  In the tso flavour
    at_ns0's veth leaves the UDP checksum to the "NIC": OVS completes it
    over the truncated bytes (known OVS bug trunc-pending-csum), and the copies
    xfail only where OVS deviates exactly as the model says."""
    t: Traffic = system_traffic(flavour)
    t.sb.ofctl("del-flows", "br0")
    ns0 = t.add_namespace("at_ns0")
    t.add_veth("p0", ns0, "br0", "10.1.1.1/24")
    t.ip("link", "set", "dev", "p0", "address", P0_MAC, ns=ns0)
    # arp -s: a permanent entry (net-tools is not in the runtime)
    t.ip("neigh", "replace", "10.1.1.2", "lladdr", P1_MAC, "nud", "permanent", "dev", "p0",
         ns=ns0)
    for n, (near, far) in enumerate((("ovs-p1", "p1"), ("ovs-p2", "p2"))):
        t.ip("link", "add", far, "type", "veth", "peer", "name", near)
        t.ip("link", "set", "dev", near, "up")
        t.ip("link", "set", "dev", far, "up")
        t.sb.vsctl(*add_port("br0", near, ofport_request=2 + 2 * n))
        t.sb.vsctl(*add_port("br0", far, ofport_request=3 + 2 * n))
    data = t.sb.rundir / "payload200.bin"
    data.write_bytes(payload(200))
    steps = record_for(request.node).steps
    loops = Loops(t, ns0, second_opinion)

    def load(flow: str) -> None:
        t.sb.ofctl("del-flows", "br0")
        flows = t.sb.rundir / "flows.txt"
        flows.write_text("in_port=3 dl_dst=e6:66:c1:22:22:22 actions=drop\n"
                         "in_port=5 dl_dst=e6:66:c1:22:22:22 actions=drop\n"
                         f"{flow}\n")
        t.sb.ofctl("add-flows", "br0", str(flows))

    def send_and_count(p1: int, p2: int) -> None:
        t.run(["ncat", *NC_EOF_OPT, "-u", "10.1.1.2", "1234"], ns0, input_path=data)
        t.sb.appctl("revalidator/purge")
        for match, want in (("in_port=3", p1), ("in_port=5", p2)):
            line = f"n_bytes={want}\n"
            assert settled(lambda: n_bytes(t, "br0", match), line,
                           what=f"{match}'s n_bytes") == line

    load(BASIC_FLOW)
    send_and_count(100, 242)
    loops.verify("basic", BASIC_CUTS, steps)
    load(MORE_FLOW)
    send_and_count(684, 542)
    loops.verify("more output actions", MORE_CUTS, steps)
    # SLOW_ACTION: the datapath's truncate support off.
    t.sb.appctl("dpif/set-dp-features", "br0", "trunc", "false")
    load(MORE_FLOW)
    trace = t.sb.appctl(
        "ofproto/trace", "br0", "in_port=1,dl_type=0x800,dl_src=e6:66:c1:11:11:11,"
        "dl_dst=e6:66:c1:22:22:22,nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_proto=6,tp_src=8,"
        "tp_dst=9").stdout
    assert "".join(ln + "\n" for ln in trace.splitlines()[-3:]) == SLOW_TRACE, trace
    load(MORE_FLOW)
    send_and_count(684, 542)
    loops.verify("slow action", MORE_CUTS, steps)


class Loops:
    """at_ns0's p0 and the loops' far ends p1 and p2, captured; verify()
    judges what reached p1 and p2 since the last call."""

    def __init__(self, t: Traffic, ns0: Netns, tshark: Tshark | None) -> None:
        self.t, self.tshark = t, tshark
        self.p0 = Sniffer(ns0, "p0")
        self.far = {port: Sniffer(t.host, port) for port in ("p1", "p2")}
        t.env.cleanup.defer("close the captures", self.close)
        self.tx = {port: TxOffloads(tx_from_status(
            read_interface(t.sb, f"ovs-{port}").status)[0].advertised) for port in self.far}

    def close(self) -> None:
        for sniffer in (self.p0, *self.far.values()):
            sniffer.close()

    def verify(self, path: str, outputs: Cuts,
               steps: list[Step]) -> None:
        """Each far end got, for each UDP datagram p0 sent, one copy per output
        to its port, cut to that output's max_len (datapath/verdict.py)."""
        def read() -> list[PortFrames]:
            for sniffer in (self.p0, *self.far.values()):
                sniffer.read()
            sent = [c for c in self.p0.frames if c.outgoing and _proto(c.frame) == PROTO_UDP]
            extra = [] if len(sent) == 1 else [
                f"at_ns0 sent {len(sent)} UDP datagrams, not the one of nc"]
            ports = []
            for port, cuts in outputs.items():
                expected = model.Expected(frames=[])
                for c in sent:
                    actions: list[Action] = [a for cut in cuts
                               for a in ([Truncate(cut)] if cut else []) + [output(port)]]
                    expected.extend(model.forward(c.frame, actions, self.tx[port], rx_flags(c)))
                got = [c.frame for c in self.far[port].frames
                       if not c.outgoing and _udp4_header(c.frame)]
                ports.append(PortFrames(port, expected, got, sent=[c.frame for c in sent],
                                        rx_port="p0", title=f"{path}: to {port}",
                                        extra=extra if not ports else []))
            return ports
        # A frame seen on one side may still be on its way to the other.
        verdict = settle(steps, read, title=path, second_opinion=self.tshark,
                         what=f"{path}: the copies on the wire")
        for sniffer in (self.p0, *self.far.values()):
            sniffer.frames.clear()
        verdict.check()


def _udp4_header(frame: bytes) -> bool:
    """An IPv4 UDP header in front, whatever follows (a cut packet's lengths
    say more than it holds, so no parser takes it)."""
    return len(frame) > 23 and frame[12:14] == b"\x08\x00" and frame[23] == PROTO_UDP
