"""The one reader of ovs-vswitchd's log: `sb.log`.

Upstream reads the log with `tail -n +LINE ovs-vswitchd.log | grep PATTERN`,
LINE taken before the step (`get_log_next_line_num`).  Here:

- `m = sb.log.mark()` is that LINE: an opaque `LogMark`, after every line the
  daemon logged before the call (see `mark`).  It is a `NewType`, so strict
  mypy rejects a plain number where a mark is expected;
- `sb.log.lines(after=m)` is `tail -n +LINE`;
- `sb.log.grep(pattern, after=m)` is `tail ... | grep`, once;
- `sb.log.wait(pattern, after=m)` is OVS_WAIT_UNTIL around that grep.

Patterns are always Python regexes, searched in each line (`re.search`).  A
fixed string goes through `re.escape` at the call site, and a grep (POSIX
basic) pattern through `harness.filters.bre`, so a reader sees which it is.

The marks' own unixctl request and its reply are in no reader's lines.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Final, NewType

from harness.daemon import Daemon
from harness.wait import wait_until

LogMark = NewType("LogMark", int)
"""A point in the vswitchd log; only `Log.mark()` and `START` make one."""

START: Final = LogMark(0)
"""The beginning of the log."""

# mark()'s request carries this token, and the readers leave its lines out.
MARK_TOKEN = "ovstest-log-mark-"
WAIT_TIMEOUT = 10.0  # seconds; wait()'s bound unless the Log or the call says otherwise


class Log:
    """The log of one sandbox's ovs-vswitchd, which may be restarted, die or hang."""

    def __init__(self, rundir: Path, vswitchd: Callable[[], Daemon | None],
                 assert_alive: Callable[[], None]) -> None:
        """The log of the ovs-vswitchd that runs in `rundir`: `vswitchd` gives
        it (None when stopped), for the marks' requests; `assert_alive` raises
        when a daemon the waits depend on has died."""
        self.path = rundir / "ovs-vswitchd.log"
        self._vswitchd = vswitchd
        self._assert_alive = assert_alive
        self._marks = 0
        # Where the current case's slice begins: begin_case() at each case or id
        # a shared sandbox serves; the fixtures' log scans and excerpts read from it.
        self.case: LogMark = START
        # wait()'s default bound; system-*.at suites wait OVS_CTL_TIMEOUT (30 s).
        self.wait_timeout = WAIT_TIMEOUT

    def begin_case(self) -> LogMark:
        """A case (or a shared sandbox's next id) starts here: `case` = mark()."""
        self.case = self.mark()
        return self.case

    def mark(self) -> LogMark:
        """The end of the log once every line ovs-vswitchd logged before this
        call is in it.  Once started, it writes its log asynchronously
        (vlog_enable_async()), so a line a PMD thread logged can reach the file
        after a look at its size, and land after the mark.  A request it logs
        (-vunixctl, dbg) joins the same writer's queue behind those lines: once
        its line is in the file, so is everything logged before it.  The mark
        is after the request's reply (logged next, by the same thread), so a
        slice from it holds neither.  The request is no step of the case: it is
        in no transcript.  From a daemon that is not running, the end of the
        file; one that hangs raises."""
        vswitchd = self._vswitchd()
        if vswitchd is None or not vswitchd.alive():
            return LogMark(self._end())
        self._marks += 1
        token = f"{MARK_TOKEN}{os.getpid()}-{self._marks}".encode()
        start = self._end()
        vswitchd.transact("coverage/read-counter", [token.decode()])  # any logged request

        def written() -> int:
            self._assert_alive()
            data = self._raw(start)
            request = re.search(re.escape(token) + rb".*, id=([0-9]+)\n", data)
            if request is None:
                return 0
            reply = re.compile(rb"\|unixctl\|DBG\|replying with error, id=%s:.*\n"
                               % request.group(1))
            done = reply.search(data, request.end())
            return start + done.end() if done else 0
        return LogMark(wait_until(written, 10, what="ovs-vswitchd's log to reach this point"))

    def lines(self, *, after: LogMark = START) -> list[str]:
        """The lines after `after`, with every line logged before this call
        (mark()), or, from a daemon that no longer answers, what the file holds:
        the evidence must not be lost with the daemon."""
        try:
            self.mark()
        except AssertionError:  # it died or hangs (SandboxError, WaitTimeout)
            pass
        return self._lines(after)

    def grep(self, pattern: str, *, after: LogMark = START) -> list[str]:
        """The lines after `after` that match the regex `pattern`, with every
        line logged before this call."""
        return [ln for ln in self.lines(after=after) if re.search(pattern, ln)]

    def wait(self, pattern: str, *, after: LogMark = START, count: int = 1,
             timeout: float | None = None) -> list[str]:
        """OVS_WAIT_UNTIL([tail -n +LINE ovs-vswitchd.log | grep PATTERN]): wait
        until `count` lines after `after` match the regex `pattern`, while the
        daemons live; returns the matching lines.  It looks at the file as it
        grows (a line that is coming needs no mark)."""
        def found() -> list[str]:
            self._assert_alive()
            hits = [ln for ln in self._lines(after) if re.search(pattern, ln)]
            return hits if len(hits) >= count else []
        return wait_until(found, self.wait_timeout if timeout is None else timeout,
                          what=f"{count} ovs-vswitchd.log line(s) matching {pattern!r}",
                          describe=lambda: "last lines:\n" + "\n".join(self._lines(after)[-8:]))

    # -- the file ------------------------------------------------------------

    def _end(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _raw(self, position: int) -> bytes:
        try:
            with open(self.path, "rb") as f:
                f.seek(position)
                return f.read()
        except OSError:
            return b""

    def _lines(self, after: LogMark) -> list[str]:
        """The lines written after `after`, without the marks' requests and replies."""
        out: list[str] = []
        replies: set[str] = set()
        for line in self._raw(after).decode(errors="replace").splitlines():
            if MARK_TOKEN in line:
                replies.update(re.findall(r", id=([0-9]+)$", line))
                continue
            reply = re.search(r"\|unixctl\|DBG\|replying with error, id=([0-9]+):", line)
            if reply and reply.group(1) in replies:
                replies.discard(reply.group(1))
                continue
            out.append(line)
        return out
