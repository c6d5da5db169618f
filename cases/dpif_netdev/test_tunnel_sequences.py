"""VXLAN tunnel checksums, upstream's sequences: dpif-netdev.at tests 1122-1133, one id each.

cases/dpif_netdev/test_tunnel_upstream.py runs every forward of these tests as an id of its
own on a shared rig whose datapath flows are purged before each id, so each
packet is a miss.  Here each upstream test runs as upstream runs it: its own
ovs-vswitchd with upstream's set-up (br0, br1 with p1 and t1, br2 with p2 and
the underlay address, p2.pcap), its one rule, and all its forwards in order
(fixtures/tunnel.py upstream_steps), tunnel csum, tx offloads and rx flags
changed between them, so later packets hit the datapath flow of earlier ones.
After each forward the last frame of p2.pcap must be upstream's (the vectors
of fixtures/dpif_netdev/upstream_tunnel_vectors.py) and every frame the model's.

After `options:csum=true` the sequence waits until the flows installed so far
carry the new header (harness/dpflows.py) before the next packet.  Upstream
sends at once and relies on its forks being slow: `ovs-vsctl` returns when
ovs-vswitchd has taken the change, and the installed datapath flows follow it
only on a later revalidator round (right after vsctl returned, the old actions
were still installed in 2 of 40 tries under load).  That is by design, not a
bug: installed flows are a cache that the revalidators keep in step
asynchronously (vswitch.xml's other_config:max-revalidator), and OVS's own
tests wait with `revalidator/wait` where it matters.  The packets in the gap
leave with the old configuration's header, here a zero outer UDP checksum,
which RFC 768 and RFC 6935 both let a receiver accept.
"""
from __future__ import annotations

import pytest

from datapath.backends.dummy import DummyPort
from datapath.model.actions import ofctl_actions
from evidence.tshark import Tshark
from fixtures.dpif_netdev.sequence import FwdSequence
from fixtures.dpif_netdev.upstream_tunnel_vectors import TUNNEL_TESTS, resolve
from fixtures.tunnel import INNERS, REMOTE_MAC, model_actions, spec, upstream_steps, upstream_title
from harness.control import check
from harness.dpflows import installed, wait_retranslated
from harness.records import CaseRecord
from harness.sandbox import Sandbox
from harness.vsctl import add_port, chain, set_interface

UNDERLAY = {4: ("ip4addr", "1.1.2.88/24", "1.1.2.92"), 6: ("ip6addr", "2001:cafe::88/64",
                                                           "2001:cafe::92")}
PARAMS = [pytest.param(ul, traffic, id=f"ul{ul}-{traffic}",
                       marks=pytest.mark.upstream(upstream_title(ul, traffic)))
          for ul in (4, 6) for traffic in INNERS]


@pytest.mark.parametrize("underlay,traffic", PARAMS)
def test_vxlan_upstream_sequence(sandbox: Sandbox, case_record: CaseRecord, second_opinion: Tshark | None,
                                 underlay: int, traffic: str) -> None:
    """Every forward of the upstream test, in order, in one daemon: the outer
    headers and checksums (0 with csum off; complete, or ffff from a _disabled
    driver, with csum on) and the inner ones after the rewrite."""
    sb = sandbox
    cmd, local, remote = UNDERLAY[underlay]
    sb.add_of_br("br0",
                 *chain(["add-br", "br1"], ["set", "bridge", "br1", "datapath-type=dummy"],
                        add_port("br1", "p1", type="dummy"), ["add-br", "br2"],
                        ["set", "bridge", "br2", "datapath-type=dummy"],
                        ["set", "bridge", "br2", "other-config:hwaddr=aa:66:aa:66:00:00"],
                        add_port("br2", "p2", type="dummy")))
    sb.vsctl(*add_port("br1", "t1", type="vxlan",
                       options={"remote_ip": remote, "key": 123, "csum": False}, ofport_request=11))
    inner = INNERS[traffic]
    rule = ofctl_actions(model_actions(inner, spec("vxlan", underlay, False)))
    sb.ofctl("add-flow", "br1", f"{inner.match()},actions={rule}")
    check(sb.appctl(f"netdev-dummy/{cmd}", "br2", local), stdout="OK\n")
    check(sb.appctl("tnl/neigh/set", "br2", remote, REMOTE_MAC), stdout="OK\n")
    check(sb.appctl("tnl/egress_port_range", "57363", "57363"), stdout="OK\n")
    sb.appctl("vlog/set", "netdev_dummy:file:dbg")
    sb.vsctl(*set_interface("p2", options={"tx_pcap": "p2.pcap"}))
    seq = FwdSequence(sb, DummyPort.existing(sb, "p1", 0),
                      DummyPort.existing(sb, "p2", 0, pcap_name="p2.pcap"), case_record.steps,
                      second_opinion)
    vectors = TUNNEL_TESTS[upstream_title(underlay, traffic).removeprefix("dpif-netdev - ")]
    frames = inner.frames()
    csum = False
    for step in upstream_steps(traffic):
        if step.csum != csum:
            seq.p2.configure(tx=step.tx)  # upstream removed every tx option before this
            before = installed(sb)
            sb.vsctl(*set_interface("t1", options={"csum": True}))
            # The flows installed so far push the old header until a revalidator
            # re-translates them (harness/dpflows.py); upstream's next packet
            # would race that, so wait for it.
            wait_retranslated(sb, before, affected=lambda actions: "tnl_push" in actions,
                              what="t1's options:csum=true")
            if traffic != "none":
                check(sb.vsctl("get", "interface", "p2", "options"), stdout="{tx_pcap=p2.pcap}\n")
            csum = step.csum
        tun = spec("vxlan", underlay, step.csum)
        seq.forward(frames[step.frame], model_actions(inner, tun), rx=step.rx, tx=step.tx,
                    upstream_hex=resolve(vectors, step.expected),
                    title=f"{step.id} -> {step.expected}")
