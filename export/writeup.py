"""The plain-text report next to an exported test: what is wrong, the minimal
frame, where in OVS, the rule broken, its class, severity, real-port trigger
and root-cause group, expected against actual, how to run it, and the fix of
its group where export/fixes/ has one.

The rule each known bug breaks is written here, from the RFCs and OVS's own
documentation (the model's sources), not from OVS's code.  The fixes are ours,
written from a reading of OVS's sources.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from datapath.model.bugs import OvsBug
from export.frames import scapy_line, split_hex
from harness.records import CaseRecord, Step

WIDTH = 78
# The fixes this project proposes, one patch per root-cause group (bugs.py),
# each with a `Bugs: KEY...` line naming the entries it cures (export/series.py).
FIXES = Path(__file__).resolve().parent / "fixes"
# A disclosure note per bug a guest or a remote host can trigger, for OVS's
# security process (export/series.py copies them next to the series).
DISCLOSURES = Path(__file__).resolve().parent / "disclosures"


@dataclass(frozen=True)
class Rule:
    """How an exported test for a known bug is titled, and the rule it checks."""

    title: str  # the AT_SETUP title, after "dpif-netdev - "
    rule: str
    fix_hint: str = ""


CSUM_DOC = "Documentation/topics/userspace-checksum-offloading.rst"
TSO_DOC = "Documentation/topics/userspace-tso.rst"

RULES: dict[str, Rule] = {
    "gre-csum-at-push": Rule(
        "gre tunnel - csum covers the inner packet as sent",
        "RFC 2784 section 2.5: the GRE Checksum field \"contains the IP (one's "
        "complement) checksum sum of the all the 16 bit words in the GRE header and the "
        "payload packet\" (RFC 1071 arithmetic), i.e. of the bytes on the wire, the "
        "Sequence Number (RFC 2890) included.  "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\", so an inner checksum that is still pending when the GRE header is "
        "pushed (or, in software segmentation, when a segment is cut) changes the payload "
        "after the GRE checksum was taken.  A receiver that checks GRE checksums (RFC "
        "2784 section 2.5) drops the packet.",
        "finish the pending checksums before the GRE checksum is taken, and take it last "
        "(after the sequence number), at the push and per segment in "
        "dp_packet_gso_update_segment()"),
    "l4-partial-assert": Rule(
        "l4 csum partial flag on a packet that is not tcp or udp",
        f"{CSUM_DOC}: \"Open vSwitch strives to forward packets as they arrive "
        "regardless of whether the checksum is correct or not\" and rule 1, \"OVS should "
        "strive to forward all packets regardless of checksum\".  ARP (RFC 826) has no "
        "checksum and ICMP/ICMPv6 (RFC 792, RFC 4443) are not an L4 checksum a netdev "
        "offloads: there is nothing to finish, and a flag a port stamps on what it "
        "receives must not abort the daemon.  The packet must leave unchanged; so must "
        "one whose IP length field exceeds the frame (RFC 1812 section 5.2.2: no IP "
        "packet to process).  A TCP segment with a data offset below 5 still has its "
        "checksum at its place, over the whole segment (RFC 9293 section 3.1): it is "
        "completed.",
        "fix the classification, not the assertion: mark TCP in miniflow_extract() for "
        "any TCP header that holds the checksum field (as parse_tcp_flags() does), and "
        "drop a partial L4 checksum flag of a packet in which flow extraction marks "
        "no L4 protocol, so that dp_packet_ol_send_prepare() and "
        "netdev_dpdk_prep_hwol_packet() only see packets of a known protocol"),
    "tso-short-tunnel-assert": Rule(
        "tunnel tso - udp tunnel csum with less payload than one segment",
        f"{TSO_DOC}: a TSO packet sent over a port that cannot segment is segmented in "
        "software; a payload no longer than the segment size is one segment, sent as "
        "it is.  Its outer UDP checksum must then be valid for that frame: RFC 768 "
        "(UDP checksum), RFC 7348 section 5 for VXLAN and RFC 8926 section 3.3 for "
        "Geneve (a non-zero UDP checksum \"MUST be correctly calculated across the "
        "entire packet\"), RFC 8200 section 8.1 over IPv6.  The daemon must not abort.",
        "treat a packet with no more than one segment of payload as no TSO packet: "
        "clear its segment size (dp_packet_gso__() returns for n_segs <= 1 and keeps "
        "it), and in packet_udp_tunnel_csum() adjust the outer checksum only for a "
        "packet cut into whole segments, never asserting (a guest's segment size reaches "
        "it unsegmented where userspace TSO is disabled)"),
    "tso-empty-tunnel-csum": Rule(
        "tunnel tso - udp tunnel csum of a packet without payload",
        f"{TSO_DOC}: a TSO packet sent over a port that cannot segment is segmented in "
        "software; one without payload is nothing to segment and leaves as it is.  Its "
        "outer UDP checksum must be valid for that frame: RFC 768, RFC 7348 section 5 "
        "for VXLAN and RFC 8926 section 3.3 for Geneve (a non-zero UDP checksum \"MUST "
        "be correctly calculated across the entire packet\").  OVS adjusts it for a "
        "segment-size payload the packet does not have, and receivers drop it.",
        "treat a packet with no more than one segment of payload as no TSO packet: "
        "clear its segment size (dp_packet_gso__() returns for n_segs <= 1 and keeps "
        "it), and in packet_udp_tunnel_csum() adjust the outer checksum only for a "
        "packet cut into whole segments, never asserting (a guest's segment size reaches "
        "it unsegmented where userspace TSO is disabled)"),
    "ipv4-header-only-csum": Rule(
        "ip csum offload - header without payload",
        "RFC 791 section 3.1: the header checksum covers the header and must be correct "
        f"in every IPv4 packet, whatever follows it.  {CSUM_DOC}: a checksum OVS postponed "
        "is completed at egress by OVS or the port.  A header-only packet (total length = "
        "header length) leaves with the stale checksum, and receivers drop it.",
        "in dp_packet_ip_set_header_csum(), compute the checksum whenever the header fits "
        "the L3 data (ip_hdr_len <= l3 size)"),
    "gso-cwr-every-segment": Rule(
        "tso - CWR on the first segment only",
        "RFC 3168 section 6.1.2: the TCP sender sets CWR in the first new data packet "
        "after it reduced its window.  Segmenting one TSO packet into several must keep "
        "CWR on the first segment only, as Linux GSO (tcp_gso_segment) and NIC TSO do; "
        "a CWR on every segment tells the receiver of several window reductions.",
        "in dp_packet_gso_update_segment(), clear CWR on every segment after the first"),
    "ipv6-ext-pseudo-header": Rule(
        "IPv6 csum with extension headers - pseudo-header next header",
        "RFC 8200 section 8.1: the pseudo-header's Next Header is \"the upper-layer "
        "protocol\" (6 for TCP, 17 for UDP), which \"will differ from the Next Header value "
        "in the IPv6 header if there are extension headers\", and its length is the "
        "upper-layer packet's.  A checksum completed with the first extension header's "
        "type is wrong on the wire, and receivers drop the packet.",
        "give packet_csum_pseudoheader6() the upper-layer protocol and length, and pass "
        "them everywhere: TCP/UDP completion, the UDP tunnel checksum shortcut, the tunnel "
        "receive path's checksum check and netdev-linux's virtio-net checksum seed"),
    "ipv4-later-fragment-rewrite": Rule(
        "ip address rewrite of a later fragment",
        "RFC 791 section 3.2: only the first fragment carries the upper-layer header; a "
        "later fragment's payload is data.  Rewriting an address changes the TCP/UDP "
        "checksum of the whole datagram, which lives in the first fragment only; a later "
        "fragment must be left as it is apart from its IP header.  Patching two payload "
        "bytes corrupts the reassembled datagram.",
        "in packet_set_ipv4_addr(), update an L4 checksum only when the packet is not a "
        "later fragment"),
    "trunc-pending-csum": Rule(
        "output max_len - pending l4 csum of the truncated packet",
        "Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output ... meant for use in "
        "monitoring applications, e.g. for mirroring packets to a collector\".  The "
        "collector must see the packet's first bytes as the packet is on the wire; "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\", so a checksum still pending at the cut must be the one the whole "
        "packet gets (RFC 768, RFC 9293 section 3.1, RFC 8200 section 8.1).  OVS computes "
        "it over the bytes left after the cut instead: a value no packet carries.",
        "finish the pending checksums before dp_packet_batch_apply_cutlen() cuts the "
        "packet, or drop the offload flags (and the L4 offsets) of a packet it cuts: "
        "then the truncated copy's checksums are the packet's, and a tunnel's outer "
        "checksum is a full one over the bytes that leave"),
    "trunc-tunnel-outer-csum": Rule(
        "output max_len - udp tunnel csum of the truncated packet",
        "RFC 768: the UDP checksum covers the pseudo-header, the UDP header and the data "
        "as sent; RFC 7348 section 5 (VXLAN) and RFC 8926 section 3.3 (Geneve): a "
        "non-zero outer UDP checksum \"MUST be correctly calculated across the entire "
        "packet\".  With max_len the packet pushed into the tunnel is the truncated one "
        "(Documentation/ref/ovs-actions.7.rst, output), so the outer checksum must be "
        "right for the truncated inner bytes that follow it.  OVS's nested-checksum "
        "shortcut takes it for inner headers past the cut, or, over inner IPv6, under "
        "the IPv6 header's payload length while the inner checksum is completed under "
        "the bytes left; receivers that check it drop the packet.",
        "finish the pending checksums before dp_packet_batch_apply_cutlen() cuts the "
        "packet, or drop the offload flags (and the L4 offsets) of a packet it cuts: "
        "then the truncated copy's checksums are the packet's, and a tunnel's outer "
        "checksum is a full one over the bytes that leave"),
    "trunc-l4-cut-crash": Rule(
        "output max_len - cut before a pending l4 header",
        "Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output\"; ovs-ofctl accepts any "
        "max_len of 14 bytes and more, so a cut may fall inside the IP header.  "
        f"{CSUM_DOC}: OVS \"postpones checksum updates until the packet egresses the "
        "datapath\" and rule 1, \"OVS should strive to forward all packets regardless of "
        "checksum\".  A checksum whose header is gone has nothing left to complete; the "
        "packet's first max_len bytes must leave, and the daemon must not die.",
        "finish the pending checksums before dp_packet_batch_apply_cutlen() cuts the "
        "packet, or drop the offload flags (and the L4 offsets) of a packet it cuts: "
        "then the truncated copy's checksums are the packet's, and a tunnel's outer "
        "checksum is a full one over the bytes that leave"),
    "trunc-csum-past-end": Rule(
        "output max_len - cut before a pending l4 csum field",
        "Documentation/ref/ovs-actions.7.rst, output: \"With max_len, the packet is "
        "truncated to at most nbytes bytes before being output\": the packet's first "
        "max_len bytes must leave.  A checksum whose field is gone has nothing left to "
        "complete, so the port must not be asked to complete it: the virtio-net header "
        "(VIRTIO 1.1 section 5.1.6.2) that asks for it points past the frame, and Linux "
        "refuses the frame (net/packet/af_packet.c, drivers/net/tun_vnet.h: hdr_len is "
        "raised to csum_start + csum_offset + 2, and one past the frame is EINVAL).",
        "finish the pending checksums before dp_packet_batch_apply_cutlen() cuts the "
        "packet, or drop the offload flags (and the L4 offsets) of a packet it cuts: "
        "then the truncated copy's checksums are the packet's, and a tunnel's outer "
        "checksum is a full one over the bytes that leave"),
    "revalidator-resume-unpaused": Rule(
        "revalidator/resume without a pause answers",
        "ovs-appctl(8) sends a command to the daemon and prints its response; resuming "
        "revalidators that are not paused has nothing to do, so the command must be "
        "answered at once and leave ovs-vswitchd serving requests, as a resume after a "
        "pause does.",
        "in udpif_resume_revalidators(), block on pause_barrier only when pause_latch "
        "was set (latch_poll() says so): the revalidators reach the barrier only while "
        "paused"),
    "ct-nat-untranslated": Rule(
        "conntrack - nat that cannot be set up drops the packet",
        "RFC 5508 REQ-8: \"When a NAT device is unable to establish a NAT Session for a "
        "new transport-layer (TCP, UDP, ICMP, etc.) flow due to resource constraints or "
        "administrative restrictions, the NAT device SHOULD send an ICMP destination "
        "unreachable message ... and drop the original packet.\"  ovs-actions(7) nat: the "
        "translated address \"should be selected\" from the range; a packet of a "
        "connection that has no translation has no NAT session, and its original "
        "addresses must not leave (the Linux kernel datapath drops it).",
        "in conn_not_found(), when a commit with nat(src=...) or nat(dst=...) cannot "
        "create its connection (zone limit, connection limit, NAT tuple space "
        "exhaustion), drop the packet, and the fragments of a reassembled one, instead "
        "of leaving it +trk+new untranslated"),
    "vlan-second-tag-wildcarded": Rule(
        "vlan-limit 2 - a flow for one tag is not hit by two",
        "vswitch.xml other_config:vlan-limit: OVS matches up to two VLAN headers (the "
        "limit, 0 meaning as many as OVS and the datapath support); ovs-actions(7) "
        "pop_vlan removes the outer one, and the tables then match what is under it "
        "(ovs-fields(7) vlan_tci: 0 for no header).  A frame with two headers and one "
        "with one differ under the outer header, and a datapath flow must give every "
        "packet it matches what the OpenFlow tables give it: the frame with two headers "
        "must not follow the flow of the frame with one.",
        "mask the header after the last one a pop counted (flow_pop_vlan()), keep the "
        "mask of the first missing header within the VLAN limit (xlate_wc_finish()), and "
        "read a missing VLAN mask under an exact Ethertype as no further header "
        "(parse_8021q_onward())"),
    "ct-icmp6-nat-conn-proto": Rule(
        "conntrack - nat of an icmpv6 error keeps its embedded packet",
        "RFC 5508 section 4.2 (and RFC 5382 section 7.1 for TCP): a NAT translates an "
        "ICMP error's outer header and, reversed, its embedded packet, and \"MUST\" "
        "leave the rest of the message as it was; RFC 4443 section 2.4 has the "
        "embedded packet be the invoking packet, \"as much of [it] as possible\".  "
        "ovs-actions(7) nat: the reply direction is translated back.  The outer address "
        "rewrite must touch only the IPv6 header and the ICMPv6 checksum (RFC 4443 2.3, "
        "its pseudo-header).",
        "in conntrack.c nat_packet_ipv6(), rewrite the outer address with the packet's "
        "own protocol (ICMPv6 for a related error), not the connection key's nw_proto"),
}


def rule_for(bug: OvsBug) -> Rule:
    """The rule the bug breaks, as the write-up states it (a placeholder where none is
    written)."""
    return RULES.get(bug.key, Rule(bug.key.replace("-", " "),
                                   "(no rule written for this bug yet: see "
                                   "datapath/model/bugs.py and the model's notes below)"))


CLASS_TEXT = {"bug": "a bug", "by-design": "a divergence from a standard or from OVS's "
              "documentation that OVS may keep by design",
              "latent": "latent: no real port hands OVS its input"}


def classification(bug: OvsBug) -> str:
    """The entry's class, severity and root-cause group, with the evidence for a
    class other than bug."""
    text = (f"{CLASS_TEXT.get(bug.cls, bug.cls)}; severity: {bug.severity}; root-cause "
            f"group {bug.root_cause} (one fix cures every entry of the group).")
    return text + (f"  Why: {bug.why}." if bug.why and bug.cls != "bug" else "")


def trigger(bug: OvsBug) -> str:
    """Which real port kinds can hand OVS the input, and whether a case shows it;
    a guest-triggerable abort says it is security-relevant."""
    if not bug.real_ports:
        return f"None: {bug.why}." if bug.why else "None: only netdev-dummy's options reach it."
    text = "  ".join(f"{p.text()}." for p in bug.real_ports)
    if bug.crash and any(p.kind == "vhost-user" for p in bug.real_ports):
        text += ("  A vhost-user guest that can make ovs-vswitchd abort takes down every "
                 "port of the switch: this is security-relevant (a denial of service from "
                 "inside a VM).")
    note = DISCLOSURES / f"{bug.key}.md"
    if note.is_file():
        text += (f"  Report it through OVS's security process first: the disclosure note is "
                 f"{DISCLOSURES.parent.name}/{DISCLOSURES.name}/{note.name}.")
    return text


def _para(label: str, text: str) -> list[str]:
    """A labelled paragraph; a word longer than a line (a node id, a path) stays
    whole on a line of its own, so that it can be searched for and copied."""
    return [label, *textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="  ",
                                  break_on_hyphens=False, break_long_words=False), ""]


def _hex_block(data: str) -> list[str]:
    return ["    " + line for line in split_hex(data, 64)]


def _frame(label: str, hexa: str) -> list[str]:
    data = bytes.fromhex(hexa)
    return [f"  {label} ({len(data)} bytes):",
            *textwrap.wrap(scapy_line(data), WIDTH, initial_indent="    ",
                           subsequent_indent="      ", break_on_hyphens=False),
            *_hex_block(hexa), ""]


def _bug_step(case: CaseRecord, bug: OvsBug | None) -> Step | None:
    for step in case.steps:
        if bug is None and not step.ok or bug is not None and step.bugs.get(bug.key):
            return step
    return case.steps[0] if case.steps else None


def _abort_line(case: CaseRecord) -> str:
    for line in reversed(case.log_excerpt):
        if "|EMER|" in line or "assertion" in line:
            return re.sub(r"^\S+\|\d+\|", "", line)
    return ""


def _config(case: CaseRecord) -> list[str]:
    """The case's configuration commands, short: what a reader must know."""
    out = []
    for command in case.commands:
        argv = command.argv
        tool = argv[0].rsplit("/", 1)[-1] if argv else ""
        if tool not in ("ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
            continue
        words = [a for a in argv[1:] if not re.match(r"--(timeout|db)=", a)]
        text = " ".join([tool, *words])
        if words[:1] in (["netdev-dummy/receive"], ["dpctl/show"], ["--no-wait"]) and \
                "other_config" not in text:
            continue
        out.append("    " + re.sub(r"(/[^ ]*)?/(p\d+-tx\.pcap)", r"\2", text))
    return out


def render(case: CaseRecord, at_name: str, title: str, keyword: str,
           bug: OvsBug | None, ovs: str) -> str:
    """The write-up for one exported case."""
    step = _bug_step(case, bug)
    head = f"{bug.key}: {bug.title}" if bug else f"{case.nodeid}: {case.outcome}"
    out = [head[:WIDTH * 3], "=" * min(len(head), WIDTH), ""]
    if bug:
        effect = "ovs-vswitchd aborts" if bug.crash else "the frame on the wire is wrong"
        out += _para("What is wrong", f"{bug.title} ({effect}; seen in OVS "
                                      f"{', '.join(bug.seen_in)}).")
        out += _para("Where in OVS", bug.where)
        out += _para("The rule it breaks", rule_for(bug).rule)
        out += _para("Class and severity", classification(bug))
        out += _para("Real-port trigger", trigger(bug))
    out += _para("The case", f"{case.nodeid} ({case.outcome} with {ovs}); exported as "
                 f"{at_name}, AT_SETUP([{title}]).")
    out += ["  Configuration, in the order the case made it:", *_config(case), ""]
    if step is not None:
        out += ["Minimal frame", ""]
        for hexa in step.sent:
            out += _frame(f"received on {step.rx_port}", hexa)
        for n, hexa in enumerate(step.expected):
            out += _frame(f"must leave {step.tx_port} (the model's frame {n + 1})", hexa)
        for n, hexa in enumerate(step.captured):
            if hexa not in step.expected:
                out += _frame(f"what {ovs} sent instead (frame {n + 1})", hexa)
        out += ["Expected against actual", ""]
        abort = _abort_line(case) if bug is not None and bug.crash else ""
        if abort:
            out += [(f"  expected: {step.tx_port} sends the frame above; ovs-vswitchd keeps "
                     "running"), f"  actual:   ovs-vswitchd aborts: {abort}"]
        else:
            out += ["  " + line for line in step.diff or ["(no difference recorded)"]]
        notes = [n for n in step.notes if not n.startswith("known OVS bug")]
        if notes:
            out += ["", "  The model's reasoning:", *("    - " + n for n in notes)]
        out.append("")
    out += _para("How to run it", f"Append {at_name} to tests/dpif-netdev.at (or to a file "
                 "included from tests/testsuite.at), then from the build directory:")
    out += [f"    make check TESTSUITEFLAGS='-k {keyword}'", ""]
    if bug:
        where = ("at `ovs-appctl version` right after the packet: ovs-vswitchd is gone"
                 if bug.crash else f"at the `tail -n` check of {step.tx_port if step else 'the'}"
                 " pcap: the diff shows the model's line (-) against the frame OVS sent (+)")
        patch = fix_patch(bug)
        fix = (f"The fix below (ovs-dpif-pytest's {patch[0]}, one for the root-cause group "
               f"{bug.root_cause}) makes it pass; `bash bench/export_at_check.sh --fixes "
               "TREE` runs it on a build of TREE without and with the fix." if patch else
               f"A fix could {rule_for(bug).fix_hint or 'follow the rule above'}.")
        out += _para("What the test shows",
                     f"On OVS {', '.join(bug.seen_in)} it fails {where}.  On a build "
                     f"where the bug is fixed it passes.  {fix}")
        if patch:
            out += ["Proposed fix", "", patch[1].rstrip(), ""]
    return "\n".join(out).rstrip() + "\n"


def fix_patch(bug: OvsBug) -> tuple[str, str] | None:
    """The fix of the bug's root-cause group, (its path in this checkout, its text),
    if export/fixes/ has one whose Bugs: line names the bug."""
    path = FIXES / f"{bug.root_cause}.patch"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    names = re.search(r"^Bugs:(.*)$", text, re.MULTILINE)
    if names is None or bug.key not in names.group(1).split():
        return None
    return f"{FIXES.parent.name}/{FIXES.name}/{path.name}", text
