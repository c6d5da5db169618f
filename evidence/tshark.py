"""A second opinion on checksums: tshark's own validation of every captured frame.

One long-running `tshark -i -` reads the frames as a pcap stream on its stdin
and prints, per frame, the checksum status of each IP, TCP, UDP and GRE header
(Wireshark: 0 bad, 1 good, 2 unverified, 3 not present, 4 illegal).  That
costs about a millisecond a frame instead of a tshark start per frame.  The
verdicts are keyed like the model's csum_state ("IP", or "outer.UDP",
"inner.TCP" in tunnels) so that the two can be compared layer by layer.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time
from typing import IO

from evidence import pcap

FIELDS = {"IP": "ip.checksum.status", "TCP": "tcp.checksum.status",
          "UDP": "udp.checksum.status", "GRE": "gre.checksum.status"}
# Each TCP header's checksum field and the value Wireshark computed, asked for
# beside the status: Wireshark calls a TCP checksum of 0xffff bad where it
# computes 0x0000 ("see RFC 1624"), yet both are zero in ones' complement and
# RFC 1071's verification (the sum over the header, field included, is all
# ones) accepts either.  Linux writes 0xffff for a zero result whenever it
# completes a checksum in software (CSUM_MANGLED_0), so such frames cross OVS.
TCP_VALUES = ("tcp.checksum", "tcp.checksum_calculated")
# Values of Wireshark's `<proto>.checksum.status` fields (proto_checksum_enum_e).
CHECKSUM_STATUS = {"0": "bad", "1": "good", "2": "unverified", "3": "not present",
                   "4": "illegal"}
# Checksum validation is off by default in Wireshark for IP, TCP and UDP; GRE,
# ICMP and ICMPv6 have no such preference and always verify their checksum.
CHECKSUM_PREFS = {"ip.check_checksum": "TRUE", "tcp.check_checksum": "TRUE",
                  "udp.check_checksum": "TRUE"}
# tshark's start (its dissectors and preferences loaded) ends when it says on
# stderr that it captures: a wait of its own, so that a start slowed by a busy
# machine is not charged to the first frame's answer.
CAPTURING = b"Capturing on "
START_TIMEOUT = 60.0


def checksum_verdict(status: str) -> str:
    """good, bad, unverified, not present or illegal for a checksum.status value
    (as tshark prints it); an unknown value as "status N"."""
    return CHECKSUM_STATUS.get(status, f"status {status}")


class TsharkError(Exception):
    """tshark failed or is missing."""


class Tshark:
    """Checksum verdicts from a persistent tshark process."""

    def __init__(self, timeout: float = 10.0) -> None:
        exe = shutil.which("tshark")
        if exe is None:
            raise TsharkError("tshark not found")
        argv = [exe, "-l", "-n", "-q", "-i", "-", "-T", "fields", "-E", "separator=|",
                "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number",
                *[a for f in (*FIELDS.values(), *TCP_VALUES) for a in ("-e", f)]]
        for pref, value in CHECKSUM_PREFS.items():
            argv += ["-o", f"{pref}:{value}"]
        self.timeout = timeout
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdout
        self._buf = b""
        self._started = False
        self.count = 0
        self._write(pcap.global_header())

    def _start(self) -> None:
        """Wait, once, for tshark to say it captures; then its stderr is drained
        (kept from filling its pipe) and the answers are timed one by one."""
        if self._started:
            return
        err = self.proc.stderr
        assert err is not None
        said = b""
        deadline = time.monotonic() + START_TIMEOUT
        while CAPTURING not in said:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([err], [], [], left)[0]:
                raise TsharkError(f"tshark did not start capturing within {START_TIMEOUT:g} s: "
                                  f"{said.decode(errors='replace').strip()!r}")
            chunk = os.read(err.fileno(), 4096)
            if not chunk:
                raise TsharkError(f"tshark exited (status {self.proc.wait()}): "
                                  f"{said.decode(errors='replace').strip()!r}")
            said += chunk
        self._started = True
        threading.Thread(target=self._drain, args=(err,), daemon=True).start()

    @staticmethod
    def _drain(err: IO[bytes]) -> None:
        try:
            while os.read(err.fileno(), 4096):
                pass
        except (OSError, ValueError):  # closed with the process
            pass

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise TsharkError(f"tshark exited (status {self.proc.poll()})") from None

    def _line(self) -> str:
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise TsharkError(f"tshark gave no verdict within {self.timeout} s")
            chunk = os.read(self._out.fileno(), 65536)
            if not chunk:
                raise TsharkError(f"tshark exited (status {self.proc.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")

    def raw(self, frame: bytes) -> dict[str, list[str]]:
        """Per protocol, the status of each of its headers, outermost first."""
        self._start()
        self.count += 1
        self._write(pcap.record(frame, self.count))
        parts = self._line().split("|")
        # An earlier question that timed out (its case failed, or was an xfail)
        # gets its answer late: that answer is not this frame's, so skip it.
        while parts[0].isdigit() and int(parts[0]) < self.count:
            parts = self._line().split("|")
        if parts[0] != str(self.count):
            raise TsharkError(f"tshark answered for frame {parts[0]}, expected {self.count}")
        verdicts = {name: [checksum_verdict(v) for v in value.split(",") if v]
                    for name, value in zip(FIELDS, parts[1:])}
        values, computed = ([v for v in field.split(",") if v]
                            for field in parts[1 + len(FIELDS):1 + len(FIELDS) + 2])
        tcp = verdicts.get("TCP", [])
        if len(values) == len(computed) == len(tcp):
            verdicts["TCP"] = ["good" if verdict == "bad" and int(value, 16) == 0xFFFF
                               and int(calc, 16) == 0 else verdict
                               for verdict, value, calc in zip(tcp, values, computed)]
        return verdicts

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def disagreements(model_state: dict[str, str], tshark: dict[str, list[str]]) -> list[str]:
    """Layer by layer, where tshark's verdict contradicts the model's.

    The model's good must be tshark's good; its bad or stale (a checksum left
    for a driver that did not do it) must be tshark's bad (or, for a UDP/IPv6
    checksum of 0, illegal); "none" (a UDP checksum of 0 where RFC 768 or RFC
    6935 allows one) must not be judged good or bad.
    """
    out: list[str] = []
    for proto in FIELDS:
        keys = [k for k in model_state if k.rsplit(".", 1)[-1] == proto]
        seen = tshark.get(proto, [])
        if len(seen) < len(keys):
            out.append(f"{proto}: tshark judged {len(seen)} header(s), the model {len(keys)}")
            continue
        # tshark may see more (e.g. an ICMP error's embedded header): compare the first.
        for key, verdict in zip(keys, seen):
            want = model_state[key]
            ok = {"good": verdict == "good", "bad": verdict in ("bad", "illegal"),
                  "stale": verdict in ("bad", "illegal"),
                  "none": verdict not in ("good", "bad")}.get(want, False)
            if not ok:
                out.append(f"{key}.chksum: model says {want}, tshark says {verdict}")
    return out
