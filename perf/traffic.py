"""The traffic: flows, their frames and OpenFlow rules, and the testpmd generator.

Every topology carries the same flows, those of dpdk-testpmd's `flowgen`
engine: UDP over IPv4 from 10.254.0.0 port 1000 to 10.253.0.0 + i port 1001,
for i in 0..N-1, so that N flows are N distinct 5-tuples.  A frame size counts
the 4-byte FCS, as RFC 2544 and testpmd (`set txpkts`) do: a 64 B frame is 60
bytes in a capture.

The switch gets one OpenFlow rule per flow and direction (ovs_perf's "L3
flows"), so its datapath holds one megaflow per flow and the EMC, the SMC and
the megaflow classifier (dpcls) all take part as the flow count grows; a rule
that matched on in_port alone would take OVS's "simple match" shortcut past all
three.  A catch-all rule (cookie UNMATCHED_COOKIE) drops and counts what the
per-flow rules miss, which must be nothing.
"""
from __future__ import annotations

import itertools
import os
import re
import struct
from pathlib import Path
from typing import Callable

import pexpect

from datapath.backends.testpmd import FwdMode, TestPmd, parse_port_stats
from datapath.model import csum

SRC_IP = (10 << 24) | (254 << 16)
DST_IP = (10 << 24) | (253 << 16)
SPORT, DPORT = 1000, 1001
ETH_SRC = bytes.fromhex("000102030400")
ETH_DST = bytes.fromhex("000102030401")
FCS = 4
UNMATCHED_COOKIE = 0x5EED
# Generator mbufs hold a jumbo frame in one segment (flowgen builds single-segment
# packets); the data room counts the 128-byte headroom.
GEN_MBUF_SIZE = 10240
GEN_MBUFS = 8192


def ip_text(value: int) -> str:
    """A 32-bit IPv4 address in dotted-quad form."""
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def flow_frame(index: int, size: int) -> bytes:
    """Flow `index`'s frame of `size` bytes on the wire (FCS included, so size - 4 here)."""
    length = size - FCS
    if length < 14 + 20 + 8:
        raise ValueError(f"a {size} B frame cannot hold Ethernet, IPv4 and UDP headers")
    ip_len = length - 14
    ip = bytearray(struct.pack("!BBHHHBBHII", 0x45, 0, ip_len, 0, 0, 64, 17, 0, SRC_IP,
                               DST_IP + index))
    struct.pack_into("!H", ip, 10, csum.checksum(bytes(ip)))
    udp = struct.pack("!HHHH", SPORT, DPORT, ip_len - 20, 0)  # no UDP checksum, as flowgen
    frame = ETH_DST + ETH_SRC + b"\x08\x00" + bytes(ip) + udp
    return frame + bytes(length - len(frame))


def flow_frames(flows: int, size: int) -> list[bytes]:
    """The first `flows` flows' frames of `size` bytes."""
    return [flow_frame(i, size) for i in range(flows)]


def openflow_rules(flows: int, pairs: tuple[tuple[int, int], ...] = ((1, 2), (2, 1))) -> str:
    """ovs-ofctl add-flows text: one rule per flow and direction, and the catch-all."""
    lines = [f"priority=0,cookie={UNMATCHED_COOKIE:#x},actions=drop"]
    for in_port, out_port in pairs:
        lines += [f"priority=10,in_port={in_port},udp,nw_dst={ip_text(DST_IP + i)},"
                  f"actions=output:{out_port}" for i in range(flows)]
    return "\n".join(lines) + "\n"


def parse_unmatched(dump: str) -> int:
    """n_packets of the catch-all rule in `ovs-ofctl dump-flows` output."""
    total = 0
    for line in dump.splitlines():
        if f"cookie={UNMATCHED_COOKIE:#x}" in line:
            m = re.search(r"n_packets=(\d+)", line)
            total += int(m.group(1)) if m else 0
    return total


def parse_stats_all(text: str) -> dict[int, tuple[int, int]]:
    """`show port stats all`: {port: (rx packets, tx packets)}."""
    out: dict[int, tuple[int, int]] = {}
    blocks = re.split(r"#+ NIC statistics for port (\d+)\s+#+", text)
    for i in range(1, len(blocks) - 1, 2):
        stats = parse_port_stats(blocks[i + 1])
        out[int(blocks[i])] = (stats.rx_packets, stats.tx_packets)
    return out


class TrafficError(RuntimeError):
    """testpmd could not start its ports or forwarding; the message has its words."""


START_FAILURES = ("Not all ports were started", "Start ports failed", "Fail to configure",
                  "Fail to start port", "No probed ethernet devices")


def start_forwarding(pmd: TestPmd, what: str) -> None:
    """`start`, refusing testpmd's own words that a port did not start (it still
    shows its prompt and would forward nothing)."""
    out = pmd.send_command("start")
    startup = ""
    if pmd.log_path is not None and pmd.log_path.exists():
        startup = pmd.log_path.read_text(errors="replace")
    for failure in START_FAILURES:
        if failure in out or failure in startup:
            lines = [ln for ln in startup.splitlines() if ln.strip()][-12:]
            raise TrafficError(f"{what}: testpmd says '{failure}':\n" + "\n".join(lines))


def eal_args(cpu: int, vdevs: list[str], memory_mb: int = 256) -> list[str]:
    """testpmd's EAL: no hugepages, nothing on disk, both lcores (main and the
    forwarding one) on one CPU, a runtime directory of its own.  The vhost library's chatter (dozens of lines
    per connection) is kept down: a testpmd nobody talks to for a while must
    not fill its terminal and block in the middle of a vhost-user handshake."""
    return ["--no-huge", "-m", str(memory_mb), "--in-memory", "--no-pci",
            f"--file-prefix={file_prefix()}", "--lcores", f"0@{cpu},1@{cpu}",
            "--log-level=lib.vhost.*:warning", *(f"--vdev={v}" for v in vdevs)]


_prefixes = itertools.count()


def file_prefix() -> str:
    """A DPDK runtime directory of its own for each process: processes sharing
    one exchange multi-process messages, and one stopped (a parked side) then
    blocks a newcomer's start on its full socket."""
    return f"ovsp{os.getpid()}-{next(_prefixes)}"


def drain(pmd: TestPmd | None) -> None:
    """Read (into its log) whatever testpmd printed since its last command, so
    that its terminal never fills up."""
    child = pmd.child if pmd is not None else None
    if child is None:
        return
    try:
        while True:
            child.read_nonblocking(65536, timeout=0)
    except (pexpect.TIMEOUT, pexpect.EOF, OSError):
        pass


class FlowGen:
    """dpdk-testpmd with `flowgen` on two ports: each port sends the flows and
    counts (and drops) what it receives, so one forwarding lcore is both source
    and sink, and both directions carry traffic (aggregate rates, as vsperf's
    bidirectional tests report them)."""

    def __init__(self, cpu: int, vdevs: list[str], flows: int, workdir: Path, *,
                 preexec_fn: Callable[[], None] | None = None,
                 name: str = "generator") -> None:
        self.cpu, self.vdevs, self.flows, self.workdir = cpu, vdevs, flows, workdir
        self.preexec_fn, self.name = preexec_fn, name
        self.pmd: TestPmd | None = None
        self.size = 0
        self.running = False
        self.ready = False  # its first prompt was read

    def spawn(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pmd = TestPmd(eal_args(self.cpu, self.vdevs),
                           [f"--mbuf-size={GEN_MBUF_SIZE}", f"--total-num-mbufs={GEN_MBUFS}",
                            f"--flowgen-flows={self.flows}", "--no-flush-rx", "--nb-cores=1",
                            f"--forward-mode={FwdMode.FLOWGEN}"],
                           log=self.workdir / f"{self.name}.log", cwd=self.workdir,
                           preexec_fn=self.preexec_fn, start_timeout=60)
        self.pmd.spawn()
        self.size = 0
        self.running = False
        self.ready = False

    def wait_ready(self) -> None:
        assert self.pmd is not None
        self.pmd.wait_ready()
        self.ready = True

    @property
    def pid(self) -> int | None:
        return self.pmd.pid if self.pmd else None

    def set_size(self, size: int) -> None:
        assert self.pmd is not None
        if size != self.size:
            self.pmd.send_command(f"set txpkts {size}")
            self.size = size

    def start(self) -> None:
        assert self.pmd is not None
        if not self.running:
            start_forwarding(self.pmd, self.name)
            self.running = True

    def stop(self) -> None:
        if self.pmd is not None and self.running:
            self.pmd.send_command("stop")
            self.running = False

    def counters(self) -> tuple[int, int]:
        """(rx, tx) packets over both ports since the process started."""
        assert self.pmd is not None
        stats = parse_stats_all(self.pmd.send_command("show port stats all"))
        return sum(r for r, _ in stats.values()), sum(t for _, t in stats.values())

    def quit(self) -> None:
        if self.pmd is not None:
            self.pmd.quit()
            self.pmd = None
        self.running = False
