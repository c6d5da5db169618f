"""send_and_expect: the core verb.  Send frames on one port, wait for exactly
what the model expects on another, and compare every frame field by field."""
from __future__ import annotations


import re
from collections.abc import Callable, Sequence

import pytest

from datapath.backends.base import Port
from datapath.model import Expected
from harness.compare import FrameMismatch
from harness.daemon import DaemonDied
from harness.tshark import Tshark, disagreements
from harness.wait import WaitTimeout, wait_until
from harness.records import Step

DEFAULT_TIMEOUT = 5.0
MAX_XFAIL_LINES = 24  # the xfail reason quotes the diff; the step keeps all of it


def send_and_expect(rx: Port, frames: list[bytes], tx: Port, expected: Expected, *,
                    title: str = "", steps: list[Step] | None = None,
                    timeout: float = DEFAULT_TIMEOUT,
                    second_opinion: Tshark | None = None,
                    send: Callable[[list[bytes]], None] | None = None) -> list[bytes]:
    """Returns the captured frames; raises FrameMismatch naming layer and field.

    Completion is established, not assumed: we wait until the rx port's datapath
    counter shows every frame taken (dummy ports are polled by the main thread,
    which finishes a batch before it answers the next control request), and
    until at least the expected number of frames left.  Surplus frames are
    therefore caught, and a drop is a zero-frame expectation like any other.

    `send` replaces rx.send(frames): a case that hands the datapath the packet
    the way upstream does (an ODP flow string, a queue id) still states the
    frames that go in, for the model and the record.
    """
    crash = next((b for b in expected.bugs if b.crash), None)
    sandbox = getattr(rx, "sb", None)
    if crash is not None and sandbox is not None:
        sandbox.expected_crash = crash.key
    base = rx.rx_count()
    captured: list[bytes] = tx.read_tx()
    stale = list(captured)  # frames from before this step: a previous step's surplus
    captured.clear()

    def record(lines: list[str], notes: Sequence[str] = (),
               bugs: dict[str, str] | None = None) -> None:
        if steps is not None:
            steps.append(Step(
                title=title, rx_port=rx.name, tx_port=tx.name, sent=[f.hex() for f in frames],
                expected=[f.hex() for f in expected.frames],
                captured=[f.hex() for f in captured], ok=not lines, diff=lines,
                csum_state=expected.csum_state, notes=expected.notes + list(notes),
                bugs=bugs or {}))
    (send or rx.send)(frames)
    not_taken: WaitTimeout | None = None
    try:
        try:
            wait_until(lambda: rx.rx_count() >= base + len(frames), timeout,
                       what=f"{rx.name} to take {len(frames)} frame(s)")
        except WaitTimeout as exc:
            not_taken = exc

        def enough() -> bool:
            captured.extend(tx.read_tx())
            return len(captured) >= len(expected.frames)
        wait_until(enough, timeout, what=f"{len(expected.frames)} frame(s) on {tx.name}",
                   describe=lambda: f"{len(captured)} arrived")
    except WaitTimeout:
        pass  # the comparison below says what is missing
    except DaemonDied as exc:
        # Only the known abort, recognised by its message, is the known bug.
        if crash is None or not re.search(crash.signature, exc.evidence or str(exc)):
            raise
        record([f"ovs-vswitchd died: {crash.title}"], (crash.reason(),), {crash.key: "present"})
        pytest.xfail(f"{crash.reason()}\n{str(exc).splitlines()[0]}")
    captured.extend(tx.read_tx())
    verdict = expected.judge(captured)
    expected, lines = verdict.expected, list(verdict.lines)
    if not_taken is not None and not expected.frames:
        # Nothing left and nothing was expected to: that proves a drop only if
        # the datapath took the frames in the first place.
        lines.append(f"{not_taken}: cannot tell a drop from a frame never received")
    if stale:
        lines.insert(0, f"{len(stale)} frame(s) on {tx.name} before this step was sent "
                        "(surplus of an earlier step)")
    if verdict.status == "known" and not stale:
        record(lines, tuple(b.reason() for b in expected.bugs if not b.crash), verdict.bugs)
        pytest.xfail(verdict.xfail_reason(MAX_XFAIL_LINES))
    if verdict.status == "gone" or (crash and not lines):
        gone = [crash] if crash else [b for b in expected.bugs if not b.crash]
        record([b.gone() for b in gone], (), {b.key: "absent" for b in gone})
        raise FrameMismatch(expected.frames, captured, [b.gone() for b in gone],
                            context=f"{title}: {rx.name} -> {tx.name}" if title else "")
    opinion: list[str] = []
    if not lines and second_opinion is not None:
        lines, opinion = tshark_disagrees(second_opinion, captured, expected)
    record(lines, opinion)
    if lines:
        raise FrameMismatch(expected.frames, captured, lines,
                            context=f"{title}: {rx.name} -> {tx.name}" if title else "")
    return captured


def tshark_disagrees(checker: Tshark, captured: list[bytes],
                     expected: Expected) -> tuple[list[str], list[str]]:
    """tshark's checksum verdict on every frame against the model's, layer by layer.
    Returns (disagreement lines, a note per frame with tshark's verdicts)."""
    lines: list[str] = []
    notes: list[str] = []
    for i, (frame, state) in enumerate(zip(captured, expected.csum_state)):
        seen = checker.raw(frame)
        notes.append(f"tshark, frame {i}: " + ", ".join(
            f"{proto} {'/'.join(v)}" for proto, v in seen.items() if v))
        lines += [f"frame {i}: second opinion: {d}" for d in disagreements(state, seen)]
    return lines, notes


def expect_frames(tx: Port, expected: Expected, *, sent: list[bytes], rx_name: str,
                  title: str = "", steps: list[Step] | None = None,
                  timeout: float = DEFAULT_TIMEOUT, second_opinion: Tshark | None = None,
                  done: Callable[[], bool] | None = None) -> list[bytes]:
    """The receiving half of send_and_expect, for sequences that send on their own
    (several ports, ODP flow strings, packets crossing a linked pair of dummies).

    Waits until `done()` says the datapath finished with what was sent (when
    given) and at least the expected number of frames left `tx`; then every
    frame that left since the last call is compared with the model's, and the
    step recorded.  Returns the captured frames; raises FrameMismatch."""
    captured: list[bytes] = []

    def enough() -> bool:
        captured.extend(tx.read_tx())
        return len(captured) >= len(expected.frames) and (done is None or bool(done()))
    try:
        wait_until(enough, timeout, what=f"{len(expected.frames)} frame(s) on {tx.name}",
                   describe=lambda: f"{len(captured)} arrived")
    except WaitTimeout:
        pass  # the comparison says what is missing
    captured.extend(tx.read_tx())
    verdict = expected.judge(captured)
    expected, lines = verdict.expected, list(verdict.lines)
    opinion: list[str] = []
    if not lines and second_opinion is not None:
        lines, opinion = tshark_disagrees(second_opinion, captured, expected)
    if steps is not None:
        steps.append(Step(title=title, rx_port=rx_name, tx_port=tx.name,
                          sent=[f.hex() for f in sent], expected=[f.hex() for f in expected.frames],
                          captured=[f.hex() for f in captured], ok=not lines, diff=lines,
                          csum_state=expected.csum_state, notes=expected.notes + opinion,
                          bugs=verdict.bugs))
    if verdict.status == "known":
        pytest.xfail(verdict.xfail_reason(MAX_XFAIL_LINES))
    if lines:
        raise FrameMismatch(expected.frames, captured, lines,
                            context=f"{title}: {rx_name} -> {tx.name}" if title else "")
    return captured
