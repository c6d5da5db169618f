"""Crash evidence: the cause and backtrace a dying daemon printed, symbolized
where the binary has debug information."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.crash import backtrace, crash_report, symbolize

LOG = """2026-12-01T02:55:30.739Z|00075|util|EMER|../lib/dp-packet.c:608: assertion x failed in f()
/usr/sbin/ovs-vswitchd(+0x20ef96) [0x55e81da9af96]
/usr/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0x87) [0x7ff75a9e50d7]
"""


def test_backtrace_and_cause_from_a_log() -> None:
    cause, frames = backtrace("noise\n" + LOG)
    assert "assertion x failed" in cause
    assert frames == [LOG.splitlines()[1], LOG.splitlines()[2]]
    assert crash_report(["", LOG]).startswith(cause + "\nbacktrace:\n  /usr/sbin")
    assert crash_report(["all fine\n"]) == ""


@pytest.mark.skipif(shutil.which("gdb") is None or shutil.which("cc") is None,
                    reason="needs gdb and a C compiler to build a binary with debug info")
def test_frames_of_a_binary_with_debug_info_get_function_and_line(tmp_path: Path) -> None:
    src = tmp_path / "crash.c"
    src.write_text("void boom(void) { *(volatile int *) 0 = 1; }\nint main(void) { boom(); }\n")
    exe = tmp_path / "crash"
    subprocess.run(["cc", "-g", "-O0", "-o", str(exe), str(src)], check=True)
    off = int(subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout
              .split(" T boom")[0].split()[-1], 16)
    out = symbolize([f"{exe}(+{off:#x}) [0x1234]"])
    assert "boom at" in out[0] and "crash.c:1" in out[0]


@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb")
def test_gdb_asked_once_per_binary_and_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A known bug's crash repeats id after id with the same frames: gdb (about a
    # second of CPU) is asked once, also where it knows no line; a rebuilt
    # binary (another size or mtime) is asked afresh.
    exe = tmp_path / "daemon"
    shutil.copy(shutil.which("true") or "/bin/true", exe)
    calls: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(argv: list[str], **kwargs: object) -> object:
        calls.append(argv)
        return real_run(argv, **kwargs)  # type: ignore[call-overload]
    monkeypatch.setattr(subprocess, "run", counting_run)
    frames = [f"{exe}(+0x1000) [0x1234]", f"{exe}(+0x1010) [0x1244]"]
    first = symbolize(frames)
    assert symbolize(frames) == first and len(calls) == 1
    assert symbolize(frames[:1] + [f"{exe}(+0x1020) [0x1254]"]) and len(calls) == 2
    assert "0x1020" in " ".join(calls[1]) and "0x1000" not in " ".join(calls[1])
    with exe.open("ab") as f:
        f.write(b"\0")
    symbolize(frames)
    assert len(calls) == 3
