"""Write the HTML report of a RunRecord: index, case pages, reproducers, traceability.

    out/index.html        what ran, failures first, matrix of the parameter axes, one line
                          per known OVS bug, case table
    out/bugs/<key>.html   one page per known OVS bug: its facts, fix, and the ids that sighted it
    out/case/<slug>.html  one page per failed, error and xfailed case (every case with
                          all_pages): the evidence, loaded only when opened
    out/repro/<slug>.sh   a standalone reproducer per failed, error and xfailed case
    out/upstream.html     the 48 upstream dpif-netdev.at tests and the ids reproducing them

Pages are jinja2 templates, autoescaped, with no external assets.
"""
from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.records import DETAIL_OUTCOMES, CaseRecord, RunRecord, case_slug, outcome_rank
from reports.bugpages import BUG_DIR, bug_lines, bug_page, bug_view, sightings
from reports.casepage import case_view
from reports.index import Entry, index_context
from reports.repro import reproducer
from reports.trace import trace_context

TEMPLATES = Path(__file__).parent / "templates"
PAGE_DIR = "case"
REPRO_DIR = "repro"


def render(run: RunRecord, out_dir: str, *, all_pages: bool = False,
           links: list[tuple[str, str]] | None = None) -> str:
    """Write the report into `out_dir` and return the path of its index.html.

    Case pages and reproducers of an earlier report in the same directory are
    removed first, so none is left pointing at a case this run does not have.
    """
    os.makedirs(out_dir, exist_ok=True)
    env = _environment()
    entries = layout(run.cases, all_pages)
    for sub in (PAGE_DIR, REPRO_DIR, BUG_DIR):
        shutil.rmtree(os.path.join(out_dir, sub), ignore_errors=True)
    for entry in entries:
        if entry.repro:
            text = reproducer(entry.case, run.versions)
            if text is None:
                entry.repro = ""
            else:
                _write(out_dir, entry.repro, text, executable=True)
    common = {"style": _static("report.css"), "run_title": _run_title(run)}
    page = env.get_template("case.html.j2")
    known = frozenset(str(b.get("key", "")) for b in run.known_bugs)
    for entry in entries:
        if entry.page:
            _write(out_dir, entry.page, page.render(case=case_view(entry, out_dir, known), **common))
    trace = env.get_template("upstream.html.j2").render(trace=trace_context(entries), **common)
    _write(out_dir, "upstream.html", trace)
    seen = sightings(entries)
    pages: dict[str, str] = {}
    for entry in entries:
        if entry.page:
            pages.setdefault(entry.case.nodeid, entry.page)
    bug_template = env.get_template("bug.html.j2")
    for bug in run.known_bugs:
        key = str(bug.get("key", ""))
        view = bug_view(bug, run.known_bugs, seen.get(key, []), pages)
        _write(out_dir, bug_page(key), bug_template.render(bug=view, **common))
    lines = bug_lines(run.known_bugs, seen)
    tally = Counter(b["word"] for b in lines if b["status"] != "untested")
    index = env.get_template("index.html.j2").render(
        script=_static("index.js"), links=links or [], **index_context(run, entries),
        bugs=[b for b in lines if b["cls"] == "bug"], other=[b for b in lines if b["cls"] != "bug"],
        bugs_present=", ".join(f"{n} {word}" for word, n in sorted(tally.items())),
        **common)
    return _write(out_dir, "index.html", index)


def layout(cases: list[CaseRecord], all_pages: bool = False) -> list[Entry]:
    """Cases worst outcome first (stable), with the page and reproducer each one gets."""
    ordered = sorted(enumerate(cases), key=lambda p: (outcome_rank(p[1].outcome), p[0]))
    entries = []
    slugs: set[str] = set()
    for _, case in ordered:
        slug = case_slug(case.nodeid, case.run)
        while slug in slugs:  # the same id twice in one run (a rerun plugin, a bad merge)
            slug += "_"
        slugs.add(slug)
        detail = case.outcome in DETAIL_OUTCOMES
        entries.append(Entry(
            case=case, slug=slug,
            page=f"{PAGE_DIR}/{slug}.html" if detail or all_pages else "",
            repro=f"{REPRO_DIR}/{slug}.sh" if detail else "",
        ))
    return entries


def _run_title(run: RunRecord) -> str:
    parts = [f"OVS {run.versions['ovs']}" if run.versions.get("ovs") else "",
             run.backend, run.host, run.started]
    return " | ".join(p for p in parts if p)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _static(name: str) -> Any:
    """A CSS or JS file inlined verbatim (never parsed as a template)."""
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))


def _write(out_dir: str, rel: str, text: str, executable: bool = False) -> str:
    path = os.path.join(out_dir, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    if executable:
        os.chmod(path, 0o755)
    return path
