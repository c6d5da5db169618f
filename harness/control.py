"""Control channel: forked ovs-* tools and in-process unixctl, all transcribed.

Every runner that returns a :class:`Result` (``run_tool`` here, the Sandbox's
``vsctl``/``ofctl``/``appctl``/``dpctl``, ``Traffic.run``, ``run_in``...)
raises :class:`CommandFailed` when the command's exit code is not the one its
caller names with the keyword ``rc``: 0 unless said otherwise, ``rc=1`` for a
command that must fail with 1, ``rc=None`` for one whose exit the caller
inspects itself (a probe, a teardown step).  This is the kernel net
selftests' ``cmd(..., fail=True)``: a command fails loudly unless the call
says it may fail.  :func:`check` is AT_CHECK's output half: exact stdout and
stderr.
"""
from __future__ import annotations

import difflib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
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

    def __init__(self, message: str, result: Result | None = None) -> None:
        super().__init__(message)
        self.result = result


_EVIDENCE = 2000  # characters of a failed command's output kept in the message


def expect_rc(result: Result, rc: int | None) -> Result:
    """The runners' exit-code rule: `result` if the command exited with `rc`
    (None: with anything, the caller inspects it), else CommandFailed naming
    the command, both exit codes and what it printed."""
    if rc is None or result.rc == rc:
        return result
    text = f"$ {' '.join(result.argv)}\nexit code: expected {rc}, got {result.rc}"
    for name, out in (("stderr", result.stderr), ("stdout", result.stdout)):
        if out:
            text += f"\n[{name}]\n{out[-_EVIDENCE:]}"
    raise CommandFailed(text, result)


def check(result: Result, rc: int | None = None, stdout: str | None = None,
          stderr: str | None = None) -> Result:
    """AT_CHECK's output half: compare, when given, exact stdout/stderr (unified
    diff).  The exit code is the runner's to check (its `rc` keyword); `rc` here
    is for a Result that no runner checked (one a runner returned with rc=None)."""
    problems: list[str] = []
    if rc is not None and result.rc != rc:
        problems.append(f"exit code: expected {rc}, got {result.rc}")
    for name, want, got in (("stdout", stdout, result.stdout), ("stderr", stderr, result.stderr)):
        if want is not None and want != got:
            diff = difflib.unified_diff(want.splitlines(keepends=True),
                                        got.splitlines(keepends=True),
                                        f"expected {name}", f"actual {name}")
            problems.append(f"{name} differs:\n" + "".join(diff))
    if problems:
        raise CommandFailed(f"$ {' '.join(result.argv)}\n" + "\n".join(problems)
                            + (f"\n[stderr]\n{result.stderr}" if result.stderr and stderr is None else ""),
                            result)
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
             transcript: Transcript | None, *, rc: int | None = 0,
             input_path: Path | None = None) -> Result:
    """Run a command to completion, record it in the transcript, and return its
    Result; CommandFailed if it did not exit with `rc` (see expect_rc).  Its
    stdin is `input_path` (else nothing: a command never reads the runner's
    own stdin); output a command writes in no UTF-8 is kept, replaced."""
    started = time.perf_counter()
    try:
        with open(input_path or os.devnull, "rb") as stdin:
            proc = subprocess.run(argv, env=env, cwd=cwd, stdin=stdin, capture_output=True,
                                  text=True, errors="replace", timeout=timeout)
        result = Result(argv, proc.returncode, proc.stdout, proc.stderr)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        result = Result(argv, -1, out, f"timed out after {timeout} s")
    if transcript is not None:
        transcript.add(result, time.perf_counter() - started)
    return expect_rc(result, rc)
