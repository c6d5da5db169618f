"""dpdk-testpmd at its interactive prompt, behind a small typed API.

    with TestPmd(eal_args + vdevs, app_args) as pmd:
        pmd.set_fwd(FwdMode.IO)
        pmd.start_forwarding()
        stats = pmd.port_stats(0)

Every command waits for the next `testpmd> ` prompt, with a timeout; when the
prompt does not come, `PromptTimeout` says which command, after how long, and
what testpmd printed last.  testpmd's own refusals ("Please stop port 0
first", "Bad arguments", ...) raise `TestPmdError` with its message.
"""
from __future__ import annotations

import re
import shutil
import warnings
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Sequence

import pexpect

PROMPT = "testpmd> "
# Lines testpmd prints when it refuses a command.
REFUSALS = (r"Please stop port \d+ first", r"Bad arguments", r"Invalid port \d+",
            r"Bad argument", r"Unknown parameter", r"^Invalid ", r"command not found",
            r"Command not found", r"Error", r"error: ", r"not supported", r"Failed to ")
DEFAULT_TIMEOUT = 10.0
START_TIMEOUT = 30.0
QUIT_TIMEOUT = 10.0


class TestPmdError(RuntimeError):
    """testpmd refused a command, or died; the message has its output."""

    __test__ = False  # not a pytest test class


class PromptTimeout(TestPmdError):
    """The `testpmd> ` prompt did not come in time."""


@dataclass(frozen=True)
class PortStats:
    """`show port stats N`: the NIC counters of one port."""

    rx_packets: int
    rx_missed: int
    rx_bytes: int
    rx_errors: int
    rx_nombuf: int
    tx_packets: int
    tx_errors: int
    tx_bytes: int


@dataclass(frozen=True)
class PortInfo:
    """`show port info N`: the fields the cases use, and everything as text."""

    port: int
    mac: str
    device: str
    driver: str
    link_up: bool
    mtu: int
    fields: dict[str, str]


def parse_port_stats(text: str) -> PortStats:
    """testpmd's `show port stats` output, parsed into PortStats."""
    def num(label: str) -> int:
        m = re.search(rf"{label}:\s*(\d+)", text)
        if m is None:
            raise TestPmdError(f"no {label} in 'show port stats' output:\n{text}")
        return int(m.group(1))
    return PortStats(num("RX-packets"), num("RX-missed"), num("RX-bytes"), num("RX-errors"),
                     num("RX-nombuf"), num("TX-packets"), num("TX-errors"), num("TX-bytes"))


def parse_port_info(port: int, text: str) -> PortInfo:
    """testpmd's `show port info` output of one port, parsed into PortInfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith(" "):
            fields.setdefault(key.strip(), value.strip())
    if "MAC address" not in fields:
        raise TestPmdError(f"no port info for port {port}:\n{text}")
    mtu = fields.get("MTU", "0")
    return PortInfo(port, fields["MAC address"].lower(), fields.get("Device name", ""),
                    fields.get("Driver name", ""), fields.get("Link status", "") == "up",
                    int(mtu) if mtu.isdigit() else 0, fields)


def parse_offloads(text: str) -> set[str]:
    """`show port N tx_offload capabilities|configuration`: the offload names."""
    names: set[str] = set()
    for line in text.splitlines():
        _, sep, rest = line.partition(":")
        if sep and ("Port" in line or "Queue" in line or "Per " in line):
            names.update(w for w in rest.split() if re.fullmatch(r"[A-Z0-9_]+", w))
    return names


class FwdMode(StrEnum):
    """testpmd's forwarding engines (`set fwd MODE`, `--forward-mode=MODE`)."""

    IO = "io"  # frames as they are, port to port
    MAC = "mac"  # rewrites the Ethernet addresses
    CSUM = "csum"  # also sets checksum (and TSO) offload flags, per `csum set`/`tso set`
    RXONLY = "rxonly"
    TXONLY = "txonly"
    FLOWGEN = "flowgen"  # generates UDP flows


class CsumLayer(StrEnum):
    """The checksums the csum engine can leave to the port (`csum set LAYER ...`)."""

    IP = "ip"
    UDP = "udp"
    TCP = "tcp"
    SCTP = "sctp"
    OUTER_IP = "outer-ip"
    OUTER_UDP = "outer-udp"


class CsumMode(StrEnum):
    """Who computes a checksum in the csum engine: the port (hw) or testpmd (sw)."""

    HW = "hw"
    SW = "sw"


def parse_csum_show(text: str) -> dict[str, CsumMode]:
    """`csum show N`: {'IP': hw, 'UDP': sw, 'TCP': hw, ...}."""
    out: dict[str, CsumMode] = {}
    for m in re.finditer(r"^\s*(IP|UDP|TCP|SCTP|Outer-Ip|Outer-Udp|Outer-IP|Outer-UDP)"
                         r" checksum offload is (\w+)", text, re.M | re.I):
        mode = m.group(2).lower()
        out[m.group(1).upper()] = CsumMode.HW if mode in ("hw", "hardware") else CsumMode.SW
    return out


class TestPmd:
    """One dpdk-testpmd process in interactive mode (-i)."""

    __test__ = False

    def __init__(self, eal_args: list[str], app_args: Sequence[str] = (), *,
                 binary: str = "dpdk-testpmd", timeout: float = DEFAULT_TIMEOUT,
                 start_timeout: float = START_TIMEOUT, log: Path | None = None,
                 cwd: Path | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.argv = [binary, *eal_args, "--", "-i", *app_args]
        self.cwd = cwd
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.log_path = log
        self.preexec_fn = preexec_fn
        self.child: pexpect.spawn | None = None
        self.transcript: list[tuple[str, str]] = []  # (command, output)
        self._log: Any = None
        self._at_prompt = False  # the last command got its prompt

    # -- lifecycle -------------------------------------------------------------

    def spawn(self) -> "TestPmd":
        """Start the process without waiting for the prompt (see wait_ready)."""
        exe = shutil.which(self.argv[0]) or self.argv[0]
        if self.log_path is not None:
            self._log = open(self.log_path, "a", encoding="utf-8")
        with warnings.catch_warnings():
            # Under pytest-xdist the worker has threads; the forked child execs at
            # once, so forkpty()'s multi-threading warning does not apply.
            warnings.filterwarnings("ignore", "This process .* is multi-threaded",
                                    DeprecationWarning)
            self.child = pexpect.spawn(exe, self.argv[1:], encoding="utf-8",
                                       codec_errors="replace", timeout=self.timeout,
                                       dimensions=(50, 500), cwd=self.cwd,
                                       preexec_fn=self.preexec_fn)
        self.child.logfile_read = self._log
        return self

    def wait_ready(self) -> "TestPmd":
        """Wait for the first prompt (testpmd prints it once its ports started)."""
        self._expect_prompt("(start)", self.start_timeout)
        return self

    def start(self) -> "TestPmd":
        return self.spawn().wait_ready()

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    def alive(self) -> bool:
        return self.child is not None and self.child.isalive()

    def quit(self) -> None:
        """`quit`, then make sure the process is gone."""
        child = self.child
        if child is None:
            return
        try:
            if child.isalive() and self._at_prompt:  # else it would not read `quit`
                child.sendline("quit")
                child.expect(pexpect.EOF, timeout=QUIT_TIMEOUT)
        except (pexpect.TIMEOUT, pexpect.EOF, OSError):
            pass
        finally:
            if child.isalive():
                child.terminate(force=True)
            child.close(force=True)
            self.child = None
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> "TestPmd":
        return self.start() if self.child is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.quit()

    # -- the prompt ---------------------------------------------------------------

    def _expect_prompt(self, command: str, timeout: float) -> str:
        child = self.child
        if child is None:
            raise TestPmdError(f"testpmd is not running (command {command!r})")
        self._at_prompt = False
        try:
            child.expect_exact(PROMPT, timeout=timeout)
        except pexpect.TIMEOUT:
            raise PromptTimeout(
                f"testpmd: no '{PROMPT.strip()}' prompt within {timeout:g} s after "
                f"{command!r}; last output:\n{_tail(child.before)}") from None
        except pexpect.EOF:
            status = child.wait() if not child.isalive() else None
            raise TestPmdError(
                f"testpmd exited (status {status}) during {command!r}; last output:\n"
                f"{_tail(child.before)}") from None
        self._at_prompt = True
        return str(child.before)

    def send_command(self, command: str, timeout: float | None = None,
                     check: bool = True) -> str:
        """Run one command and return its output (without the echoed command)."""
        if self.child is None:
            raise TestPmdError(f"testpmd is not running (command {command!r})")
        self.child.sendline(command)
        out = self._expect_prompt(command, self.timeout if timeout is None else timeout)
        lines = out.replace("\r\n", "\n").split("\n")
        if lines and lines[0].strip() == command.strip():
            lines = lines[1:]
        text = "\n".join(lines).strip("\n")
        self.transcript.append((command, text))
        if check:
            for pattern in REFUSALS:
                if re.search(pattern, text, re.M):
                    raise TestPmdError(f"testpmd refused {command!r}:\n{text}")
        return text

    # -- typed commands ------------------------------------------------------------

    def set_fwd(self, mode: FwdMode) -> None:
        """`set fwd MODE`: the forwarding engine."""
        self.send_command(f"set fwd {FwdMode(mode)}")

    def start_forwarding(self, mode: FwdMode | None = None) -> None:
        if mode is not None:
            self.set_fwd(mode)
        self.send_command("start")

    def stop_forwarding(self) -> str:
        """`stop`; returns the forward statistics testpmd prints."""
        return self.send_command("stop")

    def port_stats(self, port: int) -> PortStats:
        return parse_port_stats(self.send_command(f"show port stats {port}"))

    def clear_port_stats(self, port: int | str = "all") -> None:
        self.send_command(f"clear port stats {port}")

    def port_info(self, port: int) -> PortInfo:
        return parse_port_info(port, self.send_command(f"show port info {port}"))

    def tx_offload_capabilities(self, port: int) -> set[str]:
        return parse_offloads(self.send_command(f"show port {port} tx_offload capabilities"))

    def tx_offload_configuration(self, port: int) -> set[str]:
        return parse_offloads(self.send_command(f"show port {port} tx_offload configuration"))

    def stop_port(self, port: int) -> None:
        self.send_command(f"port stop {port}")

    def start_port(self, port: int) -> None:
        self.send_command(f"port start {port}", timeout=max(self.timeout, 30.0))

    def set_csum(self, port: int, layer: CsumLayer, mode: CsumMode) -> None:
        """`csum set LAYER hw|sw PORT` (the csum engine's per-port checksum work).
        The port must be stopped.  A value outside the enums is a ValueError."""
        self.send_command(f"csum set {CsumLayer(layer)} {CsumMode(mode)} {port}")

    def csum_show(self, port: int) -> dict[str, CsumMode]:
        return parse_csum_show(self.send_command(f"csum show {port}"))

    def set_tso(self, port: int, segsz: int) -> None:
        """`tso set SEGSZ PORT` (0 turns TSO off).  The port must be stopped."""
        self.send_command(f"tso set {segsz} {port}")

    def config_tx_offload(self, port: int, offload: str, on: bool) -> None:
        """`port config N tx_offload NAME on|off` (e.g. tcp_cksum, tcp_tso)."""
        self.send_command(f"port config {port} tx_offload {offload} {'on' if on else 'off'}")

    def config_rx_offload(self, port: int, offload: str, on: bool) -> None:
        self.send_command(f"port config {port} rx_offload {offload} {'on' if on else 'off'}")

    def set_peer_mac(self, port: int, mac: str) -> None:
        """The destination MAC the mac/csum engines write on frames sent on `port`."""
        self.send_command(f"set eth-peer {port} {mac}")

    def set_port_mac(self, port: int, mac: str) -> None:
        """The port's own MAC, which the mac/csum engines write as the source."""
        self.send_command(f"mac_addr set {port} {mac}")


def _tail(text: object, n: int = 15) -> str:
    lines = str(text or "").replace("\r\n", "\n").splitlines()
    return "\n".join(lines[-n:]) if lines else "(nothing)"
