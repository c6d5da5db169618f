"""system-traffic.at's nsh tests, as `make check-system-userspace` (and
check-system-tso) run them: one composed frame sent from at_ns0's p0
(upstream's sendpkt.py; an AF_PACKET send here) through br0's OpenFlow 1.3
flows that add, remove, replace or only match an NSH header (RFC 8300),
captured by tcpdump in the receiving namespace.

Each case keeps upstream's flows, frames (`ovs-ofctl compose-packet --bare`)
and check: `ovs-pcap` of tcpdump's capture shows the exact expected frame
(header and TCP SYN, or the SYN alone, followed by padding only).  Beyond
upstream, the frames that crossed br0 are captured on both sides and judged
by the model's NSH (datapath/model/nsh.py, RFC 8300 and ovs-actions(7)
encap/decap); where a flow leaves a field to OVS that the standard leaves
open (the initial SI of encap(nsh)), the comparison leaves it out and
upstream's hex checks it.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from datapath.backends.kernel import link_chatter
from datapath.backends.native_tunnel import Captured
from datapath.backends.netns import KernelSide, Netns
from datapath.model import nsh
from datapath.model.nsh import Nsh
from fixtures.system_userspace.system_l2 import Crossings, Rule
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

TCP_SYN_PKT = ("eth_src=f2:00:00:00:00:01,eth_dst=f2:00:00:00:00:02,eth_type=0x0800,"
               "nw_src=192.168.0.10,nw_dst=10.0.0.10,nw_proto=6,nw_ttl=64,nw_frag=no,"
               "tcp_src=1024,tcp_dst=2048,tcp_flags=syn")
NSH_ETH = "eth_src=f2:ff:00:00:00:01,eth_dst=f2:ff:00:00:00:02,eth_type=0x894f"
NSH_DST, NSH_SRC = "f2:ff:00:00:00:02", "f2:ff:00:00:00:01"
CONTEXT_1 = "nsh_c1=0x01020304,nsh_c2=0x05060708,nsh_c3=0x090a0b0c,nsh_c4=0x0d0e0f10"


def nsh_header(fields: str) -> str:
    """An NSH_HEADER m4 definition: the Ethernet header, then `fields`."""
    return f"{NSH_ETH},{fields}"


def compose(t: Traffic, spec: str) -> str:
    """$(ovs-ofctl compose-packet --bare 'SPEC')."""
    return t.run(["ovs-ofctl", "compose-packet", "--bare", spec]).stdout.strip()


def namespaces(t: Traffic, n: int) -> list[Netns]:
    """ADD_NAMESPACES(at_ns0 ...), ADD_VETH(pN, at_nsN, br0, "0.0.0.0")."""
    out = []
    for i in range(n):
        ns = t.add_namespace(f"at_ns{i}")
        t.add_veth(f"p{i}", ns, "br0", "0.0.0.0")
        out.append(ns)
    return out


def tcpdump(t: Traffic, ns: Netns, port: str, suffix: str = "") -> str:
    """NETNS_DAEMONIZE([ns], [tcpdump -l -n -xx -U -i PORT -w PORT.pcap
    2>tcpdumpSUFFIX_err]), then OVS_WAIT_UNTIL([grep "listening" ...]);
    returns the pcap's path."""
    pcap, err = t.sb.rundir / f"{port}.pcap", t.sb.rundir / f"tcpdump{suffix}_err"
    t.daemonize(f"tcpdump on {port}", ["sh", "-c", f"exec tcpdump -l -n -xx -U -i {port} -w "
                                       f"{pcap} 2>{err}"], ns, t.sb.rundir / f"tcpdump{suffix}.out")
    wait_until(lambda: err.exists() and "listening" in err.read_text(), 10,
               what=f"tcpdump to listen on {port}")
    return str(pcap)


def sendpkt(t: Traffic, ns: Netns, port: str, *hexes: str) -> None:
    """$PYTHON3 $srcdir/sendpkt.py PORT HEX...: the pieces as one frame."""
    side = KernelSide(ns, port)
    t.env.cleanup.defer(f"close {port}", side.close)
    side.send([bytes.fromhex("".join(hexes))])


def wait_pcap(t: Traffic, pcap: str, pattern: Callable[[str], bool], what: str) -> None:
    """OVS_WAIT_UNTIL([ovs-pcap PCAP | grep -q "PATTERN"])."""
    wait_until(lambda: any(pattern(line.strip()) for line in
                           # rc=None: upstream's pipeline is grep's; a capture just
                           # begun may not parse yet
                           t.run(["ovs-pcap", pcap], rc=None).stdout.splitlines()), 10,
               what=f"ovs-pcap {pcap.rsplit('/', 1)[-1]} to show {what}")


def exact(want: str) -> Callable[[str], bool]:
    """grep -q "^WANT$"."""
    return lambda line: line == want


def ours(frame: bytes) -> bool:
    """The test's frames (NSH, or the bare SYN), not the kernels' link chatter."""
    return (struct.unpack_from("!H", frame, 12)[0] in (nsh.ETH_TYPE_NSH, 0x0800)
            and not link_chatter(frame))


def crossing(t: Traffic, request: pytest.FixtureRequest, src: tuple[Netns, str],
             dst: tuple[Netns, str], rule: Rule,
             mask: Callable[[bytes], bytes] | None = None) -> Crossings:
    wire = Crossings(t, request)
    wire.hop(f"{src[1]} -> br0 -> {dst[1]}", (src[0], src[1], True), (dst[0], dst[1], False),
             rule, mask=mask, keep=ours)
    return wire


@FLAVOUR
@upstream("nsh - encap header")
def test_nsh_encap_header(system_traffic: Callable[..., Traffic],
                          request: pytest.FixtureRequest, flavour: str) -> None:
    """br0 puts an MD type 1 NSH header (SPI 0x1234, c1 0x11223344) and a new
    Ethernet header on the IPv4 TCP SYN from p0, out to p1: ovs-pcap of
    at_ns1's capture must show upstream's NSH_HEADER (TTL 63, Next Protocol 3,
    SI 255) then the SYN.  Judged: the frame on p1 is the model's encap of
    the frame p0 sent (RFC 8300: the default TTL 63, Next Protocol
    Ethernet, length 6; the SI, which the standard leaves to the classifier,
    left to upstream's hex)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = namespaces(t, 2)
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0",
               "table=0,priority=100,in_port=ovs-p0,ip,actions=encap(nsh(md_type=1)),"
               "set_field:0x1234->nsh_spi,set_field:0x11223344->nsh_c1,encap(ethernet),"
               "set_field:f2:ff:00:00:00:02->dl_dst,set_field:f2:ff:00:00:00:01->dl_src,"
               "ovs-p1")
    pcap = tcpdump(t, ns1, "p1")
    header = Nsh(spi=0x1234, si=0, context=(0x11223344, 0, 0, 0))
    wire = crossing(t, request, (ns0, "p0"), (ns1, "p1"),
                    lambda c: [nsh.encap(c.frame, header, NSH_DST, NSH_SRC)], nsh.mask_si)
    syn = compose(t, TCP_SYN_PKT)
    sendpkt(t, ns0, "p0", syn)
    want = compose(t, nsh_header("nsh_ttl=63,nsh_np=3,nsh_spi=0x1234,nsh_si=255,"
                                 "nsh_mdtype=1,nsh_c1=0x11223344")) + syn
    wait_pcap(t, pcap, exact(want), f"^{want}$")
    assert wire.verify() == 1


@FLAVOUR
@upstream("nsh - decap header")
def test_nsh_decap_header(system_traffic: Callable[..., Traffic],
                          request: pytest.FixtureRequest, flavour: str) -> None:
    """br0 removes the Ethernet and NSH headers (decap(), decap()) of an NSH
    frame from p0 carrying the TCP SYN, out to p1: ovs-pcap must show the SYN
    alone (then padding only).  Judged: the frame on p1 is the model's decap
    of the frame p0 sent (RFC 8300 §2.2: the header's length, Next Protocol
    Ethernet)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = namespaces(t, 2)
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0",
               "table=0,priority=100,in_port=ovs-p0,dl_type=0x894f, "
               "actions=decap(),decap(), ovs-p1")
    pcap = tcpdump(t, ns1, "p1")
    wire = crossing(t, request, (ns0, "p0"), (ns1, "p1"), lambda c: [nsh.decap(c.frame)])
    syn = compose(t, TCP_SYN_PKT)
    sendpkt(t, ns0, "p0", compose(t, nsh_header("nsh_ttl=63,nsh_np=3,nsh_spi=0x1234,"
                                                "nsh_si=255,nsh_mdtype=1,nsh_c1=0x11223344")),
            syn)
    wait_pcap(t, pcap, lambda line: line.startswith(syn) and not line[len(syn):].strip("0"),
              f"^{syn}0*$")
    assert wire.verify() == 1


@FLAVOUR
@upstream("nsh - replace header")
def test_nsh_replace_header(system_traffic: Callable[..., Traffic],
                            request: pytest.FixtureRequest, flavour: str) -> None:
    """br0 matches SPI 0x100, SI 3, removes the NSH header and puts a new one
    (TTL 7, SPI 0x101, SI 4, new c1..c4) and a new Ethernet header: ovs-pcap
    must show upstream's NSH_HEADER_2 then the SYN.  Judged: the frame on p1
    is the model's decap then encap of the frame p0 sent, every field set."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = namespaces(t, 2)
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0",
               "table=0,priority=100,in_port=ovs-p0,dl_type=0x894f,nsh_spi=0x100,"
               "nsh_si=0x03,actions=decap(),decap(),encap(nsh(md_type=1)),"
               "set_field:0x07->nsh_ttl,set_field:0x0101->nsh_spi,set_field:0x04->nsh_si,"
               "set_field:0x100f0e0d->nsh_c1,set_field:0x0c0b0a09->nsh_c2,"
               "set_field:0x08070605->nsh_c3,set_field:0x04030201->nsh_c4,encap(ethernet),"
               "set_field:f2:ff:00:00:00:02->dl_dst,set_field:f2:ff:00:00:00:01->dl_src,"
               "ovs-p1")
    pcap = tcpdump(t, ns1, "p1")
    header = Nsh(spi=0x101, si=4, ttl=7,
                 context=(0x100F0E0D, 0x0C0B0A09, 0x08070605, 0x04030201))
    wire = crossing(t, request, (ns0, "p0"), (ns1, "p1"),
                    lambda c: [nsh.encap(nsh.decap(c.frame), header, NSH_DST, NSH_SRC)])
    syn = compose(t, TCP_SYN_PKT)
    sendpkt(t, ns0, "p0", compose(t, nsh_header(
        f"nsh_ttl=8,nsh_np=3,nsh_spi=0x100,nsh_si=3,nsh_mdtype=1,{CONTEXT_1}")), syn)
    want = compose(t, nsh_header(
        "nsh_ttl=7,nsh_np=3,nsh_spi=0x101,nsh_si=4,nsh_mdtype=1,nsh_c1=0x100f0e0d,"
        "nsh_c2=0x0c0b0a09,nsh_c3=0x08070605,nsh_c4=0x04030201")) + syn
    wait_pcap(t, pcap, exact(want), f"^{want}$")
    assert wire.verify() == 1


@FLAVOUR
@upstream("nsh - forward")
def test_nsh_forward(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                     flavour: str) -> None:
    """Two flows on SPI 0x100: SI 2 goes to p1, SI 1 to p2.  An NSH frame
    with SI 2 from p0 must show in at_ns1's capture, then one with SI 1 from
    p1 in at_ns2's, each exactly as sent (ovs-pcap).  Judged: each frame came
    out of its flow's port unchanged, and no other port got it."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1, ns2 = namespaces(t, 3)
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0", "table=0,priority=100,dl_type=0x894f,"
               "nsh_spi=0x100,nsh_si=0x02,actions=ovs-p1")
    t.sb.ofctl("-Oopenflow13", "add-flow", "br0", "table=0,priority=100,dl_type=0x894f,"
               "nsh_spi=0x100,nsh_si=0x01,actions=ovs-p2")
    pcap1 = tcpdump(t, ns1, "p1")
    pcap2 = tcpdump(t, ns2, "p2", "2")

    def to(si: int) -> Rule:
        def rule(c: Captured) -> list[bytes]:
            return [c.frame] if Nsh.unpack(c.frame[14:])[0].si == si else []
        return rule
    wire = Crossings(t, request)
    # p0's frame (SI 2) to p1 only, p1's (SI 1) to p2 only: p2's hop from p1
    # would also see p0's frame, p0's hop from p1 would see p1's.
    for src, dst, si in ((ns0, ns1, 2), (ns1, ns2, 1), (ns1, ns0, 0)):
        sport, dport = src.name[-1], dst.name[-1]
        wire.hop(f"p{sport} -> br0 -> p{dport}", (src, f"p{sport}", True),
                 (dst, f"p{dport}", False), to(si), keep=ours)
    syn = compose(t, TCP_SYN_PKT)
    first = compose(t, nsh_header(f"nsh_ttl=8,nsh_np=3,nsh_spi=0x100,nsh_si=2,nsh_mdtype=1,"
                                  f"{CONTEXT_1}"))
    sendpkt(t, ns0, "p0", first, syn)
    wait_pcap(t, pcap1, exact(first + syn), f"^{first}{syn}$")
    second = compose(t, nsh_header(f"nsh_ttl=8,nsh_np=3,nsh_spi=0x100,nsh_si=1,nsh_mdtype=1,"
                                   f"{CONTEXT_1}"))
    sendpkt(t, ns1, "p1", second, syn)
    wait_pcap(t, pcap2, exact(second + syn), f"^{second}{syn}$")
    assert wire.verify() == 2
