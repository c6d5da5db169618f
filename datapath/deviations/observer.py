"""The model's hooks (datapath/model/hooks.py), answered with what OVS does
otherwise: each names its entry of the catalogue (datapath/model/bugs.py)."""
from __future__ import annotations

from typing import Any

from datapath.deviations import conntrack, egress, truncation
from datapath.deviations.state import ovs_bytes, record_change, state
from datapath.model import csum, gso, hooks
from datapath.model.bugs import GRE_CSUM_AT_PUSH, GSO_CWR_EVERY_SEGMENT, IPV4_LATER_FRAGMENT, OvsBug
from datapath.model.hooks import Known, Verdicts
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Packet
from datapath.model.send import Slot, patch_from_end, variants
from datapath.offloads import RxFlags, TxOffloads

TCP_CWR = gso.TCP_CWR


class OvsObserver(hooks.Observer):
    """The model's hooks answered with OVS's known deviations, each recorded on the packet."""

    def pushed(self, pkt: Packet) -> None:
        # netdev_gre_push_header() fills the GRE checksum now, over the bytes as
        # they are (the checksums under it still pending): GRE_CSUM_AT_PUSH.
        if pkt.gre_csum_ofs is not None:
            state(pkt).gre_csum = csum.checksum(ovs_bytes(pkt)[pkt.gre_csum_ofs - 4:])

    def segmented(self, original: Packet, seg: Packet, index: int) -> None:
        tcp = gso.tcp_layer(original)
        assert tcp is not None and tcp.l4 is not None
        if index > 0 and original.data[tcp.l4 + 13] & TCP_CWR:
            record_change(seg, GSO_CWR_EVERY_SEGMENT, _keep_cwr,
                          "OVS keeps CWR on this later segment")
        if seg.gre_csum_ofs is not None:
            # dp_packet_gso_update_segment() refills the GRE checksum before the
            # checksums under it are finished.
            ofs = seg.gre_csum_ofs
            seg.put16(ofs, 0)
            state(seg).gre_csum = csum.checksum(ovs_bytes(seg)[ofs - 4:])

    def ipv4_addr_rewritten(self, pkt: Packet, old: bytes, new: bytes) -> None:
        _later_fragment(pkt, old, new)

    def gre_sealed(self, pkt: Packet, ofs: int) -> None:
        ovs = state(pkt).gre_csum
        if ovs is not None and ovs != pkt.u16(ofs):
            from_end = len(pkt.data) - ofs  # headers only go on in front from here

            def gre_field(p: Packet) -> None:
                p.put16(len(p.data) - from_end, ovs)
            record_change(pkt, GRE_CSUM_AT_PUSH, gre_field,
                          f"OVS's GRE checksum 0x{ovs:04x} (taken at the first push) rides "
                          "inside the second tunnel")
        state(pkt).gre_csum = None

    def before_software_completion(self, pkt: Packet, slots: list[Any]) -> Any:
        own = [d for d in egress.deviations(pkt, [s.name for s in slots], TxOffloads())
               if d.pkt is pkt and d.completions and d.gre is None]
        return {d.bug: (bytes(variants(pkt, slots, d.completions)[1].data), d.note) for d in own}

    def after_software_completion(self, pkt: Packet, token: Any) -> None:
        ovs: dict[OvsBug, tuple[bytes, str]] = token
        for bug, (data, note) in ovs.items():
            if data != bytes(pkt.data):
                record_change(pkt, bug, patch_from_end(bytes(pkt.data), data), note)

    def truncated(self, before: Packet, pkt: Packet, max_len: int, completed: bytes) -> None:
        truncation.truncated(before, pkt, max_len, completed)

    def egress(self, pkt: Packet, slots: list[Any], tx: TxOffloads,
               allowed: dict[bytes, Verdicts]) -> tuple[dict[bytes, Verdicts], list[Known],
                                                        list[str]]:
        """OVS does all it does; a bug counts where it changes what leaves."""
        typed: list[Slot] = slots
        found = egress.deviations(pkt, [s.name for s in typed], tx)
        if not found:
            return {}, [], []
        dropped = [d for d in found if d.dropped]
        if dropped:  # OVS hands the port what it refuses: nothing else matters
            return {hooks.NOT_SENT: {}}, [d.bug for d in dropped], [d.note for d in dropped]
        merged = egress.merge(pkt, found)
        ovs = variants(merged.pkt, typed, merged.completions, merged.gre)[0]
        if set(ovs) <= set(allowed):  # all OVS may send is allowed: nothing shows
            return {}, [], []
        seen = [d for d in found
                if not set(variants(d.pkt, typed, d.completions, d.gre)[0]) <= set(allowed)]
        named: list[Known] = []
        for d in seen or found:
            if d.bug not in named:
                named.append(d.bug)
        return ovs, named, [d.note for d in seen or found]

    def crashes(self, pkt: Packet, tx: TxOffloads) -> None:
        egress.check_crashes(pkt, tx)

    def ct_commit_refused(self, pkt: Packet, why: str) -> Known | None:
        return conntrack.refused_commit(why)

    def ct_state(self, pkt: Packet, res: Any) -> tuple[Known, int] | None:
        return conntrack.ovs_state(res, pkt)

    def ct_related_translated(self, pkt: Packet, before: bytes, res: Any) -> None:
        found = conntrack.ovs_frame(before, bytes(pkt.data), res, RxFlags(l4=pkt.outer.l4_csum))
        if found is not None:
            bug, data = found
            record_change(pkt, bug, patch_from_end(bytes(pkt.data), data),
                          "OVS's NAT of the ICMPv6 error: the bytes of ct-icmp6-nat-conn-proto")


def _keep_cwr(pkt: Packet) -> None:
    tcp = gso.tcp_layer(pkt)
    assert tcp is not None and tcp.l4 is not None
    pkt.data[tcp.l4 + 13] |= TCP_CWR


def _later_fragment(pkt: Packet, old: bytes, new: bytes) -> None:
    """packet_set_ipv4_addr() checks the protocol and the L4 size, not the
    fragment offset: on a later fragment it patches two payload bytes where a
    TCP/UDP header would hold its checksum (IPV4_LATER_FRAGMENT)."""
    lay = pkt.outer
    assert lay.l3 is not None
    ihl = (pkt.data[lay.l3] & 0x0F) * 4
    frag = pkt.u16(lay.l3 + 6)
    proto = pkt.data[lay.l3 + 9]
    need = {PROTO_TCP: 20, PROTO_UDP: 8}.get(proto)
    if not frag & 0x1FFF or need is None or lay.l3_size - ihl < need or lay.l4_csum.valid:
        return
    where = 16 if proto == PROTO_TCP else 6

    def ovs_patch(p: Packet) -> None:
        inner = p.inner if p.inner is not None else p.outer
        assert inner.l3 is not None
        ofs = inner.l3 + ihl + where
        value = p.u16(ofs)
        if proto == PROTO_UDP and value == 0:
            return
        value = csum.incremental(value, old, new)
        p.put16(ofs, 0xFFFF if proto == PROTO_UDP and value == 0 else value)
    record_change(pkt, IPV4_LATER_FRAGMENT, ovs_patch,
                  f"OVS patches payload bytes {where}-{where + 1} of this later fragment "
                  "as if they were a checksum")
