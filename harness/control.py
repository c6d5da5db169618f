"""Control channel: forked ovs-* tools and in-process unixctl, all transcribed."""
from __future__ import annotations

import difflib
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from harness.records import Command


@dataclass
class Result:
    """A finished command: its argv, exit code and output."""

    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {' '.join(self.argv)}\n(rc={self.rc})\n{self.stdout}"
                + (f"\n[stderr]\n{self.stderr}" if self.stderr else ""))


class CommandFailed(AssertionError):
    """A control command's exit code or output differed from what the case required."""


def check(result: Result, rc: int = 0, stdout: str | None = None,
          stderr: str | None = None) -> Result:
    """AT_CHECK: compare exit code and, when given, exact stdout/stderr (unified diff)."""
    problems: list[str] = []
    if result.rc != rc:
        problems.append(f"exit code: expected {rc}, got {result.rc}")
    for name, want, got in (("stdout", stdout, result.stdout), ("stderr", stderr, result.stderr)):
        if want is not None and want != got:
            diff = difflib.unified_diff(want.splitlines(keepends=True),
                                        got.splitlines(keepends=True),
                                        f"expected {name}", f"actual {name}")
            problems.append(f"{name} differs:\n" + "".join(diff))
    if problems:
        raise CommandFailed(f"$ {' '.join(result.argv)}\n" + "\n".join(problems)
                            + (f"\n[stderr]\n{result.stderr}" if result.stderr and stderr is None else ""))
    return result


class Transcript:
    """Keeps every command of a case, for the report and the reproducer."""

    def __init__(self, sink: Callable[[Command], None] | None = None) -> None:
        self.commands: list[Command] = []
        self._sink = sink

    def add(self, result: Result, seconds: float) -> None:
        cmd = Command(argv=list(result.argv), rc=result.rc, stdout=result.stdout,
                      stderr=result.stderr, seconds=round(seconds, 6))
        self.commands.append(cmd)
        if self._sink is not None:
            self._sink(cmd)


def run_tool(argv: list[str], env: dict[str, str], cwd: str, timeout: float,
             transcript: Transcript | None) -> Result:
    """Run a command to completion, record it in the transcript, and return its Result."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
        result = Result(argv, proc.returncode, proc.stdout, proc.stderr)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        result = Result(argv, -1, out, f"timed out after {timeout} s")
    if transcript is not None:
        transcript.add(result, time.perf_counter() - started)
    return result
