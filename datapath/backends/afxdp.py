"""afxdp backend: OVS ports of type `afxdp` (and `afxdp-nonpmd`) on veth pairs.

ovs-vswitchd (the plain build: AF_XDP is netdev-linux code, not DPDK) runs in
a "switch" namespace of its own, like the tap backend's; the OVS end of each
veth pair stays there, the other end goes to a peer namespace where frames go
in (AF_PACKET) and are captured.  OVS attaches an XDP program to its end and
reads frames from an AF_XDP socket in the mode `options:xdp-mode` asks for:

- `native-with-zerocopy`: driver mode, frames DMA'd into OVS's umem (veth
  cannot: it has no zero-copy support);
- `native`: driver mode with one copy (veth supports it);
- `generic`: XDP on the skb, any device;
- `best-effort` (the default): the first of these three that works.

The Interface status key `xdp-mode` says which mode is in use (OVS 4.0 has no
`xdp-mode-in-use` key; older releases had it as an option); the kernel says
which mode it attached (`ip -d link`: driver or generic).  The two must agree.

AF_XDP carries no offload metadata: frames reach OVS without checksum state,
and OVS finishes every checksum in software before it transmits (the status
reports every tx_*_offload false).  So this backend expresses rx "none" and
tx "none" (or any offload set whose wire result is the same).

libxdp looks for bpffs (LIBXDP_BPFFS) to load its multi-program dispatcher.
Each environment mounts a private bpffs for that, and unmounts it at close.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

from datapath.backends.base import BackendError
from datapath.backends.kernel import KernelPort, tx_from_status
from datapath.backends.netns import KernelSide, Netns, link_mac
from datapath.offloads import RxFlags
from harness.ifstatus import Status, read_interface
from harness.install import OvsInstall, program_files
from harness.sandbox import Sandbox, SandboxOptions

NAME = "afxdp"
MODES = ("native-with-zerocopy", "native", "generic", "best-effort")
AF_XDP = 44
BPF_FS_MAGIC = 0xCAFE4A11
MNT_DETACH = 2
# What the kernel reports as the attach mode of a device's XDP program
# (IFLA_XDP_ATTACHED: 1 driver, 2 generic/skb, 3 offloaded, 4 several).
KERNEL_MODES = {1: "native", 2: "generic", 3: "offload", 4: "multi"}

# Environment facts, not OVS faults, each said at every port (re)configuration:
# - the run may not raise its hard RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE); OVS
#   goes on, and this kernel charges XDP memory to the cgroup instead;
# - with bpffs mounted, libxdp tries its multi-program dispatcher first; the
#   kernel refuses to load it here (EPERM), and libxdp loads OVS's program alone.
LOG_ALLOW = (
    r"netdev_afxdp\|ERR\|setrlimit\(RLIMIT_MEMLOCK\) failed: Operation not permitted",
    r"netdev_afxdp\|WARN\|libbpf: prog 'xdp_pass': BPF program load failed: -EPERM",
    (r"netdev_afxdp\|WARN\|libbpf: permission error while running as root; try raising "
     r"'ulimit -l'"),
    r"netdev_afxdp\|WARN\|libbpf: prog 'xdp_pass': failed to load: -EPERM",
    r"netdev_afxdp\|WARN\|libbpf: failed to load object '\S*xdp-dispatcher.o'",
)
STDERR_ALLOW = (r"^libxdp: ",)


# ----------------------------------------------------------------------------
# what this machine and this OVS offer


@functools.cache
def _built_in(files: tuple[Path, ...]) -> bool:
    return any(b"afxdp-nonpmd\0" in p.read_bytes() for p in files)


def built_with_afxdp(install: OvsInstall) -> bool:
    """Whether this ovs-vswitchd (or its libraries) registers the afxdp netdev types."""
    try:
        return _built_in(tuple(program_files(install.layout)))
    except OSError:
        return False


def kernel_has_af_xdp() -> str | None:
    """None if the kernel has AF_XDP sockets, else why not."""
    try:
        socket.socket(AF_XDP, socket.SOCK_RAW, 0).close()
    except OSError as exc:
        return f"the kernel offers no AF_XDP sockets ({exc.strerror})"
    return None


# ----------------------------------------------------------------------------
# a private bpffs


_libc = ctypes.CDLL(None, use_errno=True)
LIVE_MOUNTS: set[str] = set()


class Bpffs:
    """A bpffs mounted on a fresh directory; umount() removes both."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="ovst-bpf-"))
        if _libc.mount(b"bpf", str(self.path).encode(), b"bpf", 0, b"mode=0700") != 0:
            err = ctypes.get_errno()
            self.path.rmdir()
            raise BackendError(f"cannot mount bpffs: {os.strerror(err)}")
        LIVE_MOUNTS.add(str(self.path))

    def umount(self) -> None:
        path = str(self.path)
        if path in LIVE_MOUNTS:
            if _libc.umount2(path.encode(), MNT_DETACH) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"umount {path}: {os.strerror(err)}")
            LIVE_MOUNTS.discard(path)
        shutil.rmtree(self.path, ignore_errors=True)


def umount_leftovers() -> list[str]:
    """Unmount every bpffs this process mounted and still holds; returns their paths."""
    left = sorted(LIVE_MOUNTS)
    for path in left:
        _libc.umount2(path.encode(), MNT_DETACH)
        LIVE_MOUNTS.discard(path)
        shutil.rmtree(path, ignore_errors=True)
    return left


def mounted_bpffs() -> list[str]:
    """Mount points of every bpffs in this mount namespace."""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        return [line.split()[1] for line in f if line.split()[2:3] == ["bpf"]]


def sandbox_options(switch_ns: Netns, bpffs: Bpffs | None) -> SandboxOptions:
    """Sandbox keyword arguments: the plain ovs-vswitchd in the switch namespace,
    libxdp pointed at the environment's own bpffs."""
    return {"enable_dummy": "", "vswitchd_preexec": switch_ns.preexec(),
            "extra_env": {"LIBXDP_BPFFS": str(bpffs.path)} if bpffs else {},
            "log_allow": LOG_ALLOW, "stderr_allow": STDERR_ALLOW}


# ----------------------------------------------------------------------------
# the port


def kernel_xdp_mode(ns: Netns, ifname: str) -> str:
    """How the kernel attached the XDP program of `ifname`: native, generic, ... or none."""
    out = ns.ip("-j", "-d", "link", "show", "dev", ifname).stdout
    info = json.loads(out)[0]
    xdp = info.get("xdp")
    if not xdp:
        return "none"
    return KERNEL_MODES.get(int(xdp.get("mode", 0)), f"mode {xdp.get('mode')}")


class AfxdpPort(KernelPort):
    """An OVS afxdp port on the switch end of a veth pair; the peer end is the
    kernel side, with tx checksumming and VLAN offload off (as upstream's
    CONFIGURE_VETH_OFFLOADS does), so what the peer's stack sends is finished."""

    kind = "afxdp"
    RX_LIMITS = ("an AF_XDP port hands frames to OVS with no checksum state (AF_XDP "
                 "carries no offload metadata): it can stamp neither good, bad nor partial, "
                 "nor a TSO segment size")

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int, switch_ns: Netns,
                 peer: Netns, *, mode: str | None = None, port_type: str = "afxdp",
                 peer_if: str | None = None) -> None:
        super().__init__(sb, bridge, name, ofport, peer)
        self.switch_ns = switch_ns
        self.port_type = port_type
        self.peer_if = peer_if or f"{name}-peer"
        switch_ns.ip("link", "add", name, "type", "veth", "peer", "name", self.peer_if,
                     "netns", peer.name)
        for feature in ("tx", "txvlan"):
            peer.run(["ethtool", "-K", self.peer_if, feature, "off"])
        switch_ns.ip("link", "set", name, "up")
        peer.ip("link", "set", self.peer_if, "up")
        opts = [f"options:xdp-mode={mode}"] if mode else []
        sb.vsctl("add-port", bridge, name, "--", "set", "Interface", name,
                 f"type={port_type}", *opts, f"ofport_request={ofport}")
        self.read_status()
        self.kernel = KernelSide(peer, self.peer_if, ignore_src=(link_mac(switch_ns, name),))

    def read_status(self) -> Status:
        self.status = read_interface(self.sb, self.name).status
        self.tx, self.tso = tx_from_status(self.status)
        return self.status

    @property
    def xdp_mode(self) -> str:
        """The mode OVS says is in use (Interface status xdp-mode)."""
        return self.status.xdp_mode or ""

    def kernel_mode(self) -> str:
        return kernel_xdp_mode(self.switch_ns, self.name)

    def rx_flags_for(self, frame: bytes) -> RxFlags:
        return RxFlags()
