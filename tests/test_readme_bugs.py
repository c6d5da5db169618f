"""The catalogue (datapath/model/bugs.py) is the one source of the README's known-bug
section and of the write-up's text about each entry (issue 27 item 4): the README
between its markers is what export/readme.py generates, and every fact the
write-up states about an entry is one of the entry's fields."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from datapath.model import bugs
from export import readme, writeup
from tests.test_export_at import _case

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = [pytest.param(b, id=b.key) for b in bugs.ALL]


def test_the_readme_section_is_what_the_catalogue_generates() -> None:
    """Edit an entry and not the README (or the other way) and this fails: run
    `./ovstest export --readme`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(readme.BEGIN) == 1 and text.count(readme.END) == 1
    assert readme.rewrite(text, readme.section(bugs)) == text, (
        "README.md's known-bug section differs from datapath/model/bugs.py: "
        "run ./ovstest export --readme")


def test_the_generator_loads_the_same_catalogue_by_path() -> None:
    """The script (stdlib only, on the host) sees the entries the framework imports."""
    loaded = readme.load_catalogue()
    assert [b.key for b in loaded.ALL] == [b.key for b in bugs.ALL]
    assert readme.section(loaded) == readme.section(bugs)


def test_check_mode_fails_on_a_drifted_readme(tmp_path: Path) -> None:
    """--check exits 1 when one word of the section differs, 0 once rewritten."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    drifted = tmp_path / "README.md"
    drifted.write_text(text.replace("| crash |", "| cosmetic |", 1), encoding="utf-8")
    script = [sys.executable, str(ROOT / "export" / "readme.py"), "--readme", str(drifted)]
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 1
    assert subprocess.run(script, capture_output=True).returncode == 0
    assert drifted.read_text(encoding="utf-8") == text
    drifted.write_text("no markers\n", encoding="utf-8")
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 2


@pytest.mark.parametrize("bug", ENTRIES)
def test_every_field_of_an_entry_reaches_the_readme(bug: bugs.OvsBug) -> None:
    """Each entry's own text: its title, where, rule, why, found-by, notes and every
    real port's how and case (nothing a reviewer read in the old tables is lost)."""
    text = "\n".join(readme.entry(bug))
    facts = [bug.title, bug.where, bug.rule, bug.why, bug.found_by, *bug.notes,
             bug.severity, bug.root_cause, *(p.how for p in bug.real_ports),
             *(p.node_id for p in bug.real_ports if p.case)]
    missing = [f for f in facts if f and f not in text]
    assert not missing, missing
    row = next(line for line in readme.section(bugs).splitlines()
               if line.startswith(f"| [`{bug.key}`]"))
    assert bug.severity in row and f"`{bug.root_cause}`" in row
    assert readme.cell(readme.short(bug.title)) in row


@pytest.mark.parametrize("bug", ENTRIES)
def test_the_writeup_text_of_an_entry_is_its_fields(bug: bugs.OvsBug) -> None:
    """The write-up's paragraphs about the bug carry the entry's fields, and a
    changed field changes the write-up (no copy of its own in export/writeup.py)."""
    text = " ".join(writeup.render(_case(bug.key, "xfailed"), "t.at", "dpif-netdev - x",
                                   bug.key, bug, "OVS 4.0.0").split())
    facts = [bug.title, bug.where, bug.rule, bugs.CLASS_MEANING[bug.cls], bug.found_by,
             *bug.notes, *(p.how for p in bug.real_ports)]
    if writeup.fix_patch(bug) is None:
        facts.append(bugs.FIX_HINTS.get(bug.root_cause, ""))
    missing = [f for f in facts if f and " ".join(f.split()) not in text]
    assert not missing, missing
    rule = writeup.rule_for(bug)
    assert (rule.title, rule.fix_hint) == (bug.at_title or bug.key.replace("-", " "),
                                           bugs.FIX_HINTS.get(bug.root_cause, ""))
    changed = bugs.OvsBug(bug.key, bug.title, bug.where, cls=bug.cls, severity=bug.severity,
                          real_ports=bug.real_ports, root_cause=bug.root_cause, why=bug.why,
                          crash=bug.crash, signature=bug.signature, seen_in=bug.seen_in,
                          rule="RFC 0000: a rule written nowhere else", at_title="retitled")
    assert "RFC 0000: a rule written nowhere else" in writeup.render(
        _case(bug.key, "xfailed"), "t.at", "dpif-netdev - x", bug.key, changed, "OVS 4.0.0")
    assert writeup.rule_for(changed).title == "retitled"


def test_export_writeup_keeps_no_copy_of_the_catalogue() -> None:
    """export/writeup.py holds no rule text, class wording or doc path of its own."""
    source = (ROOT / "export" / "writeup.py").read_text(encoding="utf-8")
    for bug in bugs.ALL:
        assert not bug.rule or bug.rule[:60] not in source, bug.key
    for words in (*bugs.CLASS_MEANING.values(), bugs.CSUM_DOC, bugs.TSO_DOC,
                  *bugs.FIX_HINTS.values()):
        assert words[:50] not in source, words
