"""The later steps of 'tunnel_push_pop - action' (test_tunnel_push_pop_action.py).

Each function continues the same sandbox where the previous one left it.
"""
from __future__ import annotations


import re
import signal
import subprocess

from datapath import model
from datapath.model.decap import pop
from datapath.model.tunnel import TunnelSpec
from datapath.offloads import RxFlags
from fixtures import pushpop_frames as F
from fixtures.pushpop import PushPop, port_rx
from harness.control import Result, check, run_tool
from harness.wait import wait_until

FROM_P0 = "in_port(1),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x0800),"
TO_INT = ("in_port(2),eth(src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00),eth_type(0x0800),"
          "ipv4(src=1.1.3.88,dst=1.1.3.112,proto=47,tos=0,ttl=64,frag=no)")
TO_INT_01 = TO_INT.replace("dst=aa:55:aa:55:00:00", "dst=aa:55:aa:55:00:01")
TO_INT_36 = TO_INT.replace("src=f8:bc:12:44:34:b6,dst=aa:55:aa:55:00:00",
                           "src=36:b1:ee:7c:01:01,dst=36:b1:ee:7c:01:02")
IP4 = "ipv4(src=1.1.2.88,dst={dst},proto={proto},tos=0,ttl=64,frag=0x4000)"
ETH = "eth(dst={mac},src=aa:55:aa:55:00:00,dl_type=0x0800)"
B6, B7 = "f8:bc:12:44:34:b6", "f8:bc:12:44:34:b7"


def push(port: int, size: int, kind: int, mac: str, dst: str, proto: int, tnl: str,
         pre: str = "") -> str:
    return (f"Datapath actions: {pre}tnl_push(tnl_port({port}),header(size={size},type={kind},"
            f"{ETH.format(mac=mac)},{IP4.format(dst=dst, proto=proto)},{tnl}),"
            "out_port(100)),1\n")


def vxlan_push(mac: str, dst: str, csum: str, flags: str, vni: str) -> str:
    return push(4789, 50, 4, mac, dst, 17,
                f"udp(src=0,dst=4789,csum={csum}),vxlan(flags={flags},vni={vni})")


TRACES = [  # (flow, packet, upstream's datapath actions)
    ("action=2", TO_INT, vxlan_push(B6, "1.1.2.92", "0x0", "0x8000000", "0x7b")),
    ("action=8", TO_INT_01, vxlan_push(B6, "1.1.2.92", "0x0", "0xc000003", "0x159")),
    ("actions=set_tunnel:124,4", TO_INT, vxlan_push(B7, "1.1.2.93", "0xffff", "0x8000000",
                                                    "0x7c")),
    ("action=3", TO_INT, push(3, 42, 3, B6, "1.1.2.92", 47,
                              "gre((flags=0x2000,proto=0x6558),key=0x1c8)")),
    ("action=7", TO_INT_01, push(3, 42, 3, B6, "1.1.2.92", 47,
                                 "gre((flags=0x2000,proto=0x800),key=0x1c8)", "pop_eth,")),
    ("actions=set_field:1.1.2.92->tun_dst,5", TO_INT,
     push(6081, 50, 5, B6, "1.1.2.92", 17, "udp(src=0,dst=6081,csum=0x0),geneve(vni=0x7b)")),
    ("actions=set_tunnel:234,6", TO_INT,
     push(6081, 50, 5, B7, "1.1.2.93", 17, "udp(src=0,dst=6081,csum=0x0),geneve(vni=0xea)",
          "set(skb_mark(0x4d2)),")),
    (None, None, None),  # the TLV map
    ("actions=set_field:1.1.2.92->tun_dst,set_field:0xa->tun_metadata0,5", TO_INT,
     push(6081, 58, 5, B6, "1.1.2.92", 17, "udp(src=0,dst=6081,csum=0x0),geneve(crit,vni=0x7b,"
          "options({class=0xffff,type=0x80,len=4,0xa}))")),
    ("actions=9", TO_INT, push(2152, 50, 110, B6, "1.1.2.92", 17, "udp(src=0,dst=2152,csum=0x0),"
                               "gtpu(flags=0x30,msgtype=255,teid=0x7b)", "pop_eth,")),
]


def check_ports_and_traces(t: PushPop) -> None:
    """The tunnel ports listening, then upstream's traced pops and pushes."""
    assert t.tnl_ports() == ("Listening ports:\ngenev_sys_6081 (6081) ref_cnt=2\n"
                             "gre_sys (3) ref_cnt=2\ngtpu_sys_2152 (2152) ref_cnt=1\n"
                             "vxlan_sys_4789 (4789) ref_cnt=3\n")
    for src, proto, l4, port in (("1.1.2.92", 17, ",udp(src=51283,dst=4789)", 4789),
                                 ("1.1.2.92", 47, "", 3), ("1.1.2.92", 17,
                                                           ",udp(src=51283,dst=6081)", 6081),
                                 ("1.1.2.96", 17, ",udp(src=51283,dst=6081)", 6081),
                                 ("1.1.2.92", 17, ",udp(src=51283,dst=2152)", 2152)):
        flow = (FROM_P0 + f"ipv4(src={src},dst=1.1.2.88,proto={proto},tos=0,ttl=64,frag=no)"
                + l4)
        assert t.trace_tail("ovs-dummy", flow) == f"Datapath actions: tnl_pop({port})\n"
    for flow, packet, want in TRACES:
        if flow is None:
            t.ofctl("add-tlv-map", "int-br", "{class=0xffff,type=0x80,len=4}->tun_metadata0")
            continue
        t.ofctl("add-flow", "int-br", flow)
        assert t.trace_tail("ovs-dummy", packet) == want, flow
    t.ofctl("del-flows", "int-br")
    t.revalidate()


def popped_len(frame: str) -> int:
    inner = pop(bytes.fromhex(frame), RxFlags()).inner
    assert inner is not None, "the model drops a packet upstream decapsulates"
    return len(inner)


def ports_248(t: PushPop) -> str:
    return "".join(t.port_line("int-br", n) for n in (2, 4, 8))


def check_decap(t: PushPop) -> None:
    """VXLAN (with and without UDP checksum) and VXLAN-GPE with each rx IP
    checksum flag, GRE and L3 GRE; the counters; then bad checksums and an ECN
    CE packet into a not-ECN-capable inner packet, all dropped."""
    vx, gpe = popped_len(F.VXLAN), popped_len(F.GPE)
    for n, flag in ((1, None), (2, "good"), (3, "partial")):
        if flag:
            t.vsctl("set", "interface", "p0", f"options:ol_ip_rx_csum_set_{flag}=true")
        t.receive("p0", F.VXLAN, F.VXLAN_CSUM, F.GPE)
        if flag:
            t.vsctl("set", "interface", "p0", f"options:ol_ip_rx_csum_set_{flag}=false")
        want = port_rx(2, 2 * n, 2 * n * vx) + port_rx(4, 0, 0) + port_rx(8, n, n * gpe)
        t.settle(lambda: ports_248(t), want, f"int-br ports 2, 4, 8 after round {n}")
    assert want == port_rx(2, 6, 252) + port_rx(4, 0, 0) + port_rx(8, 3, 126)  # upstream
    t.receive("p0", F.GRE, F.GRE, F.GRE)
    t.settle(lambda: t.port_line("int-br", 3), port_rx(3, 3, 3 * popped_len(F.GRE)), "GRE rx")
    assert 3 * popped_len(F.GRE) == 294
    l3 = popped_len(F.GRE_L3)
    t.receive("p0", F.GRE_L3, F.GRE_L3, F.GRE_L3)
    t.settle(lambda: t.port_line("int-br", 7), port_rx(7, 3, 3 * l3), "L3 GRE rx")
    assert 3 * l3 == 252
    # No drop so far, yet every outer IPv4 checksum (flag unknown) and every
    # non-zero UDP checksum was verified: 9 and 6 (the model's count).
    for name, value in (("datapath_drop_tunnel_pop_error", 0), ("native_tnl_l3csum_err", 0),
                        ("native_tnl_l4csum_err", 0), ("native_tnl_l3csum_checked", 9),
                        ("native_tnl_l4csum_checked", 6)):
        t.coverage(name, value)
    # Bad IP checksums (GRE, VXLAN, VXLAN-GPE); rx flag bad on a good VXLAN and
    # a bad GRE; a bad UDP checksum; rx L4 flag bad on a good and a bad VXLAN.
    t.receive("p0", F.GRE_L3_BAD_IP)
    t.receive("p0", F.VXLAN_BAD_IP)
    t.receive("p0", F.GPE_BAD_IP)
    t.vsctl("set", "interface", "p0", "options:ol_ip_rx_csum_set_bad=true")
    t.receive("p0", F.VXLAN_CSUM)
    t.receive("p0", F.GRE_L3_BAD_IP)
    t.vsctl("set", "interface", "p0", "options:ol_ip_rx_csum_set_bad=false")
    t.receive("p0", F.VXLAN_BAD_UDP)
    t.vsctl("set", "interface", "p0", "options:ol_l4_rx_csum_set_bad=true")
    t.receive("p0", F.VXLAN_CSUM)
    t.receive("p0", F.VXLAN_BAD_UDP)
    t.vsctl("set", "interface", "p0", "options:ol_l4_rx_csum_set_bad=false")
    for name, value in (("datapath_drop_tunnel_pop_error", 8), ("native_tnl_l3csum_err", 5),
                        ("native_tnl_l4csum_err", 3), ("native_tnl_l3csum_checked", 15),
                        ("native_tnl_l4csum_checked", 7)):
        t.coverage(name, value)
    t.receive("p0", F.GRE_L3_CE)
    t.coverage("drop_action_congestion", 1)
    # GRE protocol 0x0800 with an Ethernet frame inside: taken as an L3 packet.
    t.receive("p0", F.GRE_L3_ETH)
    t.settle(lambda: t.port_line("int-br", 3) + t.port_line("int-br", 7),
             port_rx(3, 3, 294) + port_rx(7, 5, 434), "GRE and L3 GRE rx")


def check_l3gre_echo(t: PushPop) -> None:
    """L3 GRE packets sent back into the L3 GRE tunnel: p0's pcap alternates the
    received packet and the one sent."""
    t.ofctl("del-flows", "int-br")
    t.ofctl("add-flow", "int-br", "in_port=7,actions=set_field:3->in_port,7")
    t.revalidate()
    t.vsctl("--", "set", "Interface", "br0", "options:pcap=br0.pcap")
    for _ in range(3):
        t.receive("p0", F.GRE_L3)
    # The model: the inner IP packet (Ethernet header popped) in GRE with key 456
    # and protocol 0x0800, to the MAC 1.1.2.92's tunnel packets last came from.
    inner = bytes(12) + b"\x08\x00" + bytes.fromhex(F.ICMP_IP)  # as int-br sees it
    spec = TunnelSpec("gre", "1.1.2.88", "1.1.2.92", "aa:55:aa:55:00:00", "00:1b:21:3c:ab:64",
                      key=456, l3=True)
    one = model.encapsulate(inner, spec)
    echo = one.frames[0].hex()
    assert echo == ("001b213cab64aa55aa55000008004500007000004000402f33aa010102580101025c"
                    "20000800000001c8" + F.ICMP_IP)  # upstream's expected frame
    three = model.Expected(frames=[])
    for _ in range(3):
        three.extend(model.encapsulate(inner, spec))
    t.expect("p0", three, "L3 GRE packets back into the L3 GRE tunnel",
             [bytes.fromhex(F.GRE_L3)] * 3)
    assert [f.hex() for f in t.wires["p0"].frames()[-6:]] == [F.GRE_L3, echo] * 3


def check_geneve_controller(t: PushPop) -> None:
    """A Geneve packet with options matched on tun_metadata0 goes to the
    controller (ovs-ofctl monitor) with its tunnel metadata."""
    monitor_packet_in(t, F.GENEVE_OPTS, "tun_src=1.1.2.92,tun_dst=1.1.2.88", revalidate=True)
    dump = "".join(ln + "\n" for ln in t.appctl("dpif/dump-flows", "int-br").stdout.splitlines()
                   if "in_port(6081)" in ln)
    assert re.sub(r"recirc_id=[0-9]*", "recirc_id=<cleared>", dump) == (
        "recirc_id(0),tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,geneve({class=0xffff,"
        "type=0x80,len=4,0xa/0xf}{class=0xffff,type=0,len=4}),flags(+key)),in_port(6081),"
        "packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, "
        "used:never, actions:userspace(pid=0,controller(reason=1,dont_send=0,continuation=0,"
        "recirc_id=<cleared>,rule_cookie=0,controller_id=0,max_len=65535))\n")


def monitor_packet_in(t: PushPop, frame: str, tunnel: str, revalidate: bool) -> None:
    """`ovs-ofctl monitor int-br 65534` while the Geneve frame (option 0xa) is
    received under the rule tun_metadata0=0xa/0xf,actions=5,controller: one
    packet-in with the tunnel metadata and the popped frame (the model's: its
    length and the fields of its ICMP packet), then t4 (port 5) counts it."""
    log = t.sb.rundir / "ofctl_monitor.log"
    with open(log, "wb") as err:
        monitor = subprocess.Popen([t.sb.install.tool("ovs-ofctl"), "monitor", "int-br",
                                    "65534", "--no-chdir", "--pidfile"], cwd=t.sb.rundir,
                                   env=t.sb.env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=err)
    try:
        t.ofctl("del-flows", "int-br")
        t.ofctl("add-flow", "int-br", "tun_metadata0=0xa/0xf,actions=5,controller")
        if revalidate:
            t.revalidate()
        t.receive("p0", frame)
        wait_until(lambda: log.read_text().count("\n") >= 2, 10, what="the packet-in")
    finally:  # OVS_APP_EXIT_AND_WAIT(ovs-ofctl)
        ctl = t.sb.rundir / f"ovs-ofctl.{monitor.pid}.ctl"
        run_tool([t.sb.install.tool("ovs-appctl"), "-t", str(ctl), "exit"], t.sb.env,
                 str(t.sb.rundir), 10, None)
        try:
            monitor.wait(10)
        except subprocess.TimeoutExpired:
            monitor.send_signal(signal.SIGKILL)
            monitor.wait()
    inner = pop(bytes.fromhex(frame), RxFlags()).inner
    assert inner is not None
    ip = inner[14:]
    src, dst = (".".join(str(b) for b in ip[o:o + 4]) for o in (12, 16))
    mac = [":".join(f"{b:02x}" for b in inner[o:o + 6]) for o in (0, 6)]
    check(Result(["cat", "ofctl_monitor.log"], 0, log.read_text(), ""), stdout=(
        f"NXT_PACKET_IN2 (xid=0x0): cookie=0x0 total_len={len(inner)} tun_id=0x7b,{tunnel},"
        f"tun_metadata0=0xa,in_port=5 (via action) data_len={len(inner)} (unbuffered)\n"
        f"icmp,vlan_tci=0x0000,dl_src={mac[1]},dl_dst={mac[0]},nw_src={src},nw_dst={dst},"
        f"nw_tos={ip[1]},nw_ecn=0,nw_ttl={ip[8]},nw_frag=no,icmp_type={ip[20]},"
        f"icmp_code={ip[21]} icmp_csum:{ip[22:24].hex()}\n"))
    assert len(inner) == 98 and src == "30.0.0.1"  # upstream's values
    t.settle(lambda: t.port_line("int-br", 5), port_rx(5, 1, len(inner)), "t4 rx")


def check_tunnel_learning(t: PushPop) -> None:
    """A tunnel packet from a new MAC moves the neighbour entry; another moves
    it back; csum=true on t2 shows in the push; then the ports go."""
    rows = {"cafe": "f8:bc:12:44:ca:fe", "b6": B6}
    for frame, mac in ((F.GPE_FROM_CAFE, "cafe"), (F.GPE_FROM_B6, "b6")):
        t.receive("p0", frame)
        if mac == "cafe":
            t.ofctl("add-flow", "int-br", "action=2")
        want = vxlan_push(rows[mac], "1.1.2.92", "0x0", "0x8000000", "0x7b")
        assert t.trace_tail("ovs-dummy", TO_INT_36) == want
        if mac == "cafe":
            assert t.neigh() == (f"{'1.1.2.92':<46}{rows['cafe']:<20}br0\n"
                                 f"{'1.1.2.93':<46}{B7:<20}br0\n")
    t.vsctl("set", "Interface", "t2", "options:csum=true")
    assert t.trace_tail("ovs-dummy", TO_INT_36) == vxlan_push(B6, "1.1.2.92", "0xffff",
                                                              "0x8000000", "0x7b")
    assert t.neigh() == f"{'1.1.2.92':<46}{B6:<20}br0\n{'1.1.2.93':<46}{B7:<20}br0\n"
    t.appctl("time/warp", "10000")
    t.vsctl("del-port", "int-br", "t3", "--", "del-port", "int-br", "t5", "--", "set",
            "Interface", "t1", "type=vxlan", "--", "set", "Interface", "t2",
            "options:dst_port=4790")
    assert t.tnl_ports() == ("Listening ports:\ngenev_sys_6081 (6081) ref_cnt=1\n"
                             "gre_sys (3) ref_cnt=1\ngtpu_sys_2152 (2152) ref_cnt=1\n"
                             "vxlan_sys_4789 (4789) ref_cnt=2\nvxlan_sys_4790 (4790) ref_cnt=1\n")
    t.vsctl(*[a for p in ("t1", "t2", "t4", "t6", "t7", "t8")
              for a in ("--", "del-port", "int-br", p)][1:])
    assert t.tnl_ports() == "Listening ports:\n"
