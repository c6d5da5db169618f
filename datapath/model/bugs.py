"""Known deviations of OVS from correct behaviour, found by this suite.

The model computes what a correct datapath must emit.  Where OVS is known to
do otherwise, the model also says exactly what OVS emits instead (or that it
aborts), and names the bug.  A case then passes as xfail only if OVS shows
precisely that deviation; if OVS behaves correctly the case fails, asking for
the entry to be retired.  Each entry says where in OVS the behaviour comes from.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OvsBug:
    key: str
    title: str
    where: str
    crash: bool = False  # ovs-vswitchd aborts instead of sending
    # For a crash: a regex the daemon's log or stderr must show, so that only
    # this abort counts as the known bug (any other death stays a failure).
    signature: str = ""

    def reason(self) -> str:
        return f"known OVS bug [{self.key}]: {self.title} ({self.where})"


GRE_CSUM_AT_PUSH = OvsBug(
    "gre-csum-at-push",
    "the GRE checksum is computed when the header is pushed, over inner checksums "
    "that are only finished at send, so it does not match the bytes on the wire",
    "lib/netdev-native-tnl.c netdev_gre_push_header()")

L4_PARTIAL_NOT_TCP_UDP = OvsBug(
    "l4-partial-assert",
    "ovs-vswitchd aborts when it sends a packet whose L4 checksum is flagged "
    "partial but which is neither TCP nor UDP (e.g. ICMP from a port that marks "
    "every packet L4-partial)",
    "lib/dp-packet.c dp_packet_ol_send_prepare(): ovs_assert(dp_packet_l4_proto_sctp(p)), "
    "and ovs_assert(dp_packet_inner_l4_proto_sctp(p)) for the inner packet of a tunnel",
    crash=True,
    signature=r"assertion dp_packet_(inner_)?l4_proto_sctp\(p\) failed in "
              r"dp_packet_ol_send_prepare")

TSO_SHORT_TUNNEL_ASSERT = OvsBug(
    "tso-short-tunnel-assert",
    "ovs-vswitchd aborts when a VXLAN/Geneve packet with an outer UDP checksum carries "
    "a TSO segment size but less payload than one segment (nothing to segment, so the "
    "segment size stays set and the outer checksum shortcut asserts on it)",
    "lib/packets.c packet_udp_tunnel_csum(): "
    "ovs_assert(payload_len == tso_segsz * dp_packet_gso_nr_segs(p))",
    crash=True,
    signature=r"assertion payload_len == tso_segsz \* dp_packet_gso_nr_segs\(p\) failed "
              r"in packet_udp_tunnel_csum")

GRE_SEQ_SHARED = OvsBug(
    "gre-seq-shared",
    "GRE/ERSPAN sequence numbers come from one counter per datapath tunnel port "
    "(e.g. erspan_sys), shared by every OpenFlow tunnel port and ERSPAN session on "
    "it: the first datagram of a second session does not carry 0 (RFC 2890 §2.2) and "
    "its numbers skip those the other sessions used (draft-foschiano-erspan-03: the "
    "sequence number increments per packet per session)",
    "lib/netdev-native-tnl.c netdev_erspan_push_header() / netdev_gre_push_header(): "
    "atomic_count_inc(&dev->gre_seqno) on the netdev of the tnl_push's datapath port")

NEIGH_SNOOP_CACHED = OvsBug(
    "neigh-snoop-cached",
    "an ARP reply that matches an installed datapath flow is not snooped, so the "
    "tunnel neighbour cache keeps a MAC it learned in between (from a received "
    "tunnel packet) and encapsulated frames go to that stale MAC instead of the one "
    "the latest ARP reply gave (RFC 826: a reply from a known sender updates its "
    "entry; upstream's own comment expects the reply to be learned)",
    "ofproto/ofproto-dpif-xlate.c: tnl_neigh_snoop() runs only in a translation with "
    "side effects (an upcall), never for a packet that hits a datapath flow")

ALL = (GRE_CSUM_AT_PUSH, L4_PARTIAL_NOT_TCP_UDP, TSO_SHORT_TUNNEL_ASSERT, GRE_SEQ_SHARED,
       NEIGH_SNOOP_CACHED)
