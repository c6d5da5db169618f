"""Known deviations of OVS from correct behaviour, found by this suite.

The model computes what a correct datapath must emit.  Where OVS is known to
do otherwise, the model also says exactly what OVS emits instead (or that it
aborts), and names the bug.  A case then passes as xfail only if OVS shows
precisely that deviation; if OVS behaves correctly the case fails, asking for
the entry to be retired or re-scoped.  Each entry says where in OVS the
behaviour comes from, and on which OVS releases it was seen; and, as a sceptical
maintainer would ask: its class (a bug, a divergence OVS may keep by design, or
latent: no real port produces the input), its severity, the real port kinds that
can produce its input (with the case that shows it here, or the sources the
claim rests on), and its root-cause group (one fix, one group).
"""
from __future__ import annotations

import functools
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from datapath.model.packet import Layer, Packet
    from datapath.offloads import TxOffloads

# The OVS release this list was last checked against, entry by entry.  The
# launcher says so when the runtime's OVS is another one.
VALIDATED_ON = "4.0.0"


# What an entry is (issue 18): a bug a maintainer would accept; a divergence from
# a standard or from OVS's documentation that OVS may keep by design; or latent,
# where no real port produces the input (only netdev-dummy's options reach it).
CLASSES = ("bug", "by-design", "latent")
SEVERITIES = ("crash", "corrupts data on the wire", "wrong counters", "cosmetic")
# Real port kinds; "any" for an input every kind can carry.
PORT_KINDS = ("tap", "veth", "vhost-user", "afxdp", "dpdk", "any")


# How the usual real ports hand OVS a TCP/UDP checksum to complete (partial).
LINUX_PARTIAL = ("a Linux sender's TCP/UDP checksum left to the NIC: virtio-net NEEDS_CSUM, "
                 "which netdev_linux_parse_vnet_hdr() marks partial")
VHOST_PARTIAL = ("a guest's checksum offload: NEEDS_CSUM, which DPDK's vhost library "
                 "(compliant ol_flags) marks RX_L4_CKSUM_NONE, OVS's partial")


@dataclass(frozen=True)
class RealPort:
    """A real port kind that can hand OVS a bug's input: how, and the case that
    shows it on that kind on this machine ("": not shown by a case yet; `how`
    then says which sources the claim rests on)."""

    kind: str
    how: str
    case: str = ""

    def text(self) -> str:
        return f"{self.kind} ({self.how}; " + (f"shown by {self.case})" if self.case
                                               else "not shown by a case yet)")


@dataclass(frozen=True)
class OvsBug:
    key: str
    title: str
    where: str
    _: KW_ONLY
    cls: str  # one of CLASSES
    severity: str  # one of SEVERITIES
    real_ports: tuple[RealPort, ...]  # empty for a latent entry
    root_cause: str  # one fix, one group: entries a single fix cures share it
    why: str = ""  # the evidence for the class, where it is not "bug"
    crash: bool = False  # ovs-vswitchd aborts instead of sending
    # For a crash: a regex the daemon's log or stderr must show, so that only
    # this abort counts as the known bug (any other death stays a failure).
    signature: str = ""
    seen_in: tuple[str, ...] = (VALIDATED_ON,)  # OVS releases it was confirmed on

    def reason(self) -> str:
        return f"known OVS bug [{self.key}]: {self.title} ({self.where})"

    def gone(self) -> str:
        """What a case says when the deviation did not show."""
        return (f"known bug {self.key} no longer reproduces in this build: retire or re-scope "
                f"the entry (datapath/model/bugs.py; seen in OVS {', '.join(self.seen_in)})")

    def summary(self) -> dict[str, str]:
        return {"key": self.key, "title": self.title, "where": self.where,
                "seen_in": ", ".join(self.seen_in), "cls": self.cls,
                "severity": self.severity, "root_cause": self.root_cause,
                "real_ports": "; ".join(p.text() for p in self.real_ports) or "none (latent)",
                "why": self.why}


GRE_CSUM_AT_PUSH = OvsBug(
    "gre-csum-at-push",
    "the GRE checksum is computed when the header is pushed, over inner checksums "
    "that are only finished at send, so it does not match the bytes on the wire",
    "lib/netdev-native-tnl.c netdev_gre_push_header()",
    cls="bug", severity="corrupts data on the wire", root_cause="gre-csum-at-push",
    real_ports=(RealPort("veth", LINUX_PARTIAL + ", pushed into GRE with csum"),
                RealPort("tap", LINUX_PARTIAL),
                RealPort("vhost-user", VHOST_PARTIAL)))

L4_PARTIAL_NOT_TCP_UDP = OvsBug(
    "l4-partial-assert",
    "ovs-vswitchd aborts when it sends a packet whose L4 checksum is flagged "
    "partial but which is neither TCP nor UDP (e.g. ICMP from a port that marks "
    "every packet L4-partial)",
    "lib/dp-packet.c dp_packet_ol_send_prepare(): ovs_assert(dp_packet_l4_proto_sctp(p)), "
    "and ovs_assert(dp_packet_inner_l4_proto_sctp(p)) for the inner packet of a tunnel",
    crash=True,
    signature=r"assertion dp_packet_(inner_)?l4_proto_sctp\(p\) failed in "
              r"dp_packet_ol_send_prepare",
    cls="bug", severity="crash", root_cause="l4-partial-unknown-proto",
    real_ports=(RealPort(
        "vhost-user", "from the sources: a guest's TCP segment with a data offset below 5 "
        "and NEEDS_CSUM; DPDK 25.11's vhost_dequeue_offload() classifies it TCP by the IP "
        "protocol (rte_net_get_ptype(), l4_len from the data offset, no minimum) and marks "
        "it RX_L4_CKSUM_NONE, OVS's partial, while miniflow_extract() sets OVS's TCP flag "
        "only for a header of at least 20 bytes: a guest-triggerable abort"),),
    why="netdev-dummy's ol_l4_rx_csum_set_partial marks every packet partial (ICMP, ARP); "
        "netdev-linux marks a packet partial only for TCP/UDP/SCTP at OVS's L4 offset and "
        "checksums any other in software, so tap/veth cannot reach it")

TSO_SHORT_TUNNEL_ASSERT = OvsBug(
    "tso-short-tunnel-assert",
    "ovs-vswitchd aborts when a VXLAN/Geneve packet with an outer UDP checksum carries "
    "a TSO segment size but less payload than one segment (nothing to segment, so the "
    "segment size stays set and the outer checksum shortcut asserts on it)",
    "lib/packets.c packet_udp_tunnel_csum(): "
    "ovs_assert(payload_len == tso_segsz * dp_packet_gso_nr_segs(p))",
    crash=True,
    signature=r"assertion payload_len == tso_segsz \* dp_packet_gso_nr_segs\(p\) failed "
              r"in packet_udp_tunnel_csum",
    cls="bug", severity="crash", root_cause="tso-segsz-unsegmented",
    real_ports=(RealPort(
        "vhost-user", "from the sources: a guest's TSO packet (VIRTIO_NET_HDR_GSO_TCPV4/6) "
        "whose gso_size exceeds its payload, which DPDK 25.11's vhost library copies into "
        "the mbuf unchecked (userspace-tso-enable; VXLAN/Geneve with csum over a port "
        "without outer UDP checksum offload)"),),
    why="dp_packet_gso__() returns for n_segs <= 1 without clearing the segment size; "
        "a Linux sender never makes such a packet (the TCP stack sets gso only above one "
        "MSS), so tap/veth do not reach it")

TSO_EMPTY_TUNNEL_CSUM = OvsBug(
    "tso-empty-tunnel-csum",
    "the outer UDP checksum of a VXLAN/Geneve packet that carries a TSO segment size "
    "but no TCP payload (also where the inner header is another tunnel's UDP, read as "
    "TCP) is wrong by the segment size (twice that over inner IPv6): OVS "
    "adjusts the lengths under it as if the packet would be cut into segments of that "
    "size (RFC 768: the checksum covers the datagram as sent); receivers that check "
    "it drop the packet",
    "lib/packets.c packet_udp_tunnel_csum(): recalc_csum16(udp_csum, payload_len, "
    "tso_segsz) with payload_len 0 (dp_packet_gso_nr_segs() is 0, so the assert holds)",
    cls="bug", severity="corrupts data on the wire", root_cause="tso-segsz-unsegmented",
    real_ports=(RealPort(
        "vhost-user", "from the sources: a guest's TSO packet without TCP payload (a bare "
        "ACK with gso_size), which DPDK 25.11's vhost library passes on"),),
    why="the same cause as tso-short-tunnel-assert: dp_packet_gso__() leaves the segment "
        "size on a packet it does not segment; with no payload dp_packet_gso_nr_segs() is 0, "
        "so the assert holds and the adjustment goes through")

IPV4_HEADER_ONLY = OvsBug(
    "ipv4-header-only-csum",
    "an IPv4 packet without payload (total length = header length) whose header checksum is "
    "pending leaves with the stale checksum: OVS skips the header and marks it good "
    "(RFC 791 §3.1: every IPv4 header carries a correct checksum)",
    "lib/dp-packet.h dp_packet_ip_set_header_csum(): computes only if ip_hdr_len < l3 size",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv4-header-only-csum",
    real_ports=(RealPort(
        "dpdk", "an ethdev that validates IPv4 header checksums on rx (net_tap here, NICs): "
        "RX_IP_CKSUM_GOOD, then mod_nw_src/mod_nw_dst makes the checksum pending"),))

GSO_CWR_EVERY_SEGMENT = OvsBug(
    "gso-cwr-every-segment",
    "software segmentation copies the TCP CWR flag into every segment; it belongs on the "
    "first only (RFC 3168 §6.1.2: CWR marks the first new data packet after the window "
    "reduction; Linux GSO and NIC TSO clear it on the others)",
    "lib/dp-packet-gso.c dp_packet_gso_update_segment(): clears only PSH and FIN",
    cls="latent", severity="corrupts data on the wire", root_cause="gso-cwr-every-segment",
    real_ports=(),
    why="no real port hands OVS a TSO packet with CWR set: netdev-linux refuses a "
        "VIRTIO_NET_HDR_GSO_ECN gso_type (ENOTSUP), its tap offload request has no "
        "TUN_F_TSO_ECN, and OVS disables VIRTIO_NET_F_HOST_ECN on vhost-user ports with TSO "
        "(a guest breaking virtio 1.1 5.1.6.2 could still send one: DPDK masks the ECN "
        "bit).  For AccECN flows (RFC 9768) CWR is part of the ACE counter and Linux keeps "
        "it on every segment (SKB_GSO_TCP_ACCECN); RFC 3168 §6.1.2 holds for classic ECN")

IPV6_EXT_PSEUDO_HEADER = OvsBug(
    "ipv6-ext-pseudo-header",
    "a TCP or UDP checksum OVS completes over IPv6 with extension headers uses the IPv6 "
    "header's Next Header (the first extension header's type) in the pseudo-header "
    "instead of the upper-layer protocol, so it is wrong on the wire (RFC 8200 §8.1: "
    "the pseudo-header carries the upper-layer protocol, 6 or 17)",
    "lib/packets.c packet_tcp_complete_csum(), packet_udp_complete_csum(): "
    "packet_csum_upperlayer6(ip6, ..., ip6->ip6_nxt, ...)",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv6-ext-pseudo-header",
    real_ports=(RealPort("veth", LINUX_PARTIAL + ", over IPv6 with an extension header "
                         "(e.g. destination options), out of a port without L4 checksum "
                         "offload"),
                RealPort("tap", "the same"),
                RealPort("vhost-user", VHOST_PARTIAL + "; rte_net_get_ptype() walks "
                         "the extension headers")))

IPV4_LATER_FRAGMENT = OvsBug(
    "ipv4-later-fragment-rewrite",
    "mod_nw_src/mod_nw_dst on a later IPv4 fragment (offset > 0, no TCP/UDP header) "
    "'updates' the TCP/UDP checksum it takes to be at its usual place in the payload: it "
    "corrupts two payload bytes of the fragment, so the reassembled datagram is wrong "
    "(RFC 791 §3.2: only the first fragment carries the upper-layer header)",
    "lib/packets.c packet_set_ipv4_addr(): checks ip_proto and the L4 size, not the "
    "fragment offset",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv4-later-fragment-rewrite",
    real_ports=(RealPort("any", "a later IPv4 fragment, whose L4 checksum state no port "
                         "claims, under mod_nw_src/mod_nw_dst (NAT of fragmented traffic)"),))

GRE_SEQ_SHARED = OvsBug(
    "gre-seq-shared",
    "GRE/ERSPAN sequence numbers come from one counter per datapath tunnel port "
    "(e.g. erspan_sys), shared by every OpenFlow tunnel port and ERSPAN session on "
    "it: the first datagram of a second session does not carry 0 (RFC 2890 §2.2) and "
    "its numbers skip those the other sessions used (draft-foschiano-erspan-03: the "
    "sequence number increments per packet per session)",
    "lib/netdev-native-tnl.c netdev_erspan_push_header() / netdev_gre_push_header(): "
    "atomic_count_inc(&dev->gre_seqno) on the netdev of the tnl_push's datapath port",
    cls="by-design", severity="cosmetic", root_cause="gre-seq-per-datapath-port",
    real_ports=(RealPort("any", "two GRE tunnel ports with seq=true, or two ERSPAN "
                         "sessions, on one datapath tunnel port"),),
    why="Linux's kernel datapath does the same: its collect_md GRE/ERSPAN devices take "
        "one counter per device (net/ipv4/ip_gre.c gre_fb_xmit(), erspan_fb_xmit(): "
        "tunnel->o_seqno); RFC 2890 §2.2 receivers accept gaps; it diverges from the "
        "ERSPAN draft's per-session counter and from vswitch.xml's wording (\"incremented "
        "by one on each outgoing packet\")")

NEIGH_SNOOP_CACHED = OvsBug(
    "neigh-snoop-cached",
    "an ARP reply that matches an installed datapath flow is not snooped, so the "
    "tunnel neighbour cache keeps a MAC it learned in between (from a received "
    "tunnel packet) and encapsulated frames go to that stale MAC instead of the one "
    "the latest ARP reply gave (RFC 826: a reply from a known sender updates its "
    "entry; upstream's own comment expects the reply to be learned)",
    "ofproto/ofproto-dpif-xlate.c: tnl_neigh_snoop() runs only in a translation with "
    "side effects (an upcall), never for a packet that hits a datapath flow",
    cls="by-design", severity="corrupts data on the wire", root_cause="neigh-snoop-slow-path",
    real_ports=(RealPort("any", "an ARP reply that matches an installed datapath flow, "
                         "after a tunnel packet from the same address re-pointed the "
                         "neighbour entry"),),
    why="snooping only in the slow path is how the tunnel neighbour cache is designed "
        "(ofproto-dpif-xlate.c); the window is narrow: a reply from the same sender that "
        "hits a cached flow right after a tunnel packet re-pointed the entry, until the "
        "entry is refreshed")

TRUNC_PENDING_CSUM = OvsBug(
    "trunc-pending-csum",
    "output(max_len) of a packet whose TCP/UDP checksum is still pending (received "
    "from a port that leaves it to the NIC, e.g. a veth with tx checksum offload) "
    "completes that checksum over the truncated bytes: the truncated copy carries a "
    "checksum of no packet (under IPv4's pseudo-header of the header's total length, "
    "IPv6's of the L4 bytes left) instead of the one the packet carries on the wire "
    "(ovs-actions(7): truncation serves mirroring to a collector, which should see the "
    "packet's first bytes; userspace-checksum-offloading.rst: OVS postpones checksum "
    "updates until the packet egresses).  No receiver can verify a truncated segment's "
    "checksum, and a NIC handed the cut packet with its pseudo-header seed computes the "
    "same value as OVS does over IPv4",
    "lib/dp-packet.h dp_packet_batch_apply_cutlen() (lib/dpif-netdev.c, at output and "
    "tnl_push) shortens the packet and keeps its offload flags; "
    "dp_packet_ol_send_prepare() then completes the checksum over what is left "
    "(lib/packets.c packet_{tcp,udp}_complete_csum())",
    cls="by-design", severity="cosmetic", root_cause="cutlen-keeps-offload-flags",
    real_ports=(RealPort("veth", "a Linux sender's UDP checksum left to the NIC "
                         "(system-traffic.at's truncate test, tso flavour)",
                         "cases/test_system_traffic_truncate.py::"
                         "test_truncate_and_output_to_gre_by_simulated_packets[tso]"),
                RealPort("tap", "the same")),
    why="a truncated segment's checksum is verifiable by no receiver, and a NIC handed the "
        "cut packet with its pseudo-header seed computes what OVS computes over IPv4; it "
        "diverges from ovs-actions(7) (the collector sees the packet's first bytes) read "
        "with CSUM-DOC (checksums postponed until the packet egresses)")

TRUNC_TUNNEL_OUTER_CSUM = OvsBug(
    "trunc-tunnel-outer-csum",
    "output(max_len) into VXLAN/Geneve with csum of a packet whose TCP/UDP checksum is "
    "still pending: OVS's outer UDP checksum is wrong for the bytes that leave, so "
    "receivers that check it drop the packet (RFC 768: the checksum covers the datagram "
    "as sent; RFC 7348 §5, RFC 8926 §3.3).  Where the cut falls in the inner TCP/UDP "
    "header or before it, the checksum sums the inner headers past the cut; over inner "
    "IPv6 with the cut in the payload, it is taken under the IPv6 header's payload length "
    "while OVS completes the inner checksum under the L4 bytes left.  (Over inner IPv4 "
    "with the cut in the payload it is right: both take the IPv4 total length.)",
    "lib/packets.c packet_udp_tunnel_csum(), after dp_packet_batch_apply_cutlen(): "
    "packet_csum_pseudoheader6() takes ip6_plen, dp_packet_get_inner_tcp_payload() "
    "reads a TCP header past the tail (dp_packet_inner_l4_size() as a size_t), the UDP "
    "branch reads udp_csum unchecked; packet_{tcp,udp}_complete_csum() take the L4 size "
    "left",
    cls="bug", severity="corrupts data on the wire", root_cause="cutlen-keeps-offload-flags",
    real_ports=(RealPort("veth", "a Linux sender's TCP/UDP checksum left to the NIC, "
                         "output with max_len into VXLAN/Geneve with csum: cut in or before "
                         "the inner L4 header, or over IPv6 out of a port without outer UDP "
                         "and inner L4 checksum offload (AF_XDP, DPDK without them)"),
                RealPort("tap", "the same")))

TRUNC_L4_CUT_CRASH = OvsBug(
    "trunc-l4-cut-crash",
    "ovs-vswitchd dies of SIGSEGV when output(max_len) cuts an IPv4 packet whose TCP/UDP "
    "checksum is pending before the TCP/UDP header starts (e.g. max_len=20 on a frame "
    "from a port that leaves L4 checksums to the NIC) and OVS or the port then completes "
    "that checksum: the L4 size it sums over is negative",
    "lib/dp-packet.h dp_packet_l4_size() (tail minus an L4 offset past the tail, as a "
    "size_t) in lib/packets.c packet_{tcp,udp}_complete_csum(), called from "
    "dp_packet_ol_send_prepare() after dp_packet_batch_apply_cutlen()",
    crash=True,
    signature=r"signal 11 \(Segmentation fault\)|SIGSEGV detected",
    cls="bug", severity="crash", root_cause="cutlen-keeps-offload-flags",
    real_ports=(RealPort("veth", "a Linux sender's TCP/UDP checksum left to the NIC, "
                         "output with max_len before its L4 header, out of a port whose "
                         "checksum OVS completes (no L4 checksum offload: AF_XDP, DPDK "
                         "without it)"),
                RealPort("tap", "the same")))

ALL = (GRE_CSUM_AT_PUSH, L4_PARTIAL_NOT_TCP_UDP, TSO_SHORT_TUNNEL_ASSERT,
       IPV4_HEADER_ONLY, GSO_CWR_EVERY_SEGMENT, IPV6_EXT_PSEUDO_HEADER, IPV4_LATER_FRAGMENT,
       GRE_SEQ_SHARED, NEIGH_SNOOP_CACHED, TSO_EMPTY_TUNNEL_CSUM, TRUNC_PENDING_CSUM,
       TRUNC_TUNNEL_OUTER_CSUM, TRUNC_L4_CUT_CRASH)


# -- where OVS deviates: the model's correct packet in, OVS's way out ----------

Change = Callable[["Packet"], None]
Completion = Callable[["Packet", "Layer"], None]


@dataclass
class Deviation:
    """How OVS makes a frame differently from the contract (datapath/model/send.py):
    `pkt` with OVS's own changes made before the checksums are completed; per
    checksum slot, OVS's own way of completing it (None: it leaves it as is);
    and the GRE checksum OVS writes."""

    bug: OvsBug
    pkt: "Packet"
    completions: dict[str, Completion | None] = field(default_factory=dict)
    gre: int | None = None
    note: str = ""


def record_change(pkt: "Packet", bug: OvsBug, change: Change, note: str) -> None:
    """Remember that OVS changes this packet otherwise than the model did (applied
    at egress to a copy: `change` finds its place from the packet's layers)."""
    pkt.ovs_changes.append((bug, change, note))


def ovs_bytes(pkt: "Packet") -> bytes:
    """The packet's bytes as OVS has them: with OVS's own changes applied."""
    if not pkt.ovs_changes:
        return bytes(pkt.data)
    changed = pkt.copy()
    for _, change, _ in pkt.ovs_changes:
        change(changed)
    return bytes(changed.data)


def check_crashes(pkt: "Packet", tx: "TxOffloads") -> None:
    """Record the aborts this packet runs into at egress (crash bugs)."""
    from datapath.model.packet import PROTO_TCP, PROTO_UDP
    from datapath.offloads import CsumState
    for lay in (pkt.outer, pkt.inner):
        if lay is not None and lay.l4_csum is CsumState.PARTIAL \
                and lay.proto not in (PROTO_TCP, PROTO_UDP):
            _add(pkt, L4_PARTIAL_NOT_TCP_UDP)
    # A cut before a pending IPv4 TCP/UDP header: completing it sums a negative size,
    # unless it is handed to a port that advertises the offload and does not do it.
    if pkt.cut is not None and pkt.cut.before_l4 and pkt.cut.flag not in tx.driver_flags():
        _add(pkt, TRUNC_L4_CUT_CRASH)
    # packet_udp_tunnel_csum() asserts that a set segment size divides the payload
    # into whole segments (dp_packet_gso_nr_segs(): DIV_ROUND_UP, 0 for no payload).
    length = _tso_tunnel_shortcut(pkt, tx)
    if length is not None and length != pkt.tso_segsz * -(-length // pkt.tso_segsz):
        _add(pkt, TSO_SHORT_TUNNEL_ASSERT)
        pkt.notes.append(f"TSO segment size {pkt.tso_segsz} still set on a tunnelled "
                         f"packet with {length} payload bytes (nothing was segmented)")


def _tso_tunnel_shortcut(pkt: "Packet", tx: "TxOffloads | None") -> int | None:
    """The inner TCP payload length where OVS's outer UDP checksum shortcut
    (packets.c packet_udp_tunnel_csum()) meets a TSO segment size: a VXLAN/Geneve
    packet whose outer UDP checksum OVS's code computes, with an inner TCP
    checksum in a valid state (a set segment size keeps the packet a tunnel one
    even with no inner checksum pending); None where it does not.  OVS's code
    computes it where the port lacks the feature, and also where netdev-dummy
    has it and does it: netdev-dummy does an offloaded checksum with OVS's own
    software path (dp_packet_ol_send_prepare()); only `_disabled` leaves it."""
    from datapath.model import gso
    from datapath.model.packet import PROTO_TCP
    from datapath.offloads import CsumState
    from datapath.model.packet import PROTO_UDP
    inn, out = pkt.inner, pkt.outer
    if not (pkt.tunnel in ("vxlan", "geneve") and inn is not None and pkt.tso_segsz
            and (tx is None or "out_udp" not in tx.driver_flags())
            and out.l4_csum is CsumState.PARTIAL and inn.l4 is not None and inn.l4_csum.valid):
        return None
    if inn.proto == PROTO_TCP:
        return gso.payload_bounds(pkt)[1]
    if inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) != 0:
        # A tunnel inside this one (its UDP header is the inner L4): OVS still
        # reads the inner TCP payload length (dp_packet_get_inner_tcp_payload
        # _length()), taking the UDP header and what follows as a TCP header.
        size = len(pkt.data) - inn.l4
        header = (pkt.data[inn.l4 + 12] >> 4) * 4 if size >= 20 else 0
        return size - header if 20 <= header <= size else 0
    return None


def deviations(pkt: "Packet", slots: list[str], tx: "TxOffloads | None" = None) -> list[Deviation]:
    """The known deviations that may apply to this packet at egress to a port
    with `tx` (send.py keeps those that change what leaves)."""
    found: list[Deviation] = []
    if "outer.UDP" in slots and _tso_tunnel_shortcut(pkt, tx) == 0:
        segsz = pkt.tso_segsz
        found.append(Deviation(TSO_EMPTY_TUNNEL_CSUM, pkt,
                               {"outer.UDP": functools.partial(_tso_empty_outer, segsz=segsz)},
                               note=f"OVS adjusts the outer UDP checksum for {segsz}-byte "
                                    "segments of a packet without payload"))
    if pkt.ovs_gre_csum is not None:
        found.append(Deviation(GRE_CSUM_AT_PUSH, pkt, gre=pkt.ovs_gre_csum,
                               note=f"OVS writes GRE checksum 0x{pkt.ovs_gre_csum:04x}, taken "
                                    "before the checksums under it were completed"))
    for name in slots:
        lay = pkt.inner if name.startswith("inner.") else pkt.outer
        if lay is None or lay.l3 is None:
            continue
        if name.endswith("IP") and lay.ipv == 4 \
                and (pkt.data[lay.l3] & 0x0F) * 4 >= lay.l3_size:
            found.append(Deviation(IPV4_HEADER_ONLY, pkt, {name: None},
                                   note=f"OVS leaves the pending {name} checksum of a "
                                        "header-only packet as it is"))
        first_nh = pkt.data[lay.l3 + 6]
        if name[-3:] in ("TCP", "UDP") and lay.ipv == 6 and first_nh != lay.proto:
            own: dict[str, Completion | None] = {
                name: functools.partial(_l4_with_proto, proto=first_nh)}
            if name.startswith("inner.") and _tunnel_csum_shortcut(pkt, slots):
                # packet_udp_tunnel_csum(): the outer UDP checksum from the inner
                # pseudo-header it takes (Next Header and payload length of the
                # IPv6 header), as if the inner checksum were right for that one.
                plen = lay.l3_size - 40
                own["outer.UDP"] = functools.partial(_lco_outer, proto=first_nh, length=plen)
            found.append(Deviation(
                IPV6_EXT_PSEUDO_HEADER, pkt, own,
                note=f"OVS completes {name} with Next Header {first_nh} in the pseudo-header"))
    for bug, change, note in pkt.ovs_changes:
        changed = pkt.copy()
        change(changed)
        found.append(Deviation(bug, changed, note=note))
    from datapath.model import cut
    found += cut.deviations(pkt, slots, tx)
    return found


def _tso_empty_outer(pkt: "Packet", outer: "Layer", segsz: int) -> None:
    """The right outer UDP checksum, then changed as if a 16-bit length under it
    went from 0 to `segsz` (RFC 1624 eqn. 3, as recalc_csum16() does): once for
    the outer pseudo-header, once more for an inner IPv6 payload length; a
    result of 0 is sent as 0xffff (RFC 768)."""
    from datapath.model import csum
    pkt.set_l4_csum(outer)
    ofs = outer.l4_csum_ofs
    times = 2 if pkt.inner is not None and pkt.inner.ipv == 6 else 1
    for _ in range(times):
        pkt.put16(ofs, csum.incremental(pkt.u16(ofs), (0).to_bytes(2, "big"),
                                        segsz.to_bytes(2, "big")))
    if pkt.u16(ofs) == 0:
        pkt.put16(ofs, 0xFFFF)


def _l4_with_proto(pkt: "Packet", lay: "Layer", proto: int) -> None:
    pkt.set_l4_csum(lay, pseudo_proto=proto)


def _tunnel_csum_shortcut(pkt: "Packet", slots: list[str]) -> bool:
    """Whether OVS computes the outer UDP checksum of this packet by its
    nested-checksum shortcut (packets.c packet_udp_tunnel_csum())."""
    from datapath.model.packet import PROTO_TCP, PROTO_UDP
    inn = pkt.inner
    return (pkt.tunnel in ("vxlan", "geneve") and "outer.UDP" in slots and inn is not None
            and inn.l4 is not None and inn.l4_csum.valid
            and (inn.proto == PROTO_TCP
                 or (inn.proto == PROTO_UDP and pkt.u16(inn.l4_csum_ofs) != 0)))


def _lco_outer(pkt: "Packet", outer: "Layer", proto: int, length: int) -> None:
    """The outer UDP checksum for an inner L4 checksum right under a pseudo-header
    with `proto` and `length` (the inner bytes otherwise as they are)."""
    from datapath.model import csum
    from datapath.offloads import CsumState
    tmp = pkt.copy()
    assert tmp.inner is not None and tmp.inner.l4 is not None
    tmp.set_l4_csum(tmp.inner, pseudo_proto=proto, pseudo_len=length)
    tmp.put16(outer.l4_csum_ofs, 0)
    pkt.put16(outer.l4_csum_ofs, csum.finish(tmp.l4_sum(tmp.outer)) or 0xFFFF)
    outer.l4_csum = CsumState.GOOD


def merge(pkt: "Packet", found: list[Deviation]) -> Deviation:
    """All of OVS's deviations for this packet, as one."""
    trunc = next((d for d in found
                  if d.bug in (TRUNC_PENDING_CSUM, TRUNC_TUNNEL_OUTER_CSUM)), None)
    base = (trunc.pkt if trunc is not None else pkt).copy()
    for bug, change, _ in pkt.ovs_changes:
        change(base)
    gre = next((d.gre for d in found if d.gre is not None), None)
    completions: dict[str, Completion | None] = {}
    for d in found:
        completions.update(d.completions)
    return Deviation(found[0].bug, base, completions, gre)


def _add(pkt: "Packet", bug: OvsBug) -> None:
    if bug not in pkt.bugs:
        pkt.bugs.append(bug)

