"""evidence/tshark.py: the persistent tshark's answers stay matched to frames."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from evidence import pcap
from evidence.tshark import Tshark, TsharkError
from fixtures.frames import compose


@pytest.fixture
def checker() -> Tshark:
    if shutil.which("tshark") is None:
        pytest.skip("no tshark on PATH")
    t = Tshark()
    yield t
    t.close()


def test_a_late_answer_is_not_taken_for_the_next_frame(checker: Tshark) -> None:
    """A question whose answer was never read (it timed out) must not shift
    every later answer by one frame."""
    good = compose("udp", 4)
    bad = bytearray(good)
    bad[14 + 10] ^= 0xFF  # the IPv4 header checksum
    checker.count += 1
    checker._write(pcap.record(bytes(bad), checker.count))  # asked, never read
    assert checker.raw(good)["IP"] == ["good"]
    assert checker.raw(bytes(bad))["IP"] == ["bad"]


def test_an_answer_ahead_of_the_question_is_an_error(checker: Tshark) -> None:
    checker.raw(compose("udp", 4))
    checker.count -= 1  # our count behind tshark's: answers cannot be matched
    with pytest.raises(TsharkError, match="answered for frame"):
        checker.raw(compose("udp", 4))


def fake_tshark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A `tshark` first on PATH, running `body` (sh)."""
    exe = tmp_path / "tshark"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_a_slow_start_is_not_charged_to_the_first_answer(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """tshark starting slower than one answer may take (a busy machine) still
    answers the first frame: the start is waited for on its own event."""
    real = shutil.which("tshark")
    if real is None:
        pytest.skip("no tshark on PATH")
    fake_tshark(tmp_path, monkeypatch, f'sleep 3; exec {real} "$@"')
    checker = Tshark(timeout=2.0)
    try:
        assert checker.raw(compose("udp", 4))["IP"] == ["good"]
    finally:
        checker.close()


def test_a_tshark_that_never_captures_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tshark(tmp_path, monkeypatch, "echo 'tshark: no dissectors' >&2; cat >/dev/null")
    monkeypatch.setattr("evidence.tshark.START_TIMEOUT", 0.5)
    checker = Tshark()
    try:
        with pytest.raises(TsharkError, match="did not start capturing within 0.5 s: "
                                              "'tshark: no dissectors'"):
            checker.raw(compose("udp", 4))
    finally:
        checker.close()


# A TCP ACK (10.1.1.1:36474 -> 10.1.1.2:80) whose checksum is zero: Linux sent
# it with the field 0xffff (a software completion writes CSUM_MANGLED_0), as
# captured in a run of test_zones_from_other_field_more[dpdk].
TCP_ZERO_SUM = bytes.fromhex(
    "3adea10a236d12d92ce2f094080045000034b562400040066f5d0a0101010a0101028e7a0050578761"
    "21f3e0ab818010003fffff00000101080acac9e4d6a8ac2157")


def test_tcp_checksum_0xffff_for_zero_is_good_as_rfc_1071_verifies(checker: Tshark) -> None:
    """Both ones' complement zeros verify (RFC 1071: the sum over the header,
    field included, is all ones); Wireshark's own status says bad for 0xffff."""
    assert checker.raw(TCP_ZERO_SUM)["TCP"] == ["good"]
    zero = bytearray(TCP_ZERO_SUM)
    zero[50:52] = b"\x00\x00"
    assert checker.raw(bytes(zero))["TCP"] == ["good"]
    wrong = bytearray(TCP_ZERO_SUM)
    wrong[50:52] = b"\xff\xfe"
    assert checker.raw(bytes(wrong))["TCP"] == ["bad"]
