"""Unit tests for evidence.pcap: reading, incremental reading and writing."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

import evidence.pcap
from evidence.pcap import MAX_RECORD_LEN, PcapError, PcapReader, main, read_all, write_pcap
from evidence.pcap import pcap_bytes as to_bytes

FRAMES = [
    bytes(range(60)),
    b"\xff" * 14 + b"\x08\x00" + b"\x45" * 50,
    b"\x01\x02\x03",
    b"",
]

USEC_MAGIC = 0xA1B2C3D4
NSEC_MAGIC = 0xA1B23C4D


def pcap_bytes(
    frames: list[bytes], order: str = "<", magic: int = USEC_MAGIC, link_type: int = 1
) -> bytes:
    """Build a pcap file by hand (independently of write_pcap)."""
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, link_type)
    for n, frame in enumerate(frames):
        out += struct.pack(order + "IIII", 1700000000 + n, 999999, len(frame), len(frame))
        out += frame
    return out


def test_write_pcap_layout(tmp_path: Path) -> None:
    """write_pcap emits a little-endian microsecond Ethernet header and records."""
    path = tmp_path / "out.pcap"
    write_pcap(path, [b"\xaa\xbb", b"\xcc"])
    data = path.read_bytes()
    assert data[:4] == bytes.fromhex("d4c3b2a1")
    assert struct.unpack("<IHHiIII", data[:24]) == (USEC_MAGIC, 2, 4, 0, 0, 262144, 1)
    assert struct.unpack("<IIII", data[24:40])[2:] == (2, 2)
    assert data[40:42] == b"\xaa\xbb"
    assert len(data) == 24 + 16 + 2 + 16 + 1


def test_round_trip(tmp_path: Path) -> None:
    """Frames written by write_pcap read back unchanged, in order."""
    path = tmp_path / "rt.pcap"
    write_pcap(path, FRAMES)
    assert read_all(path) == FRAMES
    with PcapReader(path) as reader:
        assert reader.read_new() == FRAMES
        assert reader.frames_read == len(FRAMES)


@pytest.mark.parametrize("order", ["<", ">"], ids=["little", "big"])
@pytest.mark.parametrize("magic", [USEC_MAGIC, NSEC_MAGIC], ids=["usec", "nsec"])
def test_byte_orders_and_magics(tmp_path: Path, order: str, magic: int) -> None:
    """Both byte orders and both timestamp resolutions are decoded."""
    path = tmp_path / "x.pcap"
    path.write_bytes(pcap_bytes(FRAMES, order, magic))
    assert read_all(path) == FRAMES
    reader = PcapReader(path)
    assert reader.read_new() == FRAMES
    assert reader.nanosecond is (magic == NSEC_MAGIC)


def test_missing_file_returns_nothing(tmp_path: Path) -> None:
    """A file that does not exist yet is not an error for the reader."""
    reader = PcapReader(tmp_path / "later.pcap")
    assert reader.read_new() == []
    assert reader.frames_read == 0
    assert reader.nanosecond is None


def test_missing_file_is_an_error_for_read_all(tmp_path: Path) -> None:
    path = tmp_path / "absent.pcap"
    with pytest.raises(PcapError, match="absent.pcap: file does not exist"):
        read_all(path)


def test_incremental_reading_with_partial_records(tmp_path: Path) -> None:
    """Header and records written in pieces are returned once complete."""
    path = tmp_path / "grow.pcap"
    data = pcap_bytes(FRAMES[:3])
    header_end = 24
    first_end = header_end + 16 + len(FRAMES[0])
    second_mid = first_end + 16 + 10  # 10 bytes into the second frame's data

    reader = PcapReader(path)
    with open(path, "wb") as f:
        f.write(data[:10])  # partial global header
        f.flush()
        assert reader.read_new() == []
        f.write(data[10:first_end + 7])  # header, frame 0, part of record header 1
        f.flush()
        assert reader.read_new() == [FRAMES[0]]
        assert reader.read_new() == []
        f.write(data[first_end + 7 : second_mid])  # frame 1, first chunk
        f.flush()
        assert reader.read_new() == []
        f.write(data[second_mid:])  # frame 1, second chunk, then frame 2
        f.flush()
        assert reader.read_new() == [FRAMES[1], FRAMES[2]]
    assert reader.read_new() == []
    assert reader.frames_read == 3


def test_reader_follows_appends_from_write_pcap(tmp_path: Path) -> None:
    """Records appended after a first read are picked up by the next call."""
    path = tmp_path / "app.pcap"
    write_pcap(path, FRAMES[:1])
    reader = PcapReader(path)
    assert reader.read_new() == FRAMES[:1]
    with open(path, "ab") as f:
        f.write(struct.pack("<IIII", 0, 0, 3, 3) + b"abc")
    assert reader.read_new() == [b"abc"]
    assert reader.frames_read == 2


def test_bad_magic_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.pcap"
    path.write_bytes(b"\x00" * 40)
    with pytest.raises(PcapError, match=r"junk\.pcap: bad magic 0x00000000") as info:
        PcapReader(path).read_new()
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(PcapError, match="bad magic"):
        read_all(path)


def test_unsupported_link_type(tmp_path: Path) -> None:
    path = tmp_path / "sll.pcap"
    path.write_bytes(pcap_bytes(FRAMES, link_type=113))
    with pytest.raises(PcapError, match="unsupported link type 113"):
        read_all(path)
    with pytest.raises(PcapError, match="unsupported link type 113"):
        PcapReader(path).read_new()


def test_oversized_record_is_an_error(tmp_path: Path) -> None:
    """A record length over 262144 is corruption, even before its data arrives."""
    path = tmp_path / "big.pcap"
    good = pcap_bytes(FRAMES[:1])
    path.write_bytes(good + struct.pack("<IIII", 0, 0, MAX_RECORD_LEN + 1, 0))
    reader = PcapReader(path)
    with pytest.raises(PcapError, match=rf"offset {len(good)} has length 262145"):
        reader.read_new()
    with pytest.raises(PcapError, match="over the maximum of 262144"):
        read_all(path)


def test_read_all_rejects_truncation(tmp_path: Path) -> None:
    """read_all treats a short header or a partial last record as an error."""
    path = tmp_path / "cut.pcap"
    data = pcap_bytes(FRAMES[:2])
    path.write_bytes(data[:20])
    with pytest.raises(PcapError, match=r"truncated global header \(20 of 24 bytes\)"):
        read_all(path)
    path.write_bytes(data[:-5])
    with pytest.raises(PcapError, match="truncated record at offset 100: record needs 66"):
        read_all(path)
    path.write_bytes(data[: 24 + 16 + 60 + 4])
    with pytest.raises(PcapError, match="4 bytes of a 16-byte record header"):
        read_all(path)


def test_shrinking_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "shrink.pcap"
    write_pcap(path, FRAMES[:2])
    reader = PcapReader(path)
    assert len(reader.read_new()) == 2
    write_pcap(path, [])
    with pytest.raises(PcapError, match="shrank"):
        reader.read_new()


def test_closed_reader(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    write_pcap(path, FRAMES[:1])
    with PcapReader(path) as reader:
        assert reader.read_new() == FRAMES[:1]
    with pytest.raises(ValueError, match="closed"):
        reader.read_new()


def test_pcap_bytes_is_what_write_pcap_writes(tmp_path: Path) -> None:
    """The bytes-producing writer and the file writer give the same file."""
    path = tmp_path / "w.pcap"
    write_pcap(path, FRAMES)
    assert to_bytes(FRAMES) == path.read_bytes()
    assert len(to_bytes([])) == 24
    with pytest.raises(PcapError, match=r"^big\.pcap: frame 1 has"):
        to_bytes([b"", b"\0" * (MAX_RECORD_LEN + 1)], "big.pcap")


def test_main_prints_one_hex_line_per_complete_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() lists the complete records as hex, leaving out a partial last one."""
    path = tmp_path / "m.pcap"
    path.write_bytes(pcap_bytes(FRAMES[:2]) + pcap_bytes([b"\x01\x02\x03"])[24:-1])
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [FRAMES[0].hex(), FRAMES[1].hex()]
    assert main([str(tmp_path / "missing.pcap")]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("data,message", [
    (b"\x00" * 24, "bad magic 0x00000000 (not a pcap file)"),
    (pcap_bytes([], link_type=101), "unsupported link type 101"),
])
def test_main_reports_a_malformed_file_in_one_line(tmp_path: Path, data: bytes,
                                                   message: str) -> None:
    """Run alone, as the reproducer scripts run it: a malformed file gives exit
    status 1 and exactly one line on stderr that names the file and the fault."""
    path = tmp_path / "bad.pcap"
    path.write_bytes(data)
    proc = subprocess.run([sys.executable, "-I", evidence.pcap.__file__, str(path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pcap: {path}: {message}")
