"""system-traffic.at's SRv6 tests, "datapath - ping over srv6 tunnel" and
"datapath - ping6 over srv6 tunnel", as `make check-system-userspace` (and
check-system-tso) run them: OVS's srv6 tunnel port on br0, and at_ns0 as the
far end, a Linux router with a seg6 encap route towards OVS and a seg6local
End.DX4 / End.DX6 route that decapsulates what OVS sends (RFC 8986 §4.6,
§4.5) towards at_ns1.  A kernel without seg6 skips (OVS_CHECK_SRV6).

Upstream checks the underlay ping and the overlay ping.  Then more, on the
frames both captures saw while the overlay ping ran:
- encapsulation: every IP packet br0's kernel side sent into OVS must leave on
  p0 as the model's SRv6 push of it (datapath/model/tunnel.py: outer IPv6
  and a segment routing header listing the remote as the only segment, RFC
  8754 §2, RFC 8986 §5.1 H.Encaps; the Ethernet header is not carried);
- decapsulation: every packet at_ns0 encapsulated must reach br0 as its
  inner IP packet, byte for byte (RFC 8754 §4.3.1.1.1: the inner packet is
  processed as received), in an Ethernet frame to aa:55:aa:55:00:00 (the
  flow's mod_dl_dst).  Its source MAC is not judged: OVS adds the Ethernet
  header of an L3 packet itself (ovs-fields(7), packet_type);
- at_ns0's and the host's checksum and header error counters stay still.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from datapath import model
from datapath.backends.kernel import link_chatter, tx_from_status
from datapath.backends.native_tunnel import Captured, Sniffer, moved, snmp_counters
from datapath.backends.netns import Netns, link_mac, mac_text
from datapath.model.actions import PushTunnel, output
from datapath.model.packet import parse_layer
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import TxOffloads
from datapath.verdict import PortFrames, settle
from evidence.tshark import Tshark
from fixtures.records import record_for
from fixtures.system_userspace.kernel_peer import rx_flags
from fixtures.system_userspace.system_traffic import FLAVOUR, PING_OK, Traffic, upstream
from harness.ifstatus import read_interface
from harness.records import Step

pytestmark = pytest.mark.requires(backend="tap")

IPPROTO_ROUTING, IPPROTO_IPIP, IPPROTO_IPV6 = 43, 4, 41
OVS_MAC, NEXT_HOP_MAC = "aa:55:aa:55:00:00", "aa:55:aa:55:00:01"
SID, OVS_UNDERLAY, NS_UNDERLAY = "fc00:a::1", "fc00::100", "fc00::1"
PINGS = 3  # the overlay ping's count: as many echo requests in, replies out


@dataclass(frozen=True)
class Overlay:
    """The overlay addresses of one SRv6 test, IPv4 or IPv6: br0's and each namespace's."""

    six: bool
    ovs_addr: str  # br0's overlay address (ADD_OVS_TUNNEL6's)
    ns0_addr: str  # ovs-veth0 in at_ns0
    ns1_addr: str  # ovs-veth1 in at_ns1
    target: str  # what at_ns1 pings

    @property
    def eth_type(self) -> int:
        return 0x86DD if self.six else 0x0800

    @property
    def inner_proto(self) -> int:
        return IPPROTO_IPV6 if self.six else IPPROTO_IPIP


SRV6 = {
    "datapath - ping over srv6 tunnel": Overlay(
        False, "10.100.100.100/24", "10.1.1.2/24", "10.1.1.1/24", "10.100.100.100"),
    "datapath - ping6 over srv6 tunnel": Overlay(
        True, "fc00:100::100/64", "fc00:1::2/64", "fc00:1::1/64", "fc00:100::100"),
}


@FLAVOUR
@pytest.mark.parametrize("title", [pytest.param(t, marks=upstream(t),
                                                id="ping6" if o.six else "ping")
                                   for t, o in SRV6.items()])
@pytest.mark.requires(kernel="srv6")
def test_ping_over_srv6_tunnel(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str, title: str) -> None:
    """Upstream's sequence, then the encapsulation, decapsulation and counter
    checks of the module docstring."""
    o = SRV6[title]
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = t.add_namespace("at_ns0"), t.add_namespace("at_ns1")
    for key in ("default", "all"):  # NS_EXEC: unchecked, as upstream
        t.run(["sysctl", "-w", f"net.ipv6.conf.{key}.seg6_enabled=1"], ns0)
        if not o.six:
            t.run(["sysctl", "-w", f"net.ipv4.conf.{key}.forwarding=1"], ns0)
        t.run(["sysctl", "-w", f"net.ipv6.conf.{key}.forwarding=1"], ns0)

    t.add_br("br-underlay")
    t.add_veth("p0", ns0, "br-underlay", f"{NS_UNDERLAY}/64", "", "", "nodad")
    for flow in ("priority=1,actions=drop",
                 f"priority=100,ipv6,nw_proto={o.inner_proto},actions=normal",
                 "priority=100,ipv6,nw_proto=58,actions=normal"):
        t.sb.ofctl("add-flow", "br-underlay", flow)
    t.ip("addr", "add", "dev", "br-underlay", f"{OVS_UNDERLAY}/64", "nodad")
    t.ip("link", "set", "dev", "br-underlay", "up")
    t.ip(*(["-6"] if o.six else []), "route", "add", f"{SID}/128", "dev", "br-underlay",
         "via", NS_UNDERLAY)

    t.add_ovs_tunnel("srv6", "br0", "at_srv6", SID, o.ovs_addr, v6=True)
    t.sb.vsctl("set", "bridge", "br0", f"other_config:hwaddr={OVS_MAC}")
    if o.six:
        t.ip("addr", "add", "dev", "br0", o.ovs_addr)
        t.ip("-6", "route", "add", "fc00:1::1/128", "dev", "br0", "via", "fc00:100::1")
        t.ip("-6", "neigh", "add", "fc00:100::1", "lladdr", NEXT_HOP_MAC, "dev", "br0")
    else:
        t.ip("route", "add", "10.1.1.0/24", "dev", "br0", "via", "10.100.100.1")
        # arp -s: a permanent entry (net-tools is not in the runtime)
        t.ip("neigh", "replace", "10.100.100.1", "lladdr", NEXT_HOP_MAC, "nud", "permanent",
             "dev", "br0")
    t.sb.ofctl("add-flow", "br0", "in_port=LOCAL,actions=output:at_srv6")
    t.sb.ofctl("add-flow", "br0",
               f"in_port=at_srv6,actions=mod_dl_dst:{OVS_MAC},output:LOCAL")

    t.add_veth_ns(ns0, "ovs-veth0", o.ns0_addr, ns1, "ovs-veth1", o.ns1_addr)
    t.ip("sr", "tunsrc", "set", SID, ns=ns0)
    overlay_net = "fc00:100::0/64" if o.six else "10.100.100.0/24"
    t.ip(*(["-6"] if o.six else []), "route", "add", overlay_net, "encap", "seg6", "mode",
         "encap", "segs", OVS_UNDERLAY, "dev", "p0", ns=ns0)
    t.ip("-6", "route", "add", SID, "encap", "seg6local", "action",
         *(["End.DX6", "nh6", "::"] if o.six else ["End.DX4", "nh4", "0.0.0.0"]),
         "dev", "ovs-veth0", ns=ns0)
    t.ip(*(["-6"] if o.six else []), "route", "add",
         "fc00:100::/64" if o.six else "10.100.100.0/24",
         "via", o.ns0_addr.split("/")[0], "dev", "ovs-veth1", ns=ns1)

    t.wait_ping6(ns0, OVS_UNDERLAY)
    if o.six:
        t.wait_ping6(ns1, o.target)
    t.check_ping(ns0, OVS_UNDERLAY, six=True)  # the underlay first

    wire = SrWire.start(t, ns0, o, request)
    t.check_ping(ns1, o.target, six=o.six, expect=PING_OK)  # then the overlay
    wire.verify(record_for(request.node).steps)


@dataclass
class SrWire:
    """br0 (switch namespace) and p0 (at_ns0) captured while the overlay ping runs."""

    t: Traffic
    ns0: Netns
    overlay: Overlay
    spec: TunnelSpec
    tx: TxOffloads
    br0: Sniffer
    p0: Sniffer
    before: dict[str, dict[str, int]]
    tshark: Tshark | None  # the second opinion on the frames the model accepts

    @classmethod
    def start(cls, t: Traffic, ns0: Netns, overlay: Overlay,
              request: pytest.FixtureRequest) -> "SrWire":
        tx, _ = tx_from_status(read_interface(t.sb, "ovs-p0").status)
        spec = TunnelSpec("srv6", OVS_UNDERLAY, SID,
                          mac_text(link_mac(t.host, "br-underlay")), mac_text(link_mac(ns0, "p0")))
        wire = cls(t, ns0, overlay, spec, TxOffloads(tx.advertised), Sniffer(t.host, "br0"),
                   Sniffer(ns0, "p0"), {"at_ns0": snmp_counters(ns0),
                                        "host": snmp_counters(t.host)},
                   request.getfixturevalue("second_opinion"))
        t.env.cleanup.defer("close the br0 capture", wire.br0.close)
        t.env.cleanup.defer("close the p0 capture", wire.p0.close)
        return wire

    def verify(self, steps: list[Step]) -> None:
        """Both directions and the counters, one verdict (datapath/verdict.py)."""
        def read() -> list[PortFrames]:
            self.br0.read()
            self.p0.read()
            return [self._encap(), self._decap()]

        def counters() -> list[str]:
            return [f"{name}'s kernel counted errors: {changed}"
                    for name, ns in (("at_ns0", self.ns0), ("host", self.t.host))
                    if (changed := moved(self.before[name], snmp_counters(ns)))]
        # A frame seen on one side may still be on its way to the other; the
        # echo requests and replies of the ping interleave (order-free).
        settle(steps, read, title="srv6", ordered=False, second_opinion=self.tshark,
               extra=counters, what="both captures to agree with the model").check()

    def _overlay_frame(self, frame: bytes) -> bool:
        return (len(frame) >= 14 and struct.unpack_from("!H", frame, 12)[0]
                == self.overlay.eth_type and not link_chatter(frame))

    def _srv6_inner(self, frame: bytes) -> bytes | None:
        """The inner IP packet of an SRv6-encapsulated frame of this overlay."""
        lay = parse_layer(frame)
        if (lay.ipv != 6 or lay.l3 is None or frame[lay.l3 + 6] != IPPROTO_ROUTING
                or lay.proto != self.overlay.inner_proto or lay.payload is None):
            return None
        return frame[lay.payload:lay.l3 + lay.l3_size]

    def _encap(self) -> PortFrames:
        sent = [c for c in self.br0.frames if c.outgoing and self._overlay_frame(c.frame)]
        out = [c.frame for c in self.p0.frames if not c.outgoing and self._carried(c)]
        expected = model.Expected(frames=[])
        for c in sent:
            expected.extend(model.forward(c.frame, [PushTunnel(self.spec, "tnl"), output("p0")],
                                          self.tx, rx_flags(c)))
        return PortFrames("p0", expected, out, sent=[c.frame for c in sent], rx_port="br0",
                          title="srv6: OVS encapsulates (br0 -> at_srv6 -> p0)",
                          notes=[f"{len(sent)} packets from br0, {len(out)} SRv6 frames on p0"],
                          extra=[] if len(sent) >= PINGS else [
                              f"br0's kernel sent {len(sent)} overlay packets, not the "
                              f"{PINGS} echo replies"])

    def _carried(self, c: Captured) -> bool:
        inner = self._srv6_inner(c.frame)
        eth = struct.pack("!12xH", self.overlay.eth_type)
        return inner is not None and not link_chatter(eth + inner)

    def _decap(self) -> PortFrames:
        sent = [c.frame for c in self.p0.frames if c.outgoing and self._carried(c)]
        got = [c.frame for c in self.br0.frames
               if not c.outgoing and self._overlay_frame(c.frame)]
        # The rule is RFC 8754 §4.3.1.1.1 (the inner packet as received) in an
        # Ethernet frame to the flow's mod_dl_dst, not a model.forward: the judge
        # builds the frames.  OVS adds that Ethernet header itself and its source
        # MAC is left open: each source MAC seen on br0 is allowed in every place.
        dst = bytes.fromhex(OVS_MAC.replace(":", ""))
        sources = list(dict.fromkeys(f[6:12] for f in got)) or [bytes(6)]
        eth_type = struct.pack("!H", self.overlay.eth_type)
        inners = [inner for inner in map(self._srv6_inner, sent) if inner is not None]
        expected = model.Expected(
            frames=[dst + sources[0] + eth_type + inner for inner in inners],
            allowed=[{dst + src + eth_type + inner: {} for src in sources[1:]}
                     for inner in inners])
        return PortFrames("br0", expected, got, sent=sent, rx_port="p0",
                          title="srv6: OVS decapsulates (p0 -> at_srv6 -> br0)",
                          notes=[f"{len(sent)} SRv6 frames from at_ns0, {len(got)} packets "
                                 "delivered to br0 (their source MAC not judged)"],
                          extra=[] if len(sent) >= PINGS else [
                              f"at_ns0 encapsulated {len(sent)} packets, not the {PINGS} "
                              "echo requests"])
