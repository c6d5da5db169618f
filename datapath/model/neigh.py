"""Next-hop resolution frames a tunnel endpoint sends for an unknown remote.

- ARP request, RFC 826 ("Packet Generation"): Ethernet broadcast from the
  underlay bridge's MAC, hardware type 1, protocol 0x0800, lengths 6 and 4,
  opcode 1 (request), sender = our MAC and IP, target hardware address 0,
  target protocol address = the next hop.
- Neighbor Solicitation, RFC 4861 §4.3 and §7.2.2: to the target's
  solicited-node multicast address (RFC 4291 §2.7.1, ff02::1:ff00:0/104 plus
  the target's low 24 bits), mapped to Ethernet 33:33 + its low 32 bits (RFC
  2464 §7); source = an address of the sending interface; hop limit 255; the
  Source Link-Layer Address option (type 1, length 1 = 8 octets); ICMPv6
  checksum over the pseudo-header (RFC 4443 §2.3).
"""
from __future__ import annotations

import ipaddress
import struct

from datapath.model import csum

BROADCAST = b"\xff" * 6


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def arp_packet(op: int, sha: str, spa: str, tha: str, tpa: str,
               eth_dst: str = "ff:ff:ff:ff:ff:ff") -> bytes:
    """An RFC 826 ARP packet for IPv4 over Ethernet, from `sha`."""
    return (_mac(eth_dst) + _mac(sha) + struct.pack("!HHHBBH", 0x0806, 1, 0x0800, 6, 4, op)
            + _mac(sha) + ipaddress.IPv4Address(spa).packed + _mac(tha)
            + ipaddress.IPv4Address(tpa).packed)


def arp_request(src_mac: str, src_ip: str, target_ip: str) -> bytes:
    """An ARP request (RFC 826) from SRC_MAC/SRC_IP for TARGET_IP, as an Ethernet frame."""
    return arp_packet(1, src_mac, src_ip, "00:00:00:00:00:00", target_ip)


def solicited_node(target: str) -> ipaddress.IPv6Address:
    """The solicited-node multicast address of an IPv6 address (RFC 4291 §2.7.1)."""
    low = ipaddress.IPv6Address(target).packed[13:]
    return ipaddress.IPv6Address(bytes.fromhex("ff0200000000000000000001ff") + low)


def neighbor_solicitation(src_mac: str, src_ip: str, target: str) -> bytes:
    """A Neighbor Solicitation for TARGET (RFC 4861 §4.3), as an Ethernet frame."""
    dst = solicited_node(target)
    src = ipaddress.IPv6Address(src_ip).packed
    body = (struct.pack("!BBHI", 135, 0, 0, 0) + ipaddress.IPv6Address(target).packed
            + struct.pack("!BB", 1, 1) + _mac(src_mac))
    value = csum.finish(csum.ones_sum(body, csum.pseudo_header_v6(src, dst.packed, 58,
                                                                  len(body))))
    body = body[:2] + struct.pack("!H", value) + body[4:]
    ip6 = struct.pack("!IHBB", 6 << 28, len(body), 58, 255) + src + dst.packed
    return b"\x33\x33" + dst.packed[12:] + _mac(src_mac) + b"\x86\xdd" + ip6 + body
