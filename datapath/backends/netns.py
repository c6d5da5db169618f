"""Network namespaces, and the kernel side of a port: inject and capture frames.

Everything the real backends create in the kernel (namespaces, veth pairs, tap
devices moved into a namespace) is registered with a `Cleanup` and removed in
reverse order, also when a case fails or the run is interrupted.  Deleting a
namespace deletes the virtual devices inside it, so a namespace is the unit
of cleanup: the OVS-side devices live in a namespace of their own too (the
"switch" namespace vswitchd runs in), never in the caller's.

Frames are built with scapy (fixtures/frames.py) and injected through an
AF_PACKET socket opened inside the peer namespace.  The socket is used
directly rather than through scapy's sendp() because a partial checksum can
only be handed to the kernel with PACKET_VNET_HDR, which scapy does not expose.
"""
from __future__ import annotations

import ctypes
import errno
import itertools
import os
import socket
import struct
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from datapath.model import csum
from harness import teardown_trace

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
VNET_HDR = struct.Struct("=BBHHHH")  # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
VIRTIO_NET_HDR_F_NEEDS_CSUM = 1
VIRTIO_NET_HDR_F_DATA_VALID = 2
VIRTIO_NET_HDR_GSO_TCPV4 = 1
VIRTIO_NET_HDR_GSO_TCPV6 = 4
MAX_FRAME = 65536 + VNET_HDR.size
NAME_PREFIX = "ovst"
IP_TIMEOUT = 20

_counter = itertools.count(1)
_libc: ctypes.CDLL | None = None


class NetnsError(RuntimeError):
    """A namespace or kernel-side operation failed; the message has the command and its output."""


def unique_name(role: str) -> str:
    """A namespace name no other sandbox (or xdist worker) of this run uses."""
    return f"{NAME_PREFIX}-{os.getpid()}-{next(_counter)}-{role}"


def _setns(fd: int) -> None:
    setns = getattr(os, "setns", None)  # Python >= 3.12
    if setns is not None:
        setns(fd, CLONE_NEWNET)
        return
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def run_ip(*args: str, ns: str | None = None, check: bool = True,
           timeout: float = IP_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """`ip [-n NS] ARGS`; raises NetnsError with ip's message on failure."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetnsError(f"$ {' '.join(argv)}\n(rc={proc.returncode}) {proc.stderr.strip()}")
    return proc


class Cleanup:
    """defer()-style cleanup: callbacks run in reverse order, each at most once,
    all of them even when some fail; the failures are reported together."""

    def __init__(self) -> None:
        self._items: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Lock()

    def defer(self, what: str, fn: Callable[[], None]) -> None:
        with self._lock:
            self._items.append((what, fn))

    def __len__(self) -> int:
        return len(self._items)

    def run(self) -> list[str]:
        problems: list[str] = []
        while True:
            with self._lock:
                if not self._items:
                    break
                what, fn = self._items.pop()
            try:
                with teardown_trace.step(f"cleanup '{what}'"):
                    fn()
            except BaseException as exc:  # keep cleaning; report at the end
                problems.append(f"cleanup '{what}': {type(exc).__name__}: {exc}")
        return problems


# Every namespace this process created and has not deleted yet: the last line of
# defence (session end, atexit) removes them even if a fixture's cleanup was skipped.
LIVE_NAMESPACES: set[str] = set()


class Netns:
    """A named network namespace (`ip netns add`) with IPv6 off, so that the
    kernel sends no router solicitations or MLD reports into a capture."""

    def __init__(self, name: str) -> None:
        self.name = name
        # Sockets opened inside keep the namespace (and its devices) alive after
        # `ip netns delete`: delete() closes them first.
        self.sockets: list[socket.socket] = []
        run_ip("netns", "add", name)
        LIVE_NAMESPACES.add(name)
        try:
            with self.entered():
                for key in ("all", "default"):
                    _write_sysctl(f"net/ipv6/conf/{key}/disable_ipv6", "1")
            run_ip("link", "set", "lo", "up", ns=name)
        except BaseException:
            self.delete()
            raise

    def __repr__(self) -> str:
        return f"<netns {self.name}>"

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Run the body with the calling thread inside this namespace (sockets
        created there stay in it)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(os.path.join(NETNS_DIR, self.name), os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(target)
            os.close(own)

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_ip(*args, ns=self.name, check=check)

    def exec_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], timeout: float = IP_TIMEOUT,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.exec_argv(argv), capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise NetnsError(f"$ {' '.join(self.exec_argv(argv))}\n(rc={proc.returncode}) "
                             f"{(proc.stderr or proc.stdout).strip()}")
        return proc

    def preexec(self) -> Callable[[], None]:
        """A Popen preexec_fn that moves the child into this namespace."""
        path = os.path.join(NETNS_DIR, self.name)

        def enter() -> None:
            fd = os.open(path, os.O_RDONLY)
            try:
                _setns(fd)
            finally:
                os.close(fd)
        return enter

    def enable_ipv6(self) -> None:
        """Turn IPv6 back on (an IPv6 underlay needs it), for the links that
        exist and those made later."""
        with self.entered():
            for key in ("all", "default", *os.listdir("/proc/sys/net/ipv6/conf")):
                _write_sysctl(f"net/ipv6/conf/{key}/disable_ipv6", "0")

    def sysctl(self, key: str, value: str) -> None:
        with self.entered():
            _write_sysctl(key, value)

    def delete(self) -> None:
        """Delete the namespace; the kernel deletes the virtual devices inside."""
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()
        run_ip("netns", "delete", self.name, check=False)
        LIVE_NAMESPACES.discard(self.name)
        if os.path.exists(os.path.join(NETNS_DIR, self.name)):
            raise NetnsError(f"namespace {self.name} still exists after 'ip netns delete'")

    def links(self) -> list[str]:
        out = self.ip("-o", "link", "show").stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
                if line.count(":") >= 2]


def _write_sysctl(key: str, value: str) -> None:
    # /proc/sys/net shows the namespace of the thread that opens it.
    with open(f"/proc/sys/{key}", "w") as f:
        f.write(value)


def delete_leftover_namespaces() -> list[str]:
    """Delete every namespace this process created and still holds; returns their names."""
    left = sorted(LIVE_NAMESPACES)
    for name in left:
        run_ip("netns", "delete", name, check=False)
        LIVE_NAMESPACES.discard(name)
    return left


def mac_bytes(text: str) -> bytes:
    """A MAC address in colon-separated hex, as 6 bytes."""
    return bytes(int(b, 16) for b in text.split(":"))


def mac_text(raw: bytes) -> str:
    """6 bytes of a MAC address, in colon-separated lowercase hex."""
    return ":".join(f"{b:02x}" for b in raw)


def link_mac(ns: Netns | None, ifname: str) -> bytes:
    """The MAC address of a link, in a namespace or the current one."""
    out = run_ip("-o", "link", "show", "dev", ifname, ns=ns.name if ns else None).stdout
    words = out.split()
    return mac_bytes(words[words.index("link/ether") + 1])


# ----------------------------------------------------------------------------
# Kernel side of a port: frames in (AF_PACKET send) and out (AF_PACKET capture)


@dataclass(frozen=True)
class VnetHdr:
    """A virtio-net header (struct virtio_net_hdr): checksum flags and GSO fields."""

    flags: int = 0
    gso_type: int = 0
    hdr_len: int = 0
    gso_size: int = 0
    csum_start: int = 0
    csum_offset: int = 0

    def pack(self) -> bytes:
        return VNET_HDR.pack(self.flags, self.gso_type, self.hdr_len, self.gso_size,
                             self.csum_start, self.csum_offset)

    @classmethod
    def unpack(cls, data: bytes) -> "VnetHdr":
        return cls(*VNET_HDR.unpack_from(data))


def l4_offsets(frame: bytes) -> tuple[int, int, int] | None:
    """(L4 offset, checksum offset within L4, IP version) of a TCP/UDP frame, or None."""
    from datapath.model.packet import PROTO_TCP, Packet
    pkt = Packet.parse(frame)
    if pkt.l4 is None:
        return None
    return pkt.l4, 16 if pkt.proto == PROTO_TCP else 6, pkt.ipv


def partial_csum_frame(frame: bytes, gso_size: int = 0) -> tuple[VnetHdr, bytes] | None:
    """The frame as a kernel hands over a CHECKSUM_PARTIAL skb: a NEEDS_CSUM
    header, and the frame's checksum field left as it is (a partial checksum's
    field content is not looked at by OVS, which completes it from scratch).
    With gso_size, a TCP frame becomes a GSO packet (TCPV4/TCPV6) as well."""
    offs = l4_offsets(frame)
    if offs is None:
        return None
    l4, ofs, ipv = offs
    if not gso_size:
        return VnetHdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, l4, ofs), frame
    if ofs != 16:
        return None
    hdr_len = l4 + (frame[l4 + 12] >> 4) * 4
    gso_type = VIRTIO_NET_HDR_GSO_TCPV4 if ipv == 4 else VIRTIO_NET_HDR_GSO_TCPV6
    return VnetHdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, gso_type, hdr_len, gso_size, l4, ofs), frame


def complete_needs_csum(hdr: VnetHdr, frame: bytes) -> bytes:
    """Finish a NEEDS_CSUM checksum as a NIC does on the wire: the field holds the
    pseudo-header sum, the ones' complement of the sum from csum_start goes there."""
    if not hdr.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM:
        return frame
    start, at = hdr.csum_start, hdr.csum_start + hdr.csum_offset
    if at + 2 > len(frame):
        return frame
    data = bytearray(frame)
    value = csum.checksum(bytes(data[start:]))
    struct.pack_into("!H", data, at, value)
    return bytes(data)


@dataclass(frozen=True)
class Captured:
    """One frame seen on an interface: outgoing (the kernel transmitted it) or
    not; its virtio-net header (checksum and GSO state as the skb had it);
    and the bytes, a NEEDS_CSUM checksum completed as a NIC would."""

    outgoing: bool
    vnet: VnetHdr
    frame: bytes
    # When the kernel saw it (SO_TIMESTAMPNS, seconds), for captures that ask
    # for it; orders frames of several captures (0.0: not asked).
    time: float = 0.0


class Sniffer:
    """An AF_PACKET capture on `ifname` in `ns`, both directions, with the
    virtio-net header of each frame: the one capture of the kernel side of a
    port (KernelSide reads through one).  read() never blocks."""

    def __init__(self, ns: Netns, ifname: str, rcvbuf: int = 16 << 20) -> None:
        self.ns, self.ifname = ns, ifname
        with ns.entered():
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                       socket.htons(ETH_P_ALL))
            self._sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self._sock.bind((ifname, ETH_P_ALL))
            self._sock.setblocking(False)
        ns.sockets.append(self._sock)
        self.frames: list[Captured] = []

    def take(self) -> list[Captured]:
        """The frames that arrived since the last read, not kept in self.frames."""
        got: list[Captured] = []
        while True:
            try:
                data, addr = self._sock.recvfrom(MAX_FRAME)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            hdr = VnetHdr.unpack(data)
            frame = data[VNET_HDR.size:]
            got.append(Captured(addr[2] == PACKET_OUTGOING, hdr, complete_needs_csum(hdr, frame)))
        return got

    def read(self) -> list[Captured]:
        """The frames since the last call (also appended to self.frames)."""
        got = self.take()
        self.frames += got
        return got

    def drain(self) -> None:
        self.read()
        self.frames.clear()

    @property
    def sent(self) -> list[bytes]:
        """The frames read so far that the namespace's stack transmitted."""
        return [c.frame for c in self.frames if c.outgoing]

    @property
    def received(self) -> list[bytes]:
        """The frames read so far that arrived from the wire."""
        return [c.frame for c in self.frames if not c.outgoing]

    def close(self) -> None:
        self._sock.close()


class KernelSide:
    """The kernel interface at the far end of a port (in a namespace the test made).

    `send()` injects frames as if a host behind that interface sent them;
    `read()` returns, without blocking, the frames that arrived on it since the
    last call.  The capture (a `Sniffer`) is opened here, before anything is
    sent.  Frames the kernel itself transmits on the interface (PACKET_OUTGOING)
    and frames from `ignore_src` MACs are not captured.
    """

    def __init__(self, ns: Netns, ifname: str, ignore_src: tuple[bytes, ...] = ()) -> None:
        self.ns = ns
        self.ifname = ifname
        self.ignore_src = set(ignore_src)
        self.offloaded: list[VnetHdr] = []  # vnet header of each captured frame, in order
        self.capture = Sniffer(ns, ifname, rcvbuf=4 << 20)
        with ns.entered():
            self._tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self._tx.bind((ifname, 0))
            self._tx_vnet = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            self._tx_vnet.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            self._tx_vnet.bind((ifname, 0))
        ns.sockets += [self._tx, self._tx_vnet]
        self.sent = 0

    def send(self, frames: list[bytes], partial: bool = False, gso_size: int = 0) -> None:
        """Transmit the frames on the interface; with partial=True each TCP/UDP
        frame goes as CHECKSUM_PARTIAL (virtio NEEDS_CSUM), the way a local
        socket's packets do when the interface offers checksum offload; with
        gso_size each TCP frame goes as one GSO packet of that segment size."""
        for frame in frames:
            if partial or gso_size:
                made = partial_csum_frame(frame, gso_size)
                if made is None:
                    raise NetnsError("a partial L4 checksum needs a TCP or UDP frame, GSO "
                                     "a TCP frame")
                hdr, data = made
                self._tx_vnet.send(hdr.pack() + data)
            else:
                self._tx.send(frame)
            self.sent += 1

    def read(self) -> list[bytes]:
        frames: list[bytes] = []
        for c in self.capture.take():
            if c.outgoing or c.frame[6:12] in self.ignore_src:
                continue
            self.offloaded.append(c.vnet)
            frames.append(c.frame)
        return frames

    def close(self) -> None:
        for sock in (self._tx, self._tx_vnet):
            sock.close()
        self.capture.close()


def ethtool_features(ns: Netns | None, ifname: str) -> dict[str, bool]:
    """`ethtool -k IFNAME` as {feature: on}, e.g. {'tx-checksum-ip-generic': True}."""
    argv = ["ethtool", "-k", ifname]
    if ns is not None:
        out = ns.run(argv).stdout
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT)
        if proc.returncode:
            raise NetnsError(f"$ {' '.join(argv)}\n{proc.stderr.strip()}")
        out = proc.stdout
    features: dict[str, bool] = {}
    for line in out.splitlines()[1:]:
        name, sep, value = line.strip().partition(":")
        if sep:
            features[name.strip()] = value.strip().startswith("on")
    return features
