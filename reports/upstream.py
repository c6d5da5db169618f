"""The 48 tests of upstream OVS tests/dpif-netdev.at (OVS 4.0.0), by test number.

Titles are exactly the AT_SETUP titles, with the m4 macro argument (dummy or
dummy-pmd) expanded; the numbers are those of OVS 4.0.0's main test suite.
Cases name the test they reproduce with `@pytest.mark.upstream(TITLE)`.
"""
from __future__ import annotations

SOURCE = "tests/dpif-netdev.at (Open vSwitch 4.0.0)"

UPSTREAM_TESTS: tuple[tuple[int, str], ...] = (
    (1093, "dpif-netdev - netdev-dummy/receive"),
    (1094, "dpif-netdev - dummy interface"),
    (1095, "dpif-netdev - dummy-pmd interface"),
    (1096, "dpif-netdev - miss upcall key matches flow_install - dummy"),
    (1097, "dpif-netdev - miss upcall key matches flow_install - dummy-pmd"),
    (1098, "dpif-netdev - datapath flow modification - dummy"),
    (1099, "dpif-netdev - datapath flow modification - dummy-pmd"),
    (1100, "dpif-netdev - miss upcall key matches flow_dump - dummy"),
    (1101, "dpif-netdev - miss upcall key matches flow_dump - dummy-pmd"),
    (1102, "dpif-netdev - meters"),
    (1103, "dpif-netdev - partial hw offload - dummy"),
    (1104, "dpif-netdev - partial hw offload - dummy-pmd"),
    (1105, "dpif-netdev - partial hw offload with packet modifications - dummy"),
    (1106, "dpif-netdev - partial hw offload with packet modifications - dummy-pmd"),
    (1107, "dpif-netdev - partial hw offload with arp vlan id packet modifications - dummy"),
    (1108, "dpif-netdev - partial hw offload with arp vlan id packet modifications - dummy-pmd"),
    (1109, "dpif-netdev - full hw offload - dummy-pmd"),
    (1110, "dpif-netdev - full hw offload - tunnel entropy - dummy-pmd"),
    (1111, "dpif-netdev - check dpctl/add-flow in_port exact match"),
    (1112, "dpif-netdev - check dpctl/add-flow wider ip match"),
    (1113, "dpif-netdev - mega flow ufid uniqueness for different wildcards"),
    (1114, "dpif-netdev - check tx packet checksum offloading"),
    (1115, "dpif-netdev - tx packet steering"),
    (1116, "dpif-netdev - ip csum offload"),
    (1117, "dpif-netdev - tcp csum offload"),
    (1118, "dpif-netdev - tcp csum offload (simple match)"),
    (1119, "dpif-netdev - udp csum offload"),
    (1120, "dpif-netdev - IPv6 tcp csum offload"),
    (1121, "dpif-netdev - IPv6 udp csum offload"),
    (1122, "dpif-netdev - IPv4 vxlan tunnel - no offload"),
    (1123, "dpif-netdev - IPv4 vxlan tunnel - ip csum offload"),
    (1124, "dpif-netdev - IPv4 vxlan tunnel - tcp csum offload"),
    (1125, "dpif-netdev - IPv4 vxlan tunnel - udp csum offload"),
    (1126, "dpif-netdev - IPv4 vxlan tunnel - IPv6 tcp csum offload"),
    (1127, "dpif-netdev - IPv4 vxlan tunnel - IPv6 udp csum offload"),
    (1128, "dpif-netdev - IPv6 vxlan tunnel - no offload"),
    (1129, "dpif-netdev - IPv6 vxlan tunnel - ip csum offload"),
    (1130, "dpif-netdev - IPv6 vxlan tunnel - tcp csum offload"),
    (1131, "dpif-netdev - IPv6 vxlan tunnel - udp csum offload"),
    (1132, "dpif-netdev - IPv6 vxlan tunnel - IPv6 tcp csum offload"),
    (1133, "dpif-netdev - IPv6 vxlan tunnel - IPv6 udp csum offload"),
    (1134, "dpif-netdev - conntrack"),
    (1135, "dpif-netdev - tso"),
    (1136, "dpif-netdev - tunnel tso fallback"),
    (1137, "dpif-netdev - tso + check_pkt_len"),
    (1138, "dpif-netdev - tso + dynamic packet batch grow"),
    (1139, "dpif-netdev - tso + dual tunnel encap"),
    (1140, "dpif-netdev - revalidators handle dp modification fail correctly"),
)

TITLES: frozenset[str] = frozenset(title for _, title in UPSTREAM_TESTS)


def split_titles(upstream: str | None) -> list[str]:
    """The titles a case names: the plugin joins several with '; '."""
    if not upstream:
        return []
    return [part.strip() for part in upstream.split(";") if part.strip()]
