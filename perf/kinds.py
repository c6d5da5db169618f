"""The topologies, and the core layout they run on.

Each kind wires a switch with two ports to a traffic generator.  The switch is
either an OVS build (the bridge forwards port 1 <-> port 2 by per-flow rules)
or, for the ceiling, dpdk-testpmd forwarding port 0 <-> port 1 (`io`) over the
same kind of port: OVS removed, everything else the same.

    pvp            dpdkvhostuserclient ports; the generator is testpmd's
                   virtio-user (the guest side) - the loopback PVP of vsperf and
                   ovs_perf with the VM's traffic made in the VM.  Ceiling:
                   testpmd's net_vhost ports.
    p2p            dpdk ports on net_pcap vdevs that replay their capture without
                   end (infinite_rx) and drop what they send: the source is the
                   port itself, so the rate is what the switch can forward.
                   Ceiling: testpmd on the same vdevs.
    afxdp-native,  type=afxdp on veth pairs, options:xdp-mode native / generic /
    afxdp-generic, native-with-zerocopy (which veth lacks: OVS says so, and the
    afxdp-zerocopy topology is skipped with its words); the generator is testpmd
                   on AF_PACKET at the far ends.  Ceiling: testpmd's net_af_xdp
                   on the same veths.
    veth           type=system (AF_PACKET) on veth pairs.  Ceiling: net_af_packet.
    tap            type=tap; the generator (AF_PACKET) opens the taps' kernel side
                   in the switch's namespace, as a VM's host would.  Ceiling:
                   testpmd's net_tap.
The MTU follows the frame size (1500, or 9000 for jumbo frames) on the OVS
ports; the ceilings' ports take jumbo frames throughout.
"""
from __future__ import annotations

from dataclasses import dataclass

JUMBO = 7000
JUMBO_MTU = 9000


@dataclass(frozen=True)
class Kind:
    """A kind of topology: the OVS interface type of its ports, and how testpmd stands in
    for OVS as its ceiling."""

    name: str
    title: str
    dpdk: bool  # needs the DPDK-enabled ovs-vswitchd
    iface_type: str  # the OVS interface type it uses
    ceiling: str  # how testpmd stands in for OVS
    jumbo: str = ""  # why a jumbo frame cannot pass ("" when it can)
    xdp_mode: str = ""
    kernel: bool = False  # veth/tap: far ends are kernel devices
    generator: bool = True  # False: the ports themselves are the source (p2p)
    notes: tuple[str, ...] = ()

    def sizes(self, wanted: tuple[int, ...]) -> tuple[tuple[int, ...], list[str]]:
        """The frame sizes this kind can carry, and why the others are left out."""
        if not self.jumbo:
            return wanted, []
        big = [s for s in wanted if s > 1518]
        return (tuple(s for s in wanted if s <= 1518),
                [f"{s} B frames are not measured: {self.jumbo}" for s in big])


AFXDP_JUMBO = ("AF_XDP in OVS uses one 4 KiB umem frame per packet, and native XDP on "
               "veth needs an MTU under a page, so frames above about 3.5 KB cannot pass")

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("pvp", "PVP over vhost-user (testpmd virtio-user as the guest)", True,
         "dpdkvhostuserclient", "testpmd io between two net_vhost ports"),
    Kind("p2p", "P2P over DPDK net_pcap vdevs (infinite replay into the switch)", True, "dpdk",
         "testpmd io between the same two net_pcap vdevs", generator=False),
    Kind("afxdp-native", "veth with AF_XDP, xdp-mode=native", False, "afxdp",
         "testpmd io between two net_af_xdp ports on the same veths", jumbo=AFXDP_JUMBO,
         xdp_mode="native", kernel=True),
    Kind("afxdp-generic", "veth with AF_XDP, xdp-mode=generic", False, "afxdp",
         "testpmd io between two net_af_xdp ports on the same veths", jumbo=AFXDP_JUMBO,
         xdp_mode="generic", kernel=True),
    Kind("afxdp-zerocopy", "veth with AF_XDP, xdp-mode=native-with-zerocopy", False,
         "afxdp", "testpmd io between two net_af_xdp ports on the same veths",
         jumbo=AFXDP_JUMBO, xdp_mode="native-with-zerocopy", kernel=True),
    Kind("veth", "veth as system ports (AF_PACKET)", False, "system",
         "testpmd io between two net_af_packet ports on the same veths", kernel=True),
    Kind("tap", "tap ports", False, "tap", "testpmd io between two net_tap ports",
         kernel=True),
)}
ORDER = tuple(KINDS)


@dataclass(frozen=True)
class CoreLayout:
    """Where each party runs.  On 2 CPUs: the switch (OVS's PMD and its other
    threads, or the ceiling testpmd) on the first, the generator (its main and
    forwarding lcores) on the second.  From 3 CPUs on, OVS's other threads get
    a CPU of their own."""

    cpus: tuple[int, ...]
    pmd: int
    ovs_other: int
    gen: int

    @property
    def shared(self) -> bool:
        return self.pmd == self.gen

    @property
    def pmd_mask(self) -> str:
        return f"{1 << self.pmd:#x}"

    def describe(self) -> str:
        text = (f"CPUs {','.join(map(str, self.cpus))}: switch datapath (OVS PMD "
                f"pmd-cpu-mask={self.pmd_mask}, or the ceiling's testpmd lcores) on CPU "
                f"{self.pmd}; OVS main, handler and revalidator threads on CPU "
                f"{self.ovs_other}; generator testpmd (-l main+forwarding) on CPU {self.gen}")
        if self.shared:
            text += ("; ONE CPU ONLY: switch and generator share it, and the figures say "
                     "more about the scheduler than about OVS")
        return text


def plan_cores(available: set[int] | frozenset[int]) -> CoreLayout:
    """Which CPU runs what: the switch's datapath, OVS's other threads, the generator."""
    cpus = tuple(sorted(available))
    if not cpus:
        raise ValueError("no CPU available")
    if len(cpus) == 1:
        return CoreLayout(cpus, cpus[0], cpus[0], cpus[0])
    if len(cpus) == 2:
        return CoreLayout(cpus, cpus[0], cpus[0], cpus[1])
    return CoreLayout(cpus, cpus[1], cpus[0], cpus[2])
