"""Known deviations of OVS from correct behaviour, found by this suite.

The model computes what a correct datapath must emit.  Where OVS is known to
do otherwise, the model also says exactly what OVS emits instead (or that it
aborts), and names the bug.  A case then passes as xfail only if OVS shows
precisely that deviation; if OVS behaves correctly the case fails, asking for
the entry to be retired or re-scoped.  Each entry says where in OVS the
behaviour comes from, and on which OVS releases it was seen.
"""
from __future__ import annotations

from dataclasses import dataclass

# The OVS release this list was last checked against, entry by entry.  The
# launcher says so when the runtime's OVS is another one.
VALIDATED_ON = "4.0.0"


@dataclass(frozen=True)
class OvsBug:
    key: str
    title: str
    where: str
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
                "seen_in": ", ".join(self.seen_in)}


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

ALL = (GRE_CSUM_AT_PUSH, L4_PARTIAL_NOT_TCP_UDP, TSO_SHORT_TUNNEL_ASSERT)
