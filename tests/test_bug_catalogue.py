"""The known-bug catalogue (datapath/model/bugs.py): every entry is classified,
rated and traced to the real ports that can produce its input, and the entries
that one fix cures share a root-cause group (issue 18)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from datapath.model import bugs
from export import cli
from fixtures.capabilities import ALL_BACKENDS

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = [pytest.param(b, id=b.key) for b in bugs.ALL]


def test_keys_are_unique_and_every_entry_is_listed() -> None:
    keys = [b.key for b in bugs.ALL]
    assert len(keys) == len(set(keys))
    named = {v.key for v in vars(bugs).values() if isinstance(v, bugs.OvsBug)}
    assert named == set(keys)


@pytest.mark.parametrize("bug", ENTRIES)
def test_an_entry_has_a_class_a_severity_and_a_root_cause_group(bug: bugs.OvsBug) -> None:
    assert bug.cls in bugs.CLASSES
    assert bug.severity in bugs.SEVERITIES
    assert (bug.severity == "crash") is bug.crash
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", bug.root_cause)
    if bug.cls != "bug":
        assert bug.why, "a latent or by-design entry says why"
    # A crash leaves a dead daemon, a hang one that serves nothing: never confined
    # to the frames (fixtures/case_scope.py keeps a rig in use after those only).
    assert not (bug.frames_only and (bug.crash or bug.severity == "hangs the daemon"))


def node_id(case: str) -> str:
    """The pytest node id of a RealPort case ("--backend NAME " first, or not)."""
    match = re.fullmatch(r"(?:--backend (\w+) )?(cases/\w+/\w+\.py::\w+(?:\[[^\]]+\])?)", case)
    assert match, f"not a [--backend NAME] node id: {case!r}"
    assert match.group(1) in (None, *ALL_BACKENDS), case
    assert match.group(1) != "dummy", f"netdev-dummy is no real port: {case!r}"
    port = bugs.RealPort("any", "-", case)
    assert (port.backend or None, port.node_id) == (match.group(1), match.group(2))
    return match.group(2)


@pytest.mark.parametrize("bug", ENTRIES)
def test_real_ports_or_latent(bug: bugs.OvsBug) -> None:
    """A latent entry has no real port; any other names at least one, each a known
    kind with how it reaches OVS; a case that shows it is a node id, with the
    backend it runs on real ports with, whose function exists."""
    assert (bug.cls == "latent") is (not bug.real_ports)
    for port in bug.real_ports:
        assert port.kind in bugs.PORT_KINDS and port.how
        if port.case:
            path, _, test = node_id(port.case).partition("::")
            function = test.split("[")[0]
            source = ROOT / path
            assert source.is_file(), port.case
            defined = {n.name for n in ast.walk(ast.parse(source.read_text()))
                       if isinstance(n, ast.FunctionDef)}
            assert function in defined, port.case


def test_every_named_case_is_collected() -> None:
    """Each case a RealPort names is an id pytest collects (a renamed or dropped
    parameter would otherwise leave the evidence pointing at nothing)."""
    ids = sorted({node_id(p.case) for b in bugs.ALL for p in b.real_ports if p.case})
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *ids], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    collected = set(res.stdout.split())
    missing = [i for i in ids if i not in collected]
    assert res.returncode == 0 and not missing, (
        f"not collected: {missing}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")


def test_one_fix_one_group() -> None:
    """Every entry of class bug has a written rule and an export title; every group
    of an entry with a rule has one fix hint (kept once per group, FIX_HINTS), and
    no hint names a group no entry has."""
    for bug in bugs.ALL:
        assert (bug.rule and bug.at_title) or bug.cls != "bug", bug.key
        assert bool(bug.rule) is bool(bug.at_title), bug.key
        if bug.rule:
            assert bugs.FIX_HINTS.get(bug.root_cause), bug.key
    assert set(bugs.FIX_HINTS) <= {b.root_cause for b in bugs.ALL}


def test_export_candidates_name_known_entries() -> None:
    assert set(cli.CANDIDATES) <= {b.key for b in bugs.ALL}


def test_summary_carries_the_fields_the_report_shows() -> None:
    for bug in bugs.ALL:
        row = bug.summary()
        assert {"key", "cls", "severity", "real_ports", "root_cause"} <= set(row)
        assert row["real_ports"] != "" and (bug.cls != "latent" or "latent" in row["real_ports"])
