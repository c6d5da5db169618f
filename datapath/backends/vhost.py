"""dpdkvhostuserclient ports towards dpdk-testpmd's virtio-user device.

testpmd plays the guest: its port 0 is net_virtio_user0 (the vhost-user
server, server=1), its port 1 a net_pcap vdev reading the frames to inject
from a pcap file and writing what it receives to another.  testpmd's `io`
engine forwards port 1 -> port 0 (into OVS) and port 0 -> port 1 (out of
OVS); its `csum` engine does the same while setting checksum offload flags,
so that a frame reaches OVS as virtio NEEDS_CSUM (L4-partial).

testpmd is the vhost-user server: it is started first, and OVS's client port
is added once testpmd's socket exists; testpmd shows its first prompt only
once OVS has connected.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from datapath.backends.kernel import tx_from_status
from datapath.backends.testpmd import FwdMode, TestPmd
from datapath.offloads import RxFlags, TxOffloads
from evidence.pcap import PcapReader, read_all, write_pcap
from harness.ifstatus import Status, read_interface
from harness.sandbox import Sandbox
from harness.vsctl import add_port
from harness.wait import wait_until

# testpmd's EAL: like vswitchd's, plus two lcores (main + one forwarding core).
TESTPMD_EAL = ["--no-huge", "-m", "512", "--in-memory", "--no-pci", "-l", "0-1"]
# --no-flush-rx: by default `start` first drains every rx queue, which would eat
# the frames net_pcap has ready.
TESTPMD_APP = ["--total-num-mbufs=8192", "--no-flush-rx"]


def short_socket_path(name: str) -> tuple[Path, Callable[[], None]]:
    """A vhost-user socket path short enough for sun_path (108 bytes; run
    directories can be longer), and the function that removes it again."""
    sockdir = Path(tempfile.mkdtemp(prefix="ovst-vhu-"))
    return sockdir / f"{name}.sock", lambda: shutil.rmtree(sockdir, ignore_errors=True)


class VhostUserClientPort:
    """OVS port of type dpdkvhostuserclient; testpmd holds the server socket."""

    kind = "dpdk vhost-user"

    def __init__(self, sb: Sandbox, bridge: str, name: str, ofport: int,
                 socket_path: Path) -> None:
        self.sb, self.bridge, self.name, self.ofport = sb, bridge, name, ofport
        self.socket_path = socket_path
        sb.vsctl(*add_port(bridge, name, type="dpdkvhostuserclient",
                           options={"vhost-server-path": socket_path}, ofport_request=ofport))
        self.status = Status.parse("{}")

    def wait_connected(self, timeout: float = 20.0) -> Status:
        def connected() -> bool:
            self.status = read_interface(self.sb, self.name).status
            return self.status.connection == "connected"
        wait_until(connected, timeout, what=f"vhost-user port {self.name} to connect",
                   describe=lambda: f"status {self.status}")
        return self.status

    @property
    def tx(self) -> TxOffloads:
        return tx_from_status(self.status)[0]

    @property
    def tso(self) -> bool:
        return tx_from_status(self.status)[1]

    def rx_count(self) -> int:
        return self.sb.port_stats().get(self.name, {}).get("rx_packets", 0)


class Guest:
    """testpmd as the guest behind a vhost-user port: frames in through a pcap
    file (its port 1), out through another."""

    def __init__(self, workdir: Path, socket_path: Path, frames: list[bytes], *,
                 log: Path | None = None, mac: str | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.rx_file = workdir / "guest-in.pcap"
        self.tx_file = workdir / "guest-out.pcap"
        write_pcap(self.rx_file, frames)
        self.frames = list(frames)
        # Short relative paths: DPDK refuses long devargs (E2BIG).
        sock = os.path.relpath(socket_path, workdir)
        self.pmd = TestPmd(
            [*TESTPMD_EAL, f"--vdev=net_virtio_user0,path={sock},server=1"
             + (f",mac={mac}" if mac else ""),
             f"--vdev=net_pcap0,rx_pcap={self.rx_file.name},tx_pcap={self.tx_file.name}"],
            TESTPMD_APP, log=log, cwd=workdir)
        self._reader = PcapReader(self.tx_file)

    def received(self) -> list[bytes]:
        """Frames OVS sent to the guest since the last call (testpmd port 0 -> 1)."""
        return self._reader.read_new()

    def all_received(self) -> list[bytes]:
        return read_all(self.tx_file)


class GuestInjector:
    """The Port face of the guest for send_and_expect: send() starts testpmd's
    forwarding, which hands the pcap's frames to OVS through the vhost port."""

    def __init__(self, guest: Guest, port: VhostUserClientPort,
                 mode: FwdMode = FwdMode.IO) -> None:
        self.guest, self.port, self.mode = guest, port, mode
        self.name = f"{port.name} (testpmd {mode})"
        self.ofport = port.ofport

    def configure(self, rx: RxFlags | None = None, tx: TxOffloads | None = None) -> None:
        pass

    def send(self, frames: list[bytes]) -> None:
        if frames != self.guest.frames:
            raise ValueError("the guest injects the frames of its pcap file, given at start")
        self.guest.pmd.start_forwarding(self.mode)

    def read_tx(self) -> list[bytes]:
        return self.guest.received()

    def rx_count(self) -> int:
        return self.port.rx_count()
