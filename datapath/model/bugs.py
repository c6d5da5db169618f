"""Known deviations of OVS from correct behaviour, found by this suite: the catalogue.

The model computes what a correct datapath must emit, with none of these in
view: it does not import this module, and this module imports nothing (it is
data; tooling/launcher.py reads VALIDATED_ON from it by path, export/readme.py
loads it by path).  What OVS emits
instead (or that it aborts) is datapath/deviations/, the layer above the model,
which names these entries.  A case then passes as xfail only if OVS shows
precisely that deviation; if OVS behaves correctly the case fails, asking for
the entry to be retired or re-scoped.  Each entry says where in OVS the
behaviour comes from, and on which OVS releases it was seen; and, as a sceptical
maintainer would ask: its class (a bug, a divergence OVS may keep by design, or
latent: no real port produces the input), its severity, the real port kinds that
can produce its input (with the case that shows it here, or the sources the
claim rests on), and its root-cause group (one fix, one group); the rule it
breaks and how it was found.  These fields are the one place each fact is
written: export/writeup.py (an upstream report) and the README's known-bug
section (export/readme.py) are made from them.

The entries come in sections, one per area of OVS, each holding whole root-cause
groups: offload (checksums and TSO), truncation (output max_len), conntrack,
tunnel state and ofproto; the record types and the vocabulary come first, the
fix hints of the groups and ALL last.
"""

# ---- the vocabulary and the record types ----------------------------------------

# The OVS release this list was last checked against, entry by entry.  The
# launcher says so when the runtime's OVS is another one.
VALIDATED_ON = "4.0.0"

# What an entry is (issue 18), in the words the write-up and the README use: a bug
# a maintainer would accept; a divergence from a standard or from OVS's
# documentation that OVS may keep by design; or latent, where no real port
# produces the input (only netdev-dummy's options reach it).
CLASS_MEANING = {"bug": "a bug",
                 "by-design": "a divergence from a standard or from OVS's documentation that "
                              "OVS may keep by design",
                 "latent": "latent: no real port hands OVS its input"}
CLASSES = tuple(CLASS_MEANING)
SEVERITIES = ("crash", "hangs the daemon", "breaks isolation", "corrupts data on the wire",
              "loses packets", "wrong counters", "cosmetic")
# "breaks isolation": a packet leaves where the flow table keeps it out, or with
# what the flow table takes away (its untranslated addresses out of a NAT, a
# frame into another VLAN domain): what the table's author relied on for security.
# Real port kinds; "any" for an input every kind can carry.
PORT_KINDS = ("tap", "veth", "vhost-user", "afxdp", "dpdk", "any")

# How the usual real ports hand OVS a TCP/UDP checksum to complete (partial).
LINUX_PARTIAL = ("a Linux sender's TCP/UDP checksum left to the NIC: virtio-net NEEDS_CSUM, "
                 "which netdev_linux_parse_vnet_hdr() marks partial")
VHOST_PARTIAL = ("a guest's checksum offload: NEEDS_CSUM, which DPDK's vhost library "
                 "(compliant ol_flags) marks RX_L4_CKSUM_NONE, OVS's partial")

# The documents an entry's rule cites (OVS's own, besides the RFCs).
CSUM_DOC = "Documentation/topics/userspace-checksum-offloading.rst"
TSO_DOC = "Documentation/topics/userspace-tso.rst"

# Why a tunnel entry has no case on a tap port (issue 18's real-port evidence).
TAP_RIG = ("no case on a tap: on the tap backend the tunnel rig's p1 is a veth "
           "(fixtures/tap_tunnel.py), and a tap's NEEDS_CSUM reaches the same "
           "netdev_linux_parse_vnet_hdr()")


class _Record:
    """A frozen record compared by its fields (a dataclass without the import)."""

    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Record) and type(other) is type(self) \
            and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({args})"


class RealPort(_Record):
    """A real port kind that can hand OVS a bug's input: how, and the case that
    shows it on that kind on this machine ("": not shown by a case yet; `how`
    then says which sources the claim rests on and why no case shows it here).
    A case is a pytest node id, after "--backend NAME " where the id runs on
    real ports only with that backend (the shared matrices run on netdev-dummy
    by default); it xfails on this entry alone."""

    __slots__ = ("kind", "how", "case")
    kind: str
    how: str
    case: str

    def __init__(self, kind: str, how: str, case: str = "") -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "how", how)
        object.__setattr__(self, "case", case)

    @property
    def node_id(self) -> str:
        """The case's pytest node id, without the backend it runs with."""
        return self.case.split()[-1] if self.case else ""

    @property
    def backend(self) -> str:
        """The --backend the case runs on real ports with ("" where any does)."""
        words = self.case.split()
        return words[1] if len(words) == 3 and words[0] == "--backend" else ""

    def text(self) -> str:
        shown = f"shown by {self.node_id}" + (f" with --backend {self.backend}"
                                              if self.backend else "")
        return f"{self.kind} ({self.how}; " + (f"{shown})" if self.case
                                               else "not shown by a case yet)")


class OvsBug(_Record):
    """One entry: what OVS does wrong and where, its class, severity, real port
    kinds and root-cause group; for a crash, the log line that proves it."""

    __slots__ = ("key", "title", "where", "cls", "severity", "real_ports", "root_cause",
                 "why", "crash", "signature", "seen_in", "frames_only", "rule", "at_title",
                 "found_by", "notes")
    key: str
    title: str
    where: str
    cls: str  # one of CLASSES
    severity: str  # one of SEVERITIES
    real_ports: tuple[RealPort, ...]  # empty for a latent entry
    root_cause: str  # one fix, one group: entries a single fix cures share it
    why: str  # the evidence for the class, where it is not "bug"
    crash: bool  # ovs-vswitchd aborts instead of sending
    # For a crash: a regex the daemon's log or stderr must show, so that only
    # this abort counts as the known bug (any other death stays a failure).
    signature: str
    seen_in: tuple[str, ...]  # OVS releases it was confirmed on
    # Its whole effect is in the bytes of the frames OVS sends (a checksum or a
    # field wrong, a frame not sent): nothing OVS keeps (flows, caches, conntrack
    # entries, sequence numbers, memory, the daemon's health) differs from a run
    # without it, so a shared rig that showed only such bugs serves the next id
    # (fixtures/case_scope.py).  Never for a crash.
    frames_only: bool
    # The rule it breaks, from the RFCs and OVS's own documentation (the model's
    # sources, never OVS's code), as the write-up of an exported test states it;
    # and that test's AT_SETUP title (after "dpif-netdev - ").  "" where none is
    # written yet (only a by-design or latent entry may lack one).
    rule: str
    at_title: str
    found_by: str  # which of this suite's cases or explorations found it
    # Further facts a reviewer needs: upstream's own tests and the entry, how its
    # fix was verified, where the suite works around it.
    notes: tuple[str, ...]

    def __init__(self, key: str, title: str, where: str, *, cls: str, severity: str,
                 real_ports: tuple[RealPort, ...], root_cause: str, why: str = "",
                 crash: bool = False, signature: str = "",
                 seen_in: tuple[str, ...] = (VALIDATED_ON,), frames_only: bool = False,
                 rule: str = "", at_title: str = "", found_by: str = "",
                 notes: tuple[str, ...] = ()) -> None:
        for name, value in (("key", key), ("title", title), ("where", where), ("cls", cls),
                            ("severity", severity), ("real_ports", real_ports),
                            ("root_cause", root_cause), ("why", why), ("crash", crash),
                            ("signature", signature), ("seen_in", seen_in),
                            ("frames_only", frames_only), ("rule", rule),
                            ("at_title", at_title), ("found_by", found_by), ("notes", notes)):
            object.__setattr__(self, name, value)

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
                "why": self.why, "found_by": self.found_by, "notes": " ".join(self.notes)}


# ---- offload ---------------------------------------------------------------
# checksum and segmentation offload: the checksums OVS completes or leaves to a port, and software
# segmentation (TSO).

GRE_CSUM_AT_PUSH = OvsBug(
    "gre-csum-at-push",
    "the GRE checksum is computed when the header is pushed, over inner checksums "
    "that are only finished at send (and before the sequence number is written), and "
    "again per segment in software segmentation over inner checksums just marked "
    "pending, so it does not match the bytes on the wire",
    "lib/netdev-native-tnl.c netdev_gre_push_header(), lib/dp-packet-gso.c "
    "dp_packet_gso_update_segment()",
    cls="bug", severity="corrupts data on the wire", root_cause="gre-csum-at-push",
    frames_only=True,
    real_ports=(RealPort("veth", LINUX_PARTIAL + ", NATed (mod_nw_dst) and pushed into GRE "
                         "with csum", "--backend tap cases/matrices/test_edges.py::"
                         "test_l4_partial_into_tunnel[udp_odd-in4-gre-ul4-csum_on]"),
                RealPort("tap", LINUX_PARTIAL + "; " + TAP_RIG),
                RealPort("vhost-user", VHOST_PARTIAL + " (dpdk-testpmd's csum engine), NATed "
                         "and pushed into GRE with csum out of net_pcap",
                         "--backend dpdk cases/real_ports/test_vhost_guest_crash.py::"
                         "test_guest_udp_nat_into_gre_csum")),
    at_title="gre tunnel - csum covers the inner packet as sent",
    rule="RFC 2784 section 2.5: the GRE Checksum field \"contains the IP (one's "
        "complement) checksum sum of the all the 16 bit words in the GRE header and the "
        "payload packet\" (RFC 1071 arithmetic), i.e. of the bytes on the wire, the "
        "Sequence Number (RFC 2890) included.  "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\", so an inner checksum that is still pending when the GRE header is "
        "pushed (or, in software segmentation, when a segment is cut) changes the payload "
        "after the GRE checksum was taken.  A receiver that checks GRE checksums (RFC "
        "2784 section 2.5) drops the packet.",
    notes=("Upstream's own `tunnel tso fallback` expectations (tests/dpif-netdev.at) "
           "encode the wrong values: 7 of its 48 frames; the fix corrects them.",))

L4_PARTIAL_NOT_TCP_UDP = OvsBug(
    "l4-partial-assert",
    "ovs-vswitchd aborts when it sends a packet whose L4 checksum is flagged "
    "partial but in which flow extraction marked no L4 protocol: neither TCP nor UDP "
    "(e.g. ICMP from a port that marks every packet L4-partial), a TCP header with a "
    "data offset below 5, or an IP packet whose length field exceeds the frame",
    "lib/dp-packet.c dp_packet_ol_send_prepare(): ovs_assert(dp_packet_l4_proto_sctp(p)), "
    "and ovs_assert(dp_packet_inner_l4_proto_sctp(p)) for the inner packet of a tunnel "
    "(lib/netdev-dpdk.c netdev_dpdk_prep_hwol_packet() asserts the same: ovs_assert(is_sctp)); "
    "lib/flow.c miniflow_extract() marks no L4 protocol but keeps the netdev's L4 flags",
    crash=True,
    signature=r"assertion dp_packet_(inner_)?l4_proto_sctp\(p\) failed in "
              r"dp_packet_ol_send_prepare",
    cls="bug", severity="crash", root_cause="l4-partial-unknown-proto",
    real_ports=(RealPort(
        "vhost-user", "a guest's TCP segment with a data offset below 5 and NEEDS_CSUM "
        "(dpdk-testpmd's csum engine over virtio-user); DPDK 25.11's vhost_dequeue_offload() "
        "classifies it TCP by the IP protocol (rte_net_get_ptype(), l4_len from the data "
        "offset, no minimum) and marks it RX_L4_CKSUM_NONE, OVS's partial, while "
        "miniflow_extract() sets OVS's TCP flag only for a header of at least 20 bytes; "
        "the abort comes once the port has a non-simple megaflow (before that, "
        "dfc_processing()'s simple-match pre-parse, parse_tcp_flags(), sets the TCP flag "
        "for any 20 bytes): a guest-triggerable abort",
        "--backend dpdk cases/real_ports/test_vhost_guest_crash.py::"
        "test_guest_tcp_short_data_offset[doff4]"),
        RealPort(
        "vhost-user", "a guest's IPv4 or IPv6 UDP datagram whose Total Length or Payload "
        "Length exceeds the frame, with NEEDS_CSUM (dpdk-testpmd's csum engine): "
        "rte_net_get_ptype() does not compare the length field with the frame, so DPDK marks "
        "it RX_L4_CKSUM_NONE, while neither miniflow_extract() nor parse_tcp_flags() takes "
        "it for IP; the abort comes on the first packet, simple match or not",
        "--backend dpdk cases/real_ports/test_vhost_guest_crash.py::"
        "test_guest_ip_length_exceeds_frame[ipv4]")),
    why="netdev-dummy's ol_l4_rx_csum_set_partial marks every packet partial (ICMP, ARP); "
        "netdev-linux marks a packet partial only for TCP/UDP/SCTP at OVS's L4 offset and "
        "checksums any other in software, so tap/veth cannot reach it",
    at_title="l4 csum partial flag on a packet that is not tcp or udp",
    rule=f"{CSUM_DOC}: \"Open vSwitch strives to forward packets as they arrive "
        "regardless of whether the checksum is correct or not\" and rule 1, \"OVS should "
        "strive to forward all packets regardless of checksum\".  ARP (RFC 826) has no "
        "checksum and ICMP/ICMPv6 (RFC 792, RFC 4443) are not an L4 checksum a netdev "
        "offloads: there is nothing to finish, and a flag a port stamps on what it "
        "receives must not abort the daemon.  The packet must leave unchanged; so must "
        "one whose IP length field exceeds the frame (RFC 1812 section 5.2.2: no IP "
        "packet to process).  A TCP segment with a data offset below 5 still has its "
        "checksum at its place, over the whole segment (RFC 9293 section 3.1): it is "
        "completed.")

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
        "vhost-user", "a guest's ordinary TSO packet (dpdk-testpmd's csum engine over "
        "virtio-user, VIRTIO_NET_HDR_GSO_TCPV4) cut below one segment by "
        "output(port=VXLAN,max_len=N), options:csum=true, out of a port without outer UDP "
        "checksum offload (userspace-tso-enable); a guest whose gso_size exceeds its payload "
        "would too (DPDK 25.11's vhost library copies gso_size unchecked), but testpmd sets "
        "TSO only above one segment of payload, and an Ethernet trailer is segmented as "
        "payload.  From the sources, a guest that negotiated only checksum offload reaches "
        "it too: vhost_dequeue_offload() honours the GSO fields whenever any host offload is "
        "negotiated (it does not check VIRTIO_NET_F_HOST_TSO4/6, which OVS disables with "
        "userspace TSO off), and with userspace TSO off OVS segments nothing, so "
        "packet_udp_tunnel_csum() asserts on any such packet whose payload is not a whole "
        "number of segments; dpdk-testpmd cannot play that guest (ethdev refuses TCP_TSO on "
        "a port that did not negotiate it, and its csum engine sets TSO only with it)",
        "--backend dpdk cases/real_ports/test_vhost_guest_crash.py::"
        "test_guest_tso_truncated_into_vxlan_csum[cut200]"),),
    why="dp_packet_gso__() returns for n_segs <= 1 without clearing the segment size; "
        "a Linux sender never makes such a packet itself (the TCP stack sets gso only above "
        "one MSS); output(max_len) cutting a TSO packet below one segment makes one, which "
        "tap/veth with userspace TSO could then reach too (not shown by a case here)",
    at_title="tunnel tso - udp tunnel csum with less payload than one segment",
    rule=f"{TSO_DOC}: a TSO packet sent over a port that cannot segment is segmented in "
        "software; a payload no longer than the segment size is one segment, sent as "
        "it is.  Its outer UDP checksum must then be valid for that frame: RFC 768 "
        "(UDP checksum), RFC 7348 section 5 for VXLAN and RFC 8926 section 3.3 for "
        "Geneve (a non-zero UDP checksum \"MUST be correctly calculated across the "
        "entire packet\"), RFC 8200 section 8.1 over IPv6.  The daemon must not abort.")

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
    frames_only=True,
    real_ports=(RealPort(
        "vhost-user", "from the sources: a guest's TSO packet without TCP payload (a bare "
        "ACK with gso_size), which DPDK 25.11's vhost library passes on; no case here: "
        "dpdk-testpmd's csum engine sets TSO only on a frame longer than its headers plus "
        "one segment, and the other way, output(max_len) cutting a guest's TSO packet to "
        "its headers into VXLAN with csum, the model does not judge (datapath/model/cut.py "
        "raises NotImplementedError for output max_len of a TSO packet)"),),
    why="the same cause as tso-short-tunnel-assert: dp_packet_gso__() leaves the segment "
        "size on a packet it does not segment; with no payload dp_packet_gso_nr_segs() is 0, "
        "so the assert holds and the adjustment goes through",
    at_title="tunnel tso - udp tunnel csum of a packet without payload",
    rule=f"{TSO_DOC}: a TSO packet sent over a port that cannot segment is segmented in "
        "software; one without payload is nothing to segment and leaves as it is.  Its "
        "outer UDP checksum must be valid for that frame: RFC 768, RFC 7348 section 5 "
        "for VXLAN and RFC 8926 section 3.3 for Geneve (a non-zero UDP checksum \"MUST "
        "be correctly calculated across the entire packet\").  OVS adjusts it for a "
        "segment-size payload the packet does not have, and receivers drop it.",
    found_by="the nested-tunnel exploration")

IPV4_HEADER_ONLY = OvsBug(
    "ipv4-header-only-csum",
    "an IPv4 packet without payload (total length = header length) whose header checksum is "
    "pending leaves with the stale checksum: OVS skips the header and marks it good "
    "(RFC 791 §3.1: every IPv4 header carries a correct checksum)",
    "lib/dp-packet.h dp_packet_ip_set_header_csum(): computes only if ip_hdr_len < l3 size",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv4-header-only-csum",
    frames_only=True,
    real_ports=(RealPort(
        "dpdk", "an ethdev that validates IPv4 header checksums on rx (net_tap, NICs): "
        "RX_IP_CKSUM_GOOD, then mod_nw_src/mod_nw_dst makes the checksum pending, out of a "
        "port without IPv4 checksum offload (OVS computes it); from the sources: here the "
        "DPDK ports are net_tap, which offer IPv4 checksum offload and compute it right "
        "(a header-only packet through two net_tap ports leaves with a right checksum), "
        "and net_pcap, which stamps no rx flag"),),
    at_title="ip csum offload - header without payload",
    rule="RFC 791 section 3.1: the header checksum covers the header and must be correct "
        f"in every IPv4 packet, whatever follows it.  {CSUM_DOC}: a checksum OVS postponed "
        "is completed at egress by OVS or the port.  A header-only packet (total length = "
        "header length) leaves with the stale checksum, and receivers drop it.")

GSO_CWR_EVERY_SEGMENT = OvsBug(
    "gso-cwr-every-segment",
    "software segmentation copies the TCP CWR flag into every segment; it belongs on the "
    "first only (RFC 3168 §6.1.2: CWR marks the first new data packet after the window "
    "reduction; Linux GSO and NIC TSO clear it on the others)",
    "lib/dp-packet-gso.c dp_packet_gso_update_segment(): clears only PSH and FIN",
    cls="latent", severity="corrupts data on the wire", root_cause="gso-cwr-every-segment",
    frames_only=True,
    real_ports=(),
    why="no real port hands OVS a TSO packet with CWR set: netdev-linux refuses a "
        "VIRTIO_NET_HDR_GSO_ECN gso_type (ENOTSUP), its tap offload request has no "
        "TUN_F_TSO_ECN, and OVS disables VIRTIO_NET_F_HOST_ECN on vhost-user ports with TSO "
        "(a guest breaking virtio 1.1 5.1.6.2 could still send one: DPDK masks the ECN "
        "bit).  For AccECN flows (RFC 9768) CWR is part of the ACE counter and Linux keeps "
        "it on every segment (SKB_GSO_TCP_ACCECN); RFC 3168 §6.1.2 holds for classic ECN",
    at_title="tso - CWR on the first segment only",
    rule="RFC 3168 section 6.1.2: the TCP sender sets CWR in the first new data packet "
        "after it reduced its window.  Segmenting one TSO packet into several must keep "
        "CWR on the first segment only, as Linux GSO (tcp_gso_segment) and NIC TSO do; "
        "a CWR on every segment tells the receiver of several window reductions.")

IPV6_EXT_PSEUDO_HEADER = OvsBug(
    "ipv6-ext-pseudo-header",
    "a TCP or UDP checksum OVS completes over IPv6 with extension headers uses the IPv6 "
    "header's Next Header (the first extension header's type) in the pseudo-header "
    "instead of the upper-layer protocol, so it is wrong on the wire (RFC 8200 §8.1: "
    "the pseudo-header carries the upper-layer protocol, 6 or 17)",
    "lib/packets.c packet_tcp_complete_csum(), packet_udp_complete_csum(): "
    "packet_csum_upperlayer6(ip6, ..., ip6->ip6_nxt, ...); packet_csum_pseudoheader6() "
    "(ip6_nxt and ip6_plen) in its other users: packet_udp_tunnel_csum() (the VXLAN/Geneve "
    "outer checksum over an inner IPv6 packet with extension headers), "
    "lib/netdev-native-tnl.c udp_extract_tnl_md() (a UDP tunnel packet received over IPv6 "
    "with extension headers fails the check and is dropped) and lib/netdev-linux.c "
    "netdev_linux_prepend_vnet_hdr() (the checksum seed a Linux port completes)",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv6-ext-pseudo-header",
    frames_only=True,
    real_ports=(RealPort("veth", LINUX_PARTIAL + ", over IPv6 with an extension header "
                         "(e.g. destination options), out of a port without L4 checksum "
                         "offload (here: pushed into GRE)", "--backend tap cases/matrices/test_edges.py::"
                         "test_l4_partial_into_tunnel[ext_dst_udp-in6-gre-ul4-csum_off]"),
                RealPort("tap", "the same, forwarded to a veth without tx checksumming",
                         "--backend tap cases/dpif_netdev/test_csum_offload.py::"
                         "test_l4_partial_behind_ipv6_extension_header[ext_dst_udp]"),
                RealPort("vhost-user", VHOST_PARTIAL + "; rte_net_get_ptype() walks "
                         "the extension headers (dpdk-testpmd's csum engine, out of net_pcap)",
                         "--backend dpdk cases/real_ports/test_vhost_guest_crash.py::"
                         "test_guest_udp_behind_ipv6_extension_header")),
    at_title="IPv6 csum with extension headers - pseudo-header next header",
    rule="RFC 8200 section 8.1: the pseudo-header's Next Header is \"the upper-layer "
        "protocol\" (6 for TCP, 17 for UDP), which \"will differ from the Next Header value "
        "in the IPv6 header if there are extension headers\", and its length is the "
        "upper-layer packet's.  A checksum completed with the first extension header's "
        "type is wrong on the wire, and receivers drop the packet.")

IPV4_LATER_FRAGMENT = OvsBug(
    "ipv4-later-fragment-rewrite",
    "mod_nw_src/mod_nw_dst on a later IPv4 fragment (offset > 0, no TCP/UDP header) "
    "'updates' the TCP/UDP checksum it takes to be at its usual place in the payload: it "
    "corrupts two payload bytes of the fragment, so the reassembled datagram is wrong "
    "(RFC 791 §3.2: only the first fragment carries the upper-layer header)",
    "lib/packets.c packet_set_ipv4_addr(): checks ip_proto and the L4 size, not the "
    "fragment offset",
    cls="bug", severity="corrupts data on the wire", root_cause="ipv4-later-fragment-rewrite",
    frames_only=True,
    real_ports=(RealPort("any", "a later IPv4 fragment, whose L4 checksum state no port "
                         "claims, under mod_nw_src/mod_nw_dst (NAT of fragmented traffic); "
                         "here from a veth into VXLAN",
                         "--backend tap cases/matrices/test_edges.py::"
                         "test_edge_frames[frag_later-in4-vxlan-ul4-tx_none-rx_none]"),),
    at_title="ip address rewrite of a later fragment",
    rule="RFC 791 section 3.2: only the first fragment carries the upper-layer header; a "
        "later fragment's payload is data.  Rewriting an address changes the TCP/UDP "
        "checksum of the whole datagram, which lives in the first fragment only; a later "
        "fragment must be left as it is apart from its IP header.  Patching two payload "
        "bytes corrupts the reassembled datagram.")

TUNNEL_CSUM_TRUSTS_RX_GOOD = OvsBug(
    "tunnel-csum-trusts-rx-good",
    "the outer UDP checksum OVS computes for a VXLAN/Geneve packet is taken as if the "
    "inner checksums the rx port flagged good were right: where the port flagged a wrong "
    "one good, the outer checksum is wrong for the bytes that leave (RFC 768, RFC 8200 "
    "§8.1: it covers the datagram as sent), so the tunnel endpoint drops the packet "
    "instead of the inner receiver",
    "lib/packets.c packet_udp_tunnel_csum(): sums the inner pseudo-header and the inner "
    "checksum it recomputes in place of the one in the packet, and no inner IPv4 header "
    "whose checksum is flagged valid",
    cls="latent", severity="wrong counters", root_cause="tunnel-csum-trusts-rx-flags",
    frames_only=True,
    real_ports=(),
    why="no real port flags a wrong checksum good: DPDK 25.11's vhost library never marks "
        "one good (lib/vhost/virtio_net.c vhost_dequeue_offload(): RX_IP_CKSUM_UNKNOWN, and "
        "RX_L4_CKSUM_NONE for NEEDS_CSUM; VIRTIO_NET_HDR_F_DATA_VALID, which a driver must not "
        "set on transmit (virtio 1.1 5.1.6.2.1), is ignored as the device must ignore flag bits "
        "it does not recognise), netdev-linux reads only NEEDS_CSUM from a virtio-net header "
        "and marks good only a checksum it computed itself, and an ethdev flags good only what "
        "it verified; only netdev-dummy's ol_l4_rx_csum_set_good on a wrong checksum reaches "
        "it.  It would be by design even then: userspace-checksum-offloading.rst (rules 3-4) "
        "defines the good flag as 'present in the packet and good', and the packet is lost "
        "either way (its inner checksum is wrong); what changes is where it is dropped and "
        "which receiver's checksum error counters count it",
    found_by="the nested exploration's saved regression a3307c2bc8 (an inner IPv4 "
             "checksum wrong but flagged good, under VXLAN with csum and a second VXLAN), "
             "once the model stopped allowing that shortcut (issue 18)")


# ---- truncation ------------------------------------------------------------
# output(max_len): the cut copy keeps the offload flags of the whole packet (root-cause group
# cutlen-keeps-offload-flags).

TRUNC_PENDING_CSUM = OvsBug(
    "trunc-pending-csum",
    "output(max_len) of a packet whose TCP/UDP checksum is still pending (received "
    "from a port that leaves it to the NIC, e.g. a veth with tx checksum offload) "
    "completes that checksum over the truncated bytes: the truncated copy carries a "
    "checksum of no packet (under IPv4's pseudo-header of the header's total length, "
    "IPv6's of the L4 bytes left, or, where a Linux port completes it from OVS's seed, of "
    "the header's payload length) instead of the one the packet carries on the wire "
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
    frames_only=True,
    real_ports=(RealPort("veth", "a Linux sender's UDP checksum left to the NIC "
                         "(system-traffic.at's truncate test, tso flavour)",
                         "--backend tap cases/system_userspace/test_system_traffic_truncate.py::"
                         "test_truncate_and_output_to_gre_by_simulated_packets[tso]"),
                RealPort("veth", "the same into two veth loops (system-traffic.at's basic "
                         "truncate action, tso flavour)",
                         "--backend tap cases/system_userspace/test_system_traffic_truncate.py::"
                         "test_basic_truncate_action[tso]"),
                RealPort("tap", "the same, to a veth without tx checksumming",
                         "--backend tap cases/matrices/test_truncate.py::"
                         "test_output_max_len[tx_none-tcp4-rx_partial-max_len64]"),
                RealPort("veth", "the same into VXLAN, to a veth with tx checksumming: OVS "
                         "hands it the checksum with its seed (the IP header's lengths), so "
                         "over IPv6 the veth completes it under the header's payload length",
                         "--backend tap cases/matrices/test_truncate.py::"
                         "test_output_max_len_into_tunnel[tx_l4-vxlan-ul4-tcp6-max_len80]")),
    why="a truncated segment's checksum is verifiable by no receiver, and a NIC handed the "
        "cut packet with its pseudo-header seed computes what OVS computes over IPv4; it "
        "diverges from ovs-actions(7) (the collector sees the packet's first bytes) read "
        "with CSUM-DOC (checksums postponed until the packet egresses)",
    at_title="output max_len - pending l4 csum of the truncated packet",
    rule="Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output ... meant for use in "
        "monitoring applications, e.g. for mirroring packets to a collector\".  The "
        "collector must see the packet's first bytes as the packet is on the wire; "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\", so a checksum still pending at the cut must be the one the whole "
        "packet gets (RFC 768, RFC 9293 section 3.1, RFC 8200 section 8.1).  OVS computes "
        "it over the bytes left after the cut instead: a value no packet carries.",
    found_by="system-traffic.at's truncate test in the tso flavour")

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
    frames_only=True,
    real_ports=(RealPort("veth", "a Linux sender's TCP/UDP checksum left to the NIC, "
                         "output with max_len into VXLAN/Geneve with csum: cut in or before "
                         "the inner L4 header, or over IPv6 out of a port without outer UDP "
                         "and inner L4 checksum offload (AF_XDP, DPDK without them, a veth "
                         "without tx checksumming)", "--backend tap cases/matrices/test_truncate.py::"
                         "test_output_max_len_into_tunnel[tx_none-vxlan-ul4-udp6-max_len40]"),
                RealPort("tap", "the same; " + TAP_RIG)),
    at_title="output max_len - udp tunnel csum of the truncated packet",
    rule="RFC 768: the UDP checksum covers the pseudo-header, the UDP header and the data "
        "as sent; RFC 7348 section 5 (VXLAN) and RFC 8926 section 3.3 (Geneve): a "
        "non-zero outer UDP checksum \"MUST be correctly calculated across the entire "
        "packet\".  With max_len the packet pushed into the tunnel is the truncated one "
        "(Documentation/ref/ovs-actions.7.rst, output), so the outer checksum must be "
        "right for the truncated inner bytes that follow it.  OVS's nested-checksum "
        "shortcut takes it for inner headers past the cut, or, over inner IPv6, under "
        "the IPv6 header's payload length while the inner checksum is completed under "
        "the bytes left; receivers that check it drop the packet.",
    found_by="the exploration")

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
                         "without it, a veth without tx checksumming); here into GRE",
                         "--backend tap cases/matrices/test_truncate.py::"
                         "test_output_max_len_into_tunnel[tx_none-gre-ul4-tcp4-max_len14]"),
                RealPort("tap", "the same, to a veth without tx checksumming",
                         "--backend tap cases/matrices/test_truncate.py::"
                         "test_output_max_len[tx_none-tcp4-rx_partial-max_len20]")),
    at_title="output max_len - cut before a pending l4 header",
    rule="Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output\"; ovs-ofctl accepts any "
        "max_len of 14 bytes and more, so a cut may fall inside the IP header.  "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\" and rule 1, \"OVS should strive to forward all packets regardless of "
        "checksum\".  A checksum whose header is gone has nothing left to complete; the "
        "packet's first max_len bytes must leave, and the daemon must not die.",
    found_by="the exploration, once it drew max_len")

TRUNC_CSUM_PAST_END = OvsBug(
    "trunc-csum-past-end",
    "output(max_len) of a packet whose TCP/UDP checksum is still pending, to a Linux port "
    "that offers L4 checksum offload (a veth or tap with userspace TSO): where the cut "
    "falls before the end of that checksum field (in or before the TCP/UDP header), OVS "
    "still hands the port a virtio-net header asking it to complete the checksum there, "
    "past the end of the frame; the kernel refuses the frame (sendmmsg() fails with "
    "EINVAL), so nothing leaves, no tx counter counts it (OVS only logs 'error sending "
    "Ethernet packet'), and every later packet of the same output batch to that port is "
    "lost with it (netdev_linux_sock_batch_send() gives up at the first error).  "
    "ovs-actions(7) has the first max_len bytes leave",
    "lib/netdev-linux.c netdev_linux_prepend_vnet_hdr() (NEEDS_CSUM, csum_start and "
    "csum_offset from the L4 offset, kept by dp_packet_batch_apply_cutlen(); the seed "
    "written past the tail); the kernel's net/packet/af_packet.c __packet_snd_vnet_parse() "
    "raises hdr_len to csum_start + csum_offset + 2 and returns -EINVAL when it is past "
    "the frame",
    cls="bug", severity="loses packets", root_cause="cutlen-keeps-offload-flags",
    real_ports=(RealPort("veth", "a Linux sender's TCP/UDP checksum left to the NIC, output "
                         "with max_len before the end of its checksum field to a veth with tx "
                         "checksumming; here into VXLAN", "--backend tap "
                         "cases/matrices/test_truncate.py::"
                         "test_output_max_len_into_tunnel[tx_l4-vxlan-ul4-udp4-max_len40]"),
                RealPort("veth", "the same on a plain path, the whole packet output after the "
                         "cut copy lost with it in the same batch", "--backend tap "
                         "cases/matrices/test_truncate.py::"
                         "test_output_max_len[tx_l4-udp4-rx_partial-max_len40]"),
                RealPort("tap", "the same, to a tap (its TUNSETOFFLOAD has TUN_F_CSUM): OVS "
                         "writes the same virtio-net header to the tap's fd, and tun_get_user() "
                         "makes the same hdr_len check (sources: the rigs' tx ports are "
                         "veths)")),
    at_title="output max_len - cut before a pending l4 csum field",
    rule="Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output\": the packet's first "
        "max_len bytes must leave.  A checksum whose field is gone has nothing left to "
        "complete, so the port must not be asked to complete it: the virtio-net header "
        "(VIRTIO 1.1 section 5.1.6.2) that asks for it points past the frame, and Linux "
        "refuses the frame (net/packet/af_packet.c, drivers/net/tun_vnet.h: hdr_len is "
        "raised to csum_start + csum_offset + 2, and one past the frame is EINVAL).",
    found_by="the tunnel truncation ids on the tap backend",
    notes=("The case waits for OVS's WARN in the log, one per frame: the only trace the "
           "lost frame leaves.",))


# ---- conntrack -------------------------------------------------------------
# userspace conntrack and its NAT.

CT_TCP_SYN_SENT_REPLY = OvsBug(
    "ct-tcp-syn-sent-reply",
    "userspace conntrack gives +est+rpl to a reply that is neither SYN+ACK nor RST "
    "while the connection is in SYN-SENT (e.g. a bare ACK answering a SYN), where "
    "RFC 9293 3.10.7.3 has the endpoint drop it (it neither completes nor resets the "
    "handshake); the connection then counts as seen both ways (ovs-fields(7) est)",
    "lib/conntrack-tcp.c tcp_conn_update(): the first packet from the responder "
    "(src->state < SYN_SENT) initialises its window whatever its flags, and "
    "check_ackskew is off while the window is set up (pf's tracker)",
    cls="by-design", severity="cosmetic", root_cause="ct-tcp-responder-pickup",
    real_ports=(RealPort("any", "a TCP segment without SYN from the responder of a "
                         "connection whose SYN conntrack saw",
                         "cases/matrices/test_conntrack_offload.py::test_conntrack_offload"
                         "[invalid-rx_none-tx_none]"),),
    why="pf's sequence tracking, which conntrack-tcp.c follows, picks up a connection "
        "from either end's first packet on purpose (it also opens one mid-stream); it "
        "changes only the ct_state classification, not the bytes, but a pipeline that "
        "forwards +est passes a segment no endpoint accepts (the kernel datapath's "
        "verdict was not checked here)",
    notes=("The model classifies the bare ACK +inv.",))

CT_TCP_EST_BEFORE_REPLY = OvsBug(
    "ct-tcp-est-before-reply",
    "userspace conntrack gives +est to a TCP segment of a committed connection's "
    "original direction other than a SYN (e.g. the client's ACK completing the "
    "handshake) before it has seen any packet of the reply direction, where ovs-fields(7) "
    "sets est only once \"packets of a committed connection have been seen by conntrack "
    "from both directions\" (a UDP datagram or ICMP echo in the same place stays +new); "
    "a pipeline that sends the replies past ct, or loses them before it, sees the "
    "connection as answered",
    "lib/conntrack-tcp.c tcp_conn_update() returns CT_UPDATE_VALID_NEW only for a SYN "
    "and CT_UPDATE_VALID for every other valid segment, which conn_update_state() in "
    "lib/conntrack.c turns into +est whether or not the reply direction was seen",
    cls="by-design", severity="cosmetic", root_cause="ct-tcp-est-before-reply",
    real_ports=(RealPort("any", "a TCP client's ACK after a SYN+ACK that reached it by a "
                         "path around ct (asymmetric routing, or replies exempt from tracking)",
                         "cases/exploration/test_explore_openflow.py::"
                         "test_openflow_regression[cae4c0db3d]"),),
    why="pf's window tracking, which conntrack-tcp.c follows, validates each segment "
        "against both ends' windows and has no notion of a reply seen; the bytes are "
        "unchanged, only the ct_state classification (and so the rule a table picks) "
        "differs.  The Linux kernel's tracker keeps such a segment out of ESTABLISHED "
        "(IPS_SEEN_REPLY); its verdict was not checked here",
    rule="ovs-fields(7) ct_state: est, \"Set to 1 if packets of a committed connection "
        "have been seen by conntrack from both directions\"; new, \"Start of a new "
        "connection\"",
    at_title="conntrack - a tcp segment before any reply is not established",
    found_by="test_explore_openflow (a drawn table that sends p2's packets out without ct)",
    notes=("The model classifies the segment +new, as it does a UDP datagram or an ICMP "
           "echo request there (and as OVS does those).",))

CT_ICMP6_NAT_CONN_PROTO = OvsBug(
    "ct-icmp6-nat-conn-proto",
    "the NAT of an ICMPv6 error related to a TCP or UDP connection patches the outer "
    "address change into the ICMPv6 message as if it were a TCP/UDP checksum: two "
    "bytes at the TCP checksum offset (the embedded IPv6 source address) or the UDP "
    "one (a Packet Too Big's MTU) are changed, and the ICMPv6 checksum is then "
    "recomputed over them.  (With an L4-good rx flag on the error it aborts instead, on "
    "l4-partial-assert's assertion; that variant is latent: no real port flags an ICMPv6 "
    "checksum good, DPDK 25.11's vhost library marks none good and netdev-linux only "
    "checksums it computed for TCP, UDP or SCTP)",
    "lib/conntrack.c nat_packet_ipv6() passes the connection key's nw_proto to "
    "packet_set_ipv6_addr(), whose packet_update_csum128() then treats the ICMPv6 "
    "header as TCP/UDP; nat_inner_packet() rewrites only the translated inner fields",
    cls="bug", severity="corrupts data on the wire", root_cause="ct-nat-ipv6-conn-proto",
    frames_only=True,
    real_ports=(RealPort("any", "an ICMPv6 error (e.g. Packet Too Big, RFC 8201 path MTU "
                         "discovery) from the server of a DNATed IPv6 TCP connection",
                         "cases/matrices/test_conntrack_offload.py::test_conntrack_offload"
                         "[dnat6_icmp6_related-rx_none-tx_none]"),),
    at_title="conntrack - nat of an icmpv6 error keeps its embedded packet",
    rule="RFC 5508 section 4.2 (and RFC 5382 section 7.1 for TCP): a NAT translates an "
        "ICMP error's outer header and, reversed, its embedded packet, and \"MUST\" "
        "leave the rest of the message as it was; RFC 4443 section 2.4 has the "
        "embedded packet be the invoking packet, \"as much of [it] as possible\".  "
        "ovs-actions(7) nat: the reply direction is translated back.  The outer address "
        "rewrite must touch only the IPv6 header and the ICMPv6 checksum (RFC 4443 2.3, "
        "its pseudo-header).",
    found_by="the conntrack offload cases; the embedded-checksum form by test_explore_openflow",
    notes=("Receivers accept the damaged message: its ICMPv6 checksum was recomputed "
           "over the damage.",
           "Where the damaged bytes are the embedded source address, which the inner NAT "
           "then translates back (an error about an SNATed connection's packet), the "
           "address comes out right, but the embedded TCP checksum is updated from the "
           "damaged address: the damage moves into it.",
           "export/fixes/ct-nat-ipv6-conn-proto.patch cures both symptoms (checked with the "
           "suite on a patched build)."))

CT_NAT_UNTRANSLATED = OvsBug(
    "ct-nat-untranslated",
    "a ct(commit,nat(src=...|dst=...)) whose connection the tracker cannot set up (no free "
    "address and port left in the range, the zone's limit or the datapath's connection limit "
    "reached) lets the packet go on as it came: with its original addresses and ports, "
    "uncommitted (+trk+new), out of every action after it.  A NAT bypass: once a range is "
    "exhausted or a zone full, the hosts behind the NAT reach the other side with their "
    "internal addresses (RFC 5508 REQ-8: a NAT that cannot establish a session for a new flow "
    "drops the packet; the Linux kernel datapath drops it)",
    "lib/conntrack.c conn_not_found(): the zone-limit (conntrack_zone_full), connection-limit "
    "(conntrack_full) and nat_res_exhaustion paths return NULL after the packet was marked "
    "CS_NEW, and process_one() then writes +trk+new; nothing drops the packet",
    cls="bug", severity="breaks isolation", root_cause="ct-nat-failure-forwards",
    real_ports=(RealPort("veth", "a host behind the SNAT (at_ns0, TCP through curl) opening a "
                         "connection while the one address and port of nat(src=...:PORT) is "
                         "taken (system-traffic.at's exhaustion test, judged)",
                         "--backend tap cases/system_userspace/test_system_ct_nat.py::"
                         "test_snat_port_range_exhaustion[userspace]"),
                RealPort("veth", "a host behind the SNAT sending UDP from more source ports "
                         "than the zone's limit (ct-set-limits) admits connections",
                         "--backend tap cases/system_userspace/test_system_ct_limits.py::"
                         "test_nat_commit_refused[zone_limit-userspace]"),
                RealPort("veth", "the same over the datapath's connection limit "
                         "(ct-set-maxconns)",
                         "--backend tap cases/system_userspace/test_system_ct_limits.py::"
                         "test_nat_commit_refused[maxconns-userspace]"),
                RealPort("veth", "the same while the one address and port of the range is "
                         "taken (tuple space exhaustion)",
                         "--backend tap cases/system_userspace/test_system_ct_limits.py::"
                         "test_nat_commit_refused[exhaustion-userspace]"),
                RealPort("any", "any port: the trigger is the number of connections a tenant "
                         "opens, which any sender controls, remote hosts included for a DNAT "
                         "(sources: conn_not_found() does not look at the port)")),
    at_title="conntrack - nat that cannot be set up drops the packet",
    rule="RFC 5508 REQ-8: \"When a NAT device is unable to establish a NAT Session for a "
        "new transport-layer (TCP, UDP, ICMP, etc.) flow due to resource constraints or "
        "administrative restrictions, the NAT device SHOULD send an ICMP destination "
        "unreachable message ... and drop the original packet.\"  ovs-actions(7) nat: the "
        "translated address \"should be selected\" from the range; a packet of a "
        "connection that has no translation has no NAT session, and its original "
        "addresses must not leave (the Linux kernel datapath drops it).",
    notes=("Upstream's exhaustion test cannot tell: its table drops the replies to the "
           "untranslated SYNs.",
           "export/fixes/ct-nat-failure-forwards.patch drops the packet (verified: the cases "
           "report the bug gone; its test in tests/dpif-netdev.at, patch 10 of the series, "
           "fails on 4.0.0 and passes with it)."))


# ---- tunnel state ----------------------------------------------------------
# the state a tunnel port keeps across packets: GRE sequence numbers, the neighbour cache.

GRE_SEQ_SHARED = OvsBug(
    "gre-seq-shared",
    "GRE/ERSPAN sequence numbers come from one counter per datapath tunnel port "
    "(e.g. erspan_sys, gre_sys), shared by every OpenFlow tunnel port and ERSPAN session on "
    "it: the first datagram of a second session does not carry 0 (RFC 2890 §2.2) and "
    "its numbers skip those the other sessions used (draft-foschiano-erspan-03: the "
    "sequence number increments per packet per session)",
    "lib/netdev-native-tnl.c netdev_erspan_push_header() / netdev_gre_push_header(): "
    "atomic_count_inc(&dev->gre_seqno) on the netdev of the tnl_push's datapath port",
    cls="by-design", severity="cosmetic", root_cause="gre-seq-per-datapath-port",
    real_ports=(RealPort("any", "two GRE tunnel ports with seq=true, or two ERSPAN "
                         "sessions, on one datapath tunnel port; here two GRE ports out of a "
                         "veth underlay (OVS's userspace push, no kernel GRE device)",
                         "--backend tap cases/real_ports/test_system_traffic_gre_state.py::"
                         "test_gre_seq_per_tunnel_port"),),
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
    "entry; upstream's own comment expects the reply to be learned): the tunnel "
    "endpoint does not get them, they are lost until the entry is refreshed (their "
    "bytes are right)",
    "ofproto/ofproto-dpif-xlate.c: tnl_neigh_snoop() runs only in a translation with "
    "side effects (an upcall), never for a packet that hits a datapath flow",
    cls="by-design", severity="loses packets", root_cause="neigh-snoop-slow-path",
    real_ports=(RealPort("any", "an ARP reply that matches an installed datapath flow, "
                         "after a tunnel packet from the same address re-pointed the "
                         "neighbour entry; here both from a veth (the GRE underlay)",
                         "--backend tap cases/real_ports/test_system_traffic_gre_state.py::"
                         "test_tunnel_neighbour_after_cached_arp_reply"),),
    why="snooping only in the slow path is how the tunnel neighbour cache is designed "
        "(ofproto-dpif-xlate.c); the window is narrow: a reply from the same sender that "
        "hits a cached flow right after a tunnel packet re-pointed the entry, until the "
        "entry is refreshed")


# ---- ofproto ---------------------------------------------------------------
# ofproto: the revalidators and the megaflows translation makes.

REVALIDATOR_RESUME_UNPAUSED = OvsBug(
    "revalidator-resume-unpaused",
    "`ovs-appctl revalidator/resume` without a `revalidator/pause` before it never "
    "answers, and ovs-vswitchd's main thread blocks for good: no more OpenFlow, database "
    "or appctl requests are served (the daemon must be killed; `exit` is not answered "
    "either; nor are the packets of non-PMD ports, which the main thread polls)",
    "ofproto/ofproto-dpif-upcall.c udpif_resume_revalidators() blocks on pause_barrier "
    "whether or not the revalidators are paused; they reach that barrier only in "
    "revalidator_pause(), after the main thread set pause_latch",
    cls="bug", severity="hangs the daemon", root_cause="revalidator-resume-unpaused",
    real_ports=(RealPort("any", "no port: a resume that no pause preceded (a script's "
                         "cleanup step, or a second resume after one pause)",
                         "cases/dpif_netdev/test_flows.py::test_revalidator_resume_without_pause"),),
    at_title="revalidator/resume without a pause answers",
    rule="ovs-appctl(8) sends a command to the daemon and prints its response; resuming "
        "revalidators that are not paused has nothing to do, so the command must be "
        "answered at once and leave ovs-vswitchd serving requests, as a resume after a "
        "pause does.",
    found_by="system-traffic.at's \"Dump OF rules corresponding to UFID\" reproduction, "
             "whose cleanup resumed twice",
    notes=("Verified: with export/fixes/revalidator-resume-unpaused.patch the resume is "
           "answered and the case reports the bug gone.",))

VLAN_SECOND_TAG_WILDCARDED = OvsBug(
    "vlan-second-tag-wildcarded",
    "with other_config:vlan-limit 0 or 2, the datapath flow made for a frame with one VLAN "
    "tag does not match on the absence of a second one, so a frame with two tags and the "
    "same outer tag follows it: a table that pops the outer tag and forwards by what is "
    "under it (dl_vlan, vlan_tci=0) sends the double-tagged frame where the single-tagged "
    "one went, into another VLAN domain (vswitch.xml vlan-limit: up to two headers are "
    "matched; ovs-actions(7) pop_vlan; a datapath flow must give every packet it matches "
    "what the OpenFlow tables give it)",
    "lib/flow.c flow_pop_vlan() (no mask on the tag after the last one it counted), "
    "ofproto/ofproto-dpif-xlate.c xlate_wc_finish() (clears the mask of every tag the "
    "packet lacks) and lib/odp-util.c parse_8021q_onward() (a mask without the next tag's "
    "VLAN attribute leaves it wildcarded, where the first level means 'no tag')",
    cls="bug", severity="breaks isolation", root_cause="vlan-absent-tag-unmasked",
    real_ports=(RealPort("veth", "a host sending a frame with an S-tag only, then one with "
                         "the same S-tag and a C-tag, into a port whose table pops the S-tag "
                         "and forwards by the C-tag",
                         "--backend tap cases/system_userspace/test_system_traffic_8021ad.py::"
                         "test_one_tag_then_two_under_it[vlan_limit_2-userspace]"),
                RealPort("veth", "the same with vlan-limit 0 (as many headers as OVS supports)",
                         "--backend tap cases/system_userspace/test_system_traffic_8021ad.py::"
                         "test_one_tag_then_two_under_it[vlan_limit_0-userspace]"),
                RealPort("any", "any port that carries tagged frames (sources: the megaflow "
                         "is made in ofproto, whichever port the frame came in by)")),
    at_title="vlan-limit 2 - a flow for one tag is not hit by two",
    rule="vswitch.xml other_config:vlan-limit: OVS matches up to two VLAN headers (the "
        "limit, 0 meaning as many as OVS and the datapath support); ovs-actions(7) "
        "pop_vlan removes the outer one, and the tables then match what is under it "
        "(ovs-fields(7) vlan_tci: 0 for no header).  A frame with two headers and one "
        "with one differ under the outer header, and a datapath flow must give every "
        "packet it matches what the OpenFlow tables give it: the frame with two headers "
        "must not follow the flow of the frame with one.",
    notes=("With vlan-limit 1 the ids pass (test_one_tag_then_two_under_it[vlan_limit_1-*]): "
           "the C-tag is payload there.",
           "Upstream's \"802.1ad - double vlan match\" (vlan-limit=0) sends only double-tagged "
           "frames; the fragment tests' helper bridge works around it (priority 1 on the "
           "S-only device's tag, fixtures/system_userspace/system_ct_frag.py).",
           "export/fixes/vlan-absent-tag-unmasked.patch cures it (verified: the cases report "
           "the bug gone; its test in tests/ofproto-dpif.at, patch 11 of the series, fails on "
           "4.0.0 and passes with it)."))


# ----------------------------------------------------------------------------

# The fix each root-cause group needs, as the write-up hints at it where export/fixes/ has
# no patch for the group (one fix, one group: the entries of a group share it).
FIX_HINTS = {
    # offload
    "gre-csum-at-push": (
        "finish the pending checksums before the GRE checksum is taken, and take it last (after the "
        "sequence number), at the push and per segment in dp_packet_gso_update_segment()"),
    "l4-partial-unknown-proto": (
        "fix the classification, not the assertion: mark TCP in miniflow_extract() for any TCP header "
        "that holds the checksum field (as parse_tcp_flags() does), and drop a partial L4 checksum flag "
        "of a packet in which flow extraction marks no L4 protocol, so that dp_packet_ol_send_prepare() "
        "and netdev_dpdk_prep_hwol_packet() only see packets of a known protocol"),
    "tso-segsz-unsegmented": (
        "treat a packet with no more than one segment of payload as no TSO packet: clear its segment "
        "size (dp_packet_gso__() returns for n_segs <= 1 and keeps it), and in packet_udp_tunnel_csum() "
        "adjust the outer checksum only for a packet cut into whole segments, never asserting (a guest's"
        " segment size reaches it unsegmented where userspace TSO is disabled)"),
    "ipv4-header-only-csum": (
        "in dp_packet_ip_set_header_csum(), compute the checksum whenever the header fits the L3 data "
        "(ip_hdr_len <= l3 size)"),
    "gso-cwr-every-segment": (
        "in dp_packet_gso_update_segment(), clear CWR on every segment after the first"),
    "ipv6-ext-pseudo-header": (
        "give packet_csum_pseudoheader6() the upper-layer protocol and length, and pass them everywhere:"
        " TCP/UDP completion, the UDP tunnel checksum shortcut, the tunnel receive path's checksum check"
        " and netdev-linux's virtio-net checksum seed"),
    "ipv4-later-fragment-rewrite": (
        "in packet_set_ipv4_addr(), update an L4 checksum only when the packet is not a later fragment"),
    # truncation
    "cutlen-keeps-offload-flags": (
        "finish the pending checksums before dp_packet_batch_apply_cutlen() cuts the packet, or drop the"
        " offload flags (and the L4 offsets) of a packet it cuts: then the truncated copy's checksums "
        "are the packet's, and a tunnel's outer checksum is a full one over the bytes that leave"),
    # conntrack
    "ct-tcp-est-before-reply": (
        "in conn_update_state(), give +est only once the connection has seen a packet of the "
        "reply direction (as conntrack-other.c and conntrack-icmp.c do), +new before"),
    "ct-nat-ipv6-conn-proto": (
        "in conntrack.c nat_packet_ipv6(), rewrite the outer address with the packet's own protocol "
        "(ICMPv6 for a related error), not the connection key's nw_proto"),
    "ct-nat-failure-forwards": (
        "in conn_not_found(), when a commit with nat(src=...) or nat(dst=...) cannot create its "
        "connection (zone limit, connection limit, NAT tuple space exhaustion), drop the packet, and the"
        " fragments of a reassembled one, instead of leaving it +trk+new untranslated"),
    # ofproto
    "revalidator-resume-unpaused": (
        "in udpif_resume_revalidators(), block on pause_barrier only when pause_latch was set "
        "(latch_poll() says so): the revalidators reach the barrier only while paused"),
    "vlan-absent-tag-unmasked": (
        "mask the header after the last one a pop counted (flow_pop_vlan()), keep the mask of the first "
        "missing header within the VLAN limit (xlate_wc_finish()), and read a missing VLAN mask under an"
        " exact Ethertype as no further header (parse_8021q_onward())"),
}

ALL = (GRE_CSUM_AT_PUSH, L4_PARTIAL_NOT_TCP_UDP, TSO_SHORT_TUNNEL_ASSERT, IPV4_HEADER_ONLY,
       GSO_CWR_EVERY_SEGMENT, IPV6_EXT_PSEUDO_HEADER, IPV4_LATER_FRAGMENT, GRE_SEQ_SHARED, NEIGH_SNOOP_CACHED,
       TSO_EMPTY_TUNNEL_CSUM, TRUNC_PENDING_CSUM, TRUNC_TUNNEL_OUTER_CSUM, TRUNC_L4_CUT_CRASH,
       TRUNC_CSUM_PAST_END, CT_TCP_SYN_SENT_REPLY, CT_TCP_EST_BEFORE_REPLY, CT_ICMP6_NAT_CONN_PROTO,
       TUNNEL_CSUM_TRUSTS_RX_GOOD, REVALIDATOR_RESUME_UNPAUSED, CT_NAT_UNTRANSLATED,
       VLAN_SECOND_TAG_WILDCARDED)
