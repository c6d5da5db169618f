"""The evidence of each case a reviewer must understand without a rerun: the
pcaps of every step of failed, error and xfailed cases, and tshark's decode
(with its checksum verdicts) of what left."""
from __future__ import annotations

from pathlib import Path

from harness.records import DETAIL_OUTCOMES, CaseRecord, Step, case_slug
from reports.dissect import DissectError, dissect, write_pcap

MAX_DISSECTED_FRAMES = 2000
PCAP_DIR = "pcap"


def dissect_failures(cases: list[CaseRecord], out_dir: Path) -> None:
    """Save pcaps of every step of failed, error and xfailed cases, and attach tshark's
    decode (with checksum verdicts) of what left.

    All captured frames go through one tshark run; each step gets its slice back.
    """
    pending: list[tuple[Step, int, int]] = []
    frames: list[str] = []
    for case in cases:
        if case.outcome not in DETAIL_OUTCOMES:
            continue
        slug = case_slug(case.nodeid)
        for number, step in enumerate(case.steps, 1):
            for kind in ("sent", "expected", "captured"):
                hexes = getattr(step, kind)
                if not hexes:
                    continue
                rel = f"{PCAP_DIR}/{slug}/step{number}-{kind}.pcap"
                try:
                    write_pcap(hexes, str(out_dir / rel))
                    case.artifacts[f"step {number} {kind}.pcap"] = rel
                except (DissectError, OSError) as exc:
                    step.dissection_error = f"no pcap: {exc}"
            if f"step {number} captured.pcap" not in case.artifacts:
                continue  # nothing left the port, or its frames are not valid hex
            if len(frames) + len(step.captured) > MAX_DISSECTED_FRAMES:
                step.dissection_error = f"no dissection: more than {MAX_DISSECTED_FRAMES} frames failed"
                continue
            pending.append((step, len(frames), len(step.captured)))
            frames.extend(step.captured)
    if not pending:
        return
    try:
        decoded = dissect(frames, str(out_dir / PCAP_DIR / "all-captured.pcap"))
    except (DissectError, OSError) as exc:
        for step, _, _ in pending:
            step.dissection_error = f"no dissection: {exc}"
        return
    for step, start, count in pending:
        step.dissection = [dict(d, index=d["index"] - start) for d in decoded[start:start + count]]
