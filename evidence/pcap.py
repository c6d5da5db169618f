"""Pure-Python pcap reading and writing for netdev-dummy capture files.

ovs-vswitchd's netdev-dummy writes ``tx_pcap``/``rxq_pcap`` files in append
mode and flushes after every packet, so a reader polling the file while the
daemon runs can see a missing file, a partial global header or a partially
written last record.  :class:`PcapReader` tolerates all three and returns
only complete records; :func:`read_all` is the strict variant for a file that
is known to be complete.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

__all__ = ["MAX_RECORD_LEN", "PcapError", "PcapReader", "pcap_bytes", "read_all", "write_pcap"]

#: Largest record we accept; also the snaplen written by :func:`write_pcap`.
MAX_RECORD_LEN = 262144
LINKTYPE_ETHERNET = 1

GLOBAL_HEADER_LEN = 24
RECORD_HEADER_LEN = 16

_MAGIC_USEC = 0xA1B2C3D4
_MAGIC_NSEC = 0xA1B23C4D


class PcapError(Exception):
    """A pcap file is malformed or unsupported; the message names the file."""


@dataclass(frozen=True)
class _Format:
    """What the global header says about the records that follow."""

    byte_order: str  # "<" or ">"
    nanosecond: bool
    link_type: int


def _parse_global_header(data: bytes, path: str) -> _Format:
    """Decode the 24-byte global header at the start of ``data``."""
    magic_bytes = data[:4]
    for order in ("<", ">"):
        (magic,) = struct.unpack(order + "I", magic_bytes)
        if magic in (_MAGIC_USEC, _MAGIC_NSEC):
            break
    else:
        raise PcapError(f"{path}: bad magic 0x{magic_bytes.hex()} (not a pcap file)")
    link_type = struct.unpack_from(order + "I", data, 20)[0]
    if link_type != LINKTYPE_ETHERNET:
        raise PcapError(
            f"{path}: unsupported link type {link_type} (only 1, Ethernet, is supported)"
        )
    return _Format(order, magic == _MAGIC_NSEC, link_type)


def _parse_records(
    data: bytes, offset: int, fmt: _Format, path: str, base: int = 0
) -> tuple[list[bytes], int]:
    """Decode every complete record in ``data`` from ``offset`` on.

    Returns the frames and the offset just past the last complete record.
    A record whose length field is out of range raises :class:`PcapError`;
    ``base`` is the file offset of ``data[0]``, used in that message.
    """
    header = struct.Struct(fmt.byte_order + "IIII")
    frames: list[bytes] = []
    end = len(data)
    while end - offset >= RECORD_HEADER_LEN:
        _sec, _frac, incl_len, _orig_len = header.unpack_from(data, offset)
        if incl_len > MAX_RECORD_LEN:
            raise PcapError(
                f"{path}: record at offset {base + offset} has length {incl_len}, "
                f"over the maximum of {MAX_RECORD_LEN}"
            )
        start = offset + RECORD_HEADER_LEN
        if end - start < incl_len:
            break
        frames.append(bytes(data[start : start + incl_len]))
        offset = start + incl_len
    return frames, offset


class PcapReader:
    """Incremental reader of a pcap file that another process appends to.

    Each :meth:`read_new` call returns the complete records added since the
    previous call.  The file is reopened on every call and read from the
    offset of the first unconsumed record, so a partially written record is
    simply read again next time.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._format: _Format | None = None
        self._offset = 0
        self._frames_read = 0
        self._closed = False

    @property
    def frames_read(self) -> int:
        """Number of frames returned by :meth:`read_new` so far."""
        return self._frames_read

    @property
    def nanosecond(self) -> bool | None:
        """Whether timestamps are in nanoseconds; None before the header is read."""
        return None if self._format is None else self._format.nanosecond

    def read_new(self) -> list[bytes]:
        """Return the frames appended since the last call (possibly none)."""
        if self._closed:
            raise ValueError(f"{self.path}: read_new() on a closed PcapReader")
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._offset:
                    raise PcapError(
                        f"{self.path}: file shrank from at least {self._offset} "
                        f"to {size} bytes (truncated or replaced while reading)"
                    )
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        base = self._offset
        if self._format is None:
            if len(data) < GLOBAL_HEADER_LEN:
                return []
            self._format = _parse_global_header(data, self.path)
            start = GLOBAL_HEADER_LEN
        else:
            start = 0
        frames, consumed = _parse_records(data, start, self._format, self.path, base)
        self._offset = base + consumed
        self._frames_read += len(frames)
        return frames

    def close(self) -> None:
        """Stop reading; later :meth:`read_new` calls raise ValueError."""
        self._closed = True

    def __enter__(self) -> PcapReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_all(path: str | os.PathLike[str]) -> list[bytes]:
    """Read every frame of a complete pcap file.

    Unlike :class:`PcapReader`, a missing file, a short global header or a
    trailing partial record is an error here.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise PcapError(f"{name}: file does not exist") from None
    if len(data) < GLOBAL_HEADER_LEN:
        raise PcapError(
            f"{name}: truncated global header ({len(data)} of {GLOBAL_HEADER_LEN} bytes)"
        )
    fmt = _parse_global_header(data, name)
    frames, offset = _parse_records(data, GLOBAL_HEADER_LEN, fmt, name)
    if offset != len(data):
        left = len(data) - offset
        if left < RECORD_HEADER_LEN:
            detail = f"{left} bytes of a {RECORD_HEADER_LEN}-byte record header"
        else:
            incl_len = struct.unpack_from(fmt.byte_order + "I", data, offset + 8)[0]
            detail = f"record needs {incl_len} bytes, only {left - RECORD_HEADER_LEN} present"
        raise PcapError(f"{name}: truncated record at offset {offset}: {detail}")
    return frames


def global_header() -> bytes:
    """The header of a little-endian, microsecond, Ethernet pcap stream."""
    return struct.pack("<IHHiIII", _MAGIC_USEC, 2, 4, 0, 0, MAX_RECORD_LEN, LINKTYPE_ETHERNET)


def record(frame: bytes, usec: int = 0) -> bytes:
    """One pcap record (timestamp 0 s + usec) holding the whole frame."""
    return struct.pack("<IIII", 0, usec, len(frame), len(frame)) + frame


def pcap_bytes(frames: Iterable[bytes], name: str = "pcap") -> bytes:
    """``frames`` as the bytes of a little-endian, microsecond, Ethernet pcap file.

    Record timestamps are zero so that the output is reproducible; ``name``
    (the file the bytes are for) starts the message of a frame too long.
    """
    out = bytearray(global_header())
    for index, frame in enumerate(frames):
        if len(frame) > MAX_RECORD_LEN:
            raise PcapError(
                f"{name}: frame {index} has {len(frame)} bytes, "
                f"over the maximum of {MAX_RECORD_LEN}"
            )
        out += record(frame)
    return bytes(out)


def write_pcap(path: str | os.PathLike[str], frames: Iterable[bytes]) -> None:
    """Write ``frames`` as a pcap file (see :func:`pcap_bytes`)."""
    data = pcap_bytes(frames, os.fspath(path))
    with open(path, "wb") as f:
        f.write(data)


def main(argv: list[str]) -> int:
    """``pcap.py FILE``: one hex line per complete frame of FILE, read as
    :class:`PcapReader` reads it (a missing file or short header: nothing);
    a malformed file: one line on stderr and exit status 1.

    The reproducer scripts (reports/repro.py) run this file alone, with no
    package around it, so it imports nothing but the standard library.
    """
    if len(argv) != 1:
        print("usage: pcap.py FILE", file=sys.stderr)
        return 2
    try:
        for frame in PcapReader(argv[0]).read_new():
            print(frame.hex())
    except (PcapError, OSError) as exc:
        print(f"pcap: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
