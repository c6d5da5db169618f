"""The OVS side: one OVS build's ovs-vswitchd switching the topology's two ports.

ovs-vswitchd runs in a namespace of its own (datapath/backends/env.py), the
DPDK build for the DPDK kinds; its PMD thread is pinned with pmd-cpu-mask and
its other threads with sched_setaffinity; SMC is on, so that the EMC, SMC and
dpcls all serve lookups.  The bridge forwards by one OpenFlow rule per flow
(perf/traffic.py).
"""
from __future__ import annotations

import itertools
from pathlib import Path

from datapath.backends import dpdk, tap
from datapath.backends.env import RealEnv
from datapath.backends.vhost import VhostUserClientPort
from evidence.pcap import write_pcap
from harness.control import Transcript
from harness.ifstatus import read_interface
from harness.install import OvsInstall
from harness.pmdstats import parse_pmd_stats
from harness.records import Command
from harness.wait import wait_until
from perf.kinds import JUMBO_MTU, CoreLayout, Kind
from perf.ovsstats import counters_delta, parse_dpctl_show, summarize_threads
from perf.records import Sample
from perf.sides import GEN_NAMES, SWITCH_NAMES, TAP_NAMES, Side, SideError, Snapshot, Unavailable
from perf.sysstat import group_delta, ovs_thread_class, pin_threads
from perf.traffic import file_prefix, flow_frames, openflow_rules, parse_unmatched

BRIDGE = "br0"
_vdev_ids = itertools.count()


class OvsSide(Side):
    """An OVS build as the switch, its bridge and ports set up for one kind of topology."""
    def __init__(self, label: str, kind: Kind, layout: CoreLayout, workdir: Path,
                 install: OvsInstall) -> None:
        super().__init__(label, kind, layout, workdir)
        self.install = install
        self.description = install.describe()
        self.commands: list[Command] = []
        self.env: RealEnv | None = None
        self.ports: list[str] = []
        self.mtu = 1500
        self.ports0: dict = {}
        self.log_notes: list[str] = []

    # -- build -----------------------------------------------------------------

    def build(self, flows: int) -> None:
        kind = self.kind
        if kind.dpdk and self.install.vswitchd_dpdk is None:
            raise Unavailable(f"{self.description}: no DPDK-enabled ovs-vswitchd (in Debian "
                              "only the openvswitch-switch-dpdk package has one)")
        other_config = {"pmd-cpu-mask": self.layout.pmd_mask, "smc-enable": "true",
                        "userspace-tso-enable": "false"}
        if kind.dpdk:  # as datapath/backends/dpdk.py, in a DPDK runtime directory of its own
            other_config.update({"dpdk-init": "true",
                                 "dpdk-extra": f"{dpdk.EAL_ARGS} --file-prefix={file_prefix()}"})
        self.env = RealEnv(self.install, self.workdir / "ovs", "dpdk" if kind.dpdk else "tap",
                           False, Transcript(self.commands.append),
                           sandbox_extra={"other_config": other_config})
        self.cleanup.defer("stop ovs-vswitchd", self._close_env)
        sb = self.env.sb
        types = sb.vsctl("get", "Open_vSwitch", ".", "iface_types").stdout
        if kind.iface_type not in types.strip("[]\n").replace(" ", "").split(","):
            raise Unavailable(f"{self.description} has no '{kind.iface_type}' interfaces "
                              f"(iface_types: {types.strip()})")
        self.pin()
        tap.add_bridge(sb, BRIDGE)
        if kind.name == "pvp":
            self._build_pvp(flows)
        elif kind.kernel:
            self._build_kernel()
        self.pin()

    def _build_pvp(self, flows: int) -> None:
        """testpmd is the vhost-user server: it makes a.sock, waits for OVS to
        connect, then makes b.sock."""
        assert self.env is not None
        gen = self.make_gen(flows)
        gen.spawn()
        for i, sock in enumerate(self.socket_paths(), 1):
            self.wait_socket(sock)
            self.env.sb.allow_log(r"VHOST_CONFIG: \(\S+\) failed to connect")
            VhostUserClientPort(self.env.sb, BRIDGE, f"p{i}", i, sock)
            self.ports.append(f"p{i}")
        gen.wait_ready()
        self._wait_vhost()

    def _wait_vhost(self) -> None:
        assert self.env is not None
        sb = self.env.sb
        for name in self.ports:
            wait_until(lambda name=name: read_interface(sb, name).status.connection  # type: ignore[misc]
                       == "connected", 30, what=f"vhost-user port {name} to connect")

    def _build_kernel(self) -> None:
        assert self.env is not None
        env, kind = self.env, self.kind
        if kind.name == "tap":
            self.gen_ns = env.switch_ns  # the generator reads and writes the taps there
            for i, name in enumerate(TAP_NAMES, 1):
                self._add_port(name, i, "type=tap")
            self.taps_up(env.switch_ns, self.mtu)
            return
        self.gen_ns = env.peer("gen")
        self.veth_pairs(env.switch_ns, self.mtu)
        for i, name in enumerate(SWITCH_NAMES, 1):
            opts = ([f"type={kind.iface_type}", f"options:xdp-mode={kind.xdp_mode}"]
                    if kind.xdp_mode else [])
            self._add_port(name, i, *opts)
            if kind.xdp_mode:
                self._check_xdp(name)

    def _add_port(self, name: str, ofport: int, *settings: str) -> None:
        """Add a port; a port OVS cannot open is a failure, unless the kernel
        lacks the AF_XDP mode asked for (then the topology cannot run here)."""
        assert self.env is not None
        sb = self.env.sb
        since = sb.log.mark()
        # rc=None: a refused port is told apart below (mode unavailable or OVS's fault)
        added = sb.vsctl("add-port", BRIDGE, name, "--", "set", "Interface", name,
                         f"ofport_request={ofport}", *settings, rc=None)
        self.ports.append(name)
        error = sb.vsctl("get", "Interface", name, "error").stdout.strip()
        if added.rc == 0 and error in ("[]", ""):
            return
        errs = [ln for ln in sb.log.lines(after=since) if "|ERR|" in ln or "|WARN|" in ln]
        unsupported = [ln for ln in errs if "xsk_socket__create failed (Operation not "
                       "supported)" in ln]
        if self.kind.xdp_mode and unsupported:
            raise Unavailable(f"the kernel cannot run AF_XDP on veth in xdp-mode="
                              f"{self.kind.xdp_mode}; OVS: "
                              f"{unsupported[0].split('|', 4)[-1]}")
        raise SideError(f"OVS could not add {name} ({' '.join(settings)}): "
                        f"{added.stderr.strip() or error}\n" + "\n".join(errs[-10:]))

    def _check_xdp(self, name: str) -> None:
        """The port must run in the mode asked for: OVS reports it in the status."""
        assert self.env is not None
        status = read_interface(self.env.sb, name).status
        used = status.xdp_mode or ""
        if used != self.kind.xdp_mode:
            raise Unavailable(f"AF_XDP port {name} asked for xdp-mode={self.kind.xdp_mode} "
                              f"but runs in '{used or 'no mode'}' (status {status})")
        self.description = f"{self.install.describe()}; xdp-mode in use: {used}"

    def pin(self) -> None:
        """Every thread but the PMDs (pinned by pmd-cpu-mask) to the OVS CPU."""
        pin_threads(self.switch_pids()[0], {self.layout.ovs_other},
                    skip=lambda comm: comm.startswith("pmd"))

    def _close_env(self) -> None:
        if self.env is None:
            return
        sb = self.env.sb
        self.log_notes = sb.log_problems()[:20]
        self.env.close(scan_logs=False)

    def switch_pids(self) -> list[int]:
        assert self.env is not None and self.env.sb.vswitchd is not None
        return [self.env.sb.vswitchd.proc.pid]

    # -- points ------------------------------------------------------------------

    def apply(self, size: int, flows: int, flows_changed: bool) -> None:
        assert self.env is not None
        sb = self.env.sb
        if self.kind.name == "p2p":  # its ports are sources: none while the rules change
            for name in self.ports:
                sb.vsctl("del-port", BRIDGE, name)
            self.ports = []
        if flows_changed:
            rules = self.workdir / f"rules-{flows}.txt"
            rules.write_text(openflow_rules(flows))
            # One bundle: no packet meets a half-written table (and the catch-all).
            sb.ofctl("--bundle", "replace-flows", BRIDGE, str(rules))
            sb.appctl("revalidator/purge")
        if self.kind.name == "p2p":
            self._p2p_ports(size, flows)
        else:
            if self.kind.name == "pvp":
                self._wait_vhost()  # a new generator: OVS reconnects by itself
            if not self.kind.jumbo:
                self._set_mtu(JUMBO_MTU if size > 1518 else 1500)
        self.pin()

    def _set_mtu(self, mtu: int) -> None:
        assert self.env is not None
        if mtu == self.mtu:
            return
        sb = self.env.sb
        for name in self.ports:
            sb.vsctl("set", "Interface", name, f"mtu_request={mtu}")
        for name in self.ports:
            wait_until(lambda name=name: sb.vsctl(  # type: ignore[misc]
                "get", "Interface", name, "mtu").stdout.strip() == str(mtu),
                20, what=f"{name} to take MTU {mtu}")
        if self.kind.name == "veth" and self.gen_ns is not None:  # the far ends too
            for g in GEN_NAMES:
                self.gen_ns.ip("link", "set", g, "mtu", str(mtu))
        self.mtu = mtu

    def _p2p_ports(self, size: int, flows: int) -> None:
        """New net_pcap vdevs replaying `flows` frames of `size` bytes, without end."""
        assert self.env is not None
        sb = self.env.sb
        frames = flow_frames(flows, size)
        for i in (1, 2):
            pcap = sb.rundir / f"p2p-{size}-{flows}-{i}.pcap"
            write_pcap(pcap, frames)
            devargs = f"net_pcap{next(_vdev_ids)},rx_pcap={pcap.name},infinite_rx=1"
            settings = ["type=dpdk", f"options:dpdk-devargs={devargs}"]
            if size > 1518:
                settings.append(f"mtu_request={JUMBO_MTU}")
            self._add_port(f"p{i}", i, *settings)

    def switch_counters(self) -> tuple[int, int]:
        assert self.env is not None
        ports = parse_dpctl_show(self.env.sb.dpctl("show", "-s").stdout)
        got = [ports[name] for name in self.ports if name in ports]
        return sum(p.rx for p in got), sum(p.tx for p in got)

    # -- the window ---------------------------------------------------------------

    def before_window(self) -> None:
        assert self.env is not None
        sb = self.env.sb
        self.ports0 = parse_dpctl_show(sb.dpctl("show", "-s").stdout)
        sb.appctl("dpif-netdev/pmd-stats-clear")

    def after_window(self, sample: Sample, s0: Snapshot, s1: Snapshot) -> None:
        assert self.env is not None
        sb, m = self.env.sb, sample.metrics
        dt = s1.t - s0.t
        threads = parse_pmd_stats(sb.appctl("dpif-netdev/pmd-stats-show").stdout)
        dp = summarize_threads(threads)
        ports1 = parse_dpctl_show(sb.dpctl("show", "-s").stdout)
        delta = counters_delta(self.ports0, ports1, self.ports)
        m["ovs_drop_pps"] = (delta.rx_dropped + delta.tx_dropped) / dt
        if not self.kind.generator:
            m["drop_pps"] = delta.tx_dropped / dt
        m["cycles_per_pkt"] = dp.cycles_per_pkt
        m["busy_pct"] = dp.busy_pct
        for key in ("emc", "smc", "megaflow", "simple", "upcall"):
            m[f"{key}_hit" if key != "upcall" else key] = dp.hit_share.get(key)
        split = group_delta(s0.threads["switch"], s1.threads["switch"], ovs_thread_class)
        pmd, other = split.get("pmd", 0.0) / dt, split.get("other", 0.0) / dt
        m["ovs_cpu"], m["pmd_cpu"], m["other_cpu"] = pmd + other, pmd, other
        rx = m["rx_pps"] or 0.0
        working = pmd * (dp.busy_pct or 0.0) / 100 + other if dp.busy_pct is not None \
            else pmd + other
        m["pps_per_busy_cpu"] = rx / working if working else None
        dump = sb.ofctl("dump-flows", BRIDGE, "cookie=0x5eed/-1").stdout
        m["unmatched"] = float(parse_unmatched(dump))
        if not sb.vswitchd or not sb.vswitchd.alive():
            sb.assert_alive()


