"""Timestamps of teardown steps, to see where an interrupted run spends its time.

With OVSTEST_TEARDOWN_TRACE naming a file, every traced step appends one line:

    @<CLOCK_MONOTONIC seconds> <what> took <seconds> s

CLOCK_MONOTONIC is the machine's own clock (the same in every process and PID
namespace), so a parent that noted when it sent a signal can place each step
after it (tests/test_backends.py::test_interrupt_leaves_nothing does).  Without
the variable nothing is written.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Iterator

ENV = "OVSTEST_TEARDOWN_TRACE"


def _emit(line: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        # One write per line (O_APPEND): lines of several processes do not interleave.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def note(what: str) -> None:
    """One moment: `@T what`."""
    _emit(f"@{time.monotonic():.3f} {what}")


@contextmanager
def step(what: str) -> Iterator[None]:
    """A step: `@START what took SECONDS s`, written when it ends (or fails)."""
    if not os.environ.get(ENV):
        yield
        return
    start = time.monotonic()
    outcome = ""
    try:
        yield
    except BaseException as exc:
        outcome = f" ({type(exc).__name__})"
        raise
    finally:
        _emit(f"@{start:.3f} {what} took {time.monotonic() - start:.3f} s{outcome}")


def relative(text: str, origin: float) -> str:
    """The trace's lines with `@T` turned into `+SECONDS` after `origin`, in order."""
    rows: list[tuple[float, str]] = []
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        try:
            at = float(stamp.removeprefix("@"))
        except ValueError:
            continue
        rows.append((at, f"{at - origin:+8.3f} s  {rest}"))
    return "\n".join(row for _, row in sorted(rows))
