"""send_and_expect: the core verb.  Send frames on one port, wait for exactly
what the model expects on another, and compare every frame field by field."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import NoReturn

from datapath.backends.base import Port
from datapath.model import Expected
from datapath.model.hooks import Known
from datapath.verdict import conclude, crashed
from evidence.tshark import Tshark
from harness.daemon import DaemonDied
from harness.records import Step
from harness.wait import WaitTimeout, wait_until

DEFAULT_TIMEOUT = 5.0


def send_and_expect(rx: Port, frames: list[bytes], tx: Port, expected: Expected, *,
                    title: str = "", steps: list[Step] | None = None,
                    timeout: float = DEFAULT_TIMEOUT,
                    second_opinion: Tshark | None = None,
                    send: Callable[[list[bytes]], None] | None = None) -> list[bytes]:
    """Returns the captured frames; raises FrameMismatch naming layer and field
    where no known bug explains them (datapath/verdict.py: a known deviation is
    recorded as a sighting, and the case decided at its end).

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
    if crash is not None:
        rx.sb.expected_crash = crash.key
    base = rx.rx_count()
    stale = tx.read_tx()  # frames from before this step: a previous step's surplus
    captured: list[bytes] = []
    # A frame OVS is known not to send (hooks.NOT_SENT) is not waited for: the
    # caller waits on the evidence that the port refused it.
    want = len(expected.frames) - expected.not_sent
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
            return len(captured) >= want
        wait_until(enough, timeout, what=f"{want} frame(s) on {tx.name}",
                   describe=lambda: f"{len(captured)} arrived")
        if crash is not None:
            # A port whose counters and captures are the kernel's (a veth) asks
            # OVS nothing, so a death shows only here.
            rx.sb.assert_alive()
    except WaitTimeout:
        if crash is not None:
            try:
                rx.sb.assert_alive()
            except DaemonDied as exc:
                _known_death(exc, crash, steps, title, rx, tx, frames)
        # otherwise the comparison below says what is missing
    except DaemonDied as exc:
        _known_death(exc, crash, steps, title, rx, tx, frames)
    captured.extend(tx.read_tx())
    extra: list[str] = []
    if stale:
        extra.append(f"{len(stale)} frame(s) on {tx.name} before this step was sent "
                     "(surplus of an earlier step)")
    if not_taken is not None and not want:
        # Nothing left and nothing was expected to: that proves a drop only if
        # the datapath took the frames in the first place.
        extra.append(f"{not_taken}: cannot tell a drop from a frame never received")
    return conclude(steps, expected, captured, title=title, rx_port=rx.name, tx_port=tx.name,
                    sent=frames, second_opinion=second_opinion, extra=extra).check()


def _known_death(exc: DaemonDied, crash: Known | None, steps: list[Step] | None,
                 title: str, rx: Port, tx: Port, frames: list[bytes]) -> NoReturn:
    """Only the known abort, recognised by its message, is the known bug."""
    if crash is None or not re.search(crash.signature, exc.evidence or str(exc)):
        raise exc
    raise crashed(steps, crash, title=title, rx_port=rx.name, tx_port=tx.name,
                  sent=frames, evidence=str(exc).splitlines()[0]) from None


def expect_frames(tx: Port, expected: Expected, *, sent: list[bytes], rx_name: str,
                  title: str = "", steps: list[Step] | None = None,
                  timeout: float = DEFAULT_TIMEOUT, second_opinion: Tshark | None = None,
                  done: Callable[[], bool] | None = None) -> list[bytes]:
    """The receiving half of send_and_expect, for sequences that send on their own
    (several ports, ODP flow strings, packets crossing a linked pair of dummies).

    Waits until `done()` says the datapath finished with what was sent (when
    given) and at least the expected number of frames left `tx`; then every
    frame that left since the last call is compared with the model's, and the
    step recorded.  Returns the captured frames; raises FrameMismatch where no
    known bug explains them."""
    captured: list[bytes] = []
    want = len(expected.frames) - expected.not_sent  # as send_and_expect()

    def enough() -> bool:
        captured.extend(tx.read_tx())
        return len(captured) >= want and (done is None or bool(done()))
    try:
        wait_until(enough, timeout, what=f"{want} frame(s) on {tx.name}",
                   describe=lambda: f"{len(captured)} arrived")
    except WaitTimeout:
        pass  # the comparison says what is missing
    captured.extend(tx.read_tx())
    return conclude(steps, expected, captured, title=title, rx_port=rx_name, tx_port=tx.name,
                    sent=sent, second_opinion=second_opinion).check()
