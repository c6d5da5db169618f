"""The upstream OVS autotest files this suite reproduces, test by test.

For each file, every test in suite order as (number, title, since): titles are
exactly the AT_SETUP titles, with m4 macro arguments (dummy, dummy-pmd)
expanded; numbers are those of OVS 4.0.0's main test suite (`testsuite -l`);
`since` names the OVS release a test first appears in when that is newer than
3.7.0 (empty otherwise).

A case names the test it reproduces with
`@pytest.mark.upstream(TITLE, file="pmd.at", since="4.0")`; `file` defaults
to DEFAULT_FILE.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.system_userspace import SYSTEM_USERSPACE

RELEASE = "Open vSwitch 4.0.0"
DEFAULT_FILE = "dpif-netdev.at"


@dataclass(frozen=True)
class UpstreamTest:
    """One test of upstream's testsuite: its number and title in its file."""

    number: int
    title: str
    since: str = ""  # first release with this test, when newer than 3.7.0


def _numbered(first: int, titles: list[str], new: frozenset[str] = frozenset()
              ) -> tuple[UpstreamTest, ...]:
    return tuple(UpstreamTest(first + i, t, "4.0" if t in new else "")
                 for i, t in enumerate(titles))


_DPIF = [
    "dpif-netdev - netdev-dummy/receive",
    "dpif-netdev - dummy interface",
    "dpif-netdev - dummy-pmd interface",
    "dpif-netdev - miss upcall key matches flow_install - dummy",
    "dpif-netdev - miss upcall key matches flow_install - dummy-pmd",
    "dpif-netdev - datapath flow modification - dummy",
    "dpif-netdev - datapath flow modification - dummy-pmd",
    "dpif-netdev - miss upcall key matches flow_dump - dummy",
    "dpif-netdev - miss upcall key matches flow_dump - dummy-pmd",
    "dpif-netdev - meters",
    "dpif-netdev - partial hw offload - dummy",
    "dpif-netdev - partial hw offload - dummy-pmd",
    "dpif-netdev - partial hw offload with packet modifications - dummy",
    "dpif-netdev - partial hw offload with packet modifications - dummy-pmd",
    "dpif-netdev - partial hw offload with arp vlan id packet modifications - dummy",
    "dpif-netdev - partial hw offload with arp vlan id packet modifications - dummy-pmd",
    "dpif-netdev - full hw offload - dummy-pmd",
    "dpif-netdev - full hw offload - tunnel entropy - dummy-pmd",
    "dpif-netdev - check dpctl/add-flow in_port exact match",
    "dpif-netdev - check dpctl/add-flow wider ip match",
    "dpif-netdev - mega flow ufid uniqueness for different wildcards",
    "dpif-netdev - check tx packet checksum offloading",
    "dpif-netdev - tx packet steering",
    "dpif-netdev - ip csum offload",
    "dpif-netdev - tcp csum offload",
    "dpif-netdev - tcp csum offload (simple match)",
    "dpif-netdev - udp csum offload",
    "dpif-netdev - IPv6 tcp csum offload",
    "dpif-netdev - IPv6 udp csum offload",
    *(f"dpif-netdev - IPv{ul} vxlan tunnel - {kind}" for ul in (4, 6) for kind in (
        "no offload", "ip csum offload", "tcp csum offload", "udp csum offload",
        "IPv6 tcp csum offload", "IPv6 udp csum offload")),
    "dpif-netdev - conntrack",
    "dpif-netdev - tso",
    "dpif-netdev - tunnel tso fallback",
    "dpif-netdev - tso + check_pkt_len",
    "dpif-netdev - tso + dynamic packet batch grow",
    "dpif-netdev - tso + dual tunnel encap",
    "dpif-netdev - revalidators handle dp modification fail correctly",
]
# Not in v3.7.0's tests/dpif-netdev.at.
_DPIF_NEW = frozenset({
    "dpif-netdev - full hw offload - dummy-pmd",
    "dpif-netdev - full hw offload - tunnel entropy - dummy-pmd",
    "dpif-netdev - mega flow ufid uniqueness for different wildcards",
    "dpif-netdev - tso + dynamic packet batch grow",
    "dpif-netdev - tso + dual tunnel encap",
})

_PMD = [f"PMD - {t}" for t in (
    "creating a thread/add-port", "multiqueue support", "pmd-cpu-mask/distribution of rx queues",
    "pmd-cpu-mask - dual NUMA", "pmd-cpu-mask - multi NUMA", "stats",
    "pmd-rxq-show pmd usage time", "reconfigure n_rxq", "same flow multiple threads",
    "change numa node", "non pmd device", "add remove ports", "rxq affinity",
    "rxq affinity - non-isolate", "rxq affinity - NUMA", "monitor threads", "dpctl",
    "pmd sleep", "per PMD sleep", "revalidator modify overlapping flows")]

_ALB = [f"ALB - {t}" for t in (
    "default state", "enable/disable", "min num PMD/RxQ", "cross-numa",
    "PMD/RxQ assignment type", "interval param", "improvement param", "load param")]

_DPCTL = [f"dpctl - {t}" for t in (
    "add-dp del-dp", "add-if set-if del-if", "add/mod/del-flows",
    "ct-set-limits ct-get-limits ct-del-limits")]

_DROP_STATS = [f"drop-stats - {t}" for t in (
    "cli tests", "pipeline and recursion drops", "too many resubmit", "stack too deep",
    "too many mpls labels", "bridge sampling", "sampling action")]

_TPP = [f"tunnel_push_pop - {t}" for t in (
    "erspan", "action", "packet_out", "packet_out debug_slow", "local_ip configuration",
    "underlay bridge match", "flow translation on unrelated bridges", "VXLAN access port",
    "no clone when is_last_action", "use non-local port as tunnel endpoint",
    "recirculation after encapsulation", "Mirror over tunnels", "tunnel drop",
    "use two VTEPs in same subnet with rules")]

_TPP6 = [f"tunnel_push_pop_ipv6 - {t}" for t in (
    "srv6", "ip6gre", "ip6erspan", "action", "local_ip configuration",
    "recirculation after encapsulation", "Mirror over tunnels")]

# system-dpdk.at and system-afxdp.at each come first in their own testsuite
# (tests/system-dpdk-testsuite.at, system-afxdp-testsuite.at): numbered from 1.
_SYSTEM_DPDK = ["OVS-DPDK - EAL init",
    "OVS-DPDK - dpdk-lcore-mask conversion - single",
    "OVS-DPDK - dpdk-lcore-mask conversion - multi",
    "OVS-DPDK - dpdk-lcore-mask conversion - non-contig",
    "OVS-DPDK - dpdk-lcore-mask conversion - zeromask",
    "OVS-DPDK - add standard DPDK port",
    "OVS-DPDK - add vhost-user-client port",
    "OVS-DPDK - ping vhost-user ports",
    "OVS-DPDK - ping vhost-user-client ports",
    "OVS-DPDK - Ingress policing create delete phy port",
    "OVS-DPDK - Ingress policing create delete vport port",
    "OVS-DPDK - Ingress policing no policing rate",
    "OVS-DPDK - Ingress policing no policing burst",
    "OVS-DPDK - QoS create delete phy port",
    "OVS-DPDK - QoS create delete vport port",
    "OVS-DPDK - QoS no cir",
    "OVS-DPDK - QoS no cbs",
    "OVS-DPDK - MTU increase phy port",
    "OVS-DPDK - MTU decrease phy port",
    "OVS-DPDK - MTU increase vport port",
    "OVS-DPDK - MTU decrease vport port",
    "OVS-DPDK - MTU upper bound phy port",
    "OVS-DPDK - MTU lower bound phy port",
    "OVS-DPDK - MTU upper bound vport port",
    "OVS-DPDK - MTU lower bound vport port",
    "OVS-DPDK - user configured mempool",
    "OVS-DPDK - ovs-appctl dpif/offload/show",
    "OVS-DPDK - headroom expansion",
]

_SYSTEM_AFXDP = ["AF_XDP - infinite re-addition of failed ports",
    "AF_XDP - ping between pmd and non-pmd ports",
]

# check-system-userspace's files (system-traffic.at and the four after it),
# numbered as system-userspace-testsuite lists them.
_SYSTEM_USERSPACE = {file: tuple(UpstreamTest(n, title) for n, title in tests)
                     for file, tests in SYSTEM_USERSPACE.items()}

# File name -> its tests, in suite order.  Numbers: OVS 4.0.0 `tests/testsuite -l`.
FILES: dict[str, tuple[UpstreamTest, ...]] = {
    "dpif-netdev.at": _numbered(1093, _DPIF, _DPIF_NEW),
    "pmd.at": _numbered(1141, _PMD),
    "tunnel-push-pop.at": _numbered(830, _TPP),
    "tunnel-push-pop-ipv6.at": _numbered(844, _TPP6),
    "alb.at": _numbered(1161, _ALB),
    "dpctl.at": _numbered(1169, _DPCTL),
    "drop-stats.at": _numbered(2751, _DROP_STATS),
    "system-dpdk.at": _numbered(1, _SYSTEM_DPDK, frozenset({"OVS-DPDK - headroom expansion"})),
    "system-afxdp.at": _numbered(1, _SYSTEM_AFXDP),
    # check-system-tso's first file (system-tso-testsuite.at includes it before
    # system-traffic.at).
    "system-tap.at": _numbered(1, ["traffic between namespaces using tap"]),
    **_SYSTEM_USERSPACE,
}
# Files listed in part: what the section covers.
SCOPE: dict[str, str] = {}

# The files of OVS's main testsuite (tests/testsuite); the system-*.at files
# have testsuites of their own (make check-dpdk, check-afxdp, check-system-userspace).
MAIN_SUITE_FILES = ("dpif-netdev.at", "pmd.at", "alb.at", "dpctl.at", "tunnel-push-pop.at",
                    "tunnel-push-pop-ipv6.at", "drop-stats.at")


@dataclass(frozen=True)
class Testsuite:
    """One of upstream's testsuites (a make target) and the files it runs, in
    its order; `flavour` is the `flavour` parameter of the ids that reproduce
    its system-traffic.at ('' for make check's own testsuite)."""

    target: str
    flavour: str
    files: tuple[str, ...]


# Upstream builds system-traffic.at into four testsuites, one per way a
# userspace datapath meets a real port (tests/system-*-testsuite.at).
TESTSUITES: tuple[Testsuite, ...] = (
    Testsuite("check", "", tuple(f for f in FILES if f in MAIN_SUITE_FILES)),
    Testsuite("check-system-userspace", "userspace", tuple(SYSTEM_USERSPACE)),
    Testsuite("check-system-tso", "tso", ("system-tap.at", "system-traffic.at")),
    Testsuite("check-afxdp", "afxdp", ("system-afxdp.at", "system-traffic.at")),
    Testsuite("check-dpdk", "dpdk", ("system-dpdk.at", "system-traffic.at")),
)


# Backward-compatible views of dpif-netdev.at alone.
SOURCE = f"tests/{DEFAULT_FILE} ({RELEASE})"
UPSTREAM_TESTS: tuple[tuple[int, str], ...] = tuple((t.number, t.title)
                                                    for t in FILES[DEFAULT_FILE])
TITLES: frozenset[str] = frozenset(title for _, title in UPSTREAM_TESTS)


def titles_of(file: str) -> frozenset[str]:
    """The titles of an upstream file's tests."""
    return frozenset(t.title for t in FILES.get(file, ()))


def find(title: str, file: str = DEFAULT_FILE) -> UpstreamTest | None:
    """The upstream test of that title in that file, if there is one."""
    return next((t for t in FILES.get(file, ()) if t.title == title), None)


def split_titles(upstream: str | None) -> list[str]:
    """The titles a case names: the plugin joins several with '; '."""
    if not upstream:
        return []
    return [part.strip() for part in upstream.split(";") if part.strip()]
