"""GRE sequence numbers per tunnel port, on real ports: two OVS GRE ports
with options:seq=true and their own keys to one remote (both behind OVS's one
datapath GRE port), OVS's userspace push (no kernel GRE device needed), the
underlay a veth to at_ns0, whose side is captured.

RFC 2890 §2.2: the sequence number of the first datagram a sender sends on a
tunnel (the key tells tunnels apart, §2.1) is 0, and it goes up by one per
datagram; vswitch.xml (options:seq): "incremented by one on each outgoing
packet".  OVS 4.0.0 takes one counter per datapath tunnel port, so the first
datagram of the second port carries 1 (known entry gre-seq-shared, which OVS
may keep by design): the case xfails only if OVS sends exactly that.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from datapath import model
from datapath.backends.native_tunnel import Sniffer
from datapath.model import bugs
from datapath.model.packet import PROTO_GRE, parse_layer
from datapath.model.tunnel import TunnelSpec
from datapath.verdict import conclude
from fixtures.frames import compose
from fixtures.system_traffic import Traffic
from harness.control import check
from harness.wait import WaitTimeout, wait_until
from reports.plugin import record_for

pytestmark = pytest.mark.requires(backend="tap")

UNDERLAY_MAC, NS0_MAC = "02:90:8c:a8:a1:49", "fa:ad:fa:25:05:60"
LOCAL, REMOTE = "172.31.1.100", "172.31.1.1"


def test_gre_seq_per_tunnel_port(system_traffic: Callable[..., Traffic],
                                 request: pytest.FixtureRequest) -> None:
    """One UDP frame out of at_gre0 (key 1), then one out of at_gre1 (key 2),
    each by a packet-out on br0.  Verifies each GRE frame on the wire against the
    model: key, checksum-less header and sequence number 0, the first of each
    tunnel (RFC 2890 §2.2)."""
    t: Traffic = system_traffic("userspace")
    t.add_br("br-underlay", "set", "bridge", "br-underlay",
             f'other-config:hwaddr="{UNDERLAY_MAC}"')
    ns0 = t.add_namespace("at_ns0")
    check(t.sb.ofctl("add-flow", "br-underlay", "actions=normal"))
    t.add_veth("p0", ns0, "br-underlay", f"{REMOTE}/24", NS0_MAC)
    t.ip("addr", "add", "dev", "br-underlay", f"{LOCAL}/24")
    t.ip("link", "set", "dev", "br-underlay", "up")
    for port, key in (("at_gre0", 1), ("at_gre1", 2)):
        check(t.sb.vsctl("add-port", "br0", port, "--", "set", "int", port, "type=gre",
                         f"options:remote_ip={REMOTE}", f"options:key={key}",
                         "options:seq=true"))
    # The next hop's MAC, as upstream's tunnel tests set it: no ARP in the capture.
    check(t.sb.appctl("tnl/neigh/set", "br-underlay", REMOTE, NS0_MAC), stdout="OK\n")
    check(t.sb.ofctl("del-flows", "br0"))
    sniffer = Sniffer(ns0, "p0")
    t.env.cleanup.defer("close the capture", sniffer.close)
    steps = record_for(request.node).steps
    frame = compose("udp", 4)
    for port, key in (("at_gre0", 1), ("at_gre1", 2)):
        spec = TunnelSpec("gre", LOCAL, REMOTE, UNDERLAY_MAC, NS0_MAC, key=key, csum=False,
                          seq=True)
        expected = model.encapsulate(frame, spec, seq=0)
        if port == "at_gre1":  # at_gre0 used gre_sys's counter once
            expected = model.deviation(expected, model.encapsulate(frame, spec, seq=1),
                                       bugs.GRE_SEQ_SHARED)
        check(t.sb.ofctl("packet-out", "br0",
                         f"in_port=LOCAL packet={frame.hex()} actions=output:{port}"))
        captured: list[bytes] = []

        def arrived() -> bool:
            sniffer.read()
            captured[:] = [c.frame for c in sniffer.frames
                           if not c.outgoing and parse_layer(c.frame).proto == PROTO_GRE]
            return len(captured) >= 1
        try:
            wait_until(arrived, 5, what=f"the GRE frame of {port} on p0")
        except WaitTimeout:
            pass  # the verdict says what is missing
        sniffer.frames.clear()
        verdict = conclude(steps, expected, captured, title=f"packet-out -> {port} (key {key})",
                           rx_port="br0 LOCAL", tx_port="p0", sent=[frame])
        assert verdict.known or verdict.status == "match", "\n".join(verdict.lines)
