"""`./ovstest export --readme`: the README's known-bug section, generated from the catalogue.

datapath/model/bugs.py is the one place a known bug's facts are written.  The
README shows them between two marker comments: a table of the bugs and one of
the latent and by-design entries (one line each: key, class, severity, the real
port kinds, the root-cause group and what is wrong, cut short), then every
entry in full (what, where, the rule it breaks, each real port with the case
that shows it, why its class, how it was found, notes, the fix and disclosure
note of export/ that name it).  This module rewrites the text between the
markers; tests/test_readme_bugs.py fails when the README differs from it.

Stdlib only: it runs on the host, where the model's dependencies (scapy) may be
missing, so the catalogue (which imports nothing) is loaded by path.  Exit
status: 0 written (or already current); 1 with --check when the README differs;
2 the markers are missing.
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CATALOGUE = REPO / "datapath" / "model" / "bugs.py"
EXPORT = Path(__file__).resolve().parent
BEGIN = ("<!-- known-bugs: begin (generated from datapath/model/bugs.py by "
         "`./ovstest export --readme`; edit the entries, not this text) -->")
END = "<!-- known-bugs: end -->"
WHAT_WORDS = 24  # the table's "what": the title's first words, the rest under the entry


def load_catalogue(path: Path = CATALOGUE) -> ModuleType:
    """datapath/model/bugs.py, loaded by path under a private name (it imports nothing)."""
    spec = importlib.util.spec_from_file_location("_ovstest_readme_bugs", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell(text: str) -> str:
    """Text fit for a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def short(text: str, words: int = WHAT_WORDS) -> str:
    """The first `words` words of text, "…" where it goes on."""
    split = text.split()
    return " ".join(split[:words]) + (" …" if len(split) > words else "")


def kinds(bug: Any) -> str:
    """The real port kinds, each marked shown (a case here) or sources; none for latent."""
    seen: dict[str, bool] = {}
    for port in bug.real_ports:
        seen[port.kind] = seen.get(port.kind, False) or bool(port.case)
    shown = [k for k, case in seen.items() if case]
    sources = [k for k, case in seen.items() if not case]
    parts = ([", ".join(shown) + " (shown)"] if shown else []) + \
        ([", ".join(sources) + " (sources)"] if sources else [])
    return "; ".join(parts) or "none"


def fix_file(bug: Any, export_dir: Path = EXPORT) -> str:
    """The patch of export/fixes/ for the entry's group, if its Bugs: line names the entry."""
    path = export_dir / "fixes" / f"{bug.root_cause}.patch"
    if not path.is_file():
        return ""
    names = re.search(r"^Bugs:(.*)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    return f"export/fixes/{path.name}" if names and bug.key in names.group(1).split() else ""


def port_line(port: Any) -> str:
    """A real port's line under an entry: how it hands OVS the input, and its case."""
    if not port.case:
        return f"{port.kind}: {port.how} (not shown by a case here)"
    backend = f", with `--backend {port.backend}`" if port.backend else ""
    return f"{port.kind}: {port.how}; shown by `{port.node_id}`{backend}"


def entry(bug: Any, export_dir: Path = EXPORT) -> list[str]:
    """One entry in full, as a list under its own heading (its anchor is its key)."""
    out = [f"##### `{bug.key}`", "", f"- **what:** {bug.title}", f"- **where:** {bug.where}"]
    if bug.rule:
        out.append(f"- **the rule it breaks:** {bug.rule}")
    out.append("- **real ports:**" + (" none: latent" if not bug.real_ports else ""))
    out += [f"  - {port_line(p)}" for p in bug.real_ports]
    if bug.why:
        out.append(f"- **why{' this class' if bug.cls != 'bug' else ''}:** {bug.why}")
    if bug.found_by:
        out.append(f"- **found by:** {bug.found_by}")
    out += [f"- **note:** {note}" for note in bug.notes]
    fix = fix_file(bug, export_dir)
    if fix:
        out.append(f"- **fix:** `{fix}`")
    note = export_dir / "disclosures" / f"{bug.key}.md"
    if note.is_file():
        out.append(f"- **disclosure note:** `export/disclosures/{note.name}`")
    out += [f"- **class:** {bug.cls}; **severity:** {bug.severity}; **root cause:** "
            f"`{bug.root_cause}`; **seen in OVS:** {', '.join(bug.seen_in)}", ""]
    return out


def ordered(entries: Iterable[Any], severities: tuple[str, ...]) -> list[Any]:
    """Worst severity first; the catalogue's order among equals."""
    return sorted(entries, key=lambda b: severities.index(b.severity))


def section(catalogue: ModuleType, export_dir: Path = EXPORT) -> str:
    """The text between the markers."""
    entries = ordered(catalogue.ALL, catalogue.SEVERITIES)
    bugs = [b for b in entries if b.cls == "bug"]
    others = [b for b in entries if b.cls != "bug"]

    def link(bug: Any) -> str:
        return f"[`{bug.key}`](#{bug.key})"

    out = [BEGIN, "", f"Bugs first ({len(bugs)}, worst severity first; every entry in full "
           "below the tables):", "",
           "| key | severity | real ports | root cause | what |", "|---|---|---|---|---|"]
    out += [f"| {link(b)} | {b.severity} | {kinds(b)} | `{b.root_cause}` | "
            f"{cell(short(b.title))} |" for b in bugs]
    out += ["", f"Latent entries (no real port produces the input) and divergences OVS may keep "
            f"by design ({len(others)}); their cases still xfail only where OVS deviates "
            "exactly as described:", "",
            "| key | class | severity | real ports | root cause | what |",
            "|---|---|---|---|---|---|"]
    out += [f"| {link(b)} | {b.cls} | {b.severity} | {kinds(b)} | `{b.root_cause}` | "
            f"{cell(short(b.title))} |" for b in others]
    out += ["", "#### Every entry", ""]
    for bug in entries:
        out += entry(bug, export_dir)
    out.append(END)
    return "\n".join(out)


def rewrite(text: str, generated: str) -> str:
    """The README with the marked section replaced."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("the README has no known-bugs markers")
    return text[:start] + generated + text[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or, with --check, only compare) the README's known-bug section."""
    parser = argparse.ArgumentParser(prog="ovstest export --readme", description=__doc__)
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite")
    parser.add_argument("--check", action="store_true",
                        help="only say whether the README is current (exit 1 if not)")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    try:
        new = rewrite(text, section(load_catalogue()))
    except ValueError as exc:
        print(f"export --readme: {args.readme}: {exc}", file=sys.stderr)
        return 2
    if new == text:
        print(f"{args.readme}: the known-bug section is current")
        return 0
    if args.check:
        print(f"{args.readme}: the known-bug section differs from datapath/model/bugs.py; "
              "run ./ovstest export --readme", file=sys.stderr)
        return 1
    args.readme.write_text(new, encoding="utf-8")
    print(f"{args.readme}: known-bug section rewritten from datapath/model/bugs.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
