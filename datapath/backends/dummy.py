"""netdev-dummy ports: frames in through netdev-dummy/receive, out through tx_pcap."""
from __future__ import annotations

from pathlib import Path

from datapath.backends.base import BackendError
from datapath.offloads import RxFlags, TxOffloads
from evidence.pcap import PcapReader
from harness.ifstatus import Status, read_interface
from harness.sandbox import Sandbox
from harness.vsctl import add_port, set_interface

NAME = "dummy"
MAX_RX_BATCH = 100  # each dummy rxq holds at most 100 packets


class DummyPort:
    """A netdev-dummy port: frames in through netdev-dummy/receive, out through its tx_pcap."""

    def __init__(self, sandbox: Sandbox, bridge: str, name: str, ofport: int,
                 port_type: str = "dummy") -> None:
        self.sb = sandbox
        self.name = name
        self.ofport = ofport
        self.tx_pcap = Path(sandbox.rundir) / f"{name}-tx.pcap"
        self._pcap_option: str | None = str(self.tx_pcap)  # the tx_pcap option as set
        self._options: dict[str, str] = {"tx_pcap": self._pcap_option}
        self.rx = RxFlags()
        self.tx = TxOffloads()
        sandbox.vsctl(*add_port(bridge, name, type=port_type, ofport_request=ofport,
                                options={"tx_pcap": self.tx_pcap}))
        self._reader = PcapReader(self.tx_pcap)

    @classmethod
    def existing(cls, sandbox: Sandbox, name: str, ofport: int, *, tx_pcap: bool = False,
                 pcap_name: str | None = None) -> "DummyPort":
        """A port some other command created (upstream's OVS_VSWITCHD_START arguments).
        With tx_pcap, its transmitted frames are captured (an added option, capture
        only); `pcap_name` reads a capture the port already writes instead."""
        port = cls.__new__(cls)
        port.sb, port.name, port.ofport = sandbox, name, ofport
        port.tx_pcap = Path(sandbox.rundir) / (pcap_name or f"{name}-tx.pcap")
        port.rx, port.tx = RxFlags(), TxOffloads()
        port._pcap_option = pcap_name or (str(port.tx_pcap) if tx_pcap else None)
        port._options = {"tx_pcap": port._pcap_option} if port._pcap_option else {}
        if tx_pcap:
            sandbox.vsctl(*set_interface(name, options={"tx_pcap": port.tx_pcap}))
        port._reader = PcapReader(port.tx_pcap)
        return port

    def configure(self, rx: RxFlags | None = None, tx: TxOffloads | None = None) -> None:
        rx = self.rx if rx is None else rx
        tx = self.tx if tx is None else tx
        if rx.tso_segsz and tx.tso_segsz and rx.tso_segsz != tx.tso_segsz:
            raise BackendError(f"{self.name}: netdev-dummy has one ol_tso_segsz for rx and tx "
                               f"({rx.tso_segsz} != {tx.tso_segsz})")
        want = {**({"tx_pcap": self._pcap_option} if self._pcap_option else {}),
                **rx.options(), **tx.options()}
        missing = [k for k in want if k.startswith("ol_") and k not in self.sb.install.dummy_options]
        if missing:
            raise BackendError(f"this ovs-vswitchd's netdev-dummy lacks option(s) {', '.join(missing)}")
        if want == self._options:
            self.rx, self.tx = rx, tx
            return
        args: list[str] = []
        if want:
            args = ["set", "Interface", self.name, *(f"options:{k}={v}" for k, v in want.items())]
        gone = sorted(set(self._options) - set(want))
        if gone:
            args += [*(["--"] if args else []), "remove", "Interface", self.name, "options", *gone]
        self.sb.vsctl(*args)  # returns once vswitchd applied it
        self._options, self.rx, self.tx = want, rx, tx

    def send(self, frames: list[bytes]) -> None:
        for i in range(0, len(frames), MAX_RX_BATCH):
            self.sb.appctl("netdev-dummy/receive", self.name,
                           *(f.hex() for f in frames[i:i + MAX_RX_BATCH]))

    def read_tx(self) -> list[bytes]:
        return self._reader.read_new()

    def rx_count(self) -> int:
        return self.sb.port_stats().get(self.name, {}).get("rx_packets", 0)

    def status(self) -> Status:
        """The Interface status column (tx_*_offload keys and the like)."""
        return read_interface(self.sb, self.name).status


def wait_connected(sandbox: Sandbox, *names: str, timeout: float = 10.0) -> None:
    """Wait until each dummy with a `stream=` link reports it connected
    (netdev-dummy/conn-state; the `pstream=` side only says "unknown"): frames
    sent before that are lost."""
    from harness.wait import wait_until
    for name in names:
        def connected(n: str = name) -> bool:
            return sandbox.appctl("netdev-dummy/conn-state", n).stdout == f"{n}: connected\n"
        wait_until(connected, timeout, what=f"{name}'s stream to connect")
