"""Per-case evidence records: what the report, the JSON results and merge share.

A record is filled while a case runs (by the sandbox, the backends and the
comparison) and serialised to plain JSON at the end of the run.  Keep every
field JSON-friendly: strings, numbers, lists and dicts only.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

FORMAT = 2  # results.json: 1 stored every text plain; 2 packs long ones
# Outcomes from worst to best; anything else sorts after them.
OUTCOME_ORDER = ("failed", "error", "xpassed", "xfailed", "skipped", "passed", "unknown")
FAILED_OUTCOMES = ("failed", "error")
# Outcomes that always get a case page, pcaps, a dissection and a reproducer.
DETAIL_OUTCOMES = ("failed", "error", "xfailed")


def outcome_rank(outcome: str) -> int:
    """Position of an outcome in OUTCOME_ORDER (unknown names last)."""
    try:
        return OUTCOME_ORDER.index(outcome)
    except ValueError:
        return len(OUTCOME_ORDER)


def case_slug(nodeid: str, run: str = "") -> str:
    """A file name for a case: its test name and parameters, plus a hash of the full id."""
    key = f"{run}\n{nodeid}" if run else nodeid
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", nodeid.split("::")[-1]).strip("_")[:80]
    return f"{name}-{digest}" if name else digest


@dataclass
class Command:
    """One control-channel call made by a case (vsctl, ofctl, appctl, ...)."""

    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    seconds: float


@dataclass
class Step:
    """One send-and-expect exchange: what went in, what had to leave, what left."""

    title: str
    rx_port: str
    tx_port: str
    sent: list[str]  # hex of each frame handed to the rx port
    expected: list[str]  # hex of each frame the model says must leave
    captured: list[str]  # hex of each frame that did leave
    ok: bool
    diff: list[str] = field(default_factory=list)  # "IP.chksum: expected 0x1, got 0x2"
    # Model's checksum verdict for each expected frame, by layer: {"IP": "good", "TCP": "stale"}.
    csum_state: list[dict[str, str]] = field(default_factory=list)
    # Model's explanation of what it did, one line per rule applied.
    notes: list[str] = field(default_factory=list)
    # tshark dissection of each captured frame (filled at session end for failed cases only):
    # [{"index": 0, "length": 60, "layers": [{"name": "ip", "summary": "...", "checksums": [...]}]}]
    dissection: list[dict[str, Any]] = field(default_factory=list)
    dissection_error: str = ""  # e.g. "no dissection: tshark not found"
    # Known OVS bugs this step could show, by key: "present" (OVS deviated exactly
    # as known) or "absent" (OVS behaved correctly).
    bugs: dict[str, str] = field(default_factory=dict)


@dataclass
class CaseRecord:
    """Everything the report knows about one test case."""

    nodeid: str
    outcome: str = "unknown"  # passed, failed, error, skipped, xfailed, xpassed
    duration: float = 0.0
    params: dict[str, str] = field(default_factory=dict)
    upstream: str | None = None
    # The upstream file of those titles ("dpif-netdev.at", "pmd.at", ...); None in old records.
    upstream_file: str | None = None
    longrepr: str = ""
    backend: str = ""
    commands: list[Command] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    log_excerpt: list[str] = field(default_factory=list)  # vswitchd log lines of this case
    artifacts: dict[str, str] = field(default_factory=dict)  # label -> path relative to the output dir
    run: str = ""  # label of the run this case came from, set when several runs are merged
    # Measured figures, e.g. {"gbps_tso_off": 1.4, "retransmits_tso_off": 12} (throughput cases).
    metrics: dict[str, float] = field(default_factory=dict)
    compacted: bool = False  # its commands, log and expected frames were not kept
    crash: str = ""  # a daemon that died during the case: why, and its backtrace
    # Where and when it ran: the pytest-xdist worker ("" in a serial run) and the
    # wall clock at its set-up (seconds since the epoch), for the timeline of a run.
    worker: str = ""
    started: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON.  Evidence of some size (commands, steps with their frames, the
        log) is packed into one `evidence_z` text (see pack()): a run of rig
        commands and TSO segments repeats itself and shrinks tenfold."""
        data = dataclasses.asdict(self)
        evidence = {key: data[key] for key in EVIDENCE}
        text = json.dumps(evidence, separators=(",", ":"))
        if len(text) > PACK_OVER:
            data["evidence_z"] = pack(text)
            for key in EVIDENCE:
                data[key] = []
        return data

    def compact(self, keep_frames: bool) -> None:
        """Drop the evidence only a case page or a reproducer shows (the commands,
        the log, the frames), keeping what the index, the matrix, the merge and the
        known-bug summary read.  `keep_frames` keeps the frames sent and captured
        (a build comparison diffs them)."""
        self.commands = []
        self.log_excerpt = []
        for step in self.steps:
            step.expected, step.csum_state, step.notes, step.dissection = [], [], [], []
            if not keep_frames:
                step.sent, step.captured = [], []
        self.compacted = True

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CaseRecord":
        data = dict(data)
        packed = data.pop("evidence_z", None)
        if packed is not None:
            data.update(json.loads(unpack(packed)))
        data["commands"] = [_build(Command, c) for c in data.get("commands", [])]
        data["steps"] = [_build(Step, s) for s in data.get("steps", [])]
        record: CaseRecord = _build(cls, data)
        return record


EVIDENCE = ("commands", "steps", "log_excerpt")
PACKED = "z:"  # a packed text: zlib-compressed, base64-encoded
PACK_OVER = 2048  # characters of evidence below which a record stays plain


def pack(text: str) -> str:
    """A text as results.json stores it when packed: zlib, then base64."""
    return PACKED + base64.b64encode(zlib.compress(text.encode(), 6)).decode()


def unpack(text: str) -> str:
    """A text as written, unpacked if pack() packed it."""
    if isinstance(text, str) and text.startswith(PACKED):
        try:
            return zlib.decompress(base64.b64decode(text[len(PACKED):])).decode()
        except (ValueError, zlib.error) as exc:
            raise ValueError(f"a packed text is damaged: {exc}") from None
    return text


def _build(cls: Any, data: dict[str, Any]) -> Any:
    """Instantiate a record dataclass from JSON, ignoring keys a newer writer added."""
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class RunRecord:
    """Everything one run (or one merged set of runs) produced."""

    started: str  # ISO 8601
    duration: float
    host: str
    backend: str
    versions: dict[str, str]  # {"ovs": "4.0.0", "dpdk": "25.11.4", ...}
    cases: list[CaseRecord]
    argv: list[str] = field(default_factory=list)
    # One summary per merged input (label, host, backend, started, duration, versions, argv);
    # empty for a plain run.
    runs: list[dict[str, Any]] = field(default_factory=list)
    # Which OVS ran, where, and how it was chosen: "Open vSwitch 4.0.0 at ...; chosen by ...".
    ovs_source: str = ""
    # Each known OVS bug and whether this build showed it (see known_bug_status).
    known_bugs: list[dict[str, Any]] = field(default_factory=list)

    def dump(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            data = dataclasses.asdict(dataclasses.replace(self, cases=[]))
            data["cases"] = [case.to_json() for case in self.cases]
            json.dump({**data, "format": FORMAT}, f, separators=(",", ":"))

    @classmethod
    def load(cls, path: str) -> "RunRecord":
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a results file: {exc}") from None
        if not isinstance(data, dict) or data.get("format") not in (1, FORMAT):
            raise ValueError(f"{path}: not a results file (missing format marker)")
        try:
            cases = [CaseRecord.from_json(c) for c in data.get("cases", [])]
            return cls(
                started=data["started"], duration=data["duration"], host=data["host"],
                backend=data["backend"], versions=data["versions"], cases=cases,
                argv=data.get("argv", []), runs=data.get("runs", []),
                ovs_source=str(data.get("ovs_source", "")),
                known_bugs=list(data.get("known_bugs", [])),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"{path}: malformed results file: {exc!r}") from None


def known_bug_status(known: list[dict[str, Any]], cases: list[CaseRecord]) -> list[dict[str, Any]]:
    """Per known bug (key, title, where, seen_in): "present" if some case saw OVS
    deviate exactly as known, "absent" if some case saw it behave correctly
    (both: "mixed"), "untested" if no case ran into it; with the ids that said so."""
    seen: dict[str, dict[str, list[str]]] = {}
    for case in cases:
        for step in case.steps:
            for key, status in step.bugs.items():
                ids = seen.setdefault(key, {}).setdefault(status, [])
                if case.nodeid not in ids:
                    ids.append(case.nodeid)
    rows: list[dict[str, Any]] = []
    for bug in known:
        found = seen.get(bug["key"], {})
        present, absent = found.get("present", []), found.get("absent", [])
        status = ("mixed" if present and absent else "present" if present
                  else "absent" if absent else "untested")
        rows.append({**bug, "status": status, "present": len(present), "absent": len(absent),
                     "absent_ids": absent[:20]})
    return rows
