"""send_and_expect: the core verb.  Send frames on one port, wait for exactly
what the model expects on another, and compare every frame field by field."""
from __future__ import annotations


from datapath.backends.base import Port
from datapath.model import Expected
from harness.compare import FrameMismatch, compare_frames
from harness.wait import WaitTimeout, wait_until
from reports.records import Step

DEFAULT_TIMEOUT = 5.0


def send_and_expect(rx: Port, frames: list[bytes], tx: Port, expected: Expected, *,
                    title: str = "", steps: list[Step] | None = None,
                    timeout: float = DEFAULT_TIMEOUT) -> list[bytes]:
    """Returns the captured frames; raises FrameMismatch naming layer and field.

    Completion is established, not assumed: we wait until the rx port's datapath
    counter shows every frame taken (dummy ports are polled by the main thread,
    which finishes a batch before it answers the next control request), and
    until at least the expected number of frames left.  Surplus frames are
    therefore caught, and a drop is a zero-frame expectation like any other.
    """
    base = rx.rx_count()
    captured: list[bytes] = tx.read_tx()
    stale = list(captured)  # frames from before this step: a previous step's surplus
    captured.clear()
    rx.send(frames)
    try:
        wait_until(lambda: rx.rx_count() >= base + len(frames), timeout,
                   what=f"{rx.name} to take {len(frames)} frame(s)")

        def enough() -> bool:
            captured.extend(tx.read_tx())
            return len(captured) >= len(expected.frames)
        wait_until(enough, timeout, what=f"{len(expected.frames)} frame(s) on {tx.name}",
                   describe=lambda: f"{len(captured)} arrived")
    except WaitTimeout:
        pass  # the comparison below says what is missing
    captured.extend(tx.read_tx())
    lines = compare_frames(expected.frames, captured)
    if stale:
        lines.insert(0, f"{len(stale)} frame(s) on {tx.name} before this step was sent "
                        "(surplus of an earlier step)")
    step = Step(title=title, rx_port=rx.name, tx_port=tx.name, sent=[f.hex() for f in frames],
                expected=[f.hex() for f in expected.frames], captured=[f.hex() for f in captured],
                ok=not lines, diff=lines, csum_state=expected.csum_state, notes=expected.notes)
    if steps is not None:
        steps.append(step)
    if lines:
        raise FrameMismatch(expected.frames, captured, lines,
                            context=f"{title}: {rx.name} -> {tx.name}" if title else "")
    return captured
