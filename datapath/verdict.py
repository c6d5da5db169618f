"""One verdict path: judge a step, record it, and decide the case at its end.

Every comparison of what left the datapath with what the model expects ends
here:

- `record_step()` is the one way to put a `Step` into a case's record.
- `conclude()` judges captured frames against an `Expected` (the known-bug
  policy of `Expected.judge`, then tshark's second opinion), records the step,
  and returns the `Verdict`; nothing is raised for a known bug.
  `Verdict.check()` raises for what no known bug explains.
- `sightings()` reads the known-bug sightings back from the steps (a step whose
  `bugs` say "present"), and `finish()` is the collector's decision, made once
  the case has run every step (fixtures/verdict.py calls it after the case
  function returned): an xfail naming each sighting, else nothing.  A failure
  raised meanwhile stands: an unexplained deviation fails even where a known
  bug also showed.
- A known crash (the daemon died with the bug's signature) ends the case at
  once, as `KnownCrash`: no later step can run.  It is recorded as a sighting
  first, and fixtures/verdict.py turns it into the xfail.

With xfail_strict, a known bug that no longer shows is a "gone" verdict, which
`check()` raises: the id fails rather than xpasses silently.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from datapath.model import Expected, Judgement
from datapath.model.hooks import Known
from harness.compare import FrameMismatch
from harness.records import Step
from harness.tshark import Tshark, disagreements

MAX_REASON_LINES = 24  # the xfail reason quotes a sighting's diff; the step keeps all of it
PRESENT, ABSENT = "present", "absent"  # Step.bugs values: the deviation showed, or not


class KnownCrash(Exception):
    """ovs-vswitchd died exactly as a known bug says it does: the case ends here
    (as an xfail, fixtures/verdict.py); the step that saw it is recorded."""


def record_step(steps: list[Step] | None, title: str, rx_port: str, tx_port: str, *,
                sent: Sequence[bytes], captured: Sequence[bytes],
                expected: Expected | None = None, diff: Sequence[str] = (),
                notes: Sequence[str] = (), bugs: dict[str, str] | None = None,
                expected_frames: Sequence[bytes] = ()) -> Step:
    """The one way to record a step: frames as hex, the model's frames, checksum
    verdicts and notes from `expected` (if any; else the model's frames are
    `expected_frames`, for a judge that builds them itself), `notes` after them.
    The step is ok when `diff` is empty.  Appended to `steps` unless that is None."""
    assert not (expected and expected_frames), "the model's frames once: expected or expected_frames"
    step = Step(title=title, rx_port=rx_port, tx_port=tx_port,
                sent=[bytes(f).hex() for f in sent],
                expected=([f.hex() for f in expected.frames] if expected
                          else [bytes(f).hex() for f in expected_frames]),
                captured=[bytes(f).hex() for f in captured], ok=not diff, diff=list(diff),
                csum_state=list(expected.csum_state) if expected else [],
                notes=(list(expected.notes) if expected else []) + list(notes),
                bugs=dict(bugs or {}))
    if steps is not None:
        steps.append(step)
    return step


@dataclass
class Verdict:
    """What one step came to: "match", "known" (exactly a known bug's deviation:
    a sighting), "gone" (right where a known bug says OVS deviates) or
    "mismatch"; the differing fields, and the step as recorded."""

    status: str
    lines: list[str]
    expected: Expected  # as resolved against what was captured
    captured: list[bytes]
    step: Step
    context: str = ""

    @property
    def known(self) -> bool:
        return self.status == "known"

    @property
    def unexplained(self) -> bool:
        """A deviation no known bug explains, or a known bug that did not show."""
        return self.status in ("mismatch", "gone")

    def check(self) -> list[bytes]:
        """The captured frames; FrameMismatch naming layer and field if unexplained."""
        if self.unexplained:
            raise FrameMismatch(self.expected.frames, self.captured, self.lines,
                                context=self.context)
        return self.captured


def conclude(steps: list[Step] | None, expected: Expected, captured: list[bytes], *,
             title: str, rx_port: str, tx_port: str, sent: Sequence[bytes],
             second_opinion: Tshark | None = None, extra: Sequence[str] = (),
             notes: Sequence[str] = (), context: str = "") -> Verdict:
    """Judge `captured` against `expected`, record the step, return the verdict.

    `extra` are problems the caller found besides the frames (a surplus from an
    earlier step, frames never taken): any of them makes the verdict a mismatch,
    a known deviation included.  tshark's checksum verdicts are asked only of
    frames the model accepts."""
    judgement: Judgement = expected.judge(captured)
    resolved, lines = judgement.expected, list(judgement.lines)
    status = judgement.status
    crash = next((b for b in resolved.bugs if b.crash), None)
    if crash is not None and status == "match":  # it was to die, and did not
        lines, status = [crash.gone()], "gone"
    if extra:
        lines += extra
        status = "mismatch"
    opinion: list[str] = []
    if status == "match" and second_opinion is not None:
        disagree, opinion = tshark_disagrees(second_opinion, captured, resolved)
        if disagree:
            lines, status = disagree, "mismatch"
    known = [b for b in resolved.bugs if not b.crash]
    reasons = [b.reason() for b in known] if status == "known" else []
    bugs = ({crash.key: ABSENT} if crash is not None and status == "gone" and not judgement.bugs
            else judgement.bugs if status in ("known", "gone") else {})
    step = record_step(steps, title, rx_port, tx_port, sent=sent, captured=captured,
                       expected=resolved, diff=lines, notes=[*notes, *reasons, *opinion],
                       bugs=bugs)
    return Verdict(status, lines, resolved, list(captured), step,
                   context or (f"{title}: {rx_port} -> {tx_port}" if title else ""))


def crashed(steps: list[Step] | None, bug: Known, *, title: str, rx_port: str, tx_port: str,
            sent: Sequence[bytes], evidence: str) -> KnownCrash:
    """Record that ovs-vswitchd died of `bug` (its signature was in `evidence`),
    and return the KnownCrash for the caller to raise."""
    record_step(steps, title, rx_port, tx_port, sent=sent, captured=[],
                diff=[f"ovs-vswitchd died: {bug.title}"], notes=[bug.reason()],
                bugs={bug.key: PRESENT})
    return KnownCrash(f"{bug.reason()}\n{evidence.strip()}")


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


def is_sighting(step: Step) -> bool:
    """A step that saw a known bug exactly as known."""
    return PRESENT in step.bugs.values()


def sightings(steps: Sequence[Step]) -> list[Step]:
    """The steps of a case that saw a known bug, in order."""
    return [s for s in steps if is_sighting(s)]


def reason(steps: Sequence[Step], max_lines: int = MAX_REASON_LINES) -> str:
    """The xfail reason for these sightings: each step's title, the known bugs
    it names, and the first lines of its diff."""
    parts: list[str] = []
    for step in sightings(steps):
        keys = ", ".join(k for k, v in step.bugs.items() if v == PRESENT)
        shown = step.diff[:max_lines] + ([f"... {len(step.diff) - max_lines} more lines in the "
                                          "step's diff"] if len(step.diff) > max_lines else [])
        parts.append("\n".join([f"{step.title or 'step'}: known OVS bug(s) {keys}",
                                *[n for n in step.notes if n.startswith("known OVS bug")],
                                *shown]))
    return "\n".join(parts)


def finish(steps: Sequence[Step]) -> None:
    """The collector's decision at the end of a case that raised nothing: an
    xfail if some step saw a known bug, else the case passes."""
    if sightings(steps):
        pytest.xfail(reason(steps))


def stop(crash: KnownCrash) -> None:
    """The decision for a case a known crash ended: an xfail with its reason
    (the crash's own traceback is not chained to it: the reason says it all,
    and pytest would render every frame of it for each such id)."""
    raise pytest.xfail.Exception(str(crash)) from None
