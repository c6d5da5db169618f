"""Polling waits: try at once, then back off from 1 ms to 50 ms; never a fixed sleep."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not become true in time; the message says what and how it last looked."""


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, *, what: str = "condition",
               describe: Callable[[], str] | None = None) -> T:
    """OVS_WAIT_UNTIL with fine polling.  Returns the predicate's first truthy value."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = ""
            if describe is not None:
                try:
                    detail = f" ({describe()})"
                except Exception as exc:  # the description must not hide the timeout
                    detail = f" (could not describe: {exc})"
            raise WaitTimeout(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def wait_while(predicate: Callable[[], object], timeout: float = 10.0, *,
               what: str = "condition to clear") -> None:
    """OVS_WAIT_WHILE."""
    wait_until(lambda: not predicate(), timeout, what=what)


def settled(read: Callable[[], T], want: T, timeout: float = 5.0, *,
            what: str = "the value to settle") -> T:
    """OVS_WAIT_UNTIL_EQUAL without its verdict: read() until it equals `want`
    or the time is up, and return what it reads then, for the caller's own
    assertion to show."""
    try:
        wait_until(lambda: read() == want, timeout, what=what)
    except WaitTimeout:
        pass
    return read()
