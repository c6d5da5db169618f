"""The 218 tests of Open vSwitch 4.0.0's `make check-system-userspace`
(and check-system-tso): `tests/system-userspace-testsuite -l`, number and
exact AT_SETUP title, file by file, in suite order; and, for the tests that
cannot run in this suite, why (`NOT_HERE`)."""
from __future__ import annotations

SYSTEM_USERSPACE: dict[str, tuple[tuple[int, str], ...]] = {
    "system-traffic.at": (
        (1, 'datapath - ping between two ports'),
        (2, 'datapath - http between two ports'),
        (3, 'datapath - ping between two ports on vlan'),
        (4, 'datapath - ping between two ports on cvlan'),
        (5, 'datapath - ping6 between two ports'),
        (6, 'datapath - ping6 between two ports on vlan'),
        (7, 'datapath - ping6 between two ports on cvlan'),
        (8, 'datapath - ping6 between two ports IPv6 later fragments'),
        (9, 'datapath - ping6 between two ports with header modify'),
        (10, 'datapath - ping over bond'),
        (11, 'datapath - ping over vxlan tunnel'),
        (12, 'datapath - tcp over vxlan tunnel with software fallback'),
        (13, 'datapath - ping vlan over vxlan tunnel'),
        (14, 'datapath - ping over vxlan6 tunnel'),
        (15, 'datapath - ping over gre tunnel'),
        (16, 'datapath - tcp over gre tunnel with software fallback'),
        (17, 'datapath - ping over ip6gre L2 tunnel'),
        (18, 'datapath - ping over erspan v1 tunnel'),
        (19, 'datapath - ping over erspan v2 tunnel'),
        (20, 'datapath - ping over ip6erspan v1 tunnel'),
        (21, 'datapath - ping over ip6erspan v2 tunnel'),
        (22, 'datapath - ping over geneve tunnel'),
        (23, 'datapath - ping over geneve tunnel, delete flow regression'),
        (24, 'datapath - flow resume with geneve tun_metadata'),
        (25, 'datapath - ping over geneve6 tunnel'),
        (26, 'datapath - slow_action on geneve6 tunnel'),
        (27, 'datapath - bridging two geneve tunnels'),
        (28, 'datapath - bridging IPv4 and IPv6 flow based geneve tunnels'),
        (29, 'datapath - handling of geneve corrupted metadata'),
        (30, 'datapath - ping over gre tunnel by simulated packets'),
        (31, 'datapath - ping over erspan v1 tunnel by simulated packets'),
        (32, 'datapath - ping over erspan v2 tunnel by simulated packets'),
        (33, 'datapath - ping over ip6erspan v1 tunnel by simulated packets'),
        (34, 'datapath - ping over ip6erspan v2 tunnel by simulated packets'),
        (35, 'datapath - ping over srv6 tunnel'),
        (36, 'datapath - ping6 over srv6 tunnel'),
        (37, 'datapath - clone action'),
        (38, 'datapath - mpls actions'),
        (39, 'datapath - multiple mpls label pop'),
        (40, 'datapath - encap decap mpls actions'),
        (41, 'datapath - encap decap mpls_mc actions'),
        (42, 'datapath - multiple encap decap mpls actions'),
        (43, 'datapath - multiple encap decap mpls_mc actions'),
        (44, 'datapath - encap mpls pop mpls actions'),
        (45, 'datapath - push mpls decap mpls actions'),
        (46, 'datapath - basic truncate action'),
        (47, 'datapath - truncate and output to gre tunnel by simulated packets'),
        (48, 'datapath - truncate and output to gre tunnel'),
        (49, 'datapath - configure cache size'),
        (50, 'datapath - drop action'),
        (51, 'datapath - simulated flow action update'),
        (52, 'datapath - netdev offload software fallback'),
        (53, 'datapath - Neighbor Discovery with loose match'),
        (54, 'datapath - Dump OF rules corresponding to UFID'),
        (55, 'datapath - mod_nw_src/set_field on IP fragments'),
        (56, 'meters - datapath probe'),
        (57, 'mpls - encap header dp-support'),
        (58, 'mpls - encap header slow-path'),
        (59, 'mpls_mc - encap header dp-support'),
        (60, 'mpls_mc - encap header slow-path'),
        (61, 'mpls - decap header dp-support'),
        (62, 'mpls - decap header slow-path'),
        (63, 'QoS - basic configuration'),
        (64, 'QoS - 64bit'),
        (65, 'Ingress Policing - 64-bit'),
        (66, 'conntrack - controller'),
        (67, 'conntrack - force commit'),
        (68, 'conntrack - ct flush'),
        (69, 'conntrack - IPv4 ping'),
        (70, 'conntrack - get_nconns and get/set_maxconns'),
        (71, 'conntrack - IPv6 ping'),
        (72, 'conntrack - preserve registers'),
        (73, 'conntrack - invalid'),
        (74, 'conntrack - zones'),
        (75, 'conntrack - zones from field'),
        (76, 'conntrack - zones from other field'),
        (77, 'conntrack - zones from other field, more tests'),
        (78, 'conntrack - multiple bridges'),
        (79, 'conntrack - multiple zones'),
        (80, 'conntrack - SNAT with icmp_id'),
        (81, 'conntrack - multiple namespaces, internal ports'),
        (82, 'conntrack - ct_mark'),
        (83, 'conntrack - ct_mark bit-fiddling'),
        (84, 'conntrack - ct_mark from register'),
        (85, 'conntrack - ct_label'),
        (86, 'conntrack - ct_label bit-fiddling'),
        (87, 'conntrack - ct metadata, multiple zones'),
        (88, 'conntrack - new connections'),
        (89, 'conntrack - generic IP protocol'),
        (90, 'conntrack - ICMP related'),
        (91, 'conntrack - ICMP related to original direction'),
        (92, 'conntrack - ICMP related 2'),
        (93, 'conntrack - ICMP related NAT with single port'),
        (94, 'conntrack - IPv4 fragmentation'),
        (95, 'conntrack - IPv4 fragmentation with ct orig match'),
        (96, 'conntrack - IPv4 fragmentation expiry'),
        (97, 'conntrack - IPv4 fragmentation + vlan'),
        (98, 'conntrack - IPv4 fragmentation + cvlan'),
        (99, 'conntrack - IPv4 fragmentation incomplete reassembled packet'),
        (100, 'conntrack - IPv4 fragmentation with fragments specified'),
        (101, 'conntrack - IPv4 fragmentation out of order'),
        (102, 'conntrack - IPv4 fragmentation overlapping fragments by 1 octet'),
        (103, 'conntrack - IPv4 fragmentation overlapping fragments by 1 octet out of order'),
        (104, 'conntrack - IPv6 fragmentation'),
        (105, 'conntrack - IPv6 fragmentation with ct orig match'),
        (106, 'conntrack - IPv6 fragmentation expiry'),
        (107, 'conntrack - IPv6 fragmentation + vlan'),
        (108, 'conntrack - IPv6 fragmentation + cvlan'),
        (109, 'conntrack - IPv6 fragmentation incomplete reassembled packet'),
        (110, 'conntrack - IPv6 fragmentation with fragments specified'),
        (111, 'conntrack - IPv6 fragmentation out of order'),
        (112, 'conntrack - IPv6 fragmentation, multiple extension headers'),
        (113, 'conntrack - IPv6 fragmentation, multiple extension headers + out of order'),
        (114, 'conntrack - IPv6 fragmentation, multiple extension headers 2'),
        (115, 'conntrack - IPv6 fragmentation, multiple extension headers 2 + out of order'),
        (116, 'conntrack - Fragmentation over vxlan'),
        (117, 'conntrack - IPv6 Fragmentation over vxlan'),
        (118, 'conntrack - IPv4 Fragmentation + NAT'),
        (119, 'conntrack - resubmit to ct multiple times'),
        (120, 'conntrack - zone-based timeout policy'),
        (121, 'conntrack - SCTP SNAT with port range'),
        (122, 'conntrack - fragment reassembly with L3 L4 protocol information'),
        (123, 'conntrack - IPv4 HTTP'),
        (124, 'conntrack - IPv6 HTTP'),
        (125, 'conntrack - commit, recirc'),
        (126, 'conntrack - multiple zones, local'),
        (127, 'conntrack - multi-stage pipeline, local'),
        (128, 'conntrack - limit by zone'),
        (129, 'FTP - no conntrack'),
        (130, 'conntrack - FTP'),
        (131, 'conntrack - FTP non-standard port'),
        (132, 'conntrack - FTP with expectation dump'),
        (133, 'conntrack - FTP over IPv6'),
        (134, 'conntrack - IPv6 FTP Passive'),
        (135, 'conntrack - FTP with multiple expectations'),
        (136, 'conntrack - TFTP'),
        (137, 'conntrack - simple SNAT'),
        (138, 'conntrack - SNAT with ct_mark change on reply'),
        (139, 'conntrack - SNAT with port range'),
        (140, 'conntrack - SNAT with port range using ICMP'),
        (141, 'conntrack - SNAT with port range with exhaustion'),
        (142, 'conntrack - more complex SNAT'),
        (143, 'conntrack - all-zero IP SNAT'),
        (144, 'conntrack - simple DNAT'),
        (145, 'conntrack - DNAT with additional SNAT'),
        (146, 'conntrack - more complex DNAT'),
        (147, 'conntrack - ICMP related with NAT'),
        (148, 'conntrack - ICMP related with SNAT'),
        (149, 'conntrack - FTP SNAT prerecirc'),
        (150, 'conntrack - FTP SNAT prerecirc seqadj'),
        (151, 'conntrack - FTP SNAT postrecirc'),
        (152, 'conntrack - FTP SNAT postrecirc seqadj'),
        (153, 'conntrack - FTP SNAT orig tuple'),
        (154, 'conntrack - FTP SNAT orig tuple seqadj'),
        (155, 'conntrack - IPv4 FTP Passive with SNAT'),
        (156, 'conntrack - IPv4 FTP Passive with DNAT'),
        (157, 'conntrack - IPv4 FTP Passive with DNAT 2'),
        (158, 'conntrack - IPv4 FTP Active with DNAT'),
        (159, 'conntrack - IPv4 FTP Active with DNAT with reverse skew'),
        (160, 'conntrack - IPv6 HTTP with SNAT'),
        (161, 'conntrack - IPv6 HTTP with DNAT'),
        (162, 'conntrack - IPv6 ICMP6 Related with SNAT'),
        (163, 'conntrack - ICMPv6 related NAT with single port'),
        (164, 'conntrack - IPv6 FTP with SNAT'),
        (165, 'conntrack - IPv6 FTP Passive with SNAT'),
        (166, 'conntrack - IPv6 FTP with SNAT - orig tuple'),
        (167, 'conntrack - IPv4 TFTP with SNAT'),
        (168, 'conntrack - DNAT load balancing'),
        (169, 'conntrack - DNAT load balancing with NC'),
        (170, 'conntrack - floating IP'),
        (171, 'conntrack - negative test for recirculation optimization'),
        (172, 'conntrack - Multiple ICMP traverse'),
        (173, 'conntrack - can match and clear ct_state from outside OVS'),
        (174, 'conntrack - ICMP from different source related with NAT'),
        (175, 'conntrack - Flush many conntrack entries by port'),
        (176, 'IGMP - flood under normal action'),
        (177, 'IGMP - forward with ICMP'),
        (178, '802.1ad - vlan_limit'),
        (179, '802.1ad - push/pop outer 802.1ad'),
        (180, '802.1ad - push/pop outer 802.1q'),
        (181, '802.1ad - 802.1q tunnel'),
        (182, '802.1ad - double vlan match'),
        (183, 'nsh - encap header'),
        (184, 'nsh - decap header'),
        (185, 'nsh - replace header'),
        (186, 'nsh - forward'),
        (187, 'psample - sanity check'),
        (188, 'psample - sanity check IPv6'),
        (189, 'psample - slow'),
        (190, 'psample - slow with probability'),
        (191, 'psample - with IPFIX'),
        (192, 'psample - from ct label'),
    ),
    "system-layer3-tunnels.at": (
        (193, 'layer3 - ping over VXLAN-GPE'),
        (194, 'layer3 - ping over GRE'),
        (195, 'layer3 - ping over MPLS Bareudp'),
        (196, 'layer3 - ping over Bareudp'),
    ),
    "system-interface.at": (
        (197, 'interface - add delete add same interface'),
        (198, 'interface - add route to br and verify clean-up'),
        (199, 'interface - datapath ports garbage collection'),
        (200, 'interface - datapath port rename'),
        (201, 'interface - current speed'),
        (202, 'interface - name too long'),
        (203, 'interface - patch port name exceeds IFNAMSIZ on vswitchd restart'),
        (204, 'interface - veth peer_ifindex status'),
    ),
    "system-userspace-packet-type-aware.at": (
        (205, 'ptap - triangle bridge setup with L2 and L3 GRE tunnels'),
    ),
    "system-route.at": (
        (206, 'ovs-route - add/remove system route'),
        (207, 'ovs-route - add system route with src - ipv4'),
        (208, 'ovs-route - add system route with src - ipv6'),
        (209, 'ovs-route - add system route - ipv4 via ipv6 nexthop'),
        (210, 'ovs-route - route tables'),
        (211, 'ovs-route - add system route with multiple nexthop - ipv4'),
        (212, 'ovs-route - add system route - ipv4 via multiple ipv6 nexthop'),
        (213, 'ovs-route - add system route with multiple nexthop - ipv6'),
        (214, 'route-table - exported functions work for netlink-notifier'),
        (215, 'route-table - route attributes'),
        (216, 'ovs-route - unsupported rules'),
        (217, 'ovs-route - route tables + rules'),
        (218, 'ovs-route - route lookup + rules'),
    ),
}

# Title -> why it is not reproduced: upstream's own check-system-userspace skips
# it (the macro that does, from tests/system-userspace-macros.at), or it needs
# what no userspace datapath has.  upstream.html shows the reason in the row.
# A title whose reproduction only lacks a kernel feature on this machine is not
# here: its ids skip, naming the feature they probed.
PSAMPLE_SKIPPED = (
    "upstream skips it in userspace: OVS_CHECK_PSAMPLE (ovs-vswitchd.log never says "
    "'Datapath supports psample action': the userspace datapath has no psample action, "
    "its probe is not even tried for netdev datapaths)")

NOT_HERE: dict[str, str] = {
    "conntrack - multiple namespaces, internal ports":
        "upstream skips it in userspace: CHECK_CONNTRACK_LOCAL_STACK (no way to pass "
        "the local stack's conntrack state from an internal port to userspace)",
    "conntrack - multiple zones, local":
        "upstream skips it in userspace: CHECK_CONNTRACK_LOCAL_STACK (no way to pass "
        "the local stack's conntrack state from an internal port to userspace)",
    "conntrack - multi-stage pipeline, local":
        "upstream skips it in userspace: CHECK_CONNTRACK_LOCAL_STACK (no way to pass "
        "the local stack's conntrack state from an internal port to userspace)",
    "conntrack - Fragmentation over vxlan":
        "upstream skips it in userspace: CHECK_CONNTRACK_LOCAL_STACK (no way to pass "
        "the local stack's conntrack state from an internal port to userspace)",
    "conntrack - IPv6 Fragmentation over vxlan":
        "upstream skips it in userspace: CHECK_CONNTRACK_LOCAL_STACK (no way to pass "
        "the local stack's conntrack state from an internal port to userspace)",
    "conntrack - fragment reassembly with L3 L4 protocol information":
        "upstream skips it in userspace: CHECK_L3L4_CONNTRACK_REASM (a kernel-datapath "
        "regression)",
    "conntrack - ICMP related with SNAT":
        "upstream skips it in userspace: OVS_CHECK_MIN_KERNEL(6, 7) (the userspace "
        "macros skip every test that checks the kernel's version)",
    "conntrack - can match and clear ct_state from outside OVS":
        "upstream skips it in userspace: CHECK_EXTERNAL_CT (the userspace datapath has "
        "no external conntrack)",
    **{title: PSAMPLE_SKIPPED for title in (
        "psample - sanity check", "psample - sanity check IPv6", "psample - slow",
        "psample - slow with probability", "psample - with IPFIX", "psample - from ct label")},
    "layer3 - ping over MPLS Bareudp":
        "upstream skips it in userspace: OVS_CHECK_BAREUDP (the userspace datapath has "
        "no bareudp tunnels)",
    "layer3 - ping over Bareudp":
        "upstream skips it in userspace: OVS_CHECK_BAREUDP (the userspace datapath has "
        "no bareudp tunnels)",
    "interface - datapath ports garbage collection":
        "upstream skips it in userspace: AT_SKIP_IF([! ovs-appctl dpctl/show | grep -q "
        "ovs-system]) (the kernel datapath's ports and its geneve backing device)",
    "interface - datapath port rename":
        "upstream skips it in userspace: AT_SKIP_IF([! ovs-appctl dpctl/show | grep -q "
        "ovs-system]) (a device renamed while attached to the kernel datapath)",
    "interface - patch port name exceeds IFNAMSIZ on vswitchd restart":
        "upstream skips it in userspace: AT_SKIP_IF([! ovs-appctl dpctl/show | grep -q "
        "ovs-system]) (kernel datapath only)",
    "datapath - configure cache size":
        "upstream skips it in userspace: OVS_CHECK_KERNEL_EXCL (the kernel datapath's "
        "masks cache, through ovs-dpctl)",
    "meters - datapath probe":
        "upstream skips it in userspace: OVS_CHECK_MIN_KERNEL (the kernel datapath's "
        "meter probe across an ovs-vswitchd restart)",
}


# What upstream's other testsuites of system-traffic.at skip beyond NOT_HERE,
# by make target: the titles no id of that flavour reproduces, and why.
_NO_TSO = ("upstream skips it in this testsuite: CHECK_SYSTEM_TSO is defined only by "
           "system-tso-macros.at (m4_ifndef([CHECK_SYSTEM_TSO], [AT_SKIP_IF(:)]))")
_TUNNEL_TSO = ("upstream skips it in this testsuite: OVS_CHECK_TUNNEL_TSO (system-common-macros.at) "
               "is AT_SKIP_IF(:) where CHECK_SYSTEM_TSO is defined")
NOT_HERE_IN: dict[str, dict[str, str]] = {
    **{target: {"datapath - tcp over vxlan tunnel with software fallback": _NO_TSO,
                "datapath - tcp over gre tunnel with software fallback": _NO_TSO}
       for target in ("check-system-userspace", "check-afxdp", "check-dpdk")},
    # Where our ids of the tso flavour do not go beyond upstream's skip.
    "check-system-tso": {"datapath - bridging IPv4 and IPv6 flow based geneve tunnels": _TUNNEL_TSO},
}


def not_here(title: str, target: str = "") -> str:
    """Why `title` cannot run in testsuite `target` ('' when it can)."""
    return NOT_HERE.get(title) or NOT_HERE_IN.get(target, {}).get(title, "")
