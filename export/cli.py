"""`./ovstest export-at ID [ID...] [--out-dir DIR] [--results FILE]`.

ID is a pytest node id of this checkout or a known-bug key of
datapath/model/bugs.py.  For a node id the case is run (with
--report-all-cases, so even a passing case keeps its transcript) and its record
is exported.  For a bug key, the bug's candidate cases are run and, among the
ids that xfail on exactly that bug, the one with the smallest frame is
exported (first among those that show no other known bug).  `--results FILE`
(a results.json, repeatable) chooses from an earlier run instead, without
running anything (missing node ids are run).

Each export writes DIR/NAME.at (the Autotest test) and DIR/NAME.txt (the
report).  Exit status: 0 all exported; 1 a bug showed in no case (fixed in
this build?) or a case could not be exported; 2 a bad ID or a failed run.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from datapath.model import bugs
from datapath.model.bugs import OvsBug
from export import at, writeup
from export.frames import checksums_valid
from harness.records import CaseRecord, RunRecord, Step, case_slug

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = "reports/out-export"
PREFIX = "dpif-netdev - "
OFFLOAD_OPTION = re.compile(r"^options:ol_\w+=")
# Where each known bug can show: the search space for its minimal case.  A bug
# without an entry searches every case.  The choice among them comes from the
# records (the ids that xfail on the bug), never from this list.  Where a
# selection is narrowed, it keeps every id that can be the minimal one: for
# gre-csum-at-push the frame sent is the inner one whatever the underlay and
# the tx port's offloads, so the smallest inner frames (IPv4, UDP or another
# protocol) on a tx port without offload options (680 ids down to 36).
CANDIDATES = {
    "gre-csum-at-push": "test_encap_csum and gre and csum_on and in4 and tx_none and (udp or other)",
    "l4-partial-assert": "partial and (arp or icmp or other)",
    "tso-short-tunnel-assert": "test_tso_edges_tunnel and csum_on and 400B",
    "tso-empty-tunnel-csum": "test_tso_flags_and_sizes and PA-0B and vxlan",
    "ipv4-header-only-csum": "test_edge_frames and ip_header_only",
    "gso-cwr-every-segment": "test_tso_flags_and_sizes and C- and plain",
    "ipv6-ext-pseudo-header": "test_edge_frames and ext_ and plain",
    "ipv4-later-fragment-rewrite": "test_edge_frames and frag_later and in4 and plain",
    "gre-seq-shared": "test_erspan",
    "neigh-snoop-cached": "test_erspan",
    "trunc-pending-csum": "test_output_max_len and rx_partial and max_len100",
    "trunc-tunnel-outer-csum": "test_output_max_len_into_tunnel and udp6 and max_len80",
    "trunc-l4-cut-crash": "test_output_max_len and rx_partial and max_len20",
}


class ExportError(Exception):
    """One line for the user; `code` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Target:
    """One ID given on the command line: a known-bug key, or a node id."""

    given: str
    bug: OvsBug | None = None  # a bug key, else a node id


def known_bugs() -> dict[str, OvsBug]:
    """The known OVS bugs (datapath/model/bugs.py), by key."""
    return {b.key: b for b in bugs.ALL}


def classify(given: str) -> Target:
    """A known-bug key or a node id of a test file in this checkout."""
    if given in known_bugs():
        return Target(given, known_bugs()[given])
    path = given.split("::", 1)[0]
    if "::" in given and path.endswith(".py") and (REPO / path).is_file():
        return Target(given)
    raise ExportError(
        f"unknown ID {given!r}: neither a known-bug key ({', '.join(known_bugs())}) nor a "
        "pytest node id of this checkout (e.g. cases/dpif_netdev/test_tso.py::test_tso[in4-tx_none])")


def run_pytest(args: list[str], out_dir: Path, what: str) -> RunRecord:
    """Run the suite on a selection into out_dir; its results."""
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider",
            f"--out-dir={out_dir}"]
    print(f"export-at: running {what} (pytest output: {out_dir / 'pytest.log'})",
          file=sys.stderr, flush=True)
    with open(out_dir / "pytest.log", "w", encoding="utf-8") as log:
        proc = subprocess.run(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=False)
    lines = (out_dir / "pytest.log").read_text(errors="replace").strip().splitlines()
    if proc.returncode not in (0, 1):
        why = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1] if lines else "")
        raise ExportError(f"pytest ended with exit code {proc.returncode} for {what}: {why}")
    if lines:
        print(f"export-at: {lines[-1].strip('= ')}", file=sys.stderr)
    return RunRecord.load(str(out_dir / "results.json"))


def shows(case: CaseRecord, bug: OvsBug) -> Step | None:
    """The step where the case xfailed on exactly this bug, if any."""
    if case.outcome != "xfailed" or case.compacted:
        return None
    return next((s for s in case.steps if s.bugs.get(bug.key) == "present"), None)


def minimal(cases: list[CaseRecord], bug: OvsBug) -> CaseRecord | None:
    """Among the cases that xfail on the bug: first those whose step shows no
    other known bug (a test that one fix turns green), then the smallest frame
    sent in that step; among equals, the fewest offload options set, a sent
    frame with valid checksums, the fewest commands, then the id."""
    found = []
    for case in cases:
        step = shows(case, bug)
        if step is not None:
            others = sum(1 for key, status in step.bugs.items()
                         if key != bug.key and status == "present")
            size = max((len(h) // 2 for h in step.sent), default=0)
            options = sum(1 for c in case.commands for a in c.argv if OFFLOAD_OPTION.match(a))
            valid = all(checksums_valid(bytes.fromhex(h)) for h in step.sent)
            found.append(((others, size, options, not valid, len(case.commands), case.nodeid),
                          case))
    return min(found, key=lambda f: f[0])[1] if found else None


def title_for(case: CaseRecord, bug: OvsBug | None) -> str:
    """The AT_SETUP title: the bug's rule for a bug, else the test's name and parameters."""
    if bug is not None:
        return PREFIX + writeup.rule_for(bug).title
    name = case.nodeid.split("::")[-1]
    func, _, params = name.partition("[")
    text = func.removeprefix("test_").replace("_", " ")
    return PREFIX + text + (f" - {params.rstrip(']')}" if params else "")


def keywords_for(case: CaseRecord, bug: OvsBug | None) -> list[str]:
    """AT_KEYWORDS: userspace, offload, the test's name for a node id, and the bug keys."""
    words = ["userspace", "offload"]
    if bug is None:
        words.append(case.nodeid.split("::")[-1].partition("[")[0].removeprefix("test_"))
    keys = [bug.key] if bug else sorted({k for s in case.steps for k in s.bugs})
    return words + [k for k in keys if k not in words]


def export(case: CaseRecord, bug: OvsBug | None, name: str, out: Path, ovs: str) -> Path:
    """Write NAME.at and NAME.txt for `case` into `out`; return the .at file's path."""
    title = title_for(case, bug)
    keywords = keywords_for(case, bug)
    test = at.render(case, title, keywords)
    step = shows(case, bug) if bug is not None else None
    if step is not None and step.title in test.skipped:
        # A test without the step that shows the bug passes on the buggy OVS.
        raise ExportError(f"{bug.key if bug else name}: the step that shows it ({step.title!r}) "
                          f"cannot be exported from {case.nodeid} (its frames are not in a "
                          "netdev-dummy/receive of hex frames): not exported", code=1)
    at_path = out / f"{name}.at"
    at_path.write_text(test.text, encoding="utf-8")
    keyword = bug.key if bug else keywords[2]
    text = writeup.render(case, at_path.name, title, keyword, bug, ovs)
    if test.warnings:
        text += "\nNot carried over faithfully\n" + "".join(f"  - {w}\n" for w in test.warnings)
    (out / f"{name}.txt").write_text(text, encoding="utf-8")
    for warning in test.warnings:
        print(f"export-at: {name}: warning: {warning}", file=sys.stderr)
    return at_path


def main(argv: list[str] | None = None) -> int:
    """`./ovstest export-at`: export each ID; the exit status as the module says."""
    parser = argparse.ArgumentParser(prog="ovstest export-at", description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="+", metavar="ID",
                        help="a pytest node id, or a known-bug key: " + ", ".join(known_bugs()))
    parser.add_argument("--out-dir", default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument("--results", action="append", default=[],
                        help="choose from this results.json instead of running (repeatable)")
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except ExportError as exc:
        print(f"ovstest export-at: error: {exc}", file=sys.stderr)
        return exc.code


def _main(args: argparse.Namespace) -> int:
    targets = [classify(given) for given in args.ids]
    out = Path(args.out_dir)
    if not out.is_absolute():
        out = REPO / out
    cases: dict[str, CaseRecord] = {}
    ovs = ""
    for path in args.results:
        try:
            run = RunRecord.load(path)
        except ValueError as exc:
            raise ExportError(str(exc)) from None
        ovs = ovs or run.versions.get("ovs", "")
        cases.update({c.nodeid: c for c in run.cases})
    nodeids = [t.given for t in targets if t.bug is None and t.given not in cases]
    if nodeids:
        run = run_pytest([*nodeids, "--report-all-cases"], out / "run-ids",
                         f"{len(nodeids)} case(s)")
        ovs = run.versions.get("ovs", ovs)
        cases.update({c.nodeid: c for c in run.cases})
    keys = [t.bug.key for t in targets if t.bug is not None]
    if keys and not args.results:
        hints = [CANDIDATES.get(k) for k in keys]
        select = [] if None in hints else ["-k", " or ".join(f"({h})" for h in hints)]
        run = run_pytest(["cases", *select], out / "run-bugs",
                         "the candidate cases of " + ", ".join(keys))
        ovs = run.versions.get("ovs", ovs)
        cases.update({c.nodeid: c for c in run.cases})
    status = 0
    for target in targets:
        if target.bug is None:
            case = cases.get(target.given)
            if case is None:
                raise ExportError(f"pytest ran no case {target.given!r} (not collected: check "
                                  "the test name and parameters with --collect-only)")
            name = case_slug(case.nodeid)
        else:
            case = minimal(list(cases.values()), target.bug)
            if case is None:
                print(f"ovstest export-at: {target.bug.key}: no case xfailed on this bug "
                      f"with OVS {ovs or '(unknown)'}: fixed in this build?", file=sys.stderr)
                status = 1
                continue
            name = target.bug.key
        if not case.commands:
            print(f"ovstest export-at: {target.given}: its record kept no commands "
                  "(a summary record: rerun it with --report-all-cases)", file=sys.stderr)
            status = 1
            continue
        out.mkdir(parents=True, exist_ok=True)
        try:
            path = export(case, target.bug, name, out, f"OVS {ovs}" if ovs else "this OVS")
        except ExportError as exc:
            print(f"ovstest export-at: {exc}", file=sys.stderr)
            status = exc.code
            continue
        print(f"{path} ({path.with_suffix('.txt').name}): {case.nodeid}")
    return status
