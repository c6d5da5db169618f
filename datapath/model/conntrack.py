"""Connection tracking and NAT, from the standards and OVS's documentation.

The table (`Conntrack`) holds committed connections per zone; `Ct` is the
OpenFlow `ct` action applied to one packet.  Each rule cites where it comes from:

Checksums (what makes a packet invalid before any lookup):
- IPv4 header checksum (RFC 791; a host verifies it, RFC 1122 3.2.1.2): a packet
  whose rx flags say the NIC found it bad is invalid without a look; one the NIC
  vouched for (good) or that is ours to finish (partial) is not looked at; an
  unknown one is verified in software (`checked`), and if wrong it is invalid.
  Every invalid verdict for a bad IPv4 checksum counts one error (`err`).
- The TCP, UDP, ICMP and ICMPv6 checksums (RFC 9293 3.1, RFC 768, RFC 792,
  RFC 4443 2.3) the same way by the L4 rx flag; a UDP checksum of 0 is none and
  is not verified (RFC 768; over IPv6 RFC 6935).  "L3/L4 protocol handler
  determines that the packet is malformed" is +inv (ovs-fields(7) ct_state).
- An invalid packet is not tracked further: no commit, no NAT, no mark; it goes
  on through the pipeline as it is, with ct_state +trk+inv, "only the trk flag
  is also set" (ovs-fields(7)).

States (ovs-fields(7) `ct_state`; ovs-actions(7) `ct`):
- Connections live per zone ("each zone is an independent connection tracking
  context"); a key is the 5-tuple, with the ICMP echo identifier for both ports.
- new: "an uncommitted connection", and a committed one not yet seen from both
  directions; est: "packets of a committed connection have been seen by
  conntrack from both directions"; the two exclude each other.
- rpl: the packet goes opposite to the one that committed the connection (only
  for committed connections); new and rpl exclude each other.
- rel: an ICMP/ICMPv6 error (RFC 792, RFC 4443 2.1 types 1-4) whose embedded
  packet belongs to a committed connection in that zone; +rpl when it travels in
  the connection's reply direction.  An error about no committed connection is
  invalid (RFC 5508 section 4.1: a NAT drops an error with no mapping).
- TCP (RFC 9293 3.5, 3.10.7): a connection opens with a SYN; a SYN+ACK, a RST or
  a segment with neither SYN nor ACK cannot open one (a LISTEN end answers them
  with a reset or drops them, 3.10.7.2) and is +inv.  An ACK without SYN opens
  one "mid-stream" (loose pickup; dpif-netdev.at's conntrack test commits such
  segments, upstream's expected hex counts as a fact).  In SYN-SENT, a reply
  must be a SYN+ACK or a RST (3.10.7.3), else +inv.
- UDP and ICMP echo (RFC 792, RFC 4443 4.1-4.2): the first packet opens; an
  echo reply cannot open a connection (it answers a request) and is +inv.
- ct_mark and ct_label: zero for an untracked or uncommitted connection;
  `exec(set_field:V/M->ct_mark)` on a commit stores (old & ~M) | (V & M); every
  later packet of the connection reads them back (ovs-actions(7) `ct`).
- force: a committed connection in the other direction is ended and a new one
  begins in this packet's direction (ovs-actions(7) `force`).

NAT (ovs-actions(7) `nat`; RFC 4787, RFC 5382, RFC 5508):
- Takes effect only once the connection is committed; `nat(src=...)` on a
  packet of an existing connection behaves as a bare `nat`, which translates
  each packet as its connection was set up.
- One address: always that address.  A range: "any address in the range",
  consistent for the whole connection (endpoint-independent per connection,
  RFC 4787 REQ-1 in its weakest reading): `Nat.candidates()` lists them and a
  case pins the one OVS chose (`Conntrack.pin`).  Without a port range the port
  is kept (OVS falls back to another port only on a collision, which these
  scenarios avoid; RFC 4787 4.2.1 port preservation); with one, any port in it.
  An ICMP echo's identifier, which keys it as ports do, may be kept or mapped
  into the range (RFC 5508 3.1 REQ-1 a: a NAPT translates the Query Identifier).
- nat(src=0.0.0.0): no SNAT unless the connection's reply key collides with a
  committed connection's, then the source port only, to any other port
  (ovs-actions(7) "a special case").
- Original direction: rewrite to the reverse of the reply key; reply direction:
  to the reverse of the original key (RFC 5382 / RFC 4787 the inverse mapping).
  ct_state gets +snat when this packet's source was translated, +dnat when its
  destination was ("transformed by source/destination address/port
  translation"): a reply to a SNATed connection gets +dnat.
- A packet NATed by a connection stays that connection's packet (a related
  ICMP error too): a later ct in the same zone finds it by the tuple it
  translated to (the reverse of the other direction's key), and a ct with nat
  there translates it as before (no change) and keeps its +snat/+dnat; a new
  zone starts afresh
  (ovs-fields(7): ct_nw_src and the other original-tuple fields stay with the
  packet through recirculation; "each zone is an independent connection
  tracking context").
- A related ICMP error travels in the direction opposite to the packet it
  embeds (RFC 5508 4.2, RFC 5382 7.1): the embedded packet's key is reversed.
- A mapping is the connection's reply tuple, and no two connections of a zone
  share one: the replies could not tell them apart (RFC 4787 4.1, RFC 3022
  2.2).  An SNAT whose mappings are all taken falls back to another port
  when it has no port range, and has none for a new connection when it has
  one (ovs-actions(7): "When a port range is specified, fallback to
  ephemeral ports does not happen, else, it will"): its commit is refused.
  How a DNAT collision is resolved is not documented (the model does not say).
- Limits (ovs-dpctl(8) ct-set-limits: "the maximum allowed number of
  connections in a connection tracking zone", 0 unlimited, a default for the
  zones without one; ct-set-maxconns: "the maximum limit of connection tracker
  entries"): a commit over a limit is refused.
- A commit with nat(src=...) or nat(dst=...) that is refused leaves the packet
  with no NAT session: "When a NAT device is unable to establish a NAT Session
  for a new transport-layer (TCP, UDP, ICMP, etc.) flow due to resource
  constraints or administrative restrictions, the NAT device SHOULD send an
  ICMP destination unreachable message ... and drop the original packet"
  (RFC 5508 REQ-8): the packet is dropped (the ct action sends no ICMP: an
  action of the flow table would).  What becomes of a packet whose commit
  without NAT a limit refuses is documented nowhere: the model does not say.
- How the packet's bytes are rewritten to that (addresses, ports, a related
  error's embedded headers, the checksums) is datapath/model/ct_nat.py's.
"""
from __future__ import annotations

import copy
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from datapath.model import csum, ct_nat, hooks
from datapath.model.actions import Action
from datapath.model.packet import (
    IPV6_AH,
    IPV6_EXT_HEADERS,
    PROTO_ICMP,
    PROTO_ICMPV6,
    PROTO_TCP,
    PROTO_UDP,
    Packet,
    ipv6_header,
)
from datapath.offloads import CsumState

ICMP_ERRORS = (3, 4, 5, 11, 12)  # unreachable, source quench, redirect, time exceeded, param
ICMPV6_ERRORS = (1, 2, 3, 4)  # unreachable, too big, time exceeded, parameter problem
ICMP_ECHO = {PROTO_ICMP: (8, 0), PROTO_ICMPV6: (128, 129)}  # request, reply

# ct_state bits (ovs-fields(7)).
NEW, EST, REL, RPL, INV, TRK, SNAT, DNAT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
STATE_NAMES = (("new", NEW), ("est", EST), ("rel", REL), ("rpl", RPL), ("inv", INV),
               ("trk", TRK), ("snat", SNAT), ("dnat", DNAT))
TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10


def state_text(bits: int) -> str:
    """ct_state as ovs-ofctl prints it: '+trk+est+rpl', or '0' untracked."""
    return "".join(f"+{name}" for name, bit in STATE_NAMES if bits & bit) or "0"


class Key(NamedTuple):
    """A connection's 5-tuple as one direction's packets carry it."""

    src: str
    dst: str
    proto: int
    sport: int
    dport: int

    def reversed(self) -> "Key":
        return Key(self.dst, self.src, self.proto, self.dport, self.sport)


@dataclass(frozen=True)
class Nat:
    """nat(src=A[-B][:P[-Q]]) or nat(dst=...) (ovs-actions(7)); bare `nat` is Nat()."""

    kind: str = ""  # "src", "dst", or "" for a bare nat
    addrs: tuple[str, str] = ("", "")
    ports: tuple[int, int] | None = None

    @classmethod
    def of(cls, kind: str, addr: str, ports: tuple[int, int] | int | None = None) -> "Nat":
        lo, _, hi = addr.partition("-")
        if isinstance(ports, int):
            ports = (ports, ports)
        return cls(kind, (lo, hi or lo), ports)

    def ofctl(self) -> str:
        if not self.kind:
            return "nat"
        lo, hi = self.addrs
        v6 = ":" in lo
        text = lo if lo == hi else f"{lo}-{hi}"
        if self.ports is not None:
            if v6:
                text = f"[{lo}]" if lo == hi else f"[{lo}]-[{hi}]"
            p_lo, p_hi = self.ports
            text += f":{p_lo}" if p_lo == p_hi else f":{p_lo}-{p_hi}"
        return f"nat({self.kind}={text})"

    @property
    def all_zero(self) -> bool:
        """nat(src=0.0.0.0) or nat(src=::): the special case of ovs-actions(7)."""
        return self.kind == "src" and self.addrs[0] == self.addrs[1] \
            and not int(ipaddress.ip_address(self.addrs[0]))

    def candidates(self, key: Key) -> list[tuple[str, int]]:
        """Every (address, port) the documentation allows for this connection."""
        lo, hi = (ipaddress.ip_address(a) for a in self.addrs)
        addrs = [str(ipaddress.ip_address(int(lo) + i)) for i in range(int(hi) - int(lo) + 1)]
        own = key.sport if self.kind == "src" else key.dport
        if self.all_zero:
            # "When a source port collision is detected during the commit, the
            # source port will be translated to an ephemeral port" (ovs-actions(7)).
            return [(key.src, p) for p in range(1, 65536) if p != own]
        if self.ports is None or key.proto not in (PROTO_TCP, PROTO_UDP, *ICMP_ECHO):
            ports = [own]
        elif key.proto in ICMP_ECHO:
            # The range is of L4 ports (ovs-actions(7)); a NAPT may map an echo's
            # Query Identifier as a port (RFC 5508 3.1 REQ-1 a): either is allowed.
            ports = [own, *(p for p in range(self.ports[0], self.ports[1] + 1) if p != own)]
        else:
            ports = list(range(self.ports[0], self.ports[1] + 1))
        return [(a, p) for a in addrs for p in ports]


@dataclass
class Conn:
    """A committed connection: its keys as each direction's packets arrive."""

    zone: int
    orig: Key
    reply: Key  # the reply packets' key: the reverse of the translated original
    nat: str = ""  # "src", "dst" or ""
    mark: int = 0
    label: int = 0
    seen_reply: bool = False
    tcp: str = ""  # RFC 9293 state names, as a tracker between the two ends sees them
    committed: bool = False


@dataclass
class Result:
    """What one ct action made of one packet."""

    state: int
    zone: int = 0
    conn: Conn | None = None
    reply: bool = False
    related: bool = False
    key: Key | None = None
    rule: str = ""  # the rule that decided an invalid verdict, for the record
    found: bool = False  # the connection was in the table before this packet

    @property
    def committed(self) -> bool:
        """Whether the packet's connection is in the table (ct_mark/ct_label are
        zero otherwise)."""
        return self.conn is not None and self.conn.committed

    @property
    def text(self) -> str:
        return state_text(self.state)

    @property
    def orig(self) -> Key | None:
        """ct_nw_src/dst, ct_nw_proto, ct_tp_src/dst (ovs-fields(7)): the original
        direction's tuple of a committed or related connection ("from that
        initial non-committed non-related packet"); an uncommitted packet's own
        headers; none for an invalid or untracked packet."""
        if self.state & INV or not self.state & TRK:
            return None
        if self.conn is not None and (self.conn.committed or self.related):
            return self.conn.orig
        return self.key


@dataclass
class Conntrack:
    """The connection tables (one per zone) and the checksum counters."""

    checked: int = 0  # conntrack_l3csum_checked
    err: int = 0  # conntrack_l3csum_err
    l4_checked: int = 0  # verified TCP/UDP/ICMP checksums
    l4_err: int = 0
    conns: list[Conn] = field(default_factory=list)
    # (zone, original key) -> the (address, port) a NAT range gave it, as observed.
    pins: dict[tuple[int, Key], tuple[str, int]] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)  # every ct action's, in order
    # ct-set-limits: zone -> limit, and the default of the zones without one (0: none).
    limits: dict[int, int] = field(default_factory=dict)
    default_limit: int = 0
    max_conns: int | None = None  # ct-set-maxconns

    @property
    def last(self) -> Result:
        return self.results[-1]

    def probe(self) -> "Conntrack":
        """A copy to try a packet on, this table left as it is: the connections,
        pins, limits and counters copied, the history of results not (a probe
        reads only its own, and copying every earlier one made each probe cost
        as much as the whole conversation so far)."""
        saved, self.results = self.results, []
        try:
            return copy.deepcopy(self)
        finally:
            self.results = saved

    def pin(self, zone: int, orig: Key, addr: str, port: int) -> None:
        """The choice a NAT range made for the connection `orig` (seen on the wire)."""
        self.pins[(zone, orig)] = (addr, port)

    def find(self, zone: int, key: Key) -> tuple[Conn, bool] | None:
        for conn in self.conns:
            if conn.zone == zone and key in (conn.orig, conn.reply):
                return conn, key == conn.reply
        return None

    # -- validity ----------------------------------------------------------

    def l3_valid(self, pkt: Packet) -> bool:
        """The IPv4 header checksum verdict, counting as it goes."""
        state = pkt.outer.ip_csum
        if state is CsumState.BAD:
            self.err += 1
            return False
        if state.valid:
            return True
        self.checked += 1
        assert pkt.l3 is not None
        ihl = (pkt.data[pkt.l3] & 0x0F) * 4
        if csum.checksum(bytes(pkt.data[pkt.l3:pkt.l3 + ihl])) != 0:
            self.err += 1
            return False
        return True

    def l4_valid(self, pkt: Packet) -> bool:
        lay = pkt.outer
        proto, ofs = lay.proto, lay.payload
        if proto not in (PROTO_TCP, PROTO_UDP, PROTO_ICMP, PROTO_ICMPV6) or ofs is None:
            return True  # no header of these to judge
        if proto in (PROTO_TCP, PROTO_UDP) and lay.l4 is None:
            return False  # shorter than its header: malformed
        if lay.l4_csum is CsumState.BAD:
            self.l4_err += 1
            return False
        if lay.l4_csum.valid:
            return True
        assert lay.l3 is not None
        end = lay.l3 + lay.l3_size
        if proto == PROTO_UDP and pkt.u16(ofs + 6) == 0:
            return True  # RFC 768: no checksum
        self.l4_checked += 1
        if proto == PROTO_ICMP:
            ok = csum.checksum(bytes(pkt.data[ofs:end])) == 0
        else:
            ok = csum.finish(csum.ones_sum(bytes(pkt.data[ofs:end]),
                                           pkt.pseudo_header(lay, proto, end - ofs))) == 0
        if not ok:
            self.l4_err += 1
        return ok

    # -- lookup ------------------------------------------------------------

    def track(self, pkt: Packet, zone: int) -> Result:
        """The lookup half of `ct`: the packet's state in `zone`, and the
        connection it belongs to (uncommitted: a Conn not in the table)."""
        if pkt.l3 is None or pkt.ipv not in (4, 6):
            raise NotImplementedError("model: conntrack of a non-IP packet")
        if pkt.outer.fragment or pkt.outer.payload is None:
            raise NotImplementedError("model: conntrack of a fragment (reassemble it first: "
                                      "datapath/model/ipfrag.py)")
        if pkt.ipv == 4 and not self.l3_valid(pkt):
            pkt.notes.append("conntrack: IPv4 checksum bad: +inv")
            return Result(TRK | INV, zone)
        if not self.l4_valid(pkt):
            pkt.notes.append("conntrack: L4 checksum bad or header malformed: +inv")
            return Result(TRK | INV, zone)
        lay = pkt.outer
        assert lay.payload is not None and lay.proto is not None
        natted = pkt.ct_nat.get(zone)
        if natted is not None and not any(c is natted[0] for c in self.conns):
            natted = None
        if lay.proto in (PROTO_ICMP, PROTO_ICMPV6) \
                and pkt.data[lay.payload] in (ICMP_ERRORS if lay.proto == PROTO_ICMP
                                              else ICMPV6_ERRORS):
            return self._related(pkt, zone, natted)
        key = packet_key(pkt.data, lay.l3 or 0, pkt.ipv)
        found = self.find(zone, key)
        if natted is not None:
            found = natted[0], natted[1]  # the connection that translated it
        if found is None:
            return self._opening(pkt, zone, key)
        conn, reply = found
        bits = self._update(pkt, conn, reply)
        return Result(bits, zone, conn, reply, key=key,
                      rule="tcp-syn-sent-reply" if bits & INV else "", found=True)

    def _opening(self, pkt: Packet, zone: int, key: Key) -> Result:
        lay = pkt.outer
        assert lay.payload is not None
        tcp = ""
        if key.proto == PROTO_TCP:
            flags = pkt.data[lay.payload + 13]
            if flags & TCP_SYN and not flags & (TCP_ACK | TCP_RST):
                tcp = "SYN-SENT"
            elif flags & TCP_ACK and not flags & (TCP_SYN | TCP_RST):
                tcp = "ESTABLISHED"  # picked up mid-stream
            else:
                pkt.notes.append(f"conntrack: TCP flags {flags:#x} cannot open a connection: +inv")
                return Result(TRK | INV, zone, key=key)
        elif key.proto in ICMP_ECHO:
            icmp_type = pkt.data[lay.payload]
            request, _ = ICMP_ECHO[key.proto]
            if icmp_type != request:
                pkt.notes.append(f"conntrack: ICMP type {icmp_type} opens no connection: +inv")
                return Result(TRK | INV, zone, key=key)
        conn = Conn(zone, key, key.reversed(), tcp=tcp)
        return Result(TRK | NEW, zone, conn, key=key)

    def _update(self, pkt: Packet, conn: Conn, reply: bool) -> int:
        """A packet of a committed connection: its state bits, updating the connection."""
        lay = pkt.outer
        assert lay.payload is not None
        if conn.orig.proto == PROTO_TCP:
            flags = pkt.data[lay.payload + 13]
            if conn.tcp == "SYN-SENT" and reply:
                if flags & TCP_SYN and flags & TCP_ACK:
                    conn.tcp = "SYN-RECEIVED"
                elif not flags & TCP_RST:
                    pkt.notes.append("conntrack: a reply in SYN-SENT neither SYN+ACK nor RST "
                                     "(RFC 9293 3.10.7.3): +inv")
                    return TRK | INV
            elif conn.tcp == "SYN-RECEIVED" and not reply and flags & TCP_ACK:
                conn.tcp = "ESTABLISHED"
        if reply:
            conn.seen_reply = True
        bits = TRK | (EST if conn.seen_reply else NEW)
        return bits | (RPL if reply else 0)

    def _related(self, pkt: Packet, zone: int,
                 natted: tuple[Conn, bool, int] | None = None) -> Result:
        """An ICMP error: related to the committed connection of the packet it
        embeds, or to the one whose NAT translated it earlier in this zone."""
        lay = pkt.outer
        assert lay.payload is not None
        inner = lay.payload + 8
        try:
            embedded = packet_key(pkt.data, inner, pkt.ipv)
        except (IndexError, struct.error, ValueError):
            embedded = None
        found = None if embedded is None else self.find(zone, embedded.reversed())
        if natted is not None and embedded is not None:
            found = natted[0], natted[1]
        if found is None:
            pkt.notes.append("conntrack: ICMP error about no committed connection: +inv")
            return Result(TRK | INV, zone)
        conn, reply = found
        return Result(TRK | REL | (RPL if reply else 0), zone, conn, reply, related=True,
                      key=embedded)

    # -- commit --------------------------------------------------------------

    def commit(self, res: Result, nat: Nat | None, force: bool) -> str:
        """Commit the packet's connection; "" if committed (or it was), else why
        the tracker refused it (a limit reached, no free mapping)."""
        assert res.conn is not None and res.key is not None
        if force and res.reply and not res.related:
            self.conns.remove(res.conn)
            res.conn.committed = False
            res.conn = Conn(res.zone, res.key, res.key.reversed(), tcp=res.conn.tcp)
            res.reply, res.state = False, TRK | NEW
        conn = res.conn
        if conn.committed:
            return ""
        refused = self.over_limit(conn.zone)
        if refused:
            return refused
        if nat is not None and nat.all_zero and not self._taken(conn.zone, conn.reply):
            nat = None  # nat(src=0.0.0.0) without a collision: no SNAT (ovs-actions(7))
        if nat is not None and nat.kind:
            o = conn.orig
            free = [c for c in nat.candidates(o)
                    if not self._taken(conn.zone, _mapped(o, nat, *c))]
            if not free and nat.kind == "dst":
                raise NotImplementedError(
                    f"model: every mapping of {nat.ofctl()} is taken for {o}: how a datapath "
                    "resolves a DNAT collision (another source port?) is documented nowhere")
            if not free and nat.ports is None and not nat.all_zero:
                # "When a port range is specified, fallback to ephemeral ports does not
                # happen, else, it will" (ovs-actions(7)): any other port of the addresses.
                free = [(a, port) for a, _ in nat.candidates(o) for port in range(1, 65536)
                        if not self._taken(conn.zone, _mapped(o, nat, a, port))]
            if not free:
                return f"no mapping of {nat.ofctl()} is free for {o}"
            addr, port = self.pins.get((conn.zone, o), free[0])
            if (addr, port) not in free:
                raise ValueError(f"model: pinned {addr}:{port} is not a free mapping of "
                                 f"{nat.ofctl()}")
            conn.nat, conn.reply = nat.kind, _mapped(o, nat, addr, port)
        conn.committed = True
        self.conns.append(conn)
        return ""

    def over_limit(self, zone: int) -> str:
        """Why a new connection in `zone` is over a limit, or ""."""
        limit = self.limits.get(zone, self.default_limit)
        if limit and sum(c.zone == zone for c in self.conns) >= limit:
            return f"zone {zone} holds its limit of {limit} connections"
        if self.max_conns is not None and len(self.conns) >= self.max_conns:
            return f"the tracker holds its maximum of {self.max_conns} connections"
        return ""

    def _taken(self, zone: int, reply: Key) -> bool:
        """Whether a committed connection of `zone` has the tuple `reply` either way."""
        return any(c.zone == zone and reply in (c.orig, c.reply) for c in self.conns)


def _mapped(o: Key, nat: Nat, addr: str, port: int) -> Key:
    """The reply key of connection `o` translated by `nat` to (addr, port)."""
    new = (Key(addr, o.dst, o.proto, port, o.dport) if nat.kind == "src"
           else Key(o.src, addr, o.proto, o.sport, port))
    if o.proto in ICMP_ECHO:  # one identifier both ways
        new = new._replace(sport=port, dport=port)
    return new.reversed()


def packet_key(data: bytes | bytearray, l3: int, ipv: int) -> Key:
    """The 5-tuple of the IP packet at `l3` (an ICMP echo's identifier in both
    ports; IPv6: the protocol after the extension headers)."""
    if ipv == 4:
        ihl = (data[l3] & 0x0F) * 4
        proto, l4 = data[l3 + 9], l3 + ihl
        src = str(ipaddress.IPv4Address(bytes(data[l3 + 12:l3 + 16])))
        dst = str(ipaddress.IPv4Address(bytes(data[l3 + 16:l3 + 20])))
    else:
        v6 = ipv6_header(data, l3)
        proto, l4 = v6.next_header, l3 + 40
        # The upper-layer header follows the extension headers (RFC 8200 §4;
        # AH's length is in 4-octet units, RFC 4302 §2.2).
        while proto in IPV6_EXT_HEADERS and l4 + 8 <= len(data):
            proto, l4 = data[l4], l4 + ((data[l4 + 1] + 2) * 4 if proto == IPV6_AH
                                        else (data[l4 + 1] + 1) * 8)
        src = str(ipaddress.IPv6Address(bytes(data[l3 + 8:l3 + 24])))
        dst = str(ipaddress.IPv6Address(bytes(data[l3 + 24:l3 + 40])))
    sport = dport = 0
    if proto in (PROTO_TCP, PROTO_UDP):
        sport, dport = struct.unpack_from("!HH", data, l4)
    elif proto in ICMP_ECHO:
        sport = dport = struct.unpack_from("!H", data, l4 + 4)[0]
    return Key(src, dst, proto, sport, dport)


# -- the action ---------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Ct(Action):
    """ct([commit,][force,]zone=Z[,table=T][,exec(set_field...)][,nat...]) (ovs-actions(7)).

    `mark` and `label` are (value, mask) pairs set through exec (commit only)."""

    table: Conntrack
    zone: int = 0
    commit: bool = False
    nat: Nat | None = None
    mark: tuple[int, int] | None = None
    label: tuple[int, int] | None = None
    force: bool = False
    recirc: int | None = None  # table=, for ovs-ofctl only

    def ofctl(self) -> str:
        args = (["commit"] if self.commit else []) + (["force"] if self.force else [])
        if self.zone:
            args.append(f"zone={self.zone}")
        if self.recirc is not None:
            args.append(f"table={self.recirc}")
        sets = [f"set_field:{v:#x}/{m:#x}->{name}" for name, vm in
                (("ct_mark", self.mark), ("ct_label", self.label)) if vm is not None
                for v, m in [vm]]
        if sets:
            args.append(f"exec({','.join(sets)})")
        if self.nat is not None:
            args.append(self.nat.ofctl())
        return f"ct({','.join(args)})"

    def apply(self, pkt: Packet) -> None:
        res = self.table.track(pkt, self.zone)
        self.table.results.append(res)
        if res.state & INV:
            return
        if self.commit and res.related:
            # "Connections identified as rel are separate from the originating
            # connection and must be committed separately" (ovs-fields(7)): an
            # ICMP error is no connection of its own to commit.  It belongs to the
            # connection it is about (its ct_mark and ct_label are that one's), and
            # exec's ct_mark and ct_label are "committed ... to the connection to
            # which the current packet belongs" (ovs-fields(7), ct_mark, ct_label).
            assert res.conn is not None
            self._store(res.conn)
            pkt.notes.append("conntrack: commit of a related ICMP error: no connection of its "
                             "own" + (", exec's fields go to the one it is about"
                                      if self.mark or self.label else ""))
        elif self.commit:
            refused = self.table.commit(res, self.nat, self.force)
            if refused:
                self._refused(pkt, refused)
                return
            conn = res.conn
            assert conn is not None
            self._store(conn)
            pkt.notes.append(f"conntrack: zone {self.zone}: {res.key} committed"
                             + (f", {conn.nat} NAT to {conn.reply.reversed()}" if conn.nat else ""))
        if self.nat is not None and res.committed and res.conn is not None and res.conn.nat:
            natted = pkt.ct_nat.get(self.zone)
            bits = translate(pkt, res)
            if natted is not None and natted[0] is res.conn:
                bits |= natted[2]
            res.state |= bits
            pkt.ct_nat[self.zone] = (res.conn, res.reply, bits)


    def _store(self, conn: Conn) -> None:
        """exec's ct_mark and ct_label, (value, mask) each, into `conn`."""
        for attr, vm in (("mark", self.mark), ("label", self.label)):
            if vm is not None:
                value, mask = vm
                setattr(conn, attr, (getattr(conn, attr) & ~mask) | (value & mask))

    def _refused(self, pkt: Packet, why: str) -> None:
        """The tracker refused the commit: with NAT, the packet has no session and
        is dropped (RFC 5508 REQ-8); a layer above may say the datapath under
        test forwards it instead (datapath/model/hooks.py)."""
        if self.nat is None or not self.nat.kind:
            raise NotImplementedError(f"model: a commit refused without NAT ({why}): what "
                                      "becomes of the packet is documented nowhere")
        bug = hooks.active().ct_commit_refused(pkt, why)
        if bug is None:
            pkt.dropped = True
            pkt.notes.append(f"conntrack: zone {self.zone}: commit refused ({why}): no NAT "
                             "session, the packet is dropped (RFC 5508 REQ-8)")
            return
        if bug not in pkt.bugs:
            pkt.bugs.append(bug)
        pkt.notes.append(f"conntrack: zone {self.zone}: commit refused ({why}); the datapath "
                         f"under test forwards the packet untranslated (known: {bug.key})")


def translate(pkt: Packet, res: Result) -> int:
    """Rewrite the packet as its connection's NAT says (datapath/model/ct_nat.py);
    the snat/dnat bits it earns."""
    conn, key = res.conn, res.key
    assert conn is not None and key is not None
    # The direction's packets become the reverse of the other direction's key; a
    # related error travels opposite to the packet it embeds (`key`).
    outer = key.reversed() if res.related else key
    to = conn.orig.reversed() if res.reply else conn.reply.reversed()
    snat, dnat = ct_nat.rewrite(pkt, outer, to, res.related)
    bits = (SNAT if snat else 0) | (DNAT if dnat else 0)
    pkt.notes.append(f"conntrack: NAT {outer} -> {to}: {state_text(bits)}")
    return bits


@dataclass(frozen=True, eq=False)
class CtClear(Action):
    """ct_clear (ovs-actions(7)): the packet is untracked again, its ct_state
    and the other connection tracking fields zero; the frame is unchanged."""

    table: Conntrack

    def ofctl(self) -> str:
        return "ct_clear"

    def apply(self, pkt: Packet) -> None:
        self.table.results.append(Result(0))
        pkt.notes.append("ct_clear: untracked")


def CtCommitDnat(table: Conntrack, addr: str) -> Ct:  # noqa: N802 (an action's name)
    """ct(commit,nat(dst=ADDR)) in zone 0 (dpif-netdev.at's conntrack test)."""
    return Ct(table, commit=True, nat=Nat.of("dst", addr))


