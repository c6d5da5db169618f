"""tunnel-push-pop.at and tunnel-push-pop-ipv6.at: 'Mirror over tunnels'.

br0 mirrors everything to a Geneve port and to an ERSPAN v1 port with a
flow-based key and index; the tunnels leave through br-ext/p-ext.  Upstream
checks that the trace of a packet from p1 holds both pushes.  Beyond that,
the case then sends that packet: p-ext must send exactly the two mirrored
copies the model builds (Geneve with VNI 0 from the fixed source port 35190;
ERSPAN with session 0, index 0 and GRE sequence number 0, the first datagram).
"""
from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from datapath import model
from datapath.model.tunnel import TunnelSpec
from fixtures.tunnel_push_pop.pushpop import PushPop, neigh_advert

BR_EXT_MAC = "aa:55:aa:55:00:00"
FLOW = ("in_port(p1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),eth_type(0x0800),"
        "ipv4(src=192.168.0.1,dst=192.168.0.2,proto=1,tos=0,ttl=128,frag=no),"
        "icmp(type=8,code=0)")
PACKET = bytes(Ether(src="50:54:00:00:00:05", dst="50:54:00:00:00:07")
               / IP(src="192.168.0.1", dst="192.168.0.2", ttl=128, id=0) / ICMP(type=8))
CASES = {  # underlay: (file, local, geneve remote and MAC, erspan remote and MAC, header)
    4: ("tunnel-push-pop.at", "tunnel_push_pop - Mirror over tunnels", "1.1.1.3",
        ("1.1.1.1", "f8:bc:12:44:34:b6"), ("1.1.1.2", "f8:bc:12:44:34:b3")),
    6: ("tunnel-push-pop-ipv6.at", "tunnel_push_pop_ipv6 - Mirror over tunnels",
        "2001:cafe::90", ("2001:cafe::91", "f8:bc:12:44:34:b3"),
        ("2001:cafe::92", "f8:bc:12:44:34:b6")),
}


def actions(ul: int) -> tuple[str, str]:
    """Upstream's ERSPAN_ACT and GENEVE_ACT for this underlay."""
    _, _, local, (g_ip, g_mac), (e_ip, e_mac) = CASES[ul]
    if ul == 4:
        ip = "ipv4(src={src},dst={dst},proto={p},tos=0,ttl=64,frag=0x4000)"
        eth_type, size, e_type, csum = "0x0800", 50, 107, "0x0"
    else:
        ip = "ipv6(src={src},dst={dst},label=0,proto={p},tclass=0x0,hlimit=64)"
        eth_type, size, e_type, csum = "0x86dd", 70, 108, "0xffff"
    erspan = (f"clone(tnl_push(tnl_port(erspan_sys),header(size={size},type={e_type},"
              f"eth(dst={e_mac},src=aa:55:aa:55:00:00,dl_type={eth_type}),"
              + ip.format(src=local, dst=e_ip, p=47)
              + ",erspan(ver=1,sid=0x0,idx=0x0)),out_port(br-ext)),p-ext)")
    geneve = (f"clone(tnl_push(tnl_port(genev_sys_6081),header(size={size},type=5,"
              f"eth(dst={g_mac},src=aa:55:aa:55:00:00,dl_type={eth_type}),"
              + ip.format(src=local, dst=g_ip, p=17)
              + f",udp(src=0,dst=6081,csum={csum}),geneve(vni=0x0)),out_port(br-ext)),p-ext)")
    return erspan, geneve


PARAMS = [pytest.param(ul, id=f"ipv{ul}", marks=pytest.mark.upstream(CASES[ul][1],
                                                                       file=CASES[ul][0]))
          for ul in (4, 6)]


@pytest.mark.parametrize("underlay", PARAMS)
def test_mirror_over_tunnels(pushpop: PushPop, underlay: int) -> None:
    """Both mirror pushes in the trace (in any order), then the two copies on
    p-ext, every header against the model."""
    t = pushpop
    _, _, local, (g_ip, g_mac), (e_ip, e_mac) = CASES[underlay]
    t.start("add-br", "br-ext", "--", "set", "bridge", "br-ext", "datapath_type=dummy",
            f"other-config:hwaddr={BR_EXT_MAC}",
            "--", "add-port", "br0", "t1", "--", "set", "Interface", "t1", "type=geneve",
            f"options:remote_ip={g_ip}",
            "--", "add-port", "br0", "t2", "--", "set", "Interface", "t2", "type=erspan",
            f"options:remote_ip={e_ip}", "options:key=flow", "options:erspan_ver=1",
            "options:erspan_idx=flow",
            "--", "add-port", "br0", "p0", "--", "set", "Interface", "p0", "type=dummy",
            "--", "add-port", "br0", "p1", "--", "set", "Interface", "p1", "type=dummy",
            "--", "add-port", "br-ext", "p-ext", "--", "set", "Interface", "p-ext",
            "type=dummy", "options:pcap=ext.pcap")
    t.capture("p-ext", "ext.pcap", combined=True, own_macs=(BR_EXT_MAC,))
    t.vsctl("set", "Bridge", "br0", "mirrors=@m1,@m2", "--", "--id=@t1", "get", "Port", "t1",
            "--", "--id=@t2", "get", "Port", "t2",
            "--", "--id=@m1", "create", "Mirror", "name=vxlan", "select_all=true",
            "output_port=@t1",
            "--", "--id=@m2", "create", "Mirror", "name=erspan", "select_all=true",
            "output_port=@t2")
    t.ofctl("add-flow", "br-ext", "actions=normal")
    t.ofctl("add-flow", "br0", "actions=normal")
    if underlay == 4:
        t.revalidate()
    t.ok("tnl/egress_port_range", "35190", "35190")
    if underlay == 4:
        t.ok("netdev-dummy/ip4addr", "br-ext", "1.1.1.3/24")
        for ip, mac in ((g_ip, g_mac), (e_ip, e_mac)):
            t.receive("p-ext", f"eth(src={mac},dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),"
                      f"arp(sip={ip},tip=1.1.1.3,op=2,sha={mac},tha=00:00:00:00:00:00)")
    else:
        t.ok("netdev-dummy/ip6addr", "br-ext", "2001:cafe::90/64")
        for ip, mac in ((g_ip, g_mac), (e_ip, e_mac)):
            t.receive("p-ext", neigh_advert(ip, mac, dst=local, prefix=""))
    trace = t.trace("--names", "ovs-dummy", FLOW)
    erspan, geneve = actions(underlay)
    assert erspan in trace
    assert geneve in trace
    # Beyond upstream: the packet itself, mirrored into both tunnels.
    t.receive("p1", PACKET.hex())
    copies = model.Expected(frames=[])
    copies.extend(model.encapsulate(PACKET, TunnelSpec(
        "geneve", local, g_ip, BR_EXT_MAC, g_mac, key=None, udp_src=35190)))
    copies.extend(model.encapsulate(PACKET, TunnelSpec(
        "erspan", local, e_ip, BR_EXT_MAC, e_mac, key=0, erspan_ver=1, erspan_idx=0), seq=0))
    t.expect("p-ext", copies, "p1's packet mirrored into Geneve and ERSPAN", [PACKET],
             any_order=True)
    t.finish()
