"""What OVS 4.0.0's userspace conntrack does instead of the model's verdict.

The model (datapath/model/conntrack.py) says what a correct tracker does; this
layer names the catalogue entries where OVS is known to differ, for the cases
that run conntrack (cases/matrices/test_conntrack_offload.py), which ask it per packet,
and answers the model's hook for a refused commit (datapath/model/hooks.py),
which the system tests' judge (fixtures/system_userspace/system_ct.py CtWire) replays with and
without this layer.
"""
from __future__ import annotations

from datapath.model import csum
from datapath.model.bugs import (
    CT_ICMP6_NAT_CONN_PROTO,
    CT_NAT_UNTRANSLATED,
    CT_TCP_EST_BEFORE_REPLY,
    CT_TCP_SYN_SENT_REPLY,
    L4_PARTIAL_NOT_TCP_UDP,
    OvsBug,
)
from datapath.model.conntrack import EST, NEW, RPL, TCP_SYN, TRK, Result
from datapath.model.packet import PROTO_TCP, PROTO_UDP, Packet
from datapath.offloads import RxFlags

PROTO_ICMPV6 = 58


def ovs_state(res: Result, pkt: Packet | None = None) -> tuple[OvsBug, int] | None:
    """The ct_state OVS gives where the model says otherwise, and the entry.

    A reply that is neither SYN+ACK nor RST to a connection in SYN-SENT: OVS's
    tracker (pf's) takes it as the responder's first packet and the connection
    as seen both ways, +est+rpl; the model says +inv.  Only claimed for a
    connection without NAT, where the packet then leaves unchanged.

    With the packet (after the ct action): a TCP segment other than a SYN in the
    original direction of a connection committed before it, none of whose
    replies conntrack has seen: tcp_conn_update() finds it valid, which is +est
    (CT_TCP_EST_BEFORE_REPLY); the model says +new."""
    conn = res.conn
    if res.rule == "tcp-syn-sent-reply" and conn is not None and not conn.nat:
        return CT_TCP_SYN_SENT_REPLY, TRK | EST | RPL
    if pkt is not None and conn is not None and res.found and conn.committed \
            and not res.reply and not res.related and not conn.seen_reply \
            and conn.orig.proto == PROTO_TCP and res.state & NEW \
            and pkt.outer.payload is not None \
            and not pkt.data[pkt.outer.payload + 13] & TCP_SYN:
        return CT_TCP_EST_BEFORE_REPLY, (res.state & ~NEW) | EST
    return None


def ovs_crash(res: Result, rx: RxFlags, ipv: int, proto: int | None) -> OvsBug | None:
    """An abort OVS runs into where the model forwards the packet.

    The NAT of an ICMPv6 error related to a TCP/UDP connection rewrites its
    outer address as if it were the connection's protocol
    (conntrack.c nat_packet_ipv6() passes the connection key's nw_proto to
    packet_set_ipv6_addr()), so a valid (good or partial) L4 checksum state
    becomes partial on an ICMPv6 packet, and dp_packet_ol_send_prepare()
    asserts on it (l4-partial-assert, one more way in)."""
    conn = res.conn
    if res.related and ipv == 6 and proto == PROTO_ICMPV6 and conn is not None and conn.nat \
            and conn.orig.proto in (PROTO_TCP, PROTO_UDP) and rx.l4.valid:
        return L4_PARTIAL_NOT_TCP_UDP
    return None


def ovs_frame(sent: bytes, correct: bytes, res: Result,
              rx: RxFlags) -> tuple[OvsBug, bytes] | None:
    """What OVS sends instead of `correct` for the ICMPv6 error `sent`, and the
    entry (None: the same frame).

    nat_packet_ipv6() rewrites the outer address change into the ICMPv6 message at
    the connection protocol's checksum offset (TCP 16, UDP 6; a UDP "checksum" of 0
    is left alone) before the inner packet is translated; a field the inner NAT
    then rewrites loses the damage; the ICMPv6 checksum is recomputed over the rest."""
    conn = res.conn
    if not (res.related and conn is not None and conn.nat and not rx.l4.valid):
        return None
    before, after = Packet.parse(sent), Packet.parse(correct)
    if before.ipv != 6 or before.proto != PROTO_ICMPV6 or before.l3 is None \
            or before.outer.payload is None or after.outer.payload is None:
        return None
    ofs = {PROTO_TCP: 16, PROTO_UDP: 6}.get(conn.orig.proto)
    icmp, l3 = before.outer.payload, before.l3
    end = l3 + before.outer.l3_size
    if ofs is None or icmp + (20 if ofs == 16 else 8) > end:
        return None
    field = icmp + ofs
    value = before.u16(field)
    if ofs == 6 and value == 0:
        return None  # a UDP checksum of none
    changed = [(sent[a:a + 16], correct[a:a + 16]) for a in (l3 + 8, l3 + 24)
               if sent[a:a + 16] != correct[a:a + 16]]
    if not changed:
        return None
    damaged = value
    for old, new in changed:
        damaged = csum.incremental(damaged, old, new)
    if ofs == 6 and damaged == 0:
        damaged = 0xFFFF
    out = Packet.parse(correct)
    inner = icmp + 8  # the embedded IPv6 header
    if ofs == 16 and sent[inner + 8:inner + 24] != correct[inner + 8:inner + 24]:
        # The inner NAT rewrites the field: TCP's offset 16 is the embedded source
        # address's first bytes, translated back (whole) for an error about an
        # SNATed packet.  The address comes out right, but the embedded TCP
        # checksum is updated from the damaged address.
        tcp_csum = inner + 40 + 16
        if sent[inner + 6] != PROTO_TCP or tcp_csum + 2 > end:
            return None
        addr = sent[inner + 8:inner + 24]
        hurt = damaged.to_bytes(2, "big") + addr[2:]
        fixed = out.u16(tcp_csum)
        ovs = csum.incremental(fixed, hurt, addr)
        field, value = tcp_csum, ovs
    elif after.u16(field) != value:
        return None  # rewritten by the inner NAT
    else:
        value = damaged
    out.put16(icmp + 2, csum.incremental(out.u16(icmp + 2), correct[field:field + 2],
                                         value.to_bytes(2, "big")))
    out.put16(field, value)
    return CT_ICMP6_NAT_CONN_PROTO, bytes(out.data)


def refused_commit(why: str) -> OvsBug:
    """What OVS does with a packet whose ct(commit,nat(...)) the tracker refused
    (a zone or connection limit, no free mapping in the range; `why`), where
    the model drops it: conn_not_found() returns no connection, the packet
    keeps its +trk+new and its bytes, and every action after the ct applies to
    it as it came (CT_NAT_UNTRANSLATED)."""
    del why  # every way in ends the same
    return CT_NAT_UNTRANSLATED
