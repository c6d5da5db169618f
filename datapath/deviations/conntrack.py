"""What OVS 4.0.0's userspace conntrack does instead of the model's verdict.

The model (datapath/model/conntrack.py) says what a correct tracker does; this
layer names the catalogue entries where OVS is known to differ, for the cases
that run conntrack (cases/test_conntrack_offload.py), which ask it per packet.
"""
from __future__ import annotations

from datapath.model.bugs import CT_TCP_SYN_SENT_REPLY, L4_PARTIAL_NOT_TCP_UDP, OvsBug
from datapath.model.conntrack import EST, RPL, TRK, Result
from datapath.model.packet import PROTO_TCP, PROTO_UDP
from datapath.offloads import RxFlags

PROTO_ICMPV6 = 58


def ovs_state(res: Result) -> tuple[OvsBug, int] | None:
    """The ct_state OVS gives where the model says otherwise, and the entry.

    A reply that is neither SYN+ACK nor RST to a connection in SYN-SENT: OVS's
    tracker (pf's) takes it as the responder's first packet and the connection
    as seen both ways, +est+rpl; the model says +inv.  Only claimed for a
    connection without NAT, where the packet then leaves unchanged."""
    conn = res.conn
    if res.rule == "tcp-syn-sent-reply" and conn is not None and not conn.nat:
        return CT_TCP_SYN_SENT_REPLY, TRK | EST | RPL
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
