"""A side: one switch (an OVS build, or testpmd as the ceiling) with its own
ports, namespaces and traffic generator, measured one window at a time.

Sides of one topology exist together, but only one runs at a time: the others
are parked with SIGSTOP (switch and generator), so they take no CPU, and
resumed with SIGCONT for their next window.  That lets the sweep interleave
the sides point by point without rebuilding them.

A window: start the generator, wait until the sink counts packets (an event,
not a sleep), let the caches warm up, snapshot every counter, measure for
`window` seconds, snapshot again, stop the generator.  Figures are deltas
divided by the time between the two snapshots (each taken as the middle of
the reads that make it).
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from datapath.backends.netns import Cleanup, Netns, run_ip, unique_name
from harness.wait import WaitTimeout, wait_until
from perf.kinds import CoreLayout, Kind
from perf.records import Sample
from perf.sysstat import MachineTimes, group_delta, machine_times, thread_times
from perf.traffic import FlowGen, drain

GEN_NAMES = ("g1", "g2")  # generator-side kernel devices
SWITCH_NAMES = ("s1", "s2")  # switch-side veth ends
TAP_NAMES = ("t1", "t2")
FIRST_PACKET_TIMEOUT = 15.0
REWARM = 0.25  # seconds of traffic before a later repeat's window


class SideError(RuntimeError):
    """A side could not be built or configured; the message says why."""


class Unavailable(SideError):
    """This machine or build cannot run the side (a missing capability, not a
    fault of OVS): the topology is skipped, saying why."""


@dataclass
class Snapshot:
    """Every counter of a side at one moment: packets received and sent, its threads' CPU
    time and the machine's."""

    t: float
    rx: int
    tx: int | None
    threads: dict[str, dict[int, tuple[str, float]]] = field(default_factory=dict)
    machine: MachineTimes | None = None


class Side(ABC):
    """What every side shares: its generator, parking, and the measurement window."""

    def __init__(self, label: str, kind: Kind, layout: CoreLayout, workdir: Path) -> None:
        self.label, self.kind, self.layout, self.workdir = label, kind, layout, workdir
        self.description = ""
        self.cleanup = Cleanup()
        self.ns_cleanup = Cleanup()
        self.gen: FlowGen | None = None
        self.gen_ns: Netns | None = None
        self.size = 0
        self.flows = 0
        self.parked = False
        self.notes: list[str] = []
        self.sockdir: Path | None = None

    # -- what a concrete side provides -------------------------------------------

    @abstractmethod
    def build(self, flows: int) -> None:
        """Start the switch and wire its ports (and, where the ports need it to
        connect, the generator with `flows` flows)."""

    @abstractmethod
    def switch_pids(self) -> list[int]:
        """The switch's processes (parked with the generator)."""

    @abstractmethod
    def apply(self, size: int, flows: int, flows_changed: bool) -> None:
        """Make the switch ready for the point: rules, MTU, source files."""

    def switch_counters(self) -> tuple[int, int]:
        """(rx, tx) of the switch's ports, for kinds without a generator."""
        raise NotImplementedError

    def before_window(self) -> None:
        """Reset the switch's own counters (OVS: pmd-stats-clear)."""

    def after_window(self, sample: Sample, s0: Snapshot, s1: Snapshot) -> None:
        """Add the switch's own figures to the sample."""

    # -- shared plumbing -------------------------------------------------------

    def new_ns(self, role: str) -> Netns:
        ns = Netns(unique_name(role))
        self.ns_cleanup.defer(f"delete namespace {ns.name}", ns.delete)
        return ns

    def socket_paths(self) -> tuple[Path, Path]:
        """Two short vhost-user socket paths (sun_path holds 108 bytes)."""
        if self.sockdir is None:
            self.sockdir = Path(tempfile.mkdtemp(prefix="ovsp-"))
            path = self.sockdir
            self.ns_cleanup.defer("remove the vhost-user sockets",
                                  lambda: shutil.rmtree(path, ignore_errors=True))
        return self.sockdir / "a.sock", self.sockdir / "b.sock"

    def veth_pairs(self, switch_ns: Netns, mtu: int) -> None:
        """s1-g1 and s2-g2: the s ends in the switch's namespace, the g ends in the
        generator's, all up with `mtu`."""
        assert self.gen_ns is not None
        for s, g in zip(SWITCH_NAMES, GEN_NAMES):
            run_ip("link", "add", s, "netns", switch_ns.name, "mtu", str(mtu), "type", "veth",
                   "peer", "name", g, "netns", self.gen_ns.name, "mtu", str(mtu))
            switch_ns.ip("link", "set", s, "up")
            self.gen_ns.ip("link", "set", g, "up")

    def taps_up(self, ns: Netns, mtu: int) -> None:
        """The taps (t1, t2) up with `mtu`; their kernel side stays in the switch's
        namespace, where the switch keeps reading their MTU (the generator runs
        there too)."""
        for t in TAP_NAMES:
            ns.ip("link", "set", t, "mtu", str(mtu), "up")

    def gen_vdevs(self) -> list[str]:
        """The generator's two ports for this kind."""
        if self.kind.name == "pvp":
            a, b = self.socket_paths()
            return [f"net_virtio_user{i},path={p},server=1,queue_size=1024"
                    for i, p in enumerate((a, b))]
        names = TAP_NAMES if self.kind.name == "tap" else GEN_NAMES
        # A frame of up to 10 KB in each ring slot, so that jumbo frames fit.
        return [f"net_af_packet{i},iface={n},qpairs=1,qdisc_bypass=1,blocksz=36864,"
                f"framesz=9216,framecnt=512" for i, n in enumerate(names)]

    def make_gen(self, flows: int) -> FlowGen:
        gen = FlowGen(self.layout.gen, self.gen_vdevs(), flows, self.workdir,
                      preexec_fn=self.gen_ns.preexec() if self.gen_ns else None,
                      name=f"generator-{flows}")
        self.gen = gen
        return gen

    def stop_gen(self) -> None:
        if self.gen is not None:
            self.gen.quit()
            self.gen = None
        if self.sockdir is not None:  # a new generator makes new sockets
            for sock in self.socket_paths():
                sock.unlink(missing_ok=True)

    def wait_socket(self, path: Path) -> None:
        gen = self.gen
        wait_until(lambda: path.exists() or (gen is not None and gen.pmd is not None
                                             and not gen.pmd.alive()),
                   30, what=f"the generator to create {path.name}")
        if not path.exists():
            raise SideError(f"the generator exited before creating {path}")

    # -- parking ---------------------------------------------------------------

    def _pids(self) -> list[int]:
        pids = list(self.switch_pids())
        if self.gen is not None and self.gen.pid:
            pids.append(self.gen.pid)
        return pids

    def drain(self) -> None:
        """Keep the testpmd terminals from filling up (see traffic.drain)."""
        if self.gen is not None and self.gen.ready:
            drain(self.gen.pmd)

    def park(self) -> None:
        self.drain()
        for pid in self._pids():
            _signal(pid, signal.SIGSTOP)
        self.parked = True

    def resume(self) -> None:
        for pid in self._pids():
            _signal(pid, signal.SIGCONT)
        self.parked = False

    # -- points and windows ---------------------------------------------------------

    def configure(self, size: int, flows: int) -> None:
        if self.kind.generator and (self.gen is None or self.gen.flows != flows):
            self.restart_gen(flows)
        self.apply(size, flows, flows != self.flows)
        if self.gen is not None:
            self.gen.set_size(size)
        self.size, self.flows = size, flows

    def restart_gen(self, flows: int) -> None:
        """A new generator for a new flow count (flowgen reads it at start only)."""
        self.stop_gen()
        gen = self.make_gen(flows)
        gen.spawn()
        gen.wait_ready()

    def counters(self) -> tuple[int, int | None]:
        if self.gen is not None:
            return self.gen.counters()
        _, tx = self.switch_counters()
        return tx, None  # the switch's tx is what reached the sink

    def snapshot(self) -> Snapshot:
        t0 = time.monotonic()
        rx, tx = self.counters()
        t1 = time.monotonic()
        snap = Snapshot((t0 + t1) / 2, rx, tx)
        for name, pid in (("switch", self.switch_pids()[0]),
                          ("gen", self.gen.pid if self.gen and self.gen.pid else 0)):
            if pid:
                snap.threads[name] = thread_times(pid)
        snap.machine = machine_times()
        return snap

    def measure(self, repeat: int, warmup: float, window: float) -> Sample:
        if self.gen is not None:
            self.gen.start()
        notes: list[str] = []
        try:
            first = self.counters()[0]
            try:
                wait_until(lambda: self.counters()[0] > first, FIRST_PACKET_TIMEOUT,
                           what="the sink to receive packets")
            except WaitTimeout:
                notes.append(f"no packet reached the sink within {FIRST_PACKET_TIMEOUT:g} s")
            # Caches and flow setup settle (a measured interval, not a wait for an
            # event); a side resumed for a later repeat is warm already.
            time.sleep(warmup if repeat == 0 else min(warmup, REWARM))
            self.before_window()
            s0 = self.snapshot()
            time.sleep(window)  # the measurement window itself
            s1 = self.snapshot()
        finally:
            if self.gen is not None:
                self.gen.stop()
        sample = self.sample(repeat, s0, s1)
        sample.notes += notes
        self.after_window(sample, s0, s1)
        return sample

    def sample(self, repeat: int, s0: Snapshot, s1: Snapshot) -> Sample:
        dt = s1.t - s0.t
        rx_pps = (s1.rx - s0.rx) / dt
        tx_pps = (s1.tx - s0.tx) / dt if s1.tx is not None and s0.tx is not None else None
        m: dict[str, float | None] = {"rx_pps": rx_pps, "tx_pps": tx_pps,
                                      "drop_pps": max(0.0, tx_pps - rx_pps)
                                      if tx_pps is not None else None}
        ours = 0.0
        for name in ("switch", "gen"):
            if name in s0.threads and name in s1.threads:
                used = sum(group_delta(s0.threads[name], s1.threads[name],
                                       lambda c: "all").values()) / dt
                m[f"{name}_cpu"] = used
                ours += used
        if s0.machine and s1.machine:
            d = s1.machine.minus(s0.machine)
            m["softirq_cpu"] = d.softirq / dt
            m["foreign_cpu"] = max(0.0, (d.busy - d.softirq) / dt - ours) + d.steal / dt
        switch = m.get("switch_cpu")
        m["pps_per_cpu"] = rx_pps / switch if switch else None
        return Sample(self.label, repeat, round(dt, 4), m)

    def close(self) -> list[str]:
        """Stop everything (resumed first, so that it can exit); the problems found."""
        if self.parked:
            self.resume()
        problems: list[str] = []
        try:
            self.stop_gen()
        except Exception as exc:  # keep cleaning up
            problems.append(f"stop the generator: {type(exc).__name__}: {exc}")
        problems += self.cleanup.run()
        return problems + self.ns_cleanup.run()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
