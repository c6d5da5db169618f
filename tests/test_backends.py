"""The real-port backends: their pure parts against known values, and that a
run leaves nothing behind (namespaces, devices, processes), Ctrl-C included."""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from datapath.backends.base import BackendError
from datapath.backends.dpdk import net_tap_rx_flags
from datapath.backends.kernel import KernelPort, datapath_rx_packets, express, tx_from_status
from datapath.backends.netns import (
    VIRTIO_NET_HDR_F_NEEDS_CSUM,
    Cleanup,
    VnetHdr,
    complete_needs_csum,
    partial_csum_frame,
)
from datapath.backends.offload_check import OffloadMismatch, check_dpdk, check_kernel, check_vhost
from datapath.model import csum
from datapath.offloads import CsumState, RxFlags, TxOffloads
from fixtures.capabilities import unavailable
from fixtures.frames import MICROGRAM, OPT_PKT, compose, with_ip_csum_flipped, with_l4_csum
from harness import teardown_trace
from harness.control import Result
from harness.ifstatus import TX_OFFLOAD_KEYS, Status
from harness.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
G, B, U, P = CsumState.GOOD, CsumState.BAD, CsumState.UNKNOWN, CsumState.PARTIAL


# ----------------------------------------------------------------------------
# pure parts


def test_partial_frame_offsets_and_gso_header() -> None:
    hdr, _ = partial_csum_frame(compose("tcp", 4))  # type: ignore[misc]
    assert (hdr.flags, hdr.csum_start, hdr.csum_offset, hdr.gso_type) == (
        VIRTIO_NET_HDR_F_NEEDS_CSUM, 34, 16, 0)
    hdr, _ = partial_csum_frame(compose("udp", 6))  # type: ignore[misc]
    assert (hdr.csum_start, hdr.csum_offset) == (54, 6)
    hdr, _ = partial_csum_frame(compose("tcp", 6), gso_size=1000)  # type: ignore[misc]
    assert (hdr.gso_type, hdr.gso_size, hdr.hdr_len) == (4, 1000, 74)
    assert partial_csum_frame(compose("udp", 4), gso_size=1000) is None  # no UFO
    assert partial_csum_frame(OPT_PKT) is None  # ICMP: no L4 checksum to offload
    assert VnetHdr.unpack(VnetHdr(1, 1, 54, 1448, 34, 16).pack()) == VnetHdr(1, 1, 54, 1448,
                                                                            34, 16)


@pytest.mark.parametrize("l4,ipv", [("tcp", 4), ("udp", 4), ("tcp", 6), ("udp", 6)])
def test_capture_completes_a_partial_checksum_like_a_nic(l4: str, ipv: int) -> None:
    """A frame whose checksum field holds the pseudo-header sum (what OVS writes
    for NEEDS_CSUM) is completed to the checksum scapy computed for the frame."""
    good = compose(l4, ipv)
    hdr, _ = partial_csum_frame(good)  # type: ignore[misc]
    start, at = hdr.csum_start, hdr.csum_start + hdr.csum_offset
    ip = 14
    if ipv == 4:
        pseudo = csum.pseudo_header_v4(good[ip + 12:ip + 16], good[ip + 16:ip + 20],
                                       6 if l4 == "tcp" else 17, len(good) - start)
    else:
        pseudo = csum.pseudo_header_v6(good[ip + 8:ip + 24], good[ip + 24:ip + 40],
                                       6 if l4 == "tcp" else 17, len(good) - start)
    seeded = bytearray(good)
    struct.pack_into("!H", seeded, at, pseudo)
    assert bytes(seeded) != good
    assert complete_needs_csum(hdr, bytes(seeded)) == good
    assert complete_needs_csum(VnetHdr(), bytes(seeded)) == bytes(seeded)  # no flag: as is


def test_net_tap_rx_flags() -> None:
    """What net_tap's software verification stamps, by frame."""
    tcp4 = compose("tcp", 4)
    assert net_tap_rx_flags(tcp4) == RxFlags(ip=G, l4=G)
    assert net_tap_rx_flags(with_l4_csum(tcp4, 0xDEAD)) == RxFlags(ip=G, l4=B)
    assert net_tap_rx_flags(with_ip_csum_flipped(tcp4)) == RxFlags(ip=B, l4=G)
    assert net_tap_rx_flags(compose("udp", 6)) == RxFlags(l4=G)
    assert net_tap_rx_flags(with_l4_csum(compose("udp", 6), 0x1234)) == RxFlags(l4=B)
    assert net_tap_rx_flags(OPT_PKT) == RxFlags(ip=B)  # IPv4 options, ICMP: no L4 check
    assert net_tap_rx_flags(MICROGRAM) == RxFlags()  # header longer than the frame


class FakeSandbox:
    """A sandbox whose dpctl and pmd-stats-show output the test gives."""

    def __init__(self, dpctl: str = "", pmd: str = "") -> None:
        self._dpctl, self._pmd = dpctl, pmd

    def dpctl(self, *args: str) -> Result:
        return Result(["ovs-appctl", "dpctl/show", *args], 0, self._dpctl, "")

    def appctl(self, *args: str) -> Result:
        return Result(["ovs-appctl", *args], 0, self._pmd, "")

    port_stats = Sandbox.port_stats  # the real parser over the fake dpctl text


def test_dp_port_stats_survives_ovs_missing_line_break() -> None:
    """OVS 4.0 prints ', could not retrieve stats (...)' without a line break for
    a tap moved to another namespace; the next port must not be misread."""
    text = ("netdev@ovs-netdev:\n  port 1: br0 (tap)\n    RX packets:0 errors:0\n"
            "    TX packets:0 errors:0\n  port 2: p1 (tap)\n"
            ", could not retrieve stats (No such device)  port 3: p2\n"
            "    RX packets:7 errors:0 dropped:0\n    TX packets:5 errors:0\n")
    stats = FakeSandbox(dpctl=text).port_stats()
    assert stats["p1"] == {}
    assert stats["p2"] == {"rx_packets": 7, "tx_packets": 5}
    pmd = ("main thread:\n  Rx packets:                    3  (0 Kpps)\n"
           "pmd thread numa_id 0 core_id 1:\n  Rx packets:                   4  (0 Kpps)\n")
    assert datapath_rx_packets(FakeSandbox(pmd=pmd)) == 7  # type: ignore[arg-type]


def test_tx_from_status() -> None:
    status = {"tx_ip_csum_offload": "true", "tx_tcp_csum_offload": "true",
              "tx_udp_csum_offload": "true", "tx_tcp_seg_offload": "false"}
    assert tx_from_status(_parsed(status)) == (TxOffloads(frozenset({"ip", "l4"})), False)
    status["tx_udp_csum_offload"] = "false"  # TCP alone is not the model's "l4"
    assert tx_from_status(_parsed(status))[0] == TxOffloads(frozenset({"ip"}))
    assert tx_from_status(_parsed({})) == (TxOffloads(), False)


def _parsed(status: dict[str, str]) -> Status:
    """A status column as ovs-vsctl prints it, parsed."""
    return Status.parse("{" + ", ".join(f"{k}={v}" for k, v in status.items()) + "}")


def _status(**on: bool) -> dict[str, str]:
    return {k: "true" if on.get(k.removeprefix("tx_").removesuffix("_offload")) else "false"
            for k in TX_OFFLOAD_KEYS}


def test_offload_mismatch_is_a_failure_naming_both_sides() -> None:
    """OVS's Interface status against the device: DPDK capabilities, virtio
    feature bits, ethtool features.  Agreement passes; any difference raises
    with OVS's keys and the device's side in the message."""
    caps = {"IPV4_CKSUM", "TCP_CKSUM", "UDP_CKSUM", "TCP_TSO"}
    csum = _status(ip_csum=True, tcp_csum=True, udp_csum=True)
    check_dpdk("p1", _parsed(csum), caps, userspace_tso=False)
    check_dpdk("p1", _parsed({**csum, "tx_tcp_seg_offload": "true"}), caps, userspace_tso=True)
    with pytest.raises(OffloadMismatch, match=r"(?s)tx_tcp_seg_offload: OVS says true, the "
                       r"driver offers TCP_TSO \(userspace TSO off\).*OVS \(Interface status\)"
                       r".*device: tx_offload capabilities IPV4_CKSUM TCP_CKSUM TCP_TSO"):
        check_dpdk("p1", _parsed({**csum, "tx_tcp_seg_offload": "true"}), caps, userspace_tso=False)
    with pytest.raises(OffloadMismatch, match="tx_udp_csum_offload: OVS says false, the "
                       "driver offers UDP_CKSUM"):
        check_dpdk("p1", _parsed({**csum, "tx_udp_csum_offload": "false"}), caps, userspace_tso=False)
    guest = {"features": f"{1 << 1 | 1 << 7 | 1 << 8 | 1 << 32:#x}"}
    check_vhost("v1", _parsed({**guest, **_status(tcp_csum=True, udp_csum=True)}), userspace_tso=False)
    with pytest.raises(OffloadMismatch, match=r"tx_tcp_csum_offload: OVS says true, the "
                       r"negotiated features do not allow it.*\n.*\n.*\n.*no guest offloads"):
        check_vhost("v1", _parsed({"features": "0x100000000", **_status(tcp_csum=True, udp_csum=True)}),
                    userspace_tso=False)
    feats = {"tx-checksum-ip-generic": True, "tx-tcp-segmentation": True}
    check_kernel("p2", _parsed(_status(tcp_csum=True, udp_csum=True, tcp_seg=True)), feats, True)
    check_kernel("p2", _parsed(_status()), feats, False)
    with pytest.raises(OffloadMismatch, match=r"tx_tcp_csum_offload: OVS says true, expected "
                       r"false(?s:.*)ethtool -k: .*userspace TSO off"):
        check_kernel("p2", _parsed(_status(tcp_csum=True, udp_csum=True)), feats, False)


class StubPort(KernelPort):
    """A kernel port that stamps the rx flags and offers the tx offloads it is given."""

    kind = "stub"
    RX_LIMITS = "stubs stamp what they are told"

    def __init__(self, stamps: RxFlags, tx: TxOffloads = TxOffloads()) -> None:
        self.name, self.stamps, self.tx, self.tso = "s1", stamps, tx, False

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        return self.stamps


def test_express_is_strict_on_requested_rx_flags() -> None:
    frame = compose("tcp", 4)
    got = express(StubPort(RxFlags(l4=P)), StubPort(RxFlags(), TxOffloads(frozenset({"l4"}))),
                  frame, RxFlags(l4=P), TxOffloads())
    assert got.rx == RxFlags(l4=P) and got.tx == TxOffloads(frozenset({"l4"}))
    assert "stub port s1 stamps rx l4=partial" in got.notes[0]
    # A layer the case leaves unknown may carry the port's own verdict ...
    got = express(StubPort(RxFlags(ip=G, l4=G)), StubPort(RxFlags()), frame, RxFlags(l4=G),
                  TxOffloads())
    assert got.rx == RxFlags(ip=G, l4=G)
    # ... but a flag the case asks for must be stamped exactly.
    with pytest.raises(BackendError, match=r"cannot stamp rx l4=good .*stamps ip=good,l4=bad"
                                           r".*stubs stamp what they are told"):
        express(StubPort(RxFlags(ip=G, l4=B)), StubPort(RxFlags()), frame, RxFlags(l4=G),
                TxOffloads())


def test_cleanup_runs_everything_in_reverse_and_reports_failures() -> None:
    done: list[str] = []
    c = Cleanup()
    c.defer("first", lambda: done.append("first"))
    c.defer("boom", lambda: 1 / 0)
    c.defer("last", lambda: done.append("last"))
    problems = c.run()
    assert done == ["last", "first"]
    assert problems == ["cleanup 'boom': ZeroDivisionError: division by zero"]
    assert c.run() == [] and len(c) == 0  # each runs once


def test_root_only_backends_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert unavailable("dummy", None) is None
    assert unavailable("tap", None) == ("the tap backend needs root (network namespaces, "
                                        "tap devices)")
    assert "needs root" in str(unavailable("dpdk", None))
    assert "needs root" in str(unavailable("afxdp", None))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    if os.path.exists("/dev/net/tun"):
        assert "ovs-vswitchd built with DPDK" in str(unavailable("dpdk", None))


def test_backend_option_parametrizes_the_topology() -> None:
    """--backend dummy,tap: every two_ports case once per backend, ids ending in
    the backend's name; the capability matrix heads the run."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--collect-only", "--backend", "dummy,tap",
                           "cases/dpif_netdev/test_csum_offload.py::test_tcp_csum_simple_match"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_tcp_csum_simple_match[dummy]" in proc.stdout
    assert "test_tcp_csum_simple_match[tap]" in proc.stdout
    assert "capability matrix" in proc.stdout
    for backend in ("dummy*", "tap*", "dpdk ", "afxdp "):
        assert f"\n  {backend}" in proc.stdout, proc.stdout


# ----------------------------------------------------------------------------
# nothing left behind


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _processes_with(token: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if token.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid}: {argv}")
        except OSError:
            continue
    return found


def _files() -> set[str]:
    """What DPDK and the backends could leave on disk: shared memory, hugepage
    files, DPDK runtime directories, short-lived paths under /tmp (vhost-user
    sockets, run-directory links, bpffs mount points)."""
    found = {f"/tmp/{n}" for n in os.listdir("/tmp") if n.startswith("ovst-")}
    for d in ("/dev/shm", "/dev/hugepages", "/run/dpdk", "/var/run/dpdk"):
        if os.path.isdir(d):
            found |= {os.path.join(d, n) for n in os.listdir(d)}
    return found


needs_tap = pytest.mark.skipif(unavailable("tap", None) is not None,
                               reason=str(unavailable("tap", None)))


@pytest.mark.requires(backend="tap")
def test_real_env_leaves_nothing(real_env) -> None:
    """A tap sandbox with a tap port, a veth port and a helper process: after
    close() its namespaces (and the devices in them) and processes are gone."""
    from datapath.backends import tap
    env = real_env("tap", tso=True)
    tap.add_bridge(env.sb, "br1")
    env.own(tap.TapPort(env.sb, "br1", "p1", 1, env.switch_ns, env.peer("p1")))
    env.own(tap.VethPort(env.sb, "br1", "p2", 2, env.switch_ns, env.peer("p2"),
                         userspace_tso=True))
    helper = env.spawn("sleeper", ["sleep", "300"], env.peer("p2"))
    names = {env.switch_ns.name, env.peer("p1").name, env.peer("p2").name}
    assert names <= _namespaces()
    assert "p1" in env.peer("p1").links() and "p2-peer" in env.peer("p2").links()
    vswitchd = env.sb.vswitchd.proc  # type: ignore[union-attr]
    assert env.close() == []
    assert not names & _namespaces()
    assert helper.poll() is not None and vswitchd.poll() is not None


def test_afxdp_and_dpdk_envs_leave_nothing(real_env, ovs_install) -> None:
    """An AF_XDP sandbox (its bpffs, two afxdp ports) and a DPDK one (a net_tap
    port, a background testpmd): after close() their namespaces, processes,
    bpffs mounts and files are gone, and /dev/shm is as before."""
    from datapath.backends import afxdp, dpdk, tap
    from fixtures.system_dpdk.macros import BackgroundTestPmd
    built = [b for b in ("afxdp", "dpdk") if unavailable(b, ovs_install) is None]
    if not built:
        pytest.skip(f"afxdp: {unavailable('afxdp', ovs_install)}; "
                    f"dpdk: {unavailable('dpdk', ovs_install)}")
    files = _files()
    for backend in built:
        env = real_env(backend, label=backend, probed=True)
        tap.add_bridge(env.sb, "br1")
        procs = [env.sb.vswitchd.proc]  # type: ignore[union-attr]
        mount = None
        if backend == "afxdp":
            assert env.bpffs is not None
            mount = str(env.bpffs.path)
            assert mount in afxdp.mounted_bpffs()
            for n in (1, 2):
                env.own(afxdp.AfxdpPort(env.sb, "br1", f"p{n}", n, env.switch_ns,
                                        env.peer(f"p{n}")))
        else:
            env.own(dpdk.DpdkTapPort(env.sb, "br1", "p1", 1, env.switch_ns, env.peer("p1")))
            pmd = BackgroundTestPmd(env.sb.rundir, env.switch_ns,
                                    ["--vdev=net_null0", "-l", "0-1"], [], env.sb.transcript)
            env.cleanup.defer("stop testpmd", lambda pmd=pmd: None if pmd.stop() else None)
            procs.append(pmd.proc)
        names = {env.switch_ns.name, *(n.name for n in env.peers.values())}
        assert names <= _namespaces()
        assert env.close() == [], backend
        assert not names & _namespaces(), backend
        assert all(p.poll() is not None for p in procs), backend
        if mount:
            assert mount not in afxdp.mounted_bpffs() and not os.path.exists(mount)
    assert _files() == files, f"left behind: {sorted(_files() - files)}"


HOLD = "OVSTEST_HOLD_READY"


@pytest.mark.skipif(HOLD not in os.environ,
                    reason="helper of test_interrupt_leaves_nothing (runs in its child pytest)")
@pytest.mark.requires(backend="tap")
def test_hold_resources_until_interrupted(real_env, ovs_install) -> None:
    """Builds every kind of resource the backends make, says so, and waits."""
    from datapath.backends import dpdk, tap
    from datapath.backends.vhost import Guest, VhostUserClientPort, short_socket_path
    backend = "dpdk" if unavailable("dpdk", ovs_install) is None and \
        os.environ.get("OVSTEST_HOLD_DPDK") else "tap"
    env = real_env(backend, tso=True, probed=backend != "tap")
    tap.add_bridge(env.sb, "br1")
    env.own(tap.TapPort(env.sb, "br1", "p1", 1, env.switch_ns, env.peer("p1")))
    env.own(tap.VethPort(env.sb, "br1", "p2", 2, env.switch_ns, env.peer("p2"),
                         userspace_tso=True))
    pids = [env.spawn("iperf3", ["iperf3", "-s"], env.peer("p2"),
                      stdout=subprocess.DEVNULL).pid]
    # A Linux tunnel peer (cases/real_ports/test_kernel_peer.py): a VXLAN device, a capture
    # on it and a listener behind it, in a namespace of the run.
    from datapath.backends.native_tunnel import Sniffer, add_native_tunnel, missing
    if missing("vxlan") is None:
        peer = env.peer("at_ns0")
        add_native_tunnel(peer, "vxlan", "ns_tnl0", "172.31.1.100", "10.1.1.1/24",
                          ("id", "0", "dstport", "4789"))
        env.cleanup.defer("close the capture", Sniffer(peer, "ns_tnl0").close)
        pids.append(env.spawn("ncat", ["ncat", "-l", "10.1.1.1", "1234"], peer,
                              stdout=subprocess.DEVNULL).pid)
    if backend == "dpdk":
        env.own(dpdk.DpdkTapPort(env.sb, "br1", "p3", 3, env.switch_ns, env.peer("p3")))
        sock, remove = short_socket_path("v1")
        env.cleanup.defer("remove the vhost-user socket", remove)
        guest = Guest(env.sb.rundir / "guest", sock, [])
        env.cleanup.defer("quit testpmd", guest.pmd.quit)
        guest.pmd.spawn()
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # testpmd's virtio-user guest offers no TSO; OVS says so (userspace TSO is on).
        env.sb.allow_log(r"VHOST_CONFIG", r"netdev_dpdk\|WARN\|v1: Tx TSO offload is not supported")
        VhostUserClientPort(env.sb, "br1", "v1", 4, sock)
        guest.pmd.wait_ready()
        pids.append(guest.pmd.pid)  # type: ignore[arg-type]
    pids += [env.sb.vswitchd.proc.pid, env.sb.ovsdb.proc.pid]  # type: ignore[union-attr]
    namespaces = [env.switch_ns.name, *(n.name for n in env.peers.values())]
    mounts: list[str] = []
    if unavailable("afxdp", ovs_install) is None:  # AF_XDP: its bpffs and XDP sockets too
        from datapath.backends import afxdp
        xdp = real_env("afxdp", label="afxdp", probed=True)
        tap.add_bridge(xdp.sb, "br1")
        xdp.own(afxdp.AfxdpPort(xdp.sb, "br1", "p1", 1, xdp.switch_ns, xdp.peer("p1")))
        mounts.append(str(xdp.bpffs.path))  # type: ignore[union-attr]
        namespaces += [xdp.switch_ns.name, *(n.name for n in xdp.peers.values())]
        pids.append(xdp.sb.vswitchd.proc.pid)  # type: ignore[union-attr]
    info = {"namespaces": namespaces, "pids": pids, "backend": backend, "mounts": mounts,
            "files": sorted(_files()),
            "handlers": {s.name: repr(signal.getsignal(s)) for s in _INTERRUPTS},
            "handled": [s.name for s in _INTERRUPTS if callable(signal.getsignal(s))]}
    ready = Path(os.environ[HOLD])
    ready.with_suffix(".tmp").write_text(json.dumps(info))
    ready.with_suffix(".tmp").replace(ready)  # whole, when the parent sees it
    time.sleep(300)


# Seconds an interrupted child has to tear everything down and exit.
INTERRUPT_BUDGET = 60
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _interruptible() -> None:
    """In the child, before exec: the signals it is interrupted with at their
    default, so that its Python turns them into a KeyboardInterrupt (SIGINT by
    itself, SIGTERM through fixtures/lifecycle.py).  An ignored signal stays
    ignored across fork and exec, and Python leaves an ignored SIGINT ignored:
    a run started in the background of a non-interactive shell (`cmd &`, which
    ignores SIGINT and SIGQUIT for it) would give its child pytest no Ctrl-C."""
    for sig in _INTERRUPTS:
        signal.signal(sig, signal.SIG_DFL)


@needs_tap
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_interrupt_leaves_nothing(tmp_path: Path, sig: signal.Signals, ovs_install) -> None:
    """A child pytest builds namespaces, tap/veth (and, on DPDK, net_tap and a
    testpmd guest; with AF_XDP, a bpffs and an afxdp port) and helper
    processes, then is interrupted (Ctrl-C: SIGINT to its process group; or
    SIGTERM).  It must end within INTERRUPT_BUDGET seconds, and afterwards none
    of its namespaces, processes, bpffs mounts or files (vhost-user sockets,
    /dev/shm, DPDK runtime files) may exist.  The child traces its teardown
    steps (harness/teardown_trace.py): a failure shows them, in seconds after
    the signal, with the signal-to-end time and the child's output."""
    ready = tmp_path / "ready.json"
    trace = tmp_path / "teardown.trace"
    token = uuid.uuid4().hex
    before = _files()
    env = {**os.environ, HOLD: str(ready), "OVSTEST_LEAK_TOKEN": token,
           teardown_trace.ENV: str(trace)}
    env.pop("RUNTIME_DIRECTORY", None)  # the child's DPDK runtime files: its own to remove
    if sig == signal.SIGINT:
        env["OVSTEST_HOLD_DPDK"] = "1"  # the Ctrl-C run holds DPDK resources too
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--timeout=0",
         "--out-dir", str(tmp_path / "out"),
         f"{Path(__file__).relative_to(ROOT)}::test_hold_resources_until_interrupted"],
        cwd=ROOT, env=env, start_new_session=True, preexec_fn=_interruptible,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def evidence(out: str) -> str:
        steps = teardown_trace.relative(trace.read_text(), signalled) if trace.exists() else ""
        return (f"--- the child's teardown, in seconds after {sig.name} ---\n"
                f"{steps or '(no step traced)'}\n--- the child's output (tail) ---\n{out[-3000:]}")
    try:
        deadline = time.monotonic() + 90
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"child never got ready:\n{child.communicate(timeout=30)[0]}"
        info = json.loads(ready.read_text())
        assert set(info["namespaces"]) <= _namespaces()  # the check below can fail
        if sig == signal.SIGINT and unavailable("dpdk", ovs_install) is None:
            assert info["backend"] == "dpdk" and len(info["pids"]) >= 4 + len(info["mounts"]), \
                info  # iperf3, testpmd, the daemons (+ the AF_XDP vswitchd, other helpers)
        assert _processes_with(token)
        # Else the signal is discarded, and nothing happens until the budget is out.
        assert sig.name in info["handled"], \
            f"the child pytest does not handle {sig.name}: {info['handlers']}"
        signalled = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(child.pid, sig)  # what a terminal's Ctrl-C does
        else:
            os.kill(child.pid, sig)
        try:
            out = child.communicate(timeout=INTERRUPT_BUDGET)[0]
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            try:
                out = child.communicate(timeout=10)[0]
            except subprocess.TimeoutExpired:  # a helper it started holds the pipe open
                out = "(no output: a process the child started still holds its pipe open)"
            pytest.fail(f"the child pytest did not end within {INTERRUPT_BUDGET} s of "
                        f"{sig.name}; killed it\n{evidence(out)}", pytrace=False)
        took = time.monotonic() - signalled
        print(f"{sig.name}: the child ended {took:.2f} s after the signal "
              f"(exit status {child.returncode})")
        print(teardown_trace.relative(trace.read_text(), signalled) if trace.exists() else "")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    left_ns = set(info["namespaces"]) & _namespaces()
    left_procs = [p for p in _processes_with(token) if not p.startswith(f"{os.getpid()}:")]
    from datapath.backends.afxdp import mounted_bpffs
    left_mounts = set(info["mounts"]) & set(mounted_bpffs())
    left_files = _files() - before
    assert not (left_ns or left_procs or left_mounts or left_files), (
        f"left behind: namespaces {sorted(left_ns)}, processes {left_procs}, bpffs mounts "
        f"{sorted(left_mounts)}, files {sorted(left_files)} (the child ended {took:.2f} s "
        f"after {sig.name})\n{evidence(out)}")
    # Interrupted (2), and nothing else: a teardown problem (a daemon that had to be
    # killed, an error in its log) fails the child's run (1), and is often what
    # made its teardown slow.
    assert child.returncode == pytest.ExitCode.INTERRUPTED, (
        f"the child's teardown reported problems (exit status {child.returncode}; it ended "
        f"{took:.2f} s after {sig.name})\n{evidence(out)}")
    if info["mounts"] or info["backend"] == "dpdk":  # bpffs mount point, vhost-user socket
        assert set(info["files"]) - before, "the child made no file to check the cleanup of"
    for pid in info["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
