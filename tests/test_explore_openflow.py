"""fixtures/explore_openflow.py's hosts and its reading of the connection table:
the explorer's own logic, without OVS."""
from __future__ import annotations

from scapy.layers.inet import TCP
from scapy.layers.l2 import Ether

from datapath.model.conntrack import Conn, Key
from fixtures.explore_openflow import Hosts, conntrack_entries, parse_conntrack


def tcp_of(frame: bytes) -> TCP:
    return Ether(frame)[TCP]


def test_tcp_ends_go_on_only_as_far_as_they_received() -> None:
    """RFC 9293: the server answers a SYN it got, the client acknowledges a SYN+ACK
    it got; an end that got nothing retransmits its own segment, numbers unchanged."""
    hosts = Hosts(4)
    port, syn, conv, from_client = hosts.packet(["open", "tcp", 1, 2, False])
    assert (port, from_client, str(tcp_of(syn).flags)) == (1, True, "S")
    # The SYN was dropped: a "reply" is the client's retransmission.
    port, again, _, from_client = hosts.packet(["reply", 0])
    assert (port, from_client, again) == (1, True, syn)
    hosts.delivered(conv, True, {"p2": [syn]})
    port, synack, _, from_client = hosts.packet(["more", 0, True])
    seg = tcp_of(synack)
    assert (port, from_client, str(seg.flags), seg.ack) == (2, False, "SA", tcp_of(syn).seq + 1)
    # The SYN+ACK was dropped: the client has nothing to acknowledge, the server resends.
    assert tcp_of(hosts.packet(["more", 0, True])[1]).seq == seg.seq
    hosts.delivered(conv, False, {"p1": [synack]})
    port, ack, _, from_client = hosts.packet(["reply", 0])
    assert (port, from_client, str(tcp_of(ack).flags), tcp_of(ack).ack) == (1, True, "A",
                                                                            seg.seq + 1)
    data = tcp_of(hosts.packet(["more", 0, False])[1])
    assert (str(data.flags), data.seq, len(bytes(data.payload))) == ("PA", seg.seq + 1, 10)


def test_a_reply_goes_to_where_the_request_arrived_from() -> None:
    """The server answers the frame as it arrived (a translated source included),
    on the port it left by."""
    hosts = Hosts(4)
    _, query, conv, _ = hosts.packet(["open", "udp", 1, 2, False])
    natted = bytearray(query)
    natted[26:30] = bytes([10, 1, 1, 240])  # the source as an SNAT left it
    hosts.delivered(conv, True, {"p3": [bytes(natted)]})
    port, answer, _, from_client = hosts.packet(["reply", 0])
    assert (port, from_client, Ether(answer).payload.dst) == (3, False, "10.1.1.240")


def test_the_connection_table_reads_as_the_models() -> None:
    """dpctl/dump-conntrack's lines and the model's connections in one canonical
    form: tuples (ICMP's identifier as both ports), zone, mark, label; an
    uncommitted model connection is not in the table."""
    text = ("tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=1001,dport=80),reply=(src=10.1.1.2,"
            "dst=10.1.1.240,sport=80,dport=1001),zone=7,mark=1,labels=0x10000,"
            "protoinfo=(state=SYN_SENT)\n"
            "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=3,type=128,code=0),reply=(src=fc00::2,"
            "dst=fc00::1,id=3,type=129,code=0)\n")
    conns = [Conn(7, Key("10.1.1.1", "10.1.1.2", 6, 1001, 80),
                  Key("10.1.1.2", "10.1.1.240", 6, 80, 1001), mark=1, label=0x10000,
                  committed=True),
             Conn(0, Key("fc00:0::1", "fc00::2", 58, 3, 3), Key("fc00::2", "fc00::1", 58, 3, 3),
                  committed=True),
             Conn(0, Key("10.1.1.3", "10.1.1.2", 17, 5, 53), Key("10.1.1.2", "10.1.1.3", 17, 53, 5))]
    assert parse_conntrack(text) == conntrack_entries(conns)
    assert parse_conntrack(text.replace("mark=1", "mark=2")) != conntrack_entries(conns)
