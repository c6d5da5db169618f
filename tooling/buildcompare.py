"""What changed between two OVS builds that ran the same selection.

    python3 -m tooling.buildcompare BASELINE_DIR CANDIDATE_DIR -o OUT_DIR

Each directory holds a results.json (`./ovstest compare` runs both sides with
--record-frames=all, so passed cases keep the frames they captured).  Writes
OUT_DIR/compare.html and OUT_DIR/compare.json, and links the page from both
sides' index.html.  Reported:

- every id whose outcome changed, grouped by the change ("passed -> failed");
- every id whose captured frames differ between the builds, even where both
  passed or both xfailed, grouped by the field paths that differ
  ("outer.UDP.chksum differs in 120 ids");
- ids that only one side ran.

Exit status 1 when an id that passed on the baseline fails (or errors) on the
candidate, 2 for unusable input, else 0.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from evidence.compare import diff_frames
from harness.records import DETAIL_OUTCOMES, FAILED_OUTCOMES, CaseRecord, RunRecord, case_slug
from harness.runtime import host_path
from reports.render import TEMPLATES, render

MAX_IDS_SHOWN = 200
MAX_EXAMPLES = 3


@dataclass
class FieldChange:
    """One field path that differs between the builds, and where."""

    path: str
    ids: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # "id: frame 3: baseline 0x1, candidate 0x2"


def field_paths(baseline: list[str], candidate: list[str]) -> dict[str, str]:
    """{field path: first differing line} between two captures (hex frames).

    A different number of frames is the path "frame count"; within a frame
    the paths are diff_frames()'s (outer.UDP.chksum, layers, length, ...)."""
    found: dict[str, str] = {}
    if len(baseline) != len(candidate):
        found["frame count"] = f"baseline {len(baseline)} frames, candidate {len(candidate)}"
    for n, (a, b) in enumerate(zip(baseline, candidate)):
        if a == b:
            continue
        try:
            lines = diff_frames(bytes.fromhex(a), bytes.fromhex(b))
        except ValueError:
            lines = ["frame: not valid hex"]
        for line in lines:
            path, _, rest = line.partition(":")
            text = re.sub(r"\bgot\b", "candidate", re.sub(r"\bexpected\b", "baseline", rest))
            found.setdefault(path.strip(), f"frame {n}: {text.strip()}")
    return found


def capture_changes(base: CaseRecord, cand: CaseRecord) -> dict[str, str]:
    """Field paths whose values differ in what left, step by step."""
    found: dict[str, str] = {}
    if len(base.steps) != len(cand.steps):
        found["step count"] = f"baseline {len(base.steps)} steps, candidate {len(cand.steps)}"
    for n, (a, b) in enumerate(zip(base.steps, cand.steps), 1):
        if a.sent != b.sent:
            found.setdefault("frames sent", f"step {n}: the builds were not sent the same frames")
        for path, line in field_paths(a.captured, b.captured).items():
            found.setdefault(path, f"step {n}, {line}" if len(base.steps) > 1 else line)
    return found


def compare_runs(baseline: RunRecord, candidate: RunRecord) -> dict[str, Any]:
    """The comparison as plain data (compare.json; the page renders it)."""
    base = {c.nodeid: c for c in baseline.cases}
    cand = {c.nodeid: c for c in candidate.cases}
    common = [n for n in base if n in cand]
    transitions: dict[tuple[str, str], list[str]] = {}
    for nodeid in common:
        a, b = base[nodeid].outcome, cand[nodeid].outcome
        if a != b:
            transitions.setdefault((a, b), []).append(nodeid)
    regressions = sorted(n for (a, b), ids in transitions.items()
                         if a == "passed" and b in FAILED_OUTCOMES for n in ids)
    fields: dict[str, FieldChange] = {}
    changed: list[str] = []
    compared = 0
    for nodeid in common:
        was, now = base[nodeid], cand[nodeid]
        if not any(s.captured for s in was.steps + now.steps) and (was.compacted or now.compacted):
            continue  # a side kept no frames for this id: nothing to compare
        compared += 1
        changes = capture_changes(was, now)
        if changes:
            changed.append(nodeid)
        for path, line in changes.items():
            entry = fields.setdefault(path, FieldChange(path))
            entry.ids.append(nodeid)
            if len(entry.examples) < MAX_EXAMPLES:
                entry.examples.append(f"{nodeid}: {line}")
    detail = {name: {c.nodeid for c in run.cases if c.outcome in DETAIL_OUTCOMES}
              for name, run in (("baseline", baseline), ("candidate", candidate))}
    return {
        "baseline": _side(baseline), "candidate": _side(candidate),
        "pages": {name: sorted(ids) for name, ids in detail.items()},
        "ids": {"common": len(common), "frames_compared": compared,
                "only_baseline": sorted(n for n in base if n not in cand),
                "only_candidate": sorted(n for n in cand if n not in base)},
        "outcome_changes": [{"baseline": a, "candidate": b, "ids": sorted(ids)}
                            for (a, b), ids in sorted(transitions.items(),
                                                      key=lambda kv: (-len(kv[1]), kv[0]))],
        "regressions": regressions,
        "frame_changes": [{"field": f.path, "count": len(f.ids), "ids": f.ids,
                           "examples": f.examples}
                          for f in sorted(fields.values(), key=lambda f: (-len(f.ids), f.path))],
        "frames_changed_ids": len(changed),
    }


def _side(run: RunRecord) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for case in run.cases:
        counts[case.outcome] = counts.get(case.outcome, 0) + 1
    return {"ovs": run.ovs_source or run.versions.get("ovs", ""), "started": run.started,
            "duration": run.duration, "counts": counts,
            "known_bugs": {b["key"]: b["status"] for b in run.known_bugs}}


def write(data: dict[str, Any], out_dir: Path, sides: dict[str, str]) -> Path:
    """Write compare.json and compare.html into `out_dir`; return the page's path."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    page = env.get_template("compare.html.j2").render(
        data=data, sides=sides, max_ids=MAX_IDS_SHOWN, slug=case_slug,
        style=(TEMPLATES / "report.css").read_text(encoding="utf-8"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compare.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    path = out_dir / "compare.html"
    path.write_text(page, encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Compare two runs' output directories and write the comparison."""
    parser = argparse.ArgumentParser(prog="python3 -m tooling.buildcompare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("baseline", help="the baseline run's output directory")
    parser.add_argument("candidate", help="the candidate run's output directory")
    parser.add_argument("-o", "--out-dir", required=True)
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    try:
        runs = {name: RunRecord.load(os.path.join(d, "results.json"))
                for name, d in (("baseline", args.baseline), ("candidate", args.candidate))}
        data = compare_runs(runs["baseline"], runs["candidate"])
        sides = {name: os.path.relpath(d, out) for name, d in
                 (("baseline", args.baseline), ("candidate", args.candidate))}
        page = write(data, out, sides)
        for name, run in runs.items():  # each side's index links the comparison
            side = Path(getattr(args, name))
            render(run, str(side), links=[("build comparison", os.path.relpath(page, side))])
    except (ValueError, OSError) as exc:
        print(f"tooling.buildcompare: error: {exc}", file=sys.stderr)
        return 2
    print(f"compare: {len(data['outcome_changes'])} outcome change(s) "
          f"({len(data['regressions'])} passed -> failed), {data['frames_changed_ids']} of "
          f"{data['ids']['frames_compared']} ids with different frames: {host_path(str(page))}")
    for change in data["frame_changes"][:10]:
        print(f"  {change['field']} differs in {change['count']} ids")
    return 1 if data["regressions"] else 0


if __name__ == "__main__":
    sys.exit(main())
