"""The ceiling: OVS removed, dpdk-testpmd forwarding port 0 <-> port 1 (`io`)
on the same kind of ports, on the CPU OVS's PMD gets, with the same generator.

What it measures is how fast this machine moves these packets through these
port kinds with a forwarding element that does no classification at all: the
OVS figures are reported as a fraction of it.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from datapath.backends.netns import Netns
from datapath.backends.testpmd import FwdMode, TestPmd
from evidence.pcap import write_pcap
from perf.kinds import JUMBO_MTU, CoreLayout, Kind
from perf.sides import SWITCH_NAMES, TAP_NAMES, Side, SideError
from perf.traffic import (
    GEN_MBUF_SIZE,
    GEN_MBUFS,
    TrafficError,
    drain,
    eal_args,
    flow_frames,
    parse_stats_all,
    start_forwarding,
)

_ids = itertools.count()


class CeilingSide(Side):
    """The ceiling: testpmd forwarding in OVS's place, on the same ports and CPU."""
    def __init__(self, label: str, kind: Kind, layout: CoreLayout, workdir: Path) -> None:
        super().__init__(label, kind, layout, workdir)
        self.description = f"no OVS: {kind.ceiling}"
        self.switch: TestPmd | None = None
        self.switch_ns: Netns | None = None
        self.af_xdp = bool(kind.xdp_mode)
        self.switch_ready = False
        self._stop_deferred = False

    def build(self, flows: int) -> None:
        kind = self.kind
        if kind.kernel:
            self.switch_ns = self.new_ns("csw")
            if kind.name != "tap":
                self.gen_ns = self.new_ns("cgen")
        if kind.name == "pvp":
            self._start_pvp(flows)
        elif kind.name == "tap":
            self.gen_ns = self.switch_ns
            self.start_switch([f"net_tap{next(_ids)},iface={t}" for t in TAP_NAMES])
            self.taps_up(self.switch_ns, JUMBO_MTU)  # type: ignore[arg-type]
        elif kind.kernel:
            self.veth_pairs(self.switch_ns, JUMBO_MTU if not kind.jumbo else 1500)  # type: ignore[arg-type]
            self._start_veth_switch()

    def _start_pvp(self, flows: int) -> None:
        """The generator (the vhost-user server) first, then the switch, whose
        net_vhost ports connect as clients; both ready once connected."""
        gen = self.make_gen(flows)
        gen.spawn()
        a, b = self.socket_paths()
        self.wait_socket(a)
        self.start_switch([f"net_vhost{next(_ids)},iface={p},client=1,queues=1"
                           for p in (a, b)], wait=False)
        assert gen.pmd is not None
        gen.wait_ready()
        assert self.switch is not None
        self.switch.wait_ready()
        self.switch_ready = True
        start_forwarding(self.switch, "the ceiling's switch")

    def restart_gen(self, flows: int) -> None:
        """pvp: the switch starts again too (net_vhost's reconnection to a new
        server is not reliable here)."""
        if self.kind.name != "pvp":
            super().restart_gen(flows)
            return
        self.stop_switch()
        self.stop_gen()
        self._start_pvp(flows)

    def _start_veth_switch(self) -> None:
        if self.af_xdp:
            try:
                self.start_switch([f"net_af_xdp{next(_ids)},iface={s},start_queue=0,"
                                   "queue_count=1" for s in SWITCH_NAMES])
                return
            except SideError as exc:
                self.af_xdp = False
                self.notes.append(f"DPDK's net_af_xdp did not start here ({exc}); the "
                                  "ceiling uses net_af_packet instead")
                self.description = ("no OVS: testpmd io between two net_af_packet ports on "
                                    "the same veths (net_af_xdp failed)")
        self.start_switch([f"net_af_packet{next(_ids)},iface={s},qpairs=1,qdisc_bypass=1,"
                           "blocksz=36864,framesz=9216,framecnt=512" for s in SWITCH_NAMES])

    def start_switch(self, vdevs: list[str], wait: bool = True) -> None:
        """testpmd `io` on the PMD's CPU; with wait, ready and forwarding."""
        self.stop_switch()
        app = [f"--forward-mode={FwdMode.IO}", "--nb-cores=1", "--no-flush-rx",
               f"--total-num-mbufs={GEN_MBUFS}"]
        if not self.kind.jumbo:  # AF_XDP's umem wants testpmd's default mbufs
            app.append(f"--mbuf-size={GEN_MBUF_SIZE}")
        if self.kind.name in ("pvp", "tap"):  # drivers that check the MTU on rx
            app.append(f"--max-pkt-len={JUMBO_MTU + 18}")
        pmd = TestPmd(eal_args(self.layout.pmd, vdevs, 512), app,
                      log=self.workdir / f"ceiling-switch-{next(_ids)}.log", cwd=self.workdir,
                      preexec_fn=self.switch_ns.preexec() if self.switch_ns else None,
                      start_timeout=60)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.switch = pmd
        self.switch_ready = False
        if not self._stop_deferred:
            self.cleanup.defer("stop the ceiling switch", self.stop_switch)
            self._stop_deferred = True
        pmd.spawn()
        if wait:
            try:
                pmd.wait_ready()
                self.switch_ready = True
            except Exception as exc:
                self.stop_switch()
                raise SideError(f"the ceiling's testpmd did not start: "
                                f"{str(exc).splitlines()[0]}") from None
            try:
                start_forwarding(pmd, "the ceiling's switch")
            except TrafficError as exc:
                self.stop_switch()
                raise SideError(str(exc)) from None

    def drain(self) -> None:
        super().drain()
        if self.switch_ready:  # never before its first prompt, which wait_ready reads
            drain(self.switch)

    def stop_switch(self) -> None:
        if self.switch is not None:
            self.switch.quit()
            self.switch = None

    def switch_pids(self) -> list[int]:
        return [self.switch.pid] if self.switch is not None and self.switch.pid else []

    def apply(self, size: int, flows: int, flows_changed: bool) -> None:
        if self.kind.name != "p2p":
            return
        frames = flow_frames(flows, size)
        vdevs = []
        for i in (1, 2):
            pcap = self.workdir / f"p2p-{size}-{flows}-{i}.pcap"
            self.workdir.mkdir(parents=True, exist_ok=True)
            write_pcap(pcap, frames)
            vdevs.append(f"net_pcap{next(_ids)},rx_pcap={pcap.name},infinite_rx=1")
        self.start_switch(vdevs)

    def switch_counters(self) -> tuple[int, int]:
        assert self.switch is not None
        stats = parse_stats_all(self.switch.send_command("show port stats all"))
        return sum(r for r, _ in stats.values()), sum(t for _, t in stats.values())
