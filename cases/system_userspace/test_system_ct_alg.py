"""system-traffic.at's ALG tests (FTP and TFTP through conntrack, with and
without NAT), as `make check-system-userspace` and check-system-tso run them:
two namespaces on br0, upstream's flow tables, servers and clients
(fixtures/system_userspace/l7.py: pyftpdlib and tftpd-hpa serving, curl and lftp fetching),
and upstream's checks: the clients' exit codes and dpctl/dump-conntrack |
FORMAT_CT (dump-conntrack-exp for the expectations).

Beyond upstream, the frames that cross OVS are judged by the model's
connection tracker (fixtures/system_userspace/system_ct.py's CtWire), as far as it reaches.  The
model has no ALG (datapath/model/conntrack.py): it neither parses the FTP
control channel (RFC 959 PORT and 227, RFC 2428 EPRT and 229) nor the TFTP
request (RFC 1350), so it creates no expectation, and it does not rewrite
the addresses those messages carry nor adjust TCP sequence numbers when a
rewrite changes their length (RFC 9293 3.4).  So in every test:
- the data connections (and TFTP's transfer from the server's new port) are
  out of reach: their first packet is +rel by an expectation; they are not
  judged;
- the control connection is judged (ct state, the flows' verdict, NAT of its
  headers); behind NAT, not the segments whose payload the ALG rewrites
  (PORT, EPRT, 227: the address they carry); without NAT the ALG only reads
  them, and they are judged as any other segment;
- where the NAT rewrite changes the length of such a message (seqadj), every
  later segment of the control connection has its sequence numbers shifted:
  only the control connection's handshake (SYN and SYN+ACK) is judged.
"""
from __future__ import annotations

import ipaddress
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import pytest

from datapath.backends.netns import Netns
from datapath.model.actions import Action
from datapath.model.conntrack import EST, NEW, REL, Ct
from datapath.model.packet import Packet
from fixtures.system_userspace.l7 import CURL_TIMEOUT, check_ftp, check_tftp, lftp, start_ftp, start_tftp
from fixtures.system_userspace.system_ct import Arrival, CtWire, add_flows, check_ct, ct_ports, format_ct
from fixtures.system_userspace.system_l2 import under_test
from fixtures.system_userspace.system_traffic import FLAVOUR, Traffic, upstream
from harness.wait import wait_until

pytestmark = pytest.mark.requires(backend="tap")

ARP, IPV4, IPV6 = 0x0806, 0x0800, 0x86DD
TCP, UDP, ICMP, ICMPV6 = 6, 17, 1, 58
SYN = 0x02
P0, P1 = "ovs-p0", "ovs-p1"
Out = list[tuple[str | None, list[Action]]]
# The control-channel messages that carry an address the ALG parses and,
# behind NAT, rewrites: RFC 959 PORT and its 227 reply to PASV, RFC 2428 EPRT
# (each a line of its own, RFC 959 4.1; several may share a segment).  229,
# EPSV's reply, carries only a port: the ALG leaves it as it is.
ADDRESSED = re.compile(rb"(^|\n)(PORT|EPRT|227) ")
ICMP_ERRORS = {ICMP: (3, 4, 5, 11, 12), ICMPV6: (1, 2, 3, 4)}  # RFC 792, RFC 4443


# ----------------------------------------------------------------------------
# frames


def ip_at(data: bytes, l3: int) -> tuple[int, int, int] | None:
    """(protocol, L4 offset, end) of the IPv4 or IPv6 packet at `l3` (no IPv6
    extension headers in these tests)."""
    if len(data) < l3 + 20:
        return None
    if data[l3] >> 4 == 4:
        return data[l3 + 9], l3 + (data[l3] & 0x0F) * 4, l3 + struct.unpack_from("!H", data, l3 + 2)[0]
    if data[l3] >> 4 == 6 and len(data) >= l3 + 40:
        return data[l3 + 6], l3 + 40, l3 + 40 + struct.unpack_from("!H", data, l3 + 4)[0]
    return None


def icmp_error_ports(frame: bytes) -> tuple[int, int] | None:
    """The ports of the packet an ICMP/ICMPv6 error embeds; None if the frame is
    no such error (or embeds no ports)."""
    if struct.unpack_from("!H", frame, 12)[0] not in (IPV4, IPV6) or (ip := ip_at(frame, 14)) is None:
        return None
    proto, ofs, _ = ip
    if proto not in ICMP_ERRORS or len(frame) <= ofs or frame[ofs] not in ICMP_ERRORS[proto]:
        return None
    inner = ip_at(frame, ofs + 8)
    if inner is None or inner[0] not in (TCP, UDP) or len(frame) < inner[1] + 4:
        return None
    sport, dport = struct.unpack_from("!HH", frame, inner[1])
    return sport, dport


def l4(frame: bytes) -> tuple[int, int, int, int, bytes] | None:
    """(protocol, source port, destination port, TCP flags, payload) of a TCP
    or UDP frame; None otherwise."""
    if struct.unpack_from("!H", frame, 12)[0] not in (IPV4, IPV6) or (ip := ip_at(frame, 14)) is None:
        return None
    proto, ofs, end = ip
    if proto == TCP:
        sport, dport = struct.unpack_from("!HH", frame, ofs)
        return proto, sport, dport, frame[ofs + 13], frame[ofs + (frame[ofs + 12] >> 4) * 4:end]
    if proto == UDP:
        sport, dport = struct.unpack_from("!HH", frame, ofs)
        return proto, sport, dport, 0, frame[ofs + 8:end]
    return None


def control(port: int = 21, proto: int = TCP, nat: bool = False, handshake: bool = False
            ) -> Callable[[bytes], bool]:
    """The judged frames: everything under test that is not TCP/UDP (ARP,
    ICMP but errors about another connection), and the segments of the
    control connection to `port` (TFTP: the requests to it); behind `nat`,
    not those whose address the ALG rewrites; with
    `handshake`, of the control connection only its SYN and SYN+ACK."""
    def judged(frame: bytes) -> bool:
        if not under_test(frame):
            return False
        seg = l4(frame)
        if seg is None:  # an error about a data connection is about what is out of reach
            about = icmp_error_ports(frame)
            return about is None or port in about
        p, sport, dport, flags, payload = seg
        if p != proto or port not in (sport, dport):
            return False
        if handshake:
            return bool(flags & SYN)
        return not (nat and ADDRESSED.search(payload))
    return judged


def normal(a: Arrival) -> Out:
    return [(port, []) for port in a.normal()]


def other(a: Arrival) -> str:
    return P1 if a.port == P0 else P0


# ----------------------------------------------------------------------------
# topology


def wait_ping(t: Traffic, ns: Netns, dst: str, six: bool = False) -> None:
    """OVS_WAIT_UNTIL([ip netns exec ns ping -c 1 dst >/dev/null])."""
    wait_until(lambda: t.run(["ping6" if six else "ping", "-c", "1", "-W", "1", dst], ns,
                             rc=None).rc == 0, 10, what=f"ping {dst} to answer")


def set_mac(t: Traffic, ns: Netns, dev: str, mac: str) -> None:
    """NS_CHECK_EXEC([ns], [ip link set dev DEV address MAC])."""
    t.ip("link", "set", "dev", dev, "address", mac, ns=ns)


def static_neigh(t: Traffic, ns: Netns, dev: str, addr: str, mac: str) -> None:
    """`arp -s ADDR MAC` / `ip -6 neigh add ADDR lladdr MAC dev DEV`: a permanent
    neighbour entry."""
    t.ip("neigh", "replace", addr, "lladdr", mac, "dev", dev, "nud", "permanent", ns=ns)


def write_flows(t: Traffic, name: str, text: str) -> str:
    """AT_DATA([name], [text]); returns its path."""
    path = t.sb.rundir / name
    path.write_text(text)
    return str(path)


def replace_flows(t: Traffic, path: str) -> None:
    """AT_CHECK([ovs-ofctl --bundle replace-flows br0 FILE]), then wait until
    the datapath's flows follow the new table: the datapath keeps the old
    table's decisions until the revalidators have been through them, and a
    connection opened in that moment (the next curl, milliseconds later)
    would be committed by the old table's ct action (with the helper where
    the new one has none).  Upstream's scripts are slow enough not to meet
    that moment.  `revalidator/wait` returns when the round in progress
    ends, which may have begun before the bundle; the second one's round
    began after the first returned, so after the bundle: it saw the new
    table.  A wait for the event, not for time."""
    t.sb.ofctl("--bundle", "replace-flows", "br0", path)
    for _ in range(2):
        t.sb.appctl("revalidator/wait")


def settled(t: Traffic, spaces: list[Netns], port: int = 21) -> None:
    """Wait until every control connection to `port` has finished closing: no
    socket on it in either namespace but listeners and TIME-WAIT (the side
    that sent the last ACK; the other side's socket is gone once it got it).
    Before the flows change or conntrack is flushed, so that no segment of a
    closing connection is in flight across the change (upstream does not
    look at them; the judge does)."""
    def open_ones() -> list[str]:
        lines = []
        for ns in spaces:
            for line in ns.run(["ss", "-Hatn"]).stdout.splitlines():
                cols = line.split()
                if len(cols) >= 5 and cols[0] not in ("LISTEN", "TIME-WAIT") and any(
                        c.rsplit(":", 1)[-1] == str(port) for c in cols[3:5]):
                    lines.append(f"{ns.name}: {line}")
        return lines
    wait_until(lambda: not open_ones(), 10, what=f"the connections to port {port} to close",
               describe=lambda: "\n".join(open_ones()))


def flush(t: Traffic, wire: CtWire) -> None:
    """AT_CHECK([ovs-appctl dpctl/flush-conntrack])."""
    t.sb.appctl("dpctl/flush-conntrack")
    wire.flushed()


def tcp_ct(src: str, dst: str, zone: int = 0, helper: bool = False,
           reply: tuple[str, str] | None = None, labels: str = "") -> str:
    """One FORMAT_CT line of a TCP connection."""
    rsrc, rdst = reply or (dst, src)
    return (f"tcp,orig=(src={src},dst={dst},sport=<cleared>,dport=<cleared>),"
            f"reply=(src={rsrc},dst={rdst},sport=<cleared>,dport=<cleared>),"
            + (f"zone={zone}," if zone else "") + (f"labels={labels}," if labels else "")
            + "protoinfo=(state=<cleared>)" + (",helper=ftp" if helper else "") + "\n")


def udp_ct(src: str, dst: str, helper: bool = False, reply: tuple[str, str] | None = None
           ) -> str:
    rsrc, rdst = reply or (dst, src)
    return (f"udp,orig=(src={src},dst={dst},sport=<cleared>,dport=<cleared>),"
            f"reply=(src={rsrc},dst={rdst},sport=<cleared>,dport=<cleared>)"
            + (",helper=tftp" if helper else "") + "\n")


# ----------------------------------------------------------------------------
# FTP - no conntrack


@FLAVOUR
@upstream("FTP - no conntrack")
def test_ftp_no_conntrack(system_traffic: Callable[..., Traffic],
                          request: pytest.FixtureRequest, flavour: str) -> None:
    """table=0,action=normal; FTP servers in both namespaces; an active FTP
    listing from ns0 to ns1 is saved as index.html.  Beyond upstream: every
    frame, control and data connection alike, is NORMAL's (no ct: the model
    reaches them all)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    replace_flows(t, write_flows(t, "flows.txt", "table=0,action=normal\n"))
    wire = CtWire.on(t, request, [ns0, ns1], normal)
    start_ftp(t, ns0)
    start_ftp(t, ns1)
    check_ftp(t, ns0, "10.1.1.2", "-o", str(t.sb.rundir / "index.html"), active=True)
    listing = (t.sb.rundir / "index.html").read_text()
    assert "hello.txt" in listing, f"index.html is not ns1's listing: {listing!r}"
    assert wire.verify() >= 20


# ----------------------------------------------------------------------------
# conntrack - FTP, non-standard port

FTP_FLOWS1 = """\
table=0,priority=1,action=drop
table=0,priority=10,arp,action=normal
table=0,priority=10,icmp,action=normal
table=0,priority=100,in_port=1,tcp,action=ct(alg=ftp,commit),2
table=0,priority=100,in_port=2,tcp,action=ct(table=1)
table=1,in_port=2,tcp,ct_state=+trk+est,action=1
table=1,in_port=2,tcp,ct_state=+trk+rel,action=1
"""
FTP_FLOWS2 = """\
table=0,priority=1,action=drop
table=0,priority=10,arp,action=normal
table=0,priority=10,icmp,action=normal
table=0,priority=100,in_port=1,tcp,action=ct(table=1)
table=1,in_port=1,tcp,ct_state=+trk+new,action=ct(commit,alg=ftp),2
table=1,in_port=1,tcp,ct_state=+trk+est,action=2
table=0,priority=100,in_port=2,tcp,action=ct(table=1)
table=1,in_port=2,tcp,ct_state=+trk+new+rel,action=ct(commit),1
table=1,in_port=2,tcp,ct_state=+trk+est,action=1
table=1,in_port=2,tcp,ct_state=+trk-new+rel,action=1
"""
FTP_FLOWS3 = FTP_FLOWS1.replace("ct(alg=ftp,commit)", "ct(commit)")


def arp_icmp(a: Arrival) -> Out | None:
    """priority=10,arp,action=normal and priority=10,icmp,action=normal; None
    for a packet those do not take."""
    if a.eth_type == ARP or (a.eth_type == IPV4 and a.ip_proto == ICMP):
        return normal(a)
    return None


def flows1(proto: int) -> Callable[[Arrival], Out]:
    """FTP_FLOWS1 (TCP) and TFTP_FLOWS1 (UDP): all of `proto` from port 1
    committed, from port 2 only established or related (FTP_FLOWS3 too: the
    helper makes no difference to the control connection's packets)."""
    def pipeline(a: Arrival) -> Out:
        if (out := arp_icmp(a)) is not None:
            return out
        if a.ip_proto != proto:
            return []
        if a.ofport == 1:
            return [(P1, [Ct(a.table, commit=True)])]
        st = a.state().state
        return [(P0 if st & (EST | REL) else None, [Ct(a.table)])]
    return pipeline


ftp_flows1, tftp_flows1 = flows1(TCP), flows1(UDP)


def flows2_out(a: Arrival, st: int) -> Out:
    """FTP_FLOWS2's and TFTP_FLOWS2's port 1: a new connection committed (with
    the helper), an established one let through."""
    if st & NEW:
        return [(P1, [Ct(a.table), Ct(a.table, commit=True)])]
    return [(P1 if st & EST else None, [Ct(a.table)])]


def ftp_flows2(a: Arrival) -> Out:
    if (out := arp_icmp(a)) is not None:
        return out
    if a.ip_proto != TCP:
        return []
    st = a.state().state
    if a.ofport == 1:
        return flows2_out(a, st)
    if st & NEW and st & REL:
        return [(P0, [Ct(a.table), Ct(a.table, commit=True)])]
    return [(P0 if st & EST or (st & REL and not st & NEW) else None, [Ct(a.table)])]


def run_ftp_three_policies(t: Traffic, request: pytest.FixtureRequest, port: int) -> None:
    """The body of 'conntrack - FTP' and its non-standard port twin."""
    ns0, ns1 = ct_ports(t)
    files = [write_flows(t, f"flows{i}.txt", text)
             for i, text in enumerate((FTP_FLOWS1, FTP_FLOWS2, FTP_FLOWS3), 1)]
    suffix = "" if port == 21 else f":{port}"
    to1, to2 = f"10.1.1.1{suffix}", f"10.1.1.2{suffix}"
    replace_flows(t, files[0])
    wire = CtWire.on(t, request, [ns0, ns1], ftp_flows1)
    wire.judged = control(port)
    start_ftp(t, ns0, port)
    start_ftp(t, ns1, port)
    control_conn = tcp_ct("10.1.1.1", "10.1.1.2", helper=True)

    # FTP requests from p1->p0 fail; from p0->p1 work.
    check_ftp(t, ns1, to1, active=True, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.1", "")
    check_ftp(t, ns0, to2, active=True)
    check_ct(t, "10.1.1.2", control_conn)

    # The second policy: only ns0's connections and what is related to them.
    settled(t, [ns0, ns1], port)
    replace_flows(t, files[1])
    wire.event("replace-flows flows2.txt", lambda w: setattr(w, "pipeline", ftp_flows2))
    flush(t, wire)
    check_ftp(t, ns1, to1, active=True, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.1", "")
    check_ftp(t, ns0, to2, active=True)
    check_ct(t, "10.1.1.2", control_conn + tcp_ct("10.1.1.2", "10.1.1.1"))
    settled(t, [ns0, ns1], port)
    flush(t, wire)
    check_ftp(t, ns0, to2)  # passive
    check_ct(t, "10.1.1.2", control_conn)

    # The third policy: the first without the helper; an active fetch fails.
    settled(t, [ns0, ns1], port)
    replace_flows(t, files[2])
    wire.event("replace-flows flows3.txt", lambda w: setattr(w, "pipeline", ftp_flows1))
    flush(t, wire)
    check_ftp(t, ns0, to2, active=True, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2"))
    # curl gave up: the control connection closes after it, and the judge
    # needs the whole conversation (a FIN still crossing skews the captures).
    settled(t, [ns0, ns1], port)
    assert wire.verify() >= 40


@FLAVOUR
@upstream("conntrack - FTP")
def test_ftp(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
             flavour: str) -> None:
    """Three policies in turn (all from ns0 committed with alg=ftp; only ns0's
    connections and related ones; the first without the helper).  FTP from
    ns1 fails under each; active and passive FTP from ns0 work, and the helper
    is on the control connection, the data connection committed as related;
    without the helper an active fetch fails (its data connection is new).
    Beyond upstream: the control connections' segments and the failed SYNs
    through the model (the data connections are out of its reach: module
    docstring)."""
    run_ftp_three_policies(system_traffic(flavour), request, 21)


@FLAVOUR
@upstream("conntrack - FTP non-standard port")
def test_ftp_non_standard_port(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """'conntrack - FTP' with the servers on port 11111: alg=ftp names the
    helper whatever the port.  Judged as 'conntrack - FTP'."""
    run_ftp_three_policies(system_traffic(flavour), request, 11111)


@FLAVOUR
@upstream("conntrack - FTP with expectation dump")
def test_ftp_expectation_dump(system_traffic: Callable[..., Traffic],
                              request: pytest.FixtureRequest, flavour: str) -> None:
    """FTP_FLOWS1, an active FTP from ns0: the control connection with its
    helper, no expectation in zone 42, and the data connection's expectation
    (from the server to the client, its parent the control connection) in
    dpctl/dump-conntrack-exp.  Beyond upstream: the control connection
    through the model (the expectation itself is the ALG's: out of reach)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    replace_flows(t, write_flows(t, "flows.txt", FTP_FLOWS1))
    wire = CtWire.on(t, request, [ns0, ns1], ftp_flows1)
    wire.judged = control()
    start_ftp(t, ns1)
    check_ftp(t, ns0, "10.1.1.2", active=True)
    check_ct(t, "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", helper=True))
    got = t.sb.appctl("dpctl/dump-conntrack-exp", "zone=42").stdout
    assert got == "", f"dpctl/dump-conntrack-exp zone=42: expected nothing, got\n{got}"
    got = format_ct(t.sb.appctl("dpctl/dump-conntrack-exp").stdout, "10.1.1.2")
    want = ("tcp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=<cleared>,dport=<cleared>),"
            "parent=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>)\n")
    assert got == want, f"dpctl/dump-conntrack-exp | FORMAT_CT(10.1.1.2): expected\n{want}got\n{got}"
    assert wire.verify() >= 10


# ----------------------------------------------------------------------------
# IPv6

FTP6_FLOWS = """\
table=0 priority=100 in_port=1 icmp6, action=2
table=0 priority=100 in_port=2 icmp6, action=1
table=0 priority=10 ip6, action=ct(table=1)
table=0 priority=0 action=drop
table=1 in_port=1 ct_state=+new, tcp6, tp_dst=21, action=ct(alg=ftp,commit),2
table=1 in_port={rel} ct_state=+new+rel, tcp6, action=ct(commit),{rel_out}
table=1 in_port=1 ct_state=+est, tcp6, action=2
table=1 in_port=2 ct_state=+est, tcp6, action=1
table=1 priority=0, action=drop
"""


@FLAVOUR
@upstream("conntrack - FTP over IPv6")
def test_ftp_ipv6(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                  flavour: str) -> None:
    """ICMPv6 passes both ways untracked, TCPv6 through ct: new FTP control
    connections from ns0, related ones from ns1, established both ways.  An
    active FTP (EPRT) from ns0 works; the control connection has the helper,
    the data connection from ns1 is committed.  Beyond upstream: the pings
    and the whole control connection, EPRT included (without NAT the ALG
    only reads it), through the model; the data connection is out of reach
    (module docstring)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, six=True)
    add_flows(t, FTP6_FLOWS.format(rel=2, rel_out=1))
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = control()
    wait_ping(t, ns0, "fc00::2", six=True)
    start_ftp(t, ns1, six=True)
    check_ftp(t, ns0, "[fc00::2]", "--ipv6", active=True)
    check_ct(t, "fc00::2", tcp_ct("fc00::1", "fc00::2", helper=True)
             + tcp_ct("fc00::2", "fc00::1"))
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - IPv6 FTP Passive")
def test_ipv6_ftp_passive(system_traffic: Callable[..., Traffic],
                          request: pytest.FixtureRequest, flavour: str) -> None:
    """'FTP over IPv6' with static neighbours and the related connections
    allowed from ns0: a passive FTP (EPSV) works, both connections from ns0
    (the control one with the helper).  Beyond upstream: as 'FTP over IPv6'."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t, six=True)
    set_mac(t, ns0, "p0", "80:88:88:88:88:88")
    set_mac(t, ns1, "p1", "80:88:88:88:88:99")
    static_neigh(t, ns0, "p0", "fc00::2", "80:88:88:88:88:99")
    static_neigh(t, ns1, "p1", "fc00::1", "80:88:88:88:88:88")
    add_flows(t, FTP6_FLOWS.format(rel=1, rel_out=2))
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = control()
    wait_ping(t, ns0, "fc00::2", six=True)
    start_ftp(t, ns1, six=True)
    check_ftp(t, ns0, "[fc00::2]", "--ipv6")
    check_ct(t, "fc00::2", tcp_ct("fc00::1", "fc00::2")
             + tcp_ct("fc00::1", "fc00::2", helper=True))
    assert wire.verify() >= 10


# ----------------------------------------------------------------------------
# two zones

MULTI_FLOWS = """\
table=0,priority=1,action=drop
table=0,priority=10,arp,action=normal
table=0,priority=10,icmp,action=normal
table=0,priority=100,in_port=1,tcp,action=ct(table=1,zone=1)
table=1,in_port=1,tcp,ct_zone=1,ct_state=+trk+new-rel,action=ct(commit,alg=ftp,zone=1),ct(commit,alg=ftp,zone=2),2
table=1,in_port=1,tcp,ct_zone=1,ct_state=+trk+new+rel,action=ct(commit,zone=1),ct(commit,zone=2),2
table=1,in_port=1,tcp,ct_zone=1,ct_state=+trk+est,action=ct(table=2,zone=2)
table=2,in_port=1,tcp,ct_zone=2,ct_state=+trk+est,action=2
table=0,priority=100,in_port=2,tcp,action=ct(table=1,zone=2)
table=1,in_port=2,tcp,ct_zone=2,ct_state=+trk+rel,action=ct(commit,zone=2),ct(commit,zone=1),1
table=1,in_port=2,tcp,ct_zone=2,ct_state=+trk+est,action=ct(table=2,zone=1)
table=2,in_port=2,tcp,ct_zone=1,ct_state=+trk+rel,action=ct(commit,zone=2),ct(commit,zone=1),1
table=2,in_port=2,tcp,ct_zone=1,ct_state=+trk+est,action=1
"""


@FLAVOUR
@upstream("conntrack - FTP with multiple expectations")
def test_ftp_multiple_expectations(system_traffic: Callable[..., Traffic],
                                   request: pytest.FixtureRequest, flavour: str) -> None:
    """A dual firewall: each connection committed in zones 1 and 2 (with the
    helper in both for the control connection), established traffic checked
    in both.  FTP from ns1 fails; active and passive FTP from ns0 work, each
    connection in both zones.  Beyond upstream: the control connections
    through the model's two zones (data connections out of reach)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    add_flows(t, MULTI_FLOWS)
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = control()
    start_ftp(t, ns0)
    start_ftp(t, ns1)
    check_ftp(t, ns1, "10.1.1.1", active=True, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.1", "")
    check_ftp(t, ns0, "10.1.1.2", active=True)
    c, d = ("10.1.1.1", "10.1.1.2"), ("10.1.1.2", "10.1.1.1")
    check_ct(t, "10.1.1.2", tcp_ct(*c, zone=1, helper=True) + tcp_ct(*c, zone=2, helper=True)
             + tcp_ct(*d, zone=1) + tcp_ct(*d, zone=2))
    settled(t, [ns0, ns1])
    flush(t, wire)
    check_ftp(t, ns0, "10.1.1.2")
    check_ct(t, "10.1.1.2", tcp_ct(*c, zone=1) + tcp_ct(*c, zone=1, helper=True)
             + tcp_ct(*c, zone=2) + tcp_ct(*c, zone=2, helper=True))
    assert wire.verify() >= 20


# ----------------------------------------------------------------------------
# TFTP

TFTP_FLOWS1 = FTP_FLOWS1.replace("tcp", "udp").replace("alg=ftp", "alg=tftp")
TFTP_FLOWS2 = """\
table=0,priority=1,action=drop
table=0,priority=10,arp,action=normal
table=0,priority=10,icmp,action=normal
table=0,priority=100,in_port=1,udp,action=ct(table=1)
table=1,in_port=1,udp,ct_state=+trk+new-rel,action=ct(commit,alg=tftp),2
table=1,in_port=1,udp,ct_state=+trk+new+rel,action=ct(commit),2
table=1,in_port=1,udp,ct_state=+trk+est,action=2
table=0,priority=100,in_port=2,udp,action=ct(table=1)
table=1,in_port=2,udp,ct_state=+trk+est,action=1
table=1,in_port=2,udp,ct_state=+trk+new+rel,action=1
"""


def tftp_flows2(a: Arrival) -> Out:
    if (out := arp_icmp(a)) is not None:
        return out
    if a.ip_proto != UDP:
        return []
    st = a.state().state
    if a.ofport == 1:
        return flows2_out(a, st)
    return [(P0 if st & EST or (st & NEW and st & REL) else None, [Ct(a.table)])]


@FLAVOUR
@upstream("conntrack - TFTP")
def test_tftp(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
              flavour: str) -> None:
    """Two policies (all UDP from ns0 committed with alg=tftp; only ns0's
    flows and related ones): a TFTP read from ns1 times out under each, one
    from ns0 works, its request's connection with the helper.  Beyond
    upstream: the read requests (to port 69) through the model; the transfer
    from the server's new port is related by the ALG's expectation, out of
    reach."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = ct_ports(t)
    files = [write_flows(t, "flows1.txt", TFTP_FLOWS1), write_flows(t, "flows2.txt", TFTP_FLOWS2)]
    replace_flows(t, files[0])
    wire = CtWire.on(t, request, [ns0, ns1], tftp_flows1)
    wire.judged = control(69, UDP)
    start_tftp(t, ns0, t.sb.rundir)
    start_tftp(t, ns1, t.sb.rundir)
    foo = t.sb.rundir / "foo"
    request_conn = udp_ct("10.1.1.1", "10.1.1.2", helper=True)
    check_tftp(t, ns1, "10.1.1.1/flows1.txt", foo, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.1", "")
    check_tftp(t, ns0, "10.1.1.2/flows1.txt", foo)
    check_ct(t, "10.1.1.2", request_conn)
    assert foo.read_text() == TFTP_FLOWS1, "the file read over TFTP is not flows1.txt"

    replace_flows(t, files[1])
    wire.event("replace-flows flows2.txt", lambda w: setattr(w, "pipeline", tftp_flows2))
    flush(t, wire)
    check_tftp(t, ns1, "10.1.1.1/flows1.txt", foo, rc=CURL_TIMEOUT)
    check_ct(t, "10.1.1.1", "")
    check_tftp(t, ns0, "10.1.1.2/flows1.txt", foo)
    check_ct(t, "10.1.1.2", request_conn)
    assert wire.verify() >= 4


# ----------------------------------------------------------------------------
# FTP behind NAT, lftp's four listings (CHECK_FTP_NAT)

NS0_MAC = "80:88:88:88:88:88"
# Table 10's request-to-reply rewrite, one action a line (joined by commas).
ARP_REPLY_ACTIONS = """\
load:2->OXM_OF_ARP_OP[]
move:OXM_OF_ARP_SHA[]->OXM_OF_ARP_THA[]
move:OXM_OF_PKT_REG0[0..47]->OXM_OF_ARP_SHA[]
move:OXM_OF_ARP_SPA[]->OXM_OF_ARP_TPA[]
move:NXM_NX_REG2[]->OXM_OF_ARP_SPA[]
move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]
move:OXM_OF_PKT_REG0[0..47]->NXM_OF_ETH_SRC[]
move:NXM_OF_IN_PORT[]->NXM_NX_REG3[0..15]
load:0->NXM_OF_IN_PORT[]
output:NXM_NX_REG3[0..15]""".replace("\n", ",")
ARP_RESPONDER = """\
table=0 priority=100 arp arp_op=1 action=move:OXM_OF_ARP_TPA[]->NXM_NX_REG2[],resubmit(,8),goto_table:10
table=0 priority=10 arp action=normal
table=0 priority=0 action=drop
table=8,reg2={hex}{mask},action=load:0x808888888888->OXM_OF_PKT_REG0[]
table=8,priority=0,action=load:0->OXM_OF_PKT_REG0[]
table=10 priority=100 arp xreg0=0 action=normal
table=10 priority=10,arp,arp_op=1,action={reply}
table=10 priority=0 action=drop
"""
PRE_RECIRC = """\
table=0 in_port=1, ip, action=ct(table=1,nat)
table=0 in_port=2, ip, action=ct(table=2,nat)
table=1 ct_state=+new, tcp, tp_dst=21, nw_src=10.1.1.1, action=ct(alg=ftp,commit,nat(src={nat})),2
table=1 ct_state=+est, tcp, nw_src={nat},     action=2
table=1 priority=10, tcp, action=drop
table=1 priority=0,action=drop
table=2 ct_state=+est, tcp, nw_dst=10.1.1.1, action=1
table=2 ct_state=+new+rel, tcp, nw_dst={nat}, action=ct(commit,nat),1
table=2 ct_state=+rel, icmp, nw_dst=10.1.1.1, action=1
table=2 priority=10, tcp, action=drop
table=2 priority=0, action=drop
"""
POST_RECIRC = """\
table=0 ip, action=ct(table=1)
table=1 in_port=1 ct_state=+new, tcp, tp_dst=21, action=ct(alg=ftp,commit,nat(src={nat})),2
table=1 in_port=1 ct_state=+est, tcp,     action=ct(nat),2
table=1 in_port=2 ct_state=+est, tcp,     action=ct(nat),1
table=1 in_port=2 ct_state=+new+rel, tcp, action=ct(commit,nat),1
table=1 in_port=2 ct_state=+rel, icmp,    action=ct(nat),1
table=1 priority=0, action=drop
"""
_CT1 = "zone=NXM_NX_REG4[0..15]"
_RULE_ID = "move:NXM_NX_REG1[0..31]->NXM_NX_CT_LABEL[96..127]"
_EXEC = f"move:NXM_NX_REG3[0]->NXM_NX_CT_LABEL[0],{_RULE_ID}"
_NEW_IN = "table=5 priority={p} reg2=1 reg3={r} ct_state=+new-rel, {m}, action=ct({ct1},"
_NEW_FTP = _NEW_IN.format(p=100, r=1, m="tcp, tp_dst=21", ct1=_CT1 + ",alg=ftp")
ORIG_TUPLE = f"""\
table=0 in_port=1, ip, action=set_field:1->reg4,set_field:1->reg3,ct({_CT1},table=1)
table=0 in_port=2, ip, action=set_field:1->reg4,set_field:2->reg3,ct({_CT1},nat,table=1)
table=1 reg3=1, ip, ct_state=-rel-rpl+trk-inv action=set_field:1->reg0,resubmit(,3),goto_table:5
table=1 reg3=1, ip, ct_state=-rel+rpl+trk-inv action=set_field:2->reg0,resubmit(,3,ct),goto_table:4
table=1 reg3=2, ip, ct_state=-rel-rpl+trk-inv action=set_field:2->reg0,resubmit(,3),goto_table:5
table=1 reg3=2, ip, ct_state=-rel+rpl+trk-inv action=set_field:1->reg0,resubmit(,3,ct),goto_table:4
table=1 ip, ct_state=+rel+trk-inv, action=move:NXM_NX_CT_LABEL[0]->NXM_NX_REG0[0],resubmit(,3,ct),goto_table:4
table=1 priority=0, action=drop
table=3 priority=10, reg0=1, ip, nw_src=10.1.1.1 action=set_field:1234->reg1,set_field:1->reg2
table=3 priority=0, action=set_field:1235->reg1,set_field:0->reg2
table=4 priority=100 reg2=1, action=goto_table:5
table=4 priority=0 action=move:NXM_NX_REG3[]->NXM_NX_REG0[],resubmit(,3),goto_table:5
table=5 reg2=0 priority=1000 action=drop
{_NEW_FTP}commit,nat(src={{nat}}),exec({_EXEC})),goto_table:6
{_NEW_IN.format(p=10, r=1, m="ip", ct1=_CT1)}commit,nat(src={{nat}}),exec({_EXEC})),goto_table:6
{_NEW_IN.format(p=10, r=2, m="ip", ct1=_CT1)}commit,nat(dst={{nat}}),exec({_EXEC})),goto_table:6
table=5 priority=10 reg2=1 ct_state=+new+rel, ip, action=ct({_CT1},commit,nat,exec({_RULE_ID})),goto_table:6
table=5 priority=10 ct_state=-new+trk-inv reg3=1 ip, action=ct({_CT1},nat),goto_table:6
table=5 priority=0 action=goto_table:6
table=6 in_port=1 action=2
table=6 in_port=2 action=1
"""


@dataclass(frozen=True)
class ArpReply(Action):
    """ARP_RESPONDER's table 10 rule: the request turned into its reply (RFC
    826: op 2, the asker's hardware and protocol addresses become the
    target's, the looked-up MAC and the asked address the sender's), the
    Ethernet header swapped the same way; sent back out the port it came in."""

    mac: str

    def ofctl(self) -> str:
        return f"arp-reply({self.mac})"

    def apply(self, pkt: Packet) -> None:
        d, mac = pkt.data, bytes.fromhex(self.mac.replace(":", ""))
        sha, spa, tpa = bytes(d[22:28]), bytes(d[28:32]), bytes(d[38:42])
        d[20:22] = b"\x00\x02"
        d[32:38], d[22:28] = sha, mac
        d[38:42], d[28:32] = spa, tpa
        d[0:6], d[6:12] = bytes(d[6:12]), mac


NAT_VARIANTS = {
    "SNAT prerecirc": (PRE_RECIRC, "/0xffffffff", ""),
    "SNAT postrecirc": (POST_RECIRC, "/0xffffffff", ""),
    "SNAT orig tuple": (ORIG_TUPLE, "", "zone=1,labels=0x4d2000000000000000000000001,"),
}


def check_ftp_nat(t: Traffic, request: pytest.FixtureRequest, variant: str, nat: str) -> None:
    """CHECK_FTP_NAT(TITLE, nat, flows, ct dump)."""
    flows, mask, extra = NAT_VARIANTS[variant]
    ns0, ns1 = ct_ports(t)
    set_mac(t, ns0, "p0", NS0_MAC)
    hexaddr = "0x" + ipaddress.IPv4Address(nat).packed.hex()
    add_flows(t, flows.format(nat=nat) + ARP_RESPONDER.format(hex=hexaddr, mask=mask,
                                                                  reply=ARP_REPLY_ACTIONS))
    wire = CtWire.on(t, request, [ns0, ns1])
    seqadj = len(nat) != len("10.1.1.1")
    wire.judged = control(nat=True, handshake=seqadj)
    start_ftp(t, ns1)
    lftp(t, ns0, "10.1.1.2")
    rest = f"{extra}protoinfo=(state=<cleared>)"
    check_ct(t, "10.1.1.2",
             f"tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),"
             f"reply=(src=10.1.1.2,dst={nat},sport=<cleared>,dport=<cleared>),{rest},helper=ftp\n"
             f"tcp,orig=(src=10.1.1.2,dst={nat},sport=<cleared>,dport=<cleared>),"
             f"reply=(src=10.1.1.1,dst=10.1.1.2,sport=<cleared>,dport=<cleared>),{rest}\n")
    assert wire.verify() >= (4 if seqadj else 12)


FTP_NAT_DOC = """{title}: ns0's active FTP session (lftp: four listings, so four
    data connections) to ns1, SNAT to {nat} {how}.  ARP for the NAT address
    is answered by the flows.  The control connection has the helper, each
    data connection from the server to the NAT address is committed related
    and translated back.{seqadj}  Beyond upstream: the ARP exchange and the
    control connection through the model's NAT (module docstring: the PORT
    commands' rewrite{skew} is the ALG's, out of reach; the data connections
    too)."""
HOW = {"SNAT prerecirc": "by the first ct (ct(nat,table=...) on every packet)",
       "SNAT postrecirc": "after the first recirculation (ct(nat) in table 1)",
       "SNAT orig tuple": "in zone 1, behind an ACL that judges replies and related "
                          "packets on the connection's original tuple, the rule id and "
                          "direction stored in ct_label"}


def _nat_case(variant: str, nat: str) -> Callable[..., None]:
    seqadj = nat == "10.1.1.240"
    title = f"conntrack - FTP {variant}" + (" seqadj" if seqadj else "")

    @FLAVOUR
    @upstream(title)
    def case(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
             flavour: str) -> None:
        check_ftp_nat(system_traffic(flavour), request, variant, nat)
    case.__doc__ = FTP_NAT_DOC.format(
        title=title, nat=nat, how=HOW[variant],
        seqadj=("  '10.1.1.240' is two characters longer than '10.1.1.1': the ALG "
                "grows each PORT command and adjusts the sequence numbers after it."
                if seqadj else ""),
        skew=", and the sequence adjustment after it (only the handshake is judged)"
        if seqadj else "")
    return cast(Callable[..., None], case)


test_ftp_snat_prerecirc = _nat_case("SNAT prerecirc", "10.1.1.9")
test_ftp_snat_prerecirc_seqadj = _nat_case("SNAT prerecirc", "10.1.1.240")
test_ftp_snat_postrecirc = _nat_case("SNAT postrecirc", "10.1.1.9")
test_ftp_snat_postrecirc_seqadj = _nat_case("SNAT postrecirc", "10.1.1.240")
test_ftp_snat_orig_tuple = _nat_case("SNAT orig tuple", "10.1.1.9")
test_ftp_snat_orig_tuple_seqadj = _nat_case("SNAT orig tuple", "10.1.1.240")


# ----------------------------------------------------------------------------
# FTP passive and active with SNAT or DNAT (curl)

def nat_table(head: str, first: str, rel: str, est1: str, est2: str, icmp: str = "icmp"
              ) -> str:
    """The flows of the NAT tests with curl: everything IP tracked with nat
    (`head`), then table 1's rules (ovs-ofctl syntax)."""
    return (f"{head}\ntable=0 priority=0 action=drop\n"
            f"table=1 {first}\ntable=1 {rel}\ntable=1 {est1}\ntable=1 {est2}\n"
            f"table=1 priority=100 in_port=1 {icmp}, action=2\n"
            f"table=1 priority=100 in_port=2 {icmp}, action=1\n"
            "table=1 priority=0, action=drop\n")


def v4_pair(t: Traffic, addr1: str = "10.1.1.2/24", mask: str = "/24"
            ) -> tuple[Netns, Netns]:
    """ADD_VETH(p0, 10.1.1.1) and ADD_VETH(p1, addr1), with the e6:66:c1 MACs."""
    ns0, ns1 = ct_ports(t, addrs=(f"10.1.1.1{mask}", addr1))
    set_mac(t, ns0, "p0", "e6:66:c1:11:11:11")
    set_mac(t, ns1, "p1", "e6:66:c1:22:22:22")
    return ns0, ns1


MAC0, MAC1 = "e6:66:c1:11:11:11", "e6:66:c1:22:22:22"
V4_HEAD = "table=0 priority=10 ip, action=ct(nat,table=1)"


def run_v4_nat(t: Traffic, request: pytest.FixtureRequest, flows: str,
               ns0: Netns, ns1: Netns, ping: str,
               fetches: list[tuple[str, tuple[str, ...], bool]], dump_addr: str,
               dump: str) -> None:
    add_flows(t, flows)
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = control(nat=True)
    wait_ping(t, ns0, ping)
    start_ftp(t, ns1)
    for url, opts, active in fetches:
        check_ftp(t, ns0, url, *opts, active=active)
    check_ct(t, dump_addr, dump)
    assert wire.verify() >= 10


@FLAVOUR
@upstream("conntrack - IPv4 FTP Passive with SNAT")
def test_ipv4_ftp_passive_snat(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """Static ARP, everything IP through ct(nat); ns0's control connection
    SNATed to 10.1.1.240 with the helper, its passive data connections (EPSV,
    then PASV) related and SNATed the same.  Beyond upstream: the pings and
    the control connection through the model's NAT (the 227 reply is the
    ALG's, the data connections too: out of reach)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = v4_pair(t)
    static_neigh(t, ns0, "p0", "10.1.1.2", MAC1)
    static_neigh(t, ns1, "p1", "10.1.1.1", MAC0)
    static_neigh(t, ns1, "p1", "10.1.1.240", MAC0)
    n = "10.1.1.240"
    flows = nat_table(
        V4_HEAD,
        f"in_port=1 ct_state=+new tcp nw_src=10.1.1.1 tp_dst=21  action=ct(alg=ftp,commit,nat(src={n})),2",
        "in_port=1 ct_state=+new+rel tcp nw_src=10.1.1.1 action=ct(commit,nat),2",
        f"in_port=1 ct_state=+est tcp nw_src={n} action=2",
        "in_port=2 ct_state=+est tcp nw_dst=10.1.1.1 action=1")
    run_v4_nat(t, request, flows, ns0, ns1, "10.1.1.2",
               [("10.1.1.2", ("--epsv",), False), ("10.1.1.2", ("--disable-epsv",), False)],
               "10.1.1.2", tcp_ct("10.1.1.1", "10.1.1.2", reply=("10.1.1.2", n))
               + tcp_ct("10.1.1.1", "10.1.1.2", reply=("10.1.1.2", n), helper=True))


def run_dnat(t: Traffic, request: pytest.FixtureRequest, mask: str, virtual: str,
             server: str, active: bool, fetches: tuple[tuple[str, ...], ...] = ((),)) -> None:
    """The DNAT tests' common body: ns0 (10.1.1.1) fetches from `virtual`,
    which the first ct DNATs to ns1's `server` with the helper; static
    neighbour entries (ns0: both addresses on ns1's MAC); the data
    connections' related rule from the client (passive) or from the server
    (active); one fetch per entry of `fetches` (curl's extra options)."""
    client = "10.1.1.1"
    ns0, ns1 = v4_pair(t, f"{server}{mask}", mask)
    static_neigh(t, ns0, "p0", virtual, MAC1)
    static_neigh(t, ns0, "p0", server, MAC1)
    static_neigh(t, ns1, "p1", client, MAC0)
    rel = (f"in_port=2 ct_state=+new+rel tcp nw_src={server} action=ct(commit,nat),1" if active
           else f"in_port=1 ct_state=+new+rel tcp nw_src={client} action=ct(commit,nat),2")
    flows = nat_table(
        V4_HEAD,
        f"in_port=1 ct_state=+new tcp nw_src={client} tp_dst=21 "
        f"action=ct(alg=ftp,commit,nat(dst={server})),2",
        rel,
        f"in_port=1 ct_state=+est tcp nw_dst={server} action=2",
        f"in_port=2 ct_state=+est tcp nw_dst={client} action=1")
    ctl = tcp_ct(client, virtual, reply=(server, client), helper=True)
    dump = (ctl + tcp_ct(server, client, reply=(client, virtual)) if active
            else tcp_ct(client, virtual, reply=(server, client)) + ctl)
    run_v4_nat(t, request, flows, ns0, ns1, server,
               [(virtual, opts, active) for opts in fetches], virtual, dump)


@FLAVOUR
@upstream("conntrack - IPv4 FTP Passive with DNAT")
def test_ipv4_ftp_passive_dnat(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0 fetches from 10.1.1.2, DNATed to ns1's 10.1.1.240 with the helper;
    the passive data connection (the 227 reply rewritten back to 10.1.1.2)
    related and DNATed the same.  Beyond upstream: the ping and the control
    connection through the model's NAT (the 227 rewrite and the data
    connection: out of reach)."""
    run_dnat(system_traffic(flavour), request, "/24", "10.1.1.2", "10.1.1.240", False)


@FLAVOUR
@upstream("conntrack - IPv4 FTP Passive with DNAT 2")
def test_ipv4_ftp_passive_dnat_2(system_traffic: Callable[..., Traffic],
                                 request: pytest.FixtureRequest, flavour: str) -> None:
    """'Passive with DNAT' on a /16: 10.1.1.200 DNATed to ns1's 10.1.100.1
    (the 227 reply's address rewritten to one of the same length).  Judged
    the same way."""
    run_dnat(system_traffic(flavour), request, "/16", "10.1.1.200", "10.1.100.1", False)


@FLAVOUR
@upstream("conntrack - IPv4 FTP Active with DNAT")
def test_ipv4_ftp_active_dnat(system_traffic: Callable[..., Traffic],
                              request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0 fetches actively (EPRT, then PORT) from 10.1.1.2, DNATed to ns1's
    10.1.1.240; the server's data connections are related and translated
    back to come from 10.1.1.2.  Beyond upstream: the ping and the control
    connection through the model's NAT (EPRT and PORT are the ALG's, the
    data connections too: out of reach)."""
    run_dnat(system_traffic(flavour), request, "/24", "10.1.1.2", "10.1.1.240", True,
             (("--eprt",), ("--disable-eprt",)))


@FLAVOUR
@upstream("conntrack - IPv4 FTP Active with DNAT with reverse skew")
def test_ipv4_ftp_active_dnat_reverse_skew(system_traffic: Callable[..., Traffic],
                                           request: pytest.FixtureRequest,
                                           flavour: str) -> None:
    """'Active with DNAT' on a /16, the client fetching from 10.1.120.240,
    DNATed to ns1's shorter 10.1.1.2.  Judged the same way."""
    run_dnat(system_traffic(flavour), request, "/16", "10.1.120.240", "10.1.1.2", True)


# ----------------------------------------------------------------------------
# IPv6 with SNAT

V6_HEAD = "table=0 priority=10 ip6, action=ct(nat,table=1)"
V6_SNAT = "fc00::240"


def v6_snat(t: Traffic, request: pytest.FixtureRequest, flows: str,
            active: bool, judged: Callable[[bytes], bool],
            peer_mac: bool = False) -> CtWire:
    """The IPv6 SNAT tests' common body: ADD_VETH without nodad, ns0's MAC set,
    ns1's neighbour entry for the NAT address; flows; the ping6 wait; the
    server; one fetch (`active` or passive) that must work."""
    ns0, ns1 = ct_ports(t, addrs=("fc00::1/96", "fc00::2/96"))
    set_mac(t, ns0, "p0", NS0_MAC)
    if peer_mac:
        set_mac(t, ns1, "p1", "80:88:88:88:88:99")
        static_neigh(t, ns0, "p0", "fc00::2", "80:88:88:88:88:99")
    static_neigh(t, ns1, "p1", V6_SNAT, NS0_MAC)
    add_flows(t, flows)
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = judged
    t.wait_ping6(ns0, "fc00::2")
    start_ftp(t, ns1, six=True)
    check_ftp(t, ns0, "[fc00::2]", "--ipv6", active=active)
    return wire


V6_SNAT_DUMP = (tcp_ct("fc00::1", "fc00::2", reply=("fc00::2", V6_SNAT), helper=True)
                + tcp_ct("fc00::2", V6_SNAT, reply=("fc00::1", "fc00::2")))


def v6_snat_flows(rel: str) -> str:
    return nat_table(
        V6_HEAD,
        "in_port=1 ct_state=+new tcp6 ipv6_src=fc00::1 tp_dst=21  "
        f"action=ct(alg=ftp,commit,nat(src={V6_SNAT})),2",
        rel,
        f"in_port=1 ct_state=+est tcp6 ipv6_src={V6_SNAT}   action=2",
        "in_port=2 ct_state=+est tcp6 ipv6_dst=fc00::1     action=1", icmp="icmp6")


@FLAVOUR
@upstream("conntrack - IPv6 FTP with SNAT")
def test_ipv6_ftp_snat(system_traffic: Callable[..., Traffic], request: pytest.FixtureRequest,
                       flavour: str) -> None:
    """ns0's active FTP (EPRT) to ns1 SNATed to fc00::240 with the helper;
    the server's data connection to the NAT address related and translated
    back.  'fc00::240' is two characters longer than 'fc00::1': the ALG grows
    the EPRT command and adjusts the sequence numbers after it.  Beyond
    upstream: the pings and the control connection's handshake through the
    model's NAT (EPRT's rewrite, the sequence adjustment after it and the
    data connection: out of reach)."""
    t: Traffic = system_traffic(flavour)
    wire = v6_snat(t, request, v6_snat_flows(
        f"in_port=2 ct_state=+new+rel tcp6 ipv6_dst={V6_SNAT} action=ct(commit,nat),1"),
        True, control(nat=True, handshake=True))
    check_ct(t, "fc00::2", V6_SNAT_DUMP)
    assert wire.verify() >= 4


@FLAVOUR
@upstream("conntrack - IPv6 FTP Passive with SNAT")
def test_ipv6_ftp_passive_snat(system_traffic: Callable[..., Traffic],
                               request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0's passive FTP (EPSV) to ns1 SNATed to fc00::240: both connections
    from ns0, translated the same, the control one with the helper.  EPSV's
    reply carries no address, nothing is rewritten.  Beyond upstream: the
    pings and the whole control connection through the model's NAT (the data
    connection is related by the ALG's expectation: out of reach)."""
    t: Traffic = system_traffic(flavour)
    wire = v6_snat(t, request, v6_snat_flows(
        "in_port=1 ct_state=+new+rel tcp6 ipv6_dst=fc00::2 action=ct(commit,nat),2"),
        False, control(nat=True), peer_mac=True)
    check_ct(t, "fc00::2", tcp_ct("fc00::1", "fc00::2", reply=("fc00::2", V6_SNAT))
             + tcp_ct("fc00::1", "fc00::2", reply=("fc00::2", V6_SNAT), helper=True))
    assert wire.verify() >= 10


ORIG6 = "ct_nw_proto=6 ct_ipv6_src=fc00::1 ct_tp_dst=21"
V6_ORIG_COMMIT = f"ct(alg=ftp,commit,nat(src={V6_SNAT}))"
V6_ORIG_FLOWS = f"""\
{V6_HEAD}
table=0 priority=0 action=drop
table=1 priority=100 in_port=1 icmp6, action=2
table=1 priority=100 in_port=2 icmp6, action=1
table=1 priority=10 in_port=1 ct_state=+new+trk-inv tcp6 {ORIG6}  action={V6_ORIG_COMMIT},2
table=1 priority=10 in_port=2 ct_state=+new+rel+trk-inv ipv6 {ORIG6} action=ct(commit,nat),1
table=1 priority=10 in_port=1 ct_state=+est+trk-inv ipv6 {ORIG6} action=2
table=1 priority=10 in_port=2 ct_state=+est+trk-inv ipv6 {ORIG6} action=1
table=1 priority=0, action=drop
"""


@FLAVOUR
@upstream("conntrack - IPv6 FTP with SNAT - orig tuple")
def test_ipv6_ftp_snat_orig_tuple(system_traffic: Callable[..., Traffic],
                                  request: pytest.FixtureRequest, flavour: str) -> None:
    """'IPv6 FTP with SNAT' with every TCP rule matching the original tuple of
    the connection (the data connection's is its parent's, the control
    connection's).  Judged the same way: the pings and the control
    connection's handshake (EPRT grows by two characters: seqadj)."""
    t: Traffic = system_traffic(flavour)
    wire = v6_snat(t, request, V6_ORIG_FLOWS, True,
                   control(nat=True, handshake=True))
    check_ct(t, "fc00::2", V6_SNAT_DUMP)
    assert wire.verify() >= 4


# ----------------------------------------------------------------------------
# TFTP with SNAT

TFTP_SNAT_COMMIT = "ct(alg=tftp,commit,nat(src=10.1.1.240))"
TFTP_SNAT_FLOWS = f"""\
table=0 priority=10 ip, action=ct(table=1)
table=0 priority=0 action=drop
table=1 priority=100 in_port=1 icmp, action=2
table=1 priority=100 in_port=2 icmp, action=1
table=1 in_port=1 ct_state=+new udp nw_src=10.1.1.1 tp_dst=69  action={TFTP_SNAT_COMMIT},2
table=1 in_port=2 ct_state=+new+rel udp nw_src=10.1.1.2 action=ct(commit,nat),1
table=1 in_port=1 ct_state=+est udp nw_src=10.1.1.1 action=ct(nat,table=2)
table=1 in_port=2 ct_state=+est udp nw_src=10.1.1.2 action=ct(nat,table=2)
table=1 priority=0, action=drop
table=2 in_port=1 ct_state=+est udp nw_src=10.1.1.240 action=2
table=2 in_port=2 ct_state=+est udp nw_dst=10.1.1.1 action=1
"""


@FLAVOUR
@upstream("conntrack - IPv4 TFTP with SNAT")
def test_ipv4_tftp_snat(system_traffic: Callable[..., Traffic],
                        request: pytest.FixtureRequest, flavour: str) -> None:
    """ns0's TFTP read request to ns1 SNATed to 10.1.1.240 with the helper;
    the transfer from the server's new port is related and translated back.
    Beyond upstream: the ping and the read requests through the model's NAT
    (the transfer is related by the ALG's expectation: out of reach)."""
    t: Traffic = system_traffic(flavour)
    ns0, ns1 = v4_pair(t)
    static_neigh(t, ns0, "p0", "10.1.1.2", MAC1)
    static_neigh(t, ns1, "p1", "10.1.1.1", MAC0)
    static_neigh(t, ns1, "p1", "10.1.1.240", MAC0)
    add_flows(t, TFTP_SNAT_FLOWS)
    wire = CtWire.on(t, request, [ns0, ns1])
    wire.judged = control(69, UDP)
    wait_ping(t, ns0, "10.1.1.2")
    start_tftp(t, ns0, t.sb.rundir)
    start_tftp(t, ns1, t.sb.rundir)
    foo = t.sb.rundir / "foo"
    check_tftp(t, ns0, "10.1.1.2/flows.txt", foo)
    check_ct(t, "10.1.1.2", udp_ct("10.1.1.1", "10.1.1.2", helper=True,
                                   reply=("10.1.1.2", "10.1.1.240"))
             + udp_ct("10.1.1.2", "10.1.1.240", reply=("10.1.1.1", "10.1.1.2")))
    assert foo.read_text() == TFTP_SNAT_FLOWS, "the file read over TFTP is not flows.txt"
    assert wire.verify() >= 3
