"""Coverage side by side with upstream's testsuite, and a patch's lines by id.

    python3 -m tooling.gcov_pages OUT_DIR

OUT_DIR is what `./ovstest coverage` wrote (tooling/gcovrun.py): gcovr's
coverage.json of our run, upstream/coverage.json with --baseline-upstream, and
patch-runs.json with --patch.  This writes, next to gcovr's own coverage.html:

- coverage-compare.html and .json: per file and per function, the lines, the
  functions and the branches each side reaches, the lines upstream reaches and
  we miss, and the reverse;
- patch.html and .json: each changed line of the patch, reached or not, and the
  finest group of ids whose own run reached it (one id where the runs' budget
  allowed), with the command that runs exactly those.

Everything here reads gcovr's JSON format; nothing parses gcov's output.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from reports.render import TEMPLATES
from tooling.idgroups import finest
from tooling.patchlines import FileChange, line_counts, states

MAX_IDS_SHOWN = 12


# ----------------------------------------------------------------------------
# One side's facts per file


@dataclass
class Side:
    """What one report says of one file."""

    lines: dict[int, int]  # code line -> count
    functions: dict[str, tuple[int, int]]  # name -> (first line, calls)
    function_of: dict[int, str]  # code line -> its function
    branches: tuple[int, int]  # (taken at least once, total)


def file_sides(report: dict[str, Any]) -> dict[str, Side]:
    """Each file's side of one gcov report: its lines, functions and branches."""
    counts = line_counts(report)
    out: dict[str, Side] = {}
    for f in report.get("files", []):
        path = f["file"]
        functions: dict[str, tuple[int, int]] = {}
        for fn in f.get("functions", []):
            name = fn.get("demangled_name") or fn.get("name") or "?"
            first, calls = functions.get(name, (int(fn.get("lineno", 0)), 0))
            functions[name] = (first, calls + int(fn.get("execution_count", 0)))
        function_of: dict[int, str] = {}
        taken = total = 0
        for ln in f.get("lines", []):
            if ln.get("gcovr/noncode"):
                continue
            if ln.get("function_name"):
                function_of[int(ln["line_number"])] = ln["function_name"]
            for br in ln.get("branches", []):
                if br.get("throw"):
                    continue
                total += 1
                taken += int(br.get("count", 0)) > 0
        starts = sorted((first, name) for name, (first, _) in functions.items())
        for line in counts.get(path, {}):
            if line not in function_of:  # older gcovr: the last function that starts before
                owner = [name for first, name in starts if first <= line]
                if owner:
                    function_of[line] = owner[-1]
        out[path] = Side(counts.get(path, {}), functions, function_of, (taken, total))
    return out


# ----------------------------------------------------------------------------
# Side by side


@dataclass
class Tally:
    """So many covered of so many."""

    covered: int
    total: int

    @property
    def percent(self) -> float | None:
        return round(100.0 * self.covered / self.total, 1) if self.total else None


@dataclass
class FunctionRow:
    """One function's coverage, ours and upstream's."""

    name: str
    first_line: int
    lines: int
    ours: int  # lines covered
    upstream: int
    ours_calls: int
    upstream_calls: int
    ours_only: list[int] = field(default_factory=list)
    upstream_only: list[int] = field(default_factory=list)


@dataclass
class FileRow:
    """One file's coverage, ours and upstream's, in lines and functions."""

    path: str
    built: bool  # a .gcda/.gcno of it reached the reports
    lines: int = 0
    ours: Tally = field(default_factory=lambda: Tally(0, 0))
    upstream: Tally = field(default_factory=lambda: Tally(0, 0))
    ours_functions: Tally = field(default_factory=lambda: Tally(0, 0))
    upstream_functions: Tally = field(default_factory=lambda: Tally(0, 0))
    ours_branches: Tally = field(default_factory=lambda: Tally(0, 0))
    upstream_branches: Tally = field(default_factory=lambda: Tally(0, 0))
    ours_only: list[int] = field(default_factory=list)
    upstream_only: list[int] = field(default_factory=list)
    functions: list[FunctionRow] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if not self.built:
            return "not built"
        ours, theirs = self.ours.percent or 0.0, self.upstream.percent or 0.0
        return "ours >= upstream" if self.ours.covered >= self.upstream.covered or ours >= theirs \
            else "upstream ahead"


def compare_file(path: str, ours: Side | None, upstream: Side | None) -> FileRow:
    """One file, our report against upstream's (either may lack it: no .gcda)."""
    if ours is None and upstream is None:
        return FileRow(path, built=False)
    empty = Side({}, {}, {}, (0, 0))
    a, b = ours or empty, upstream or empty
    code = sorted(set(a.lines) | set(b.lines))
    hit_a = {n for n in code if a.lines.get(n, 0) > 0}
    hit_b = {n for n in code if b.lines.get(n, 0) > 0}
    names = dict(b.functions)
    names.update(a.functions)
    owner = {**b.function_of, **a.function_of}
    by_function: dict[str, list[int]] = {}
    for n in code:
        by_function.setdefault(owner.get(n, "(outside any function)"), []).append(n)
    functions = []
    for name, lines in by_function.items():
        first = names.get(name, (min(lines), 0))[0]
        functions.append(FunctionRow(
            name=name, first_line=first, lines=len(lines),
            ours=sum(n in hit_a for n in lines), upstream=sum(n in hit_b for n in lines),
            ours_calls=a.functions.get(name, (0, 0))[1],
            upstream_calls=b.functions.get(name, (0, 0))[1],
            ours_only=[n for n in lines if n in hit_a and n not in hit_b],
            upstream_only=[n for n in lines if n in hit_b and n not in hit_a]))
    functions.sort(key=lambda f: (-len(f.upstream_only), -len(f.ours_only), f.first_line))
    all_names = set(a.functions) | set(b.functions)
    return FileRow(
        path=path, built=True, lines=len(code),
        ours=Tally(len(hit_a), len(code)), upstream=Tally(len(hit_b), len(code)),
        ours_functions=Tally(sum(a.functions.get(n, (0, 0))[1] > 0 for n in all_names),
                             len(all_names)),
        upstream_functions=Tally(sum(b.functions.get(n, (0, 0))[1] > 0 for n in all_names),
                                 len(all_names)),
        ours_branches=Tally(*a.branches) if ours else Tally(0, b.branches[1]),
        upstream_branches=Tally(*b.branches) if upstream else Tally(0, a.branches[1]),
        ours_only=sorted(hit_a - hit_b), upstream_only=sorted(hit_b - hit_a),
        functions=functions)


def side_by_side(ours: dict[str, Any], upstream: dict[str, Any] | None,
                 files: list[str]) -> list[FileRow]:
    """A row per file: `files` (the datapath's sources) first, in that order,
    then any other file either report has."""
    a = file_sides(ours)
    b = file_sides(upstream) if upstream is not None else {}
    paths = list(dict.fromkeys([*files, *sorted(set(a) | set(b))]))
    return [compare_file(p, a.get(p), b.get(p) if upstream is not None else None)
            for p in paths]


def ranges(lines: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    out: list[str] = []
    start = prev = None
    for n in lines:
        if prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


# ----------------------------------------------------------------------------
# The patch


@dataclass
class PatchLine:
    """One changed line of a patch: reached or not, and the finest id groups reaching it."""

    path: str
    line: int
    kind: str  # "added" or "after a deletion"
    state: str  # "reached", "not reached", "not code"
    groups: list[dict[str, Any]] = field(default_factory=list)  # the finest groups reaching it


def patch_lines(data: dict[str, Any], ours: dict[str, Any]) -> list[PatchLine]:
    """The patch's changed lines, each with its state and the groups that reach it."""
    changes = {p: FileChange(p, set(c["added"]), set(c["after_deletion"]))
               for p, c in data["changes"].items()}
    groups = data.get("groups", [])
    out: list[PatchLine] = []
    for s in states(changes, ours):
        kind = "added" if s.line in changes[s.path].added else "after a deletion"
        state = "reached" if s.reached else ("not reached" if s.code else "not code")
        row = PatchLine(s.path, s.line, kind, state)
        if s.reached:
            row.groups = [groups[i] for i in finest(groups, (s.path, s.line))]
        out.append(row)
    return out


def run_command(nodeids: list[str]) -> str:
    """The ./ovstest suite command line that runs these ids (the first MAX_IDS_SHOWN)."""
    quoted = " ".join(f"'{n}'" for n in nodeids[:MAX_IDS_SHOWN])
    more = f" ... ({len(nodeids) - MAX_IDS_SHOWN} more in patch.json)" \
        if len(nodeids) > MAX_IDS_SHOWN else ""
    return f"./ovstest suite {quoted}{more}"


# ----------------------------------------------------------------------------
# Output


def detail_pages(index_html: Path, paths: list[str]) -> dict[str, str]:
    """{source file: its page} from gcovr's own index, to link a row to it
    (gcovr names a file by its path under --root, or by its base name when
    all the files share one directory)."""
    if not index_html.is_file():
        return {}
    text = index_html.read_text(errors="replace")
    links: dict[str, str] = {}
    for href, name in re.findall(r'<a\b[^>]*\bhref="([^"]+\.html)"[^>]*>\s*([^<]+?)\s*</a>',
                                 text):
        links.setdefault(name.strip(), href)
    found: dict[str, str] = {}
    for path in paths:
        base = path.rsplit("/", 1)[-1]
        href = links.get(path) or (links.get(base) if sum(
            p.rsplit("/", 1)[-1] == base for p in paths) == 1 else None)
        if href:
            found[path] = href
    return found


def environment() -> jinja2.Environment:
    """The jinja2 environment of the coverage pages."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["ranges"] = ranges
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1f}%"
    return env


def write_compare(out: Path, rows: list[FileRow], meta: dict[str, Any]) -> Path:
    """Write coverage-compare.json and its page; return the page's path."""
    paths = [r.path for r in rows]
    data = {"meta": meta, "files": [{**asdict(r), "verdict": r.verdict,
                                     "ours_percent": r.ours.percent,
                                     "upstream_percent": r.upstream.percent} for r in rows]}
    (out / "coverage-compare.json").write_text(json.dumps(data, indent=1) + "\n")
    page = environment().get_template("gcov-compare.html.j2").render(
        rows=rows, meta=meta, ours_pages=detail_pages(out / "coverage.html", paths),
        upstream_pages=detail_pages(out / "upstream" / "coverage.html", paths),
        style=(TEMPLATES / "report.css").read_text())
    path = out / "coverage-compare.html"
    path.write_text(page)
    return path


def write_patch(out: Path, rows: list[PatchLine], data: dict[str, Any]) -> Path:
    """Write patch.json and its page; return the page's path."""
    (out / "patch.json").write_text(json.dumps(
        {"patch": data["patch"], "budget": data["budget"], "runs": len(data["groups"]),
         "lines": [asdict(r) for r in rows]}, indent=1) + "\n")
    page = environment().get_template("gcov-patch.html.j2").render(
        rows=rows, data=data, command=run_command,
        ours_pages=detail_pages(out / "coverage.html", sorted({r.path for r in rows})),
        style=(TEMPLATES / "report.css").read_text())
    path = out / "patch.html"
    path.write_text(page)
    return path


def summary_lines(rows: list[FileRow], upstream: bool) -> list[str]:
    """The terminal's summary table: per file, lines and coverage."""
    width = max([len(r.path) for r in rows] + [4])
    head = f"{'file':<{width}}  {'lines':>6}  {'ours':>6}"
    out = [head + (f"  {'upstream':>8}  {'up-only':>7}  {'ours-only':>9}" if upstream else "")]
    for r in rows:
        if not r.built:
            out.append(f"{r.path:<{width}}  {'-':>6}  not built or never linked into a run")
            continue
        line = f"{r.path:<{width}}  {r.lines:>6}  {ours_pct(r):>6}"
        if upstream:
            line += (f"  {pct_text(r.upstream.percent):>8}  {len(r.upstream_only):>7}"
                     f"  {len(r.ours_only):>9}")
        out.append(line)
    return out


def ours_pct(r: FileRow) -> str:
    """Our coverage of a file, as text."""
    return pct_text(r.ours.percent)


def pct_text(v: float | None) -> str:
    """A percentage as text, '-' for none."""
    return "-" if v is None else f"{v:.1f}%"


def main(argv: list[str] | None = None) -> int:
    """Write the coverage pages from OUT_DIR's gcov reports."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    args = ap.parse_args(argv)
    out: Path = args.out_dir
    try:
        ours = json.loads((out / "coverage.json").read_text())
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"tooling.gcov_pages: {exc}", file=sys.stderr)
        return 2
    upstream_path = out / "upstream" / "coverage.json"
    upstream = json.loads(upstream_path.read_text()) if upstream_path.is_file() else None
    rows = side_by_side(ours, upstream, run.get("files", []))
    rows = [r for r in rows if r.path in run.get("files", [])] or rows
    if upstream is not None:
        meta = {"ours": run, "upstream": _read(out / "upstream" / "run.json"),
                "upstream_tests": _read(out / "upstream" / "tests.json")}
        print(f"side by side: {write_compare(out, rows, meta)}")
    for line in summary_lines(rows, upstream is not None):
        print(line)
    patch_path = out / "patch-runs.json"
    if patch_path.is_file():
        data = json.loads(patch_path.read_text())
        lines = patch_lines(data, ours)
        print(f"patch: {write_patch(out, lines, data)}")
        for state in ("reached", "not reached", "not code"):
            print(f"  {sum(r.state == state for r in lines)} changed lines {state}")
    return 0


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    sys.exit(main())
