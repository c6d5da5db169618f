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
  first, and fixtures/verdict.py turns it into the xfail.  `observed()` records
  any other sighting that shows without a frame (a request never answered).
- `conclude_content()` judges a step by what its frames carry (a count, a
  reassembled payload) where the model builds no frames for it.
- `conclude_ports()` is `conclude()` for a judge that watches several ports at
  once (a veth's namespace end, a bond's members, both sides of a tunnel): one
  `PortFrames` per port, judged in order or, where the contract leaves the
  order open (frames of different flows interleave), order-free (`align()`).
  A port may also carry what OVS is known to send there as a whole list
  (`known_instead`: a replay of the flow table with the known-bug layer, where
  a bug changes how many frames leave, not just their bytes).  One step is
  recorded per port; the verdict is the case's, over all of them.
- `settle()` waits until the captures a judge reads agree with the model or
  with a known deviation (a frame seen going in may still be on its way out),
  then concludes: the one "wait, then compare" loop.

With xfail_strict, a known bug that no longer shows is a "gone" verdict, which
`check()` raises: the id fails rather than xpasses silently.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from datapath.model import Expected, Judgement
from datapath.model.hooks import Known
from evidence.compare import FrameMismatch
from evidence.tshark import Tshark, disagreements
from harness.records import Step
from harness.wait import WaitTimeout, wait_until

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


class _Status:
    """What a verdict's status means: "known" is a sighting; "mismatch" and
    "gone" (a known bug that did not show) are what no known bug explains."""

    status: str

    @property
    def known(self) -> bool:
        return self.status == "known"

    @property
    def unexplained(self) -> bool:
        return self.status in ("mismatch", "gone")


@dataclass
class Verdict(_Status):
    """What one step came to: "match", "known" (exactly a known bug's deviation:
    a sighting), "gone" (right where a known bug says OVS deviates) or
    "mismatch"; the differing fields, and the step as recorded."""

    status: str
    lines: list[str]
    expected: Expected  # as resolved against what was captured
    captured: list[bytes]
    step: Step
    context: str = ""

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
    frames the model accepts.  The one-port case of `conclude_ports()`."""
    one = conclude_ports(steps, [PortFrames(tx_port, expected, captured, sent, rx_port, title,
                                            notes=notes, extra=extra)],
                         title=title, second_opinion=second_opinion).ports[0]
    one.context = context or (f"{title}: {rx_port} -> {tx_port}" if title else "")
    return one


def crashed(steps: list[Step] | None, bug: Known, *, title: str, rx_port: str, tx_port: str,
            sent: Sequence[bytes], evidence: str) -> KnownCrash:
    """Record that ovs-vswitchd died of `bug` (its signature was in `evidence`),
    and return the KnownCrash for the caller to raise."""
    observed(steps, bug, title=title, rx_port=rx_port, tx_port=tx_port, sent=sent,
             what=f"ovs-vswitchd died: {bug.title}")
    return KnownCrash(f"{bug.reason()}\n{evidence.strip()}")


def observed(steps: list[Step] | None, bug: Known, *, title: str, what: str,
             rx_port: str = "-", tx_port: str = "-", sent: Sequence[bytes] = ()) -> Step:
    """Record that OVS did exactly what the known `bug` says, seen without a
    frame (a request never answered, a daemon that died): a sighting, which the
    collector decides at the case's end as it does a frame's (`finish()`)."""
    return record_step(steps, title, rx_port, tx_port, sent=sent, captured=[], diff=[what],
                       notes=[bug.reason()], bugs={bug.key: PRESENT})


def conclude_content(steps: list[Step] | None, captured: list[bytes], problems: Sequence[str],
                     *, title: str, rx_port: str, tx_port: str, sent: Sequence[bytes],
                     notes: Sequence[str] = ()) -> Verdict:
    """A step judged by what the frames carry rather than by frames the model
    builds (how many left, the payload they put back together): `problems` are
    what the caller found wrong.  Recorded; a mismatch if there are any."""
    step = record_step(steps, title, rx_port, tx_port, sent=sent, captured=captured,
                       diff=problems, notes=notes)
    return Verdict("mismatch" if problems else "match", list(problems), Expected(frames=[]),
                   list(captured), step, f"{title}: {rx_port} -> {tx_port}")


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


# -- several ports at once -------------------------------------------------------------

SETTLE_SECONDS = 3.0  # how long a judge waits for frames still on their way out


def align(expected: Expected, captured: Sequence[bytes]) -> list[bytes]:
    """`captured` in the order of `expected`'s frames, for a port whose frames
    the contract lets interleave: each expected frame is paired with a captured
    one it permits (the canonical frame, one the contract allows, or what OVS
    is known to send there), the earliest such; the frames left over fill the
    unpaired places in the order they came, so that the field-by-field
    comparison shows what differs; any surplus follows."""
    frames = [bytes(f) for f in captured]
    at: dict[bytes, list[int]] = {}
    for j, frame in enumerate(frames):
        at.setdefault(frame, []).append(j)
    taken: set[int] = set()
    allowed, known = expected.padded("allowed"), expected.padded("ovs_allowed")
    placed: list[int | None] = []
    for i, frame in enumerate(expected.frames):
        hits = [j for f in (frame, *allowed[i], *known[i]) for j in at.get(f, [])[:1]]
        hit = min(hits, default=None)
        if hit is not None:
            taken.add(hit)
            for f in (frame, *allowed[i], *known[i]):
                if at.get(f) and at[f][0] == hit:
                    at[f].pop(0)
        placed.append(hit)
    rest = iter([j for j in range(len(frames)) if j not in taken])
    order = [j if j is not None else next(rest, None) for j in placed]
    return [frames[j] for j in order if j is not None] + [frames[j] for j in rest]


@dataclass
class PortFrames:
    """One port's share of a multi-port judgement: what the model says leaves
    `port` (`expected`), what left it (`captured`), and what went in to cause
    it (`sent`, on `rx_port`: several ports may be written "p1|p2")."""

    port: str
    expected: Expected
    captured: Sequence[bytes]
    sent: Sequence[bytes] = ()
    rx_port: str = ""
    title: str = ""  # the step's title (default: the judgement's, then the port)
    # What OVS is known to send here instead, as a whole list (None: as `expected`
    # says, frame by frame); its `bugs` name the entries.
    known_instead: Expected | None = None
    notes: Sequence[str] = ()
    extra: Sequence[str] = ()  # problems this port has besides its frames


@dataclass
class PortsVerdict(_Status):
    """What a multi-port judgement came to: the case's status over every port
    ("match", "known", "gone", "mismatch" as for one port), the differing
    fields port by port, and each port's verdict (its step recorded)."""

    status: str
    lines: list[str]
    ports: list[Verdict] = field(default_factory=list)
    context: str = ""

    @property
    def captured(self) -> int:
        """How many frames left the judged ports."""
        return sum(len(v.captured) for v in self.ports)

    def check(self) -> int:
        """How many frames left the judged ports; FrameMismatch naming port,
        layer and field if unexplained."""
        if self.unexplained:
            first = next((v for v in self.ports if v.unexplained), None)
            raise FrameMismatch(first.expected.frames if first else [],
                                first.captured if first else [], self.lines,
                                context=self.context)
        return self.captured


def _judge_one(pf: PortFrames, ordered: bool) -> tuple[Judgement, list[bytes]]:
    captured = list(pf.captured) if ordered else align(pf.expected, pf.captured)
    return pf.expected.judge(captured), captured


def conclude_ports(steps: list[Step] | None, ports: Sequence[PortFrames], *, title: str = "",
                   ordered: bool = True, second_opinion: Tshark | None = None,
                   extra: Sequence[str] = (), context: str = "") -> PortsVerdict:
    """Judge every port's captured frames, record a step per port, and return
    the case's verdict over all of them.

    Port by port this is `conclude()`'s known-bug policy.  Over the ports:
    anything unexplained on one port is a mismatch of the whole; else a
    sighting on one port makes it "known"; else a known bug that did not show
    makes it "gone".  Where a port has `known_instead` (OVS is known to send a
    different list there), the ports must show either the model's frames
    everywhere (then "gone": the entries no longer reproduce) or OVS's known
    lists everywhere (a sighting of the entries `known_instead` names).
    `extra` (problems besides the frames, e.g. nothing went in) makes any
    verdict a mismatch.  tshark's verdicts are asked of frames the model
    accepts, port by port."""
    judged = [_judge_one(pf, ordered) for pf in ports]
    differs = [pf.known_instead is not None and pf.known_instead.frames != pf.expected.frames
               for pf in ports]
    whole_bugs: list[Known] = []
    whole = ""  # over the ports a whole-list deviation touches: "", "gone", "known", "mismatch"
    if any(differs):
        whole_bugs = [b for pf in ports if pf.known_instead is not None
                      for b in pf.known_instead.bugs if not b.crash]
        whole_bugs = [b for i, b in enumerate(whole_bugs) if b not in whole_bugs[:i]]
        instead = [_judge_one(PortFrames(pf.port, pf.known_instead or pf.expected, pf.captured),
                              ordered)[0] for pf in ports]
        if all(j.status in ("match", "known") for j, _ in judged):
            whole = "gone"
        elif all(j.status in ("match", "known") for j in instead):
            whole = "known"
        else:
            whole = "mismatch"
    verdicts: list[Verdict] = []
    lines: list[str] = []
    for pf, (judgement, captured), touched in zip(ports, judged, differs):
        resolved, port_lines = judgement.expected, list(judgement.lines)
        status, bugs, notes = judgement.status, dict(judgement.bugs), list(pf.notes)
        crash = next((b for b in resolved.bugs if b.crash), None)
        if crash is not None and status == "match":  # it was to die, and did not
            port_lines, status = [crash.gone()], "gone"
            bugs = bugs or {crash.key: ABSENT}
        if touched:
            assert pf.known_instead is not None
            notes.append(f"OVS is known to send {len(pf.known_instead.frames)} frame(s) here "
                         f"instead of {len(pf.expected.frames)}: "
                         + ", ".join(b.reason() for b in whole_bugs))
            status = whole
            if whole == "gone":
                port_lines += [b.gone() for b in whole_bugs]
                bugs = {b.key: ABSENT for b in whole_bugs}
            elif whole == "known":
                bugs = {b.key: PRESENT for b in whole_bugs}
            else:
                bugs = {}
        elif whole == "mismatch" and status == "known":
            status, bugs = "mismatch", {}
        port_lines += list(pf.extra)
        opinion: list[str] = []
        if status == "match" and not port_lines and second_opinion is not None:
            disagree, opinion = tshark_disagrees(second_opinion, captured, resolved)
            port_lines += disagree
        if port_lines and status == "match" or pf.extra:
            status, bugs = "mismatch", {}
        reasons = [b.reason() for b in resolved.bugs if not b.crash] \
            if status == "known" and not touched else []
        step = record_step(steps, pf.title or title or pf.port, pf.rx_port, pf.port,
                           sent=pf.sent, captured=captured, expected=resolved,
                           diff=port_lines, notes=[*notes, *reasons, *opinion], bugs=bugs)
        verdicts.append(Verdict(status, port_lines, resolved, captured, step,
                                f"{pf.title or title}: {pf.rx_port} -> {pf.port}"))
        lines += [f"{pf.port}: {line}" for line in port_lines]
    found = {v.status for v in verdicts}
    status = next((s for s in ("mismatch", "gone", "known") if s in found), "match")
    if extra:
        lines += list(extra)
        status = "mismatch"
    return PortsVerdict(status, lines, verdicts, context or title)


def settle(steps: list[Step] | None, read: Callable[[], Sequence[PortFrames]], *,
           title: str = "", ordered: bool = True, second_opinion: Tshark | None = None,
           extra: Callable[[], Sequence[str]] = lambda: (), timeout: float = SETTLE_SECONDS,
           what: str = "the captures to agree with the model") -> PortsVerdict:
    """Until what `read()` returns (it reads the captures afresh each time)
    agrees with the model or with a known deviation, or the time is up; then
    the verdict over that same reading, recorded (`conclude_ports()`): a frame
    that arrives after the captures agreed is not half of the judgement."""
    last: list[Sequence[PortFrames]] = []

    def agrees() -> bool:
        last[:] = [read()]
        return conclude_ports(None, last[0], ordered=ordered).status in ("match", "known")
    try:
        wait_until(agrees, timeout, what=what)
    except WaitTimeout:
        pass  # the verdict says what differs
    return conclude_ports(steps, last[0] if last else read(), title=title, ordered=ordered,
                          second_opinion=second_opinion, extra=extra())
